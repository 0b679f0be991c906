"""The series reads as a course: a front door, links both ways, solutions, a clean lab."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labmem.notebook import (
    CHAPTERS,
    GLOSSARY,
    START_PAGE,
    draw_chapter_map,
    neighbours,
    reading_order,
)
from tests.notebooks.hygiene import hygiene_problems

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS = ROOT / "solutions"
CHAPTER_FILES = [chapter.notebook for chapter in CHAPTERS]
SOLUTION_FILES = sorted(SOLUTIONS.glob("*.ipynb"))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def markdown(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def links(text: str) -> set[str]:
    """Targets of markdown links, without their #anchor."""
    return {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)}


def kernel_display_name() -> str:
    (name,) = re.findall(r'ipykernel install .*--display-name "([^"]+)"',
                         (ROOT / "Makefile").read_text())
    return name


def test_every_notebook_is_in_the_reading_order_and_back():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(reading_order())


def test_the_start_page_links_every_chapter_and_the_glossary():
    text = "\n".join(markdown(load(NOTEBOOKS / START_PAGE)))
    assert set(CHAPTER_FILES) | {GLOSSARY} <= links(text)
    assert "../solutions/" in text


@pytest.mark.parametrize("name", CHAPTER_FILES)
def test_each_chapter_links_home_glossary_and_neighbours(name):
    cells = markdown(load(NOTEBOOKS / name))
    before, after = neighbours(name)
    expected = {START_PAGE, GLOSSARY} | {n for n in (before, after) if n}
    assert expected <= links(cells[0]), "the first cell's navigation line"
    assert expected <= links(cells[-1]), "the last cell's navigation line"


def test_the_walkthrough_names_every_chapter_it_composes():
    text = "\n".join(markdown(load(NOTEBOOKS / "walkthrough_layered_memory.ipynb")))
    composed = {"s09_transcript.ipynb", "s10_workspace_memory.ipynb", "s11_user_memory.ipynb",
                "s12_remote_recall.ipynb", "s13_artifacts.ipynb", "s14_context_compaction.ipynb"}
    assert composed <= links(text)


def test_glossary_anchors_used_by_the_chapters_exist():
    glossary = (NOTEBOOKS / GLOSSARY).read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([\w\-]+)"></a>', glossary))
    headings = re.findall(r"^### (.+)$", glossary, re.MULTILINE)
    assert len(anchors) >= len(headings), "every term has an explicit anchor"
    for path in [*NOTEBOOKS.glob("*.ipynb"), *SOLUTION_FILES]:
        for text in markdown(load(path)):
            for anchor in re.findall(r"glossary\.md#([\w\-]+)", text):
                assert anchor in anchors, f"{path.name}: glossary.md#{anchor}"


@pytest.mark.parametrize("name", [*reading_order()])
def test_no_chapter_cites_a_document_the_learner_does_not_have(name):
    for text in markdown(load(NOTEBOOKS / name)):
        assert not re.search(r"\bseeds?\b", text, re.IGNORECASE), text[:200]


def test_every_chapter_has_its_solutions():
    assert sorted(p.name for p in SOLUTION_FILES) == sorted(CHAPTER_FILES)


@pytest.mark.parametrize("path", SOLUTION_FILES, ids=lambda p: p.name)
def test_solutions_are_clean_runs_that_link_back(path):
    nb = load(path)
    assert hygiene_problems(nb) == []
    assert f"../notebooks/{path.name}" in links("\n".join(markdown(nb)))


@pytest.mark.parametrize("path", [*sorted(NOTEBOOKS.glob("*.ipynb")), *SOLUTION_FILES],
                         ids=lambda p: p.name)
def test_opening_a_notebook_does_not_rewrite_its_kernelspec(path):
    """JupyterLab rewrites a notebook whose stored kernelspec differs from the kernel it
    starts; the stored one must be exactly the kernel `make` installs."""
    assert load(path)["metadata"]["kernelspec"] == {
        "display_name": kernel_display_name(), "language": "python", "name": "python3"}


def test_the_lab_does_not_ask_about_news():
    overrides = json.loads((ROOT / "tools" / "jupyterlab" / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert "overrides.json" in (ROOT / "Makefile").read_text()


def test_make_lab_passes_lab_args():
    makefile = (ROOT / "Makefile").read_text()
    assert "LAB_ARGS ?=" in makefile and "--allow-root" in makefile
    # tools/lab.py runs `jupyter lab` on the repository root at the start page, LAB_ARGS last
    assert re.search(r"^\t\$\(BIN\)/python tools/lab\.py \$\(LAB_ARGS\)", makefile, re.MULTILINE)


def test_the_sanitize_file_is_not_in_the_chapter_list():
    assert not (NOTEBOOKS / "sanitize.cfg").exists()
    assert "--nbval-sanitize-with=sanitize.cfg" in (ROOT / "pyproject.toml").read_text()


def test_the_chapter_map_draws_one_box_per_chapter():
    from matplotlib.patches import FancyBboxPatch

    fig = draw_chapter_map()
    (ax,) = fig.axes
    assert sum(isinstance(p, FancyBboxPatch) for p in ax.patches) == len(CHAPTERS)
    shown = {t.get_text() for t in ax.texts}
    assert {c.code for c in CHAPTERS} <= shown and {c.title for c in CHAPTERS} <= shown


def test_neighbours_follow_the_reading_order():
    assert neighbours(START_PAGE) == (None, "s09_transcript.ipynb")
    assert neighbours("s12_remote_recall.ipynb") == ("s11_user_memory.ipynb",
                                                     "s12b_choosing_a_ranker.ipynb")
    assert neighbours("case_story_memory.ipynb")[1] == "s15_connecting_memory_to_an_agent.ipynb"
    assert neighbours("s15_connecting_memory_to_an_agent.ipynb")[1] is None
    with pytest.raises(ValueError, match="not in the series"):
        neighbours("s01_intro.ipynb")
