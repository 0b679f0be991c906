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
import os
import posixpath
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = Path(__file__).resolve().parent / "site"
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
RAW_ANCHORS = re.compile(r'^(?:<a id="[\w-]+"></a>)+$', re.MULTILINE)
GENERATED = "<!-- staged by tools/build_site.py -->"

SOLUTIONS_INDEX = {"en": """# Solutions (for instructors)

Worked answers to every exercise, one page per chapter, each answer explained in a sentence
or two. Learners get more from a chapter by trying its exercises first: every checker answers
with a hint, never the answer.

""", "zh": """# 参考答案（讲师用）

每章每道练习的参考答案，一章一页，每个答案附一两句解释。学习者先在章节里自己做练习，收获更大：
检查器只给提示，从不直接给出答案。

"""}
#: the site's two editions: the folders their pages come from, the table of contents'
#: captions, and where the edition is built (the Chinese one in ``zh/`` below the English)
EDITIONS = {
    "en": {"folders": ("notebooks", "solutions"), "subdir": "",
           "captions": ("Chapters", "Reference", "Solutions")},
    "zh": {"folders": ("notebooks/zh", "solutions/zh"), "subdir": "zh",
           "captions": ("章节", "参考", "参考答案")},
}


def _reading_order() -> tuple[str, ...]:
    sys.path.insert(0, str(ROOT))
    from labmem.notebook import GLOSSARY, START_PAGE, reading_order

    return START_PAGE, GLOSSARY, reading_order()


def staged_names(root: Path = ROOT, edition: str = "en") -> dict[str, str]:
    """Repository path of every page (``notebooks/s09_transcript.ipynb``) → its staged path.
    Both editions stage their pages under the same names, so a page's twin in the other
    edition is the same path in the other site."""
    start, glossary, order = _reading_order()
    chapters, solutions = EDITIONS[edition]["folders"]
    names = {f"{chapters}/{start}": "index.ipynb", f"{chapters}/{glossary}": glossary}
    for notebook in order[1:]:
        names[f"{chapters}/{notebook}"] = notebook
        if (root / solutions / notebook).exists():
            names[f"{solutions}/{notebook}"] = f"solutions/{notebook}"
    names[solutions] = "solutions/index.md"
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


def _targets(match: re.Match) -> str:
    """A line of ``<a id>`` anchors as MyST targets, one per line."""
    return "\n".join(f"({a})=" for a in re.findall(r'id="([\w-]+)"', match.group(0)))


def _toctree(caption: str, entries: list[str]) -> str:
    lines = "\n".join(entries)
    return f"```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{lines}\n```\n"


def staged_sources(root: Path = ROOT, edition: str = "en") -> dict[str, str]:
    """Staged path → text of every source file of the site."""
    names = staged_names(root, edition)
    _, glossary, order = _reading_order()
    captions = EDITIONS[edition]["captions"]
    chapters = [n.removesuffix(".ipynb") for n in order[1:]]
    solutions = [p.removesuffix(".ipynb") for p in names.values()
                 if p.startswith("solutions/") and p.endswith(".ipynb")]
    out = {}
    for repo_path, staged in names.items():
        if staged == "solutions/index.md":
            continue
        text = (root / repo_path).read_text(encoding="utf-8")
        if staged.endswith(".ipynb"):
            nb = json.loads(text)
            for cell in nb["cells"]:
                if cell["cell_type"] == "markdown":
                    source = "".join(cell["source"])
                    cell["source"] = relink(source, repo_path, names)
            if staged == "index.ipynb":
                nav = (_toctree(captions[0], chapters)
                       + _toctree(captions[1], [glossary.removesuffix(".md")])
                       + _toctree(captions[2], ["solutions/index"]))
                nb["cells"].append({"cell_type": "markdown", "id": "site-toctree",
                                    "metadata": {}, "source": nav})
            out[staged] = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        else:  # the glossary: its explicit anchors become MyST targets that links resolve
            out[staged] = RAW_ANCHORS.sub(_targets, relink(text, repo_path, names))
    listing = "".join(f"* [{s.split('/')[-1]}]({s.split('/')[-1]}.ipynb)\n" for s in solutions)
    out["solutions/index.md"] = (SOLUTIONS_INDEX[edition] + listing + "\n" + GENERATED + "\n"
                                 + _toctree(captions[2], [s.split("/")[-1] for s in solutions]))
    return out


def stage(src_dir: Path, root: Path = ROOT, edition: str = "en") -> int:
    """Write the staged sources under ``src_dir``; returns how many files changed."""
    sources = staged_sources(root, edition)
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


def search_terms(path: Path) -> Path:
    """jieba's user dictionary for the Chinese search index: every Chinese glossary term is one
    word (召回, 分层记忆, 租约), so a reader's search for it finds the pages that use it."""
    sys.path.insert(0, str(ROOT / "tools"))
    from i18n import glossary_terms

    words = sorted({form for term in glossary_terms() for _, form in term.pairs()
                    if re.search(r"[\u4e00-\u9fff]", form)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{w.replace(' ', '')} 100000 n\n" for w in words), encoding="utf-8")
    return path


def build_edition(out: Path, edition: str, *, quiet: bool = True) -> Path:
    """Build one edition into ``out``; returns its home page."""
    import myst_nb.sphinx_ext
    from sphinx.cmd.build import build_main

    # myst-nb writes the notebooks' images to <out>/../jupyter_execute, which for build/ is
    # the repository root; an absolute name keeps them inside the build instead
    myst_nb.sphinx_ext.OUTPUT_FOLDER = str(out / ".jupyter_execute")
    src_dir = out / ".site-src"
    stage(src_dir, edition=edition)
    # tools/site/conf.py reads the edition (language, search, the language switch) from here
    os.environ["LABMEM_SITE_EDITION"] = edition
    if edition == "zh":
        os.environ["LABMEM_SITE_SEARCH_DICT"] = str(search_terms(out / ".search-terms.txt"))
    args = ["-b", "html", "-c", str(CONF_DIR), "-d", str(out / ".doctrees"),
            "--fail-on-warning", "--keep-going", str(src_dir), str(out)]
    if quiet:
        args.insert(0, "-q")
    if build_main(args) != 0:
        # forget what was read, so the next build reads every page again and reports the
        # same warnings instead of passing on a cached, broken environment
        shutil.rmtree(out / ".doctrees", ignore_errors=True)
        raise SystemExit(f"the {edition} site did not build cleanly: see the warnings above")
    return out / "index.html"


def build(out: Path, *, quiet: bool = True) -> Path:
    """Build the site into ``out`` (its home page is ``out/index.html``), the Chinese edition
    into ``out/zh``; returns the English home page."""
    out = out.resolve()
    home = build_edition(out, "en", quiet=quiet)
    build_edition(out / EDITIONS["zh"]["subdir"], "zh", quiet=quiet)
    return home


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
