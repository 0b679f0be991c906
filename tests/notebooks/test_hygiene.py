"""Every committed notebook is a clean run; and the hygiene rules catch what they claim."""

import json
from pathlib import Path

import pytest

from tests.notebooks.hygiene import hygiene_problems

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no chapters"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert hygiene_problems(nb) == []


def _nb(*cells):
    return {"cells": list(cells)}


def _code(n, source="x = 1", outputs=()):
    tags = ["raises-exception"] if "NBVAL_RAISES_EXCEPTION" in source else []
    return {"cell_type": "code", "execution_count": n, "source": source,
            "metadata": {"tags": tags}, "outputs": list(outputs)}


def test_clean_notebook_passes():
    ok = _nb(_code(1), {"cell_type": "markdown", "source": "# hi"},
             _code(2, "print(1)", [{"output_type": "stream", "name": "stdout", "text": "1\n"}]))
    assert hygiene_problems(ok) == []


@pytest.mark.parametrize("bad, expected", [
    (_nb(_code(1), _code(3)), "execution counts"),
    (_nb(_code(None)), "execution counts"),
    (_nb(_code(1, outputs=[{"output_type": "stream", "name": "stderr", "text": "w"}])), "stderr"),
    (_nb(_code(1, outputs=[{"output_type": "display_data",
                            "data": {"image/svg+xml": "<svg/>"}}])), "SVG"),
    (_nb(_code(1, outputs=[{"output_type": "display_data", "metadata": {},
                            "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}])),
     "without alt text"),
    (_nb(_code(1, outputs=[{"output_type": "execute_result", "data": {
        "text/plain": "<Obj at 0x7f3a2b1c9d00>"}}])), "memory address"),
    (_nb(_code(1, outputs=[{"output_type": "stream", "name": "stdout",
                            "text": "/tmp/labmem-s12-abc/records.jsonl"}])), "absolute path"),
    (_nb(_code(1, outputs=[{"output_type": "error", "ename": "ValueError"}])),
     "without NBVAL_RAISES_EXCEPTION"),
    (_nb(_code(1, "# NBVAL_RAISE_EXCEPTION\n1/0",
               [{"output_type": "error", "ename": "ZeroDivisionError"}])), "unknown nbval marker"),
    (_nb(_code(1, "# nbval_raises_exception\n1/0",
               [{"output_type": "error", "ename": "ZeroDivisionError"}])), "unknown nbval marker"),
    (_nb(_code(1, "# NBVAL_RAISES_EXCEPTION\nx = 1")), "raised nothing"),
    (_nb({**_code(1, "# NBVAL_RAISES_EXCEPTION\n1/0", [{"output_type": "error"}]),
          "metadata": {}}), "tag"),
])
def test_hygiene_catches(bad, expected):
    problems = hygiene_problems(bad)
    assert any(expected in p for p in problems), problems


def test_marked_error_cell_is_allowed():
    nb = _nb(_code(1, "# NBVAL_RAISES_EXCEPTION\n1/0",
                   [{"output_type": "error", "ename": "ZeroDivisionError"}]))
    assert hygiene_problems(nb) == []
