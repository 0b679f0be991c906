"""Write ``labmem/scratch/<module>.py`` from the chapters' marked cells (or check them).

A code cell whose first line is ``# scratch: <module>`` belongs to ``labmem/scratch/<module>.py``.
The module is two generated comment lines naming its chapter, then each marked cell's source
without its marker line, trailing blank lines stripped, separated by two blank lines::

    python tools/scratch.py            # write every module from its chapter
    python tools/scratch.py --check    # exit 1 and name the modules that differ

One chapter may write one module; a module gets its cells from one chapter only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PACKAGE = ROOT / "labmem" / "scratch"
MARKER = re.compile(r"^# scratch: ([a-z][a-z0-9_]*)\s*$")
BANNER = ("# Generated from notebooks/{chapter}\n"
          "# by tools/scratch.py: edit the chapter's marked cells, not this file.\n")


def marked_cells(notebook: Path) -> dict[str, list[str]]:
    """Module name → the sources of its marked cells in ``notebook``, in order, unmarked."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    out: dict[str, list[str]] = {}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        first, _, rest = source.partition("\n")
        match = MARKER.match(first)
        if match:
            out.setdefault(match.group(1), []).append(rest.rstrip())
    return out


def module_text(chapter: str, module: str, cells: list[str]) -> str:
    """The module's whole source, as the chapter's cells give it."""
    return BANNER.format(chapter=chapter, module=module) + "\n\n\n".join(cells) + "\n"


def expected_modules(notebooks: Path = NOTEBOOKS) -> dict[str, tuple[str, str]]:
    """Module name → (its chapter's file name, its source) for every marked chapter."""
    modules: dict[str, tuple[str, str]] = {}
    for notebook in sorted(notebooks.glob("*.ipynb")):
        for module, cells in marked_cells(notebook).items():
            if module in modules:
                raise SystemExit(f"labmem.scratch.{module}: cells in {modules[module][0]} "
                                 f"and in {notebook.name}; one chapter writes one module")
            modules[module] = (notebook.name, module_text(notebook.name, module, cells))
    return modules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a module differs from its chapter")
    args = parser.parse_args(argv)
    stale = []
    for module, (chapter, text) in expected_modules().items():
        path = PACKAGE / f"{module}.py"
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(f"labmem/scratch/{module}.py (from notebooks/{chapter})")
        if not args.check:
            path.write_text(text, encoding="utf-8")
    verb = "differs from its chapter" if args.check else "written"
    for line in stale:
        print(f"{line}: {verb}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
