"""Build the course website from the committed, executed notebooks (`make html`).

Usage: python tools/build_site.py [--out build]

The site is Sphinx with the Jupyter Book theme (sphinx-book-theme) and myst-nb as the
notebook reader, run with execution off. The start page becomes the home page
(``index.html``), the chapters follow in ``labmem.notebook.reading_order()`` with
previous/next links, then the glossary (``glossary.html``) and the solutions in their own
section (``solutions/``). Search is Sphinx's own: an index in ``searchindex.js`` that the
search page loads with a script tag, so it works from ``file://`` as well as over HTTP.

The sources are staged under ``<out>/.site-src``: the start page is copied to
``index.ipynb`` and every markdown link between notebooks is re-pointed at the staged
names. Only markdown cells are touched; outputs are copied as they are. A staged file is
rewritten only when its text changes, so a second build re-reads only what changed.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = Path(__file__).resolve().parent / "site"
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
RAW_ANCHOR = re.compile(r'^<a id="([\w-]+)"></a>$', re.MULTILINE)
GENERATED = "<!-- staged by tools/build_site.py -->"

SOLUTIONS_INDEX = """# Solutions (for instructors)

Worked answers to every exercise, one page per chapter, each answer explained in a sentence
or two. Learners get more from a chapter by trying its exercises first: every checker answers
with a hint, never the answer.

"""


def _reading_order() -> tuple[str, ...]:
    sys.path.insert(0, str(ROOT))
    from labmem.notebook import GLOSSARY, START_PAGE, reading_order

    return START_PAGE, GLOSSARY, reading_order()


def staged_names(root: Path = ROOT) -> dict[str, str]:
    """Repository path of every page (``notebooks/s09_transcript.ipynb``) → its staged path."""
    start, glossary, order = _reading_order()
    names = {f"notebooks/{start}": "index.ipynb", f"notebooks/{glossary}": glossary}
    for notebook in order[1:]:
        names[f"notebooks/{notebook}"] = notebook
        if (root / "solutions" / notebook).exists():
            names[f"solutions/{notebook}"] = f"solutions/{notebook}"
    names["solutions"] = "solutions/index.md"
    return names


def relink(text: str, source: str, names: dict[str, str]) -> str:
    """Re-point the markdown links in ``text`` (written in repo file ``source``) at staged pages.

    A link to another page of the site is rewritten relative to where ``source`` is staged;
    external links, in-page anchors and links to files that are not pages stay as written.
    """
    here = posixpath.dirname(source)
    staged_here = posixpath.dirname(names[source])

    def one(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(here, path)).rstrip("/")
        if repo_path not in names:
            return match.group(0)
        staged = posixpath.relpath(names[repo_path], staged_here or ".")
        return f"{match.group(1)}{staged}{hash_}{anchor}{match.group(3)}"

    return LINK.sub(one, text)


def _toctree(caption: str, entries: list[str]) -> str:
    lines = "\n".join(entries)
    return f"```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{lines}\n```\n"


def staged_sources(root: Path = ROOT) -> dict[str, str]:
    """Staged path → text of every source file of the site."""
    names = staged_names(root)
    _, glossary, order = _reading_order()
    chapters = [n.removesuffix(".ipynb") for n in order[1:]]
    solutions = [p.removesuffix(".ipynb") for p in names.values()
                 if p.startswith("solutions/") and p.endswith(".ipynb")]
    out = {}
    for repo_path, staged in names.items():
        if repo_path == "solutions":
            continue
        text = (root / repo_path).read_text(encoding="utf-8")
        if staged.endswith(".ipynb"):
            nb = json.loads(text)
            for cell in nb["cells"]:
                if cell["cell_type"] == "markdown":
                    source = "".join(cell["source"])
                    cell["source"] = relink(source, repo_path, names)
            if staged == "index.ipynb":
                nav = (_toctree("Chapters", chapters)
                       + _toctree("Reference", [glossary.removesuffix(".md")])
                       + _toctree("Solutions", ["solutions/index"]))
                nb["cells"].append({"cell_type": "markdown", "id": "site-toctree",
                                    "metadata": {}, "source": nav})
            out[staged] = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        else:  # the glossary: its explicit anchors become MyST targets that links resolve
            out[staged] = RAW_ANCHOR.sub(r"(\1)=", relink(text, repo_path, names))
    listing = "".join(f"* [{s.split('/')[-1]}]({s.split('/')[-1]}.ipynb)\n" for s in solutions)
    out["solutions/index.md"] = (SOLUTIONS_INDEX + listing + "\n" + GENERATED + "\n"
                                 + _toctree("Solutions", [s.split("/")[-1] for s in solutions]))
    return out


def stage(src_dir: Path, root: Path = ROOT) -> int:
    """Write the staged sources under ``src_dir``; returns how many files changed."""
    sources = staged_sources(root)
    changed = 0
    for rel, text in sources.items():
        target = src_dir / rel
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        changed += 1
    for stale in [p for p in src_dir.rglob("*") if p.is_file()]:
        if stale.relative_to(src_dir).as_posix() not in sources:
            stale.unlink()
            changed += 1
    return changed


def build(out: Path, *, quiet: bool = True) -> Path:
    """Build the site into ``out`` (its home page is ``out/index.html``); returns that page."""
    import myst_nb.sphinx_ext
    from sphinx.cmd.build import build_main

    out = out.resolve()
    # myst-nb writes the notebooks' images to <out>/../jupyter_execute, which for build/ is
    # the repository root; an absolute name keeps them inside the build instead
    myst_nb.sphinx_ext.OUTPUT_FOLDER = str(out / ".jupyter_execute")
    src_dir = out / ".site-src"
    stage(src_dir)
    args = ["-b", "html", "-c", str(CONF_DIR), "-d", str(out / ".doctrees"),
            "--fail-on-warning", "--keep-going", str(src_dir), str(out)]
    if quiet:
        args.insert(0, "-q")
    if build_main(args) != 0:
        # forget what was read, so the next build reads every page again and reports the
        # same warnings instead of passing on a cached, broken environment
        shutil.rmtree(out / ".doctrees", ignore_errors=True)
        raise SystemExit("the site did not build cleanly: see the warnings above")
    return out / "index.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    started = time.monotonic()
    home = build(args.out, quiet=not args.verbose)
    pages = len(list(args.out.resolve().rglob("*.html")))
    print(f"site: {home} ({pages} pages, {time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
