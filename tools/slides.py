"""Give a chapter the slide metadata it is presented with (JupyterLab RISE, `make slides`).

Usage: python tools/slides.py notebooks/s09_transcript.ipynb ...   (apply, in place)
       python tools/slides.py --check notebooks/*.ipynb            (exit 1 if any would change)

The metadata is derived from the cells alone, so running the tool twice changes nothing and
a chapter edited later gets the same treatment by running it again:

* the first cell (title and learning goals) opens the deck; every ``##`` section heading
  starts a slide, every ``###`` heading or bold lead-in paragraph (``**Exercise 2.** …``,
  one live failure case) a sub-slide below it; the setup cell before the first section
  gets a sub-slide of its own;
* a code cell right after another code cell is a fragment: the step builds on the last
  one and appears on the next key press, as does every cell that fails on purpose;
* the closing navigation line is skipped;
* instructor notes, cells of their own with slide type ``notes``, are generated from
  facts the chapter already holds: its time (measured by ``tools/reading_time.py``) and
  solution notebook, and before each cell that fails on purpose a prompt to let the room
  predict the failure (its stored output is not quoted before it runs). They carry the
  ``remove-cell`` tag, so the website leaves them out, and ``metadata.labmem.generated``
  so that the next run replaces them.

Only cell metadata and these notes cells change: no code cell, source or output is touched.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = "tools/slides.py"
NAV_ONLY = re.compile(r"^(\s*(\[[^\]]*\]\([^)]*\)|[·←→|\s]))*\s*$")
RISE = {"scroll": True, "transition": "none", "slideNumber": True, "controls": True,
        "progress": True, "autolaunch": False}


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _first_line(cell: dict) -> str:
    return next((line for line in _source(cell).splitlines() if line.strip()), "")


def is_generated(cell: dict) -> bool:
    return cell.get("metadata", {}).get("labmem", {}).get("generated") == GENERATOR


def fails_on_purpose(cell: dict) -> bool:
    return cell["cell_type"] == "code" and (
        "raises-exception" in cell.get("metadata", {}).get("tags", [])
        or "NBVAL_RAISES_EXCEPTION" in _source(cell))


def slide_types(cells: list[dict]) -> list[str]:
    """The slide type of every cell of a chapter (generated notes cells excluded)."""
    types = []
    seen_section = False
    for i, cell in enumerate(cells):
        first = _first_line(cell) if cell["cell_type"] == "markdown" else ""
        if i == 0:
            kind = "slide"
        elif first.startswith("## "):
            kind, seen_section = "slide", True
        elif first.startswith("### ") or first.startswith("**"):
            kind = "subslide"
        elif i == len(cells) - 1 and cell["cell_type"] == "markdown" \
                and NAV_ONLY.match(_source(cell)):
            kind = "skip"
        elif cell["cell_type"] == "code" and not seen_section and not any(
                c["cell_type"] == "code" for c in cells[:i]):
            kind = "subslide"  # the setup cell: imports and a scratch folder
        elif fails_on_purpose(cell):
            kind = "fragment"
        elif cell["cell_type"] == "code" and cells[i - 1]["cell_type"] == "code" \
                and types[i - 1] != "skip":
            kind = "fragment"
        else:
            kind = "-"
        types.append(kind)
    return types


def _chapter(name: str):
    sys.path.insert(0, str(ROOT))
    from labmem.notebook import CHAPTERS

    return next((c for c in CHAPTERS if c.notebook == name), None)


def _minutes(cells: list[dict]) -> tuple[int, int]:
    """(reading, doing) minutes measured from the chapter's cells by tools/reading_time.py."""
    reading_time = sys.modules.get("labmem_tools_reading_time")
    if reading_time is None:
        path = ROOT / "tools" / "reading_time.py"
        spec = importlib.util.spec_from_file_location("labmem_tools_reading_time", path)
        reading_time = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = reading_time     # dataclasses look their module up here
        spec.loader.exec_module(reading_time)
    measured = reading_time.measure_cells(cells)
    return measured.reading_minutes(), measured.doing_minutes()


def _notes_cell(anchor: dict, where: str, text: str) -> dict:
    digest = hashlib.sha256(f"{anchor.get('id', '')}:{where}".encode()).hexdigest()[:12]
    return {"cell_type": "markdown", "id": f"notes-{digest}",
            "metadata": {"labmem": {"generated": GENERATOR},
                         "slideshow": {"slide_type": "notes"}, "tags": ["remove-cell"]},
            "source": text.splitlines(keepends=True)}


def notes_for(name: str, cells: list[dict]) -> dict[int, list[tuple[str, str]]]:
    """Cell index → the notes to insert (``("before"|"after", text)``) at that cell."""
    chapter = _chapter(name)
    notes: dict[int, list[tuple[str, str]]] = {}
    if chapter is not None:
        reading, doing = _minutes(cells)
        notes.setdefault(0, []).append(("after", (
            f"**Instructor notes.** {chapter.code} · {chapter.title}: about {reading} min "
            f"to present with every cell run live, {doing} min more for the exercises. Each "
            "`##` section is a slide (Space moves on; a code cell that builds on the last "
            "appears on the next press). Worked answers are in "
            f"`solutions/{chapter.notebook}`.")))
    else:
        notes.setdefault(0, []).append(("after", (
            "**Instructor notes.** The course overview: show the map, the time table and "
            "how the exercises are checked, then open s09. Each `##` section is a slide.")))
    for i, cell in enumerate(cells):
        if fails_on_purpose(cell):
            notes.setdefault(i, []).append(("before", (
                "**Live failure.** The next cell fails on purpose. Before you run it, ask the "
                "room to predict what will be refused and why; then run it, read the message "
                "aloud, and compare it with the predictions before the explanation below it.")))
        first = _first_line(cell) if cell["cell_type"] == "markdown" else ""
        if chapter is not None and first.startswith("## Exercises"):
            notes.setdefault(i, []).append(("after", (
                f"**Exercises.** Give the room about {_minutes(cells)[1]} min. A checker "
                "answers ✓ or a hint and never raises, so learners retry in the same cell; "
                f"the answers, each explained, are in `solutions/{chapter.notebook}`.")))
    return notes


def with_slides(nb: dict, name: str) -> dict:
    """``nb`` with its slide metadata and instructor notes (a new dict; ``nb`` is unchanged)."""
    nb = json.loads(json.dumps(nb))
    cells = [c for c in nb["cells"] if not is_generated(c)]
    for cell, kind in zip(cells, slide_types(cells), strict=True):
        cell.setdefault("metadata", {})["slideshow"] = {"slide_type": kind}
    notes = notes_for(name, cells)
    out = []
    for i, cell in enumerate(cells):
        out += [_notes_cell(cell, f"before{n}", t)
                for n, (w, t) in enumerate(notes.get(i, [])) if w == "before"]
        out.append(cell)
        out += [_notes_cell(cell, f"after{n}", t)
                for n, (w, t) in enumerate(notes.get(i, [])) if w == "after"]
    nb["cells"] = out
    nb["metadata"]["rise"] = dict(RISE)
    return nb


def dumps(nb: dict) -> str:
    """A notebook as `jupyter nbconvert` and JupyterLab write it."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _normal(nb: dict) -> dict:
    """``nb`` with every cell source as one string (nbformat stores a list of lines)."""
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        cell["source"] = _source(cell)
    return nb


def up_to_date(nb: dict, name: str) -> bool:
    """True if ``nb`` already carries exactly the slide metadata the tool would write."""
    return _normal(with_slides(nb, name)) == _normal(nb)


def apply(path: Path) -> bool:
    """Write the slide metadata into ``path``; True if the file changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    if up_to_date(nb, path.name):
        return False
    new = dumps(with_slides(nb, path.name))
    path.write_text(new, encoding="utf-8")
    return True


def outputs(nb: dict) -> list:
    """Every code cell's source and outputs, in order: what applying must leave alone."""
    return [(_source(c), c.get("outputs"), c.get("execution_count"))
            for c in nb["cells"] if c["cell_type"] == "code"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a notebook lacks its metadata")
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    stale = []
    for path in args.notebooks:
        if args.check:
            if not up_to_date(json.loads(path.read_text(encoding="utf-8")), path.name):
                stale.append(path)
        elif apply(path):
            print(f"{path}: slide metadata written")
    for path in stale:
        print(f"{path}: slide metadata missing or out of date; run "
              f"python tools/slides.py {path}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
