"""Render chapter notebooks to standalone, offline HTML for instructors.

Usage: python tools/render_html.py --out build notebooks/*.ipynb

Uses the stored outputs (it does not re-execute), embeds figures, and uses a
template that loads nothing from a CDN. Exits non-zero if any page still refers
to a remote script or stylesheet.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

TEMPLATE_DIR = Path(__file__).resolve().parent / "offline_html"
REMOTE_ASSET = re.compile(r"""<(?:script|link)\b[^>]*(?:src|href)=["']https?://""", re.I)


def render(notebook: Path, out_dir: Path) -> Path:
    exporter = HTMLExporter(template_name="lab", template_file="offline.html.j2",
                            extra_template_paths=[str(TEMPLATE_DIR)], embed_images=True)
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4),
                                          resources={"metadata": {"name": notebook.stem}})
    if REMOTE_ASSET.search(body) or "cdnjs" in body:
        raise SystemExit(f"{notebook.name}: the HTML still loads a remote asset")
    target = out_dir / f"{notebook.stem}.html"
    target.write_text(body, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build"))
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for notebook in args.notebooks:
        target = render(notebook, args.out)
        print(f"{notebook} -> {target} ({target.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
