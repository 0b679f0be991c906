"""`make html`: one course website, offline, with navigation, search, glossary, solutions
and every figure's alt text — checked in the built files and in a real browser."""

from __future__ import annotations

import html
import json
import re

import pytest

from labmem.notebook import reading_order
from tests.site.conftest import ROOT, load_tool
from tests.site.pages import (
    REMOTE,
    REMOTE_CSS,
    figures,
    html_name,
    search_index,
    site_order,
    unique_term,
)

build_site = load_tool("build_site")
NAMES = build_site.staged_names()
ORDER = site_order(NAMES)


def page_id(page: str) -> str:
    return page.removesuffix(".html")


# -- the built files ------------------------------------------------------------------


def test_the_home_page_is_the_start_page(site):
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "<title>Start here: how AI agents remember" in home
    assert (site / "glossary.html").exists()


@pytest.mark.parametrize("page", ORDER, ids=page_id)
def test_every_page_is_built(site, page):
    assert (site / page).is_file()


def test_nothing_in_the_site_loads_from_another_host(site):
    offenders = []
    for path in site.rglob("*"):
        if ".site-src" in path.parts or path.suffix not in {".html", ".css", ".js"} \
                or "screenshots" in path.parts or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        pattern = REMOTE if path.suffix == ".html" else REMOTE_CSS
        if path.suffix != ".js" and pattern.search(text):
            offenders.append(f"{path.relative_to(site)}: {pattern.search(text).group(0)}")
    assert offenders == []


@pytest.mark.parametrize("name", reading_order())
def test_every_figure_keeps_its_alt_text(site, name):
    alts = figures(ROOT / "notebooks" / name)
    page = (site / html_name(NAMES[f"notebooks/{name}"])).read_text(encoding="utf-8")
    shown = [html.unescape(a) for a in re.findall(r'<img [^>]*alt="([^"]*)"', page)]
    assert shown == alts


def test_the_solutions_are_a_section_of_their_own(site):
    home = (site / "index.html").read_text(encoding="utf-8")
    nav = home[home.index("bd-sidenav"):]
    assert re.search(r'caption-text">Solutions<', home)
    for page in (p for p in ORDER if p.startswith("solutions/") and p != "solutions/index.html"):
        assert f'href="{page}"' in nav
    assert (site / "solutions" / "index.html").is_file()


def test_instructor_notes_stay_off_the_site(site):
    for page in ORDER:
        assert "Instructor notes." not in (site / page).read_text(encoding="utf-8"), page


def test_staging_repoints_links_between_pages():
    names = {"notebooks/00_start_here.ipynb": "index.ipynb",
             "notebooks/s09_transcript.ipynb": "s09_transcript.ipynb",
             "solutions/s09_transcript.ipynb": "solutions/s09_transcript.ipynb",
             "notebooks/glossary.md": "glossary.md", "solutions": "solutions/index.md"}
    text = ("[home](00_start_here.ipynb) [g](glossary.md#fold) [sol](../solutions/) "
            "[web](https://example.org/x.ipynb) [here](#top) [code](../labmem/core/)")
    assert build_site.relink(text, "notebooks/s09_transcript.ipynb", names) == (
        "[home](index.ipynb) [g](glossary.md#fold) [sol](solutions/index.md) "
        "[web](https://example.org/x.ipynb) [here](#top) [code](../labmem/core/)")
    back = build_site.relink("[ch](../notebooks/s09_transcript.ipynb)",
                             "solutions/s09_transcript.ipynb", names)
    assert back == "[ch](../s09_transcript.ipynb)"


def test_staging_copies_outputs_untouched():
    staged = build_site.staged_sources()
    for repo_path, name in NAMES.items():
        if not name.endswith(".ipynb"):
            continue
        original = json.loads((ROOT / repo_path).read_text(encoding="utf-8"))
        copy = json.loads(staged[name])
        assert [c.get("outputs") for c in copy["cells"] if c["cell_type"] == "code"] == \
               [c.get("outputs") for c in original["cells"] if c["cell_type"] == "code"]


# -- in Chromium ------------------------------------------------------------------------


def _neighbours(page: str) -> tuple[str | None, str | None]:
    i = ORDER.index(page)
    return (ORDER[i - 1] if i else None, ORDER[i + 1] if i + 1 < len(ORDER) else None)


@pytest.mark.parametrize("mode", ["http", "file"])
@pytest.mark.parametrize("page", ORDER, ids=page_id)
def test_every_page_opens_cleanly_offline(visit, site, server, page, mode):
    """No console error, every image decoded, previous/next point at the neighbours in the
    reading order, and nothing requested from another host — served and from files."""
    base = server if mode == "http" else site.as_uri()
    tab = visit.open(f"{base}/{page}")
    assert tab.title(), page
    assert visit.broken_images() == []
    links = tab.evaluate("""() => ["a.left-prev", "a.right-next"].map(s => {
        const a = document.querySelector(s); return a ? a.href : null; })""")
    expected = [f"{base}/{n}" if n else None for n in _neighbours(page)]
    assert links == expected
    visit.screenshot(f"site-{mode}-{page_id(page).replace('/', '-')}")
    visit.assert_clean()


def test_next_and_previous_are_clickable(visit, server):
    """A reader clicks 'next' on the home page and 'previous' to come back."""
    visit.open(f"{server}/{ORDER[0]}")
    visit.page.click("a.right-next")
    visit.page.wait_for_url(f"{server}/{ORDER[1]}")
    assert visit.broken_images() == []
    visit.page.click("a.left-prev")
    visit.page.wait_for_url(f"{server}/{ORDER[0]}")
    visit.screenshot("site-prev-next-back-home")
    visit.assert_clean()


def _words(name: str) -> list[str]:
    nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    text = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return re.findall(r"\b[A-Za-z]{6,}\b", text)


CHAPTERS = list(reading_order())[1:]


# every chapter over HTTP; from files (where a fetch()-based search would fail) two of them
SEARCHES = [("http", n) for n in CHAPTERS] + [
    ("file", n) for n in ("s09_transcript.ipynb", "s12b_choosing_a_ranker.ipynb")]


@pytest.mark.parametrize(("mode", "name"), SEARCHES)
def test_search_finds_a_chapter_by_a_word_only_it_contains(visit, site, server, name, mode):
    page = html_name(NAMES[f"notebooks/{name}"])
    word = unique_term(search_index(site), page, _words(name))
    assert word, f"{name}: no word of its prose is unique to it in the search index"
    base = server if mode == "http" else site.as_uri()
    assert visit.search(f"{base}/search.html?q={word}") == [page], f"searching {word!r}"
    visit.screenshot(f"search-{mode}-{page_id(page)}")
    visit.assert_clean()
