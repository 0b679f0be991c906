"""`make slides`: every chapter is an offline reveal.js deck that presents in Chromium."""

from __future__ import annotations

import json

import pytest

from tests.site.conftest import ROOT
from tests.site.pages import REMOTE, REMOTE_CSS

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def slide_count(notebook) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum(c["metadata"].get("slideshow", {}).get("slide_type") == "slide" for c in cells)


def notes_count(notebook) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum(c["metadata"].get("slideshow", {}).get("slide_type") == "notes" for c in cells)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_deck_is_self_contained(decks, notebook):
    deck = (decks / f"{notebook.stem}.slides.html").read_text(encoding="utf-8")
    assert not REMOTE.search(deck) and not REMOTE_CSS.search(deck), "nothing from another host"
    assert 'src="reveal.js/dist/reveal.js"' in deck
    assert deck.count('<aside class="notes">') == notes_count(notebook)


# a deck is meant to be opened as a file: every deck from files, one served
PRESENTATIONS = [pytest.param("file", n, id=f"file-{n.stem}") for n in NOTEBOOKS] + [
    pytest.param("http", n, id=f"http-{n.stem}") for n in NOTEBOOKS if n.stem == "s09_transcript"]


@pytest.mark.parametrize(("mode", "notebook"), PRESENTATIONS)
def test_every_deck_presents_offline(visit, decks, server, notebook, mode):
    """The deck starts, has one horizontal slide per section, steps through a fragment,
    decodes every figure and asks no other host for anything."""
    base = f"{server}/slides" if mode == "http" else decks.as_uri()
    tab = visit.open(f"{base}/{notebook.stem}.slides.html")
    tab.wait_for_function("() => window.Reveal && Reveal.isReady()")
    if slide_count(notebook):
        assert tab.evaluate("() => Reveal.getHorizontalSlides().length") == \
            slide_count(notebook)
    assert visit.broken_images() == []
    visit.screenshot(f"deck-{mode}-{notebook.stem}-title")
    if tab.evaluate("() => document.querySelectorAll('.reveal .fragment').length"):
        before = tab.evaluate("() => Reveal.getProgress()")
        tab.keyboard.press("ArrowRight")
        assert tab.evaluate("() => Reveal.getProgress()") > before or \
            tab.evaluate("() => document.querySelectorAll('.fragment.visible').length")
    visit.assert_clean()


def test_a_slide_with_a_figure(visit, decks, server):
    """The s09 deck, moved to its first slide with a figure (the screenshot for review)."""
    image = visit.first_figure_slide(f"{server}/slides/s09_transcript.slides.html")
    assert len(image.get_attribute("alt").split()) >= 5
    visit.screenshot("deck-s09-figure-slide")
    visit.assert_clean()
