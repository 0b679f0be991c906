"""Export every chapter to an offline reveal.js slide deck (`make slides`).

Usage: python tools/build_decks.py [--out build/slides] notebooks/*.ipynb notebooks/zh/*.ipynb

Each deck is nbconvert's slides export of the committed, executed notebook (no
re-execution), with the slide metadata that tools/slides.py writes. reveal.js comes from
the npm package pinned in tools/reveal/package-lock.json (`npm ci --prefix tools/reveal`)
and is copied beside the decks, so a deck opens from a file or a local server with no
network. Instructor notes show in reveal.js's speaker view (press S). A Chinese chapter
(``notebooks/zh/``, built by tools/i18n.py) becomes ``<out>/zh/<name>.slides.html``, its deck
in Chinese (``<html lang="zh">``) reading the same reveal.js one folder up.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REVEAL_PACKAGE = ROOT / "tools" / "reveal" / "node_modules" / "reveal.js"
TEMPLATE_DIR = ROOT / "tools" / "reveal" / "template"
REVEAL_DIR = "reveal.js"  # beside the decks
REVEAL_FILES = ("dist/reveal.js", "dist/reveal.css", "dist/reset.css", "dist/theme/white.css",
                "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js")


def copy_reveal(out: Path) -> None:
    """Copy the parts of reveal.js a deck loads into ``out/reveal.js``."""
    if not (REVEAL_PACKAGE / "dist" / "reveal.js").exists():
        raise SystemExit("reveal.js is not installed: run `npm ci --prefix tools/reveal` "
                         "(make slides does)")
    for rel in REVEAL_FILES:
        source, target = REVEAL_PACKAGE / rel, out / REVEAL_DIR / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, target)


def edition(notebook: Path) -> str:
    """``zh`` for a Chinese chapter (its folder is ``zh``), else ``en``."""
    return "zh" if notebook.parent.name == "zh" else "en"


def export(notebook: Path, out: Path) -> Path:
    """Write ``<out>/<name>.slides.html`` (``<out>/zh/…`` for a Chinese chapter); returns its
    path."""
    import nbformat
    from nbconvert import SlidesExporter

    chinese = edition(notebook) == "zh"
    folder = out / "zh" if chinese else out
    exporter = SlidesExporter(template_file="offline_slides.html.j2",
                              extra_template_paths=[str(TEMPLATE_DIR)],
                              reveal_url_prefix=("../" if chinese else "") + REVEAL_DIR,
                              reveal_theme="white", reveal_transition="none",
                              language_code="zh" if chinese else "en")
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4),
                                          resources={"metadata": {"name": notebook.stem}})
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{notebook.stem}.slides.html"
    target.write_text(body, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "slides")
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    copy_reveal(args.out)
    for notebook in args.notebooks:
        target = export(notebook, args.out)
        print(f"{notebook} -> {target} ({target.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
