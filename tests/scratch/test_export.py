"""Each from-scratch module is exactly its chapter's marked cells (one source of truth)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import scratch as export  # noqa: E402  (tools/scratch.py)

MODULES = export.expected_modules()


def test_every_module_in_the_package_comes_from_a_chapter():
    on_disk = {p.stem for p in export.PACKAGE.glob("*.py")} - {"__init__"}
    assert on_disk == set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_module_is_its_chapters_cells(module):
    chapter, text = MODULES[module]
    path = export.PACKAGE / f"{module}.py"
    assert path.read_text(encoding="utf-8") == text, (
        f"labmem/scratch/{module}.py differs from notebooks/{chapter}: edit the chapter and "
        "run `python tools/scratch.py`")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_module_imports_and_names_its_chapter(module):
    loaded = importlib.import_module(f"labmem.scratch.{module}")
    assert loaded.__doc__, "the first marked cell opens with the module's docstring"
    first = Path(loaded.__file__).read_text(encoding="utf-8").splitlines()[0]
    assert f"notebooks/{MODULES[module][0]}" in first


def test_the_check_command_agrees():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "scratch.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# -- and the check bites -----------------------------------------------------------------

def chapter(tmp_path: Path, name: str, sources: list[str]) -> Path:
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [],
              "execution_count": None, "source": s} for i, s in enumerate(sources)]
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}), encoding="utf-8")
    return path


def test_only_marked_cells_are_exported_in_order(tmp_path):
    chapter(tmp_path, "s99_demo.ipynb", ['# scratch: s99\n"""Doc."""\nA = 1\n\n',
                                        "print('not part of it')",
                                        "# scratch: s99\ndef f():\n    return A"])
    (name, text), = export.expected_modules(tmp_path).values()
    assert name == "s99_demo.ipynb"
    assert text.splitlines()[2:] == ['"""Doc."""', "A = 1", "", "", "def f():",
                                     "    return A"]


def test_an_edited_cell_makes_the_module_differ(tmp_path):
    chapter(tmp_path, "s99_demo.ipynb", ["# scratch: s99\nA = 1"])
    before = export.expected_modules(tmp_path)["s99"][1]
    chapter(tmp_path, "s99_demo.ipynb", ["# scratch: s99\nA = 2"])
    assert export.expected_modules(tmp_path)["s99"][1] != before


def test_one_module_has_one_chapter(tmp_path):
    chapter(tmp_path, "s98_a.ipynb", ["# scratch: s99\nA = 1"])
    chapter(tmp_path, "s99_b.ipynb", ["# scratch: s99\nB = 1"])
    with pytest.raises(SystemExit, match="one chapter writes one module"):
        export.expected_modules(tmp_path)
