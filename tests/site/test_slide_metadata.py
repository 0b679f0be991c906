"""Every chapter carries the slide metadata tools/slides.py derives from it."""

from __future__ import annotations

import json

import pytest

from labmem.notebook import reading_order
from tests.site.conftest import ROOT, load_tool

slides = load_tool("slides")
NOTEBOOKS = ROOT / "notebooks"


def load(name: str) -> dict:
    return json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", reading_order())
def test_every_chapter_carries_its_slide_metadata(name):
    nb = load(name)
    assert slides.up_to_date(nb, name), f"run: python tools/slides.py notebooks/{name}"
    kinds = [c["metadata"]["slideshow"]["slide_type"] for c in nb["cells"]]
    assert kinds[0] == "slide" and "notes" in kinds
    assert nb["metadata"]["rise"]["scroll"] is True


def cell(kind: str, text: str, **extra) -> dict:
    base = {"cell_type": kind, "id": f"c{abs(hash(text)) % 10**8}", "metadata": {},
            "source": text}
    if kind == "code":
        base |= {"execution_count": 1, "outputs": []}
    return base | extra


def chapter(*cells) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


FAILING = cell("code", "# NBVAL_RAISES_EXCEPTION\nboom()",
               metadata={"tags": ["raises-exception"]},
               outputs=[{"output_type": "error", "ename": "ValidationError",
                         "evalue": "field: say what to do", "traceback": []}])
SAMPLE = chapter(
    cell("markdown", "[Start here](00_start_here.ipynb)\n\n# s09 · Transcript"),
    cell("code", "import json"),
    cell("markdown", "## Appending evidence\n\ntext"),
    cell("code", "a = 1"),
    cell("code", "a + 1"),
    cell("markdown", "### A detail"),
    cell("markdown", "**A live case.** It fails:"),
    FAILING,
    cell("markdown", "## Exercises\n\nAnswer:"),
    cell("markdown", "[Start here](00_start_here.ipynb) · [s10](s10_workspace_memory.ipynb) →"),
)


def kinds(nb: dict) -> list[tuple[str, str]]:
    return [(c["metadata"]["slideshow"]["slide_type"], slides._first_line(c)[:12])
            for c in nb["cells"]]


def test_sections_slides_steps_fragments_notes():
    out = slides.with_slides(SAMPLE, "s09_transcript.ipynb")
    assert [k for k, _ in kinds(out)] == [
        "slide", "notes", "subslide", "slide", "-", "fragment", "subslide", "subslide",
        "notes", "fragment", "slide", "notes", "skip"]
    failure_note = slides._source(out["cells"][8])
    assert "predict" in failure_note      # the room predicts; the stored output is not quoted
    assert "ValidationError" not in failure_note and "say what to do" not in failure_note
    for note in (c for c in out["cells"] if slides.is_generated(c)):
        assert note["metadata"]["tags"] == ["remove-cell"]
    assert "solutions/s09_transcript.ipynb" in slides._source(out["cells"][1])


def test_applying_twice_changes_nothing_and_leaves_outputs_alone():
    once = slides.with_slides(SAMPLE, "s09_transcript.ipynb")
    assert slides.with_slides(once, "s09_transcript.ipynb") == once
    assert slides.up_to_date(once, "s09_transcript.ipynb")
    assert slides.outputs(once) == slides.outputs(SAMPLE)
    assert SAMPLE["cells"][1]["metadata"] == {}, "the input is not modified"


def test_an_edited_chapter_gets_new_metadata_and_loses_stale_notes():
    once = slides.with_slides(SAMPLE, "s09_transcript.ipynb")
    edited = json.loads(json.dumps(once))
    edited["cells"] = [c for c in edited["cells"] if c["id"] != FAILING["id"]]
    detail = next(i for i, c in enumerate(edited["cells"]) if c["source"] == "### A detail")
    edited["cells"][detail]["source"] = "## Now a section"
    assert not slides.up_to_date(edited, "s09_transcript.ipynb")
    again = slides.with_slides(edited, "s09_transcript.ipynb")
    assert not any("Live failure" in slides._source(c) for c in again["cells"])
    assert again["cells"][detail]["metadata"]["slideshow"]["slide_type"] == "slide"


def test_check_mode_reports_a_chapter_without_metadata(tmp_path, capsys):
    path = tmp_path / "s09_transcript.ipynb"
    path.write_text(slides.dumps(SAMPLE), encoding="utf-8")
    assert slides.main(["--check", str(path)]) == 1
    assert "python tools/slides.py" in capsys.readouterr().out
    assert slides.main([str(path)]) == 0 and slides.main(["--check", str(path)]) == 0
