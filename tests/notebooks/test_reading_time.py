"""The start page's time table is measured from the notebooks, and is never stale."""

from __future__ import annotations

import json

import pytest

from tests.site.conftest import ROOT, load_tool

reading_time = load_tool("reading_time")


def test_the_start_page_table_is_what_the_notebooks_measure_today():
    assert reading_time.start_page_table() == reading_time.table(reading_time.chapters()), \
        "the start page's time table is stale: run python tools/reading_time.py --write"


def test_every_chapter_is_measured_and_the_total_is_the_sum():
    measures = reading_time.chapters()
    text = reading_time.table(measures)
    assert len(measures) == 11 and all(m.prose_words and m.code_lines for m in measures)
    total = sum(m.reading_minutes() for m in measures)
    assert f"about {total / 60:.1f} h;" in text
    assert all(f"| {m.code} | {m.title} |" in text for m in measures)


def cell(kind, text, outputs=(), **metadata):
    base = {"cell_type": kind, "metadata": metadata, "source": text}
    return base | ({"outputs": list(outputs), "execution_count": 1} if kind == "code" else {})


CELLS = [
    cell("markdown", "Read [the glossary](glossary.md#a-very-long-anchor) <b>now</b>."),
    cell("markdown", "**Instructor notes.** many words here that no learner reads",
         labmem={"generated": "tools/slides.py"}),
    cell("code", "# NBVAL_RAISES_EXCEPTION\nx = 1\n\n\ny = 2\n",
         [{"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
          {"output_type": "error", "ename": "E", "evalue": "boom", "traceback": []}]),
    cell("code", "print(1)", [{"output_type": "stream", "name": "stdout",
                               "text": "".join(f"{i}\n" for i in range(100))}]),
    cell("code", "my_answer = None   # your answer\ncheck(my_answer)"),
    cell("code", "def f(x):\n    raise NotImplementedError  # your code"),
    cell("code", "answer_2 = None"),
]


def test_what_is_counted():
    m = reading_time.measure_cells(CELLS)
    assert m.prose_words == 4                   # Read the glossary now: targets and tags unread
    assert m.code_lines == 2 + 1 + 2 + 2 + 1    # blank lines and NBVAL markers are not read
    assert m.output_lines == 2 + 1 + 25         # a long listing counts 25 lines at most
    assert (m.predictions, m.build_cells) == (2, 1)


def test_the_rates_convert_counts_to_minutes():
    m = reading_time.Measure("x", "X", "x.ipynb", prose_words=400, code_lines=10,
                             output_lines=30, predictions=2, build_cells=1)
    assert m.reading_minutes() == 2 + 1 + 1     # 400 words at 200/min, 60 s, 60 s
    assert m.doing_minutes() == 2 * 4 + 15
    assert reading_time.Measure("x", "X", "x.ipynb", 201, 0, 0, 0, 0).reading_minutes() == 2


def test_write_then_check_round_trip(tmp_path, monkeypatch):
    page = tmp_path / "start.ipynb"
    page.write_text(json.dumps({"cells": [cell("markdown", "old") | {"id": "start-10"}]}),
                    encoding="utf-8")
    assert reading_time.write_start_page("new table\n", page) is True
    assert reading_time.start_page_table(page) == "new table\n"
    assert reading_time.write_start_page("new table\n", page) is False


@pytest.mark.parametrize("flag", ["--check"])
def test_check_fails_on_a_stale_table(monkeypatch, capsys, flag):
    monkeypatch.setattr(reading_time, "start_page_table", lambda page=None: "stale\n")
    assert reading_time.main([flag]) == 1
    assert "reading_time.py --write" in capsys.readouterr().err
    monkeypatch.setattr(reading_time, "start_page_table",
                        lambda page=None: reading_time.table(reading_time.chapters()))
    assert reading_time.main([flag]) == 0


def test_the_start_page_says_how_it_is_measured():
    nb = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text(encoding="utf-8"))
    text = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for rate in ("200 words a minute", "6 s a line", "2 s for each line", "4 min", "15 min"):
        assert rate in text
    assert "tools/reading_time.py" in text
