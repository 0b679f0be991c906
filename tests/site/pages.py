"""What the site should hold, derived from the same sources the build reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

from labmem.notebook import reading_order

ROOT = Path(__file__).resolve().parents[2]
# a tag that loads a resource from another host, and the same in a style sheet
REMOTE = re.compile(
    r"""<(?:script|link|img|iframe|source|video|audio|embed|object)\b[^>]*"""
    r"""(?:src|href|data|srcset)\s*=\s*["']?\s*(?:https?:)?//""", re.I)
REMOTE_CSS = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])\s*(?:https?:)?//""", re.I)


def html_name(staged: str) -> str:
    return re.sub(r"\.(ipynb|md)$", ".html", staged)


def site_order(names: dict[str, str]) -> list[str]:
    """Every page in the order previous/next walks it: the home page, the chapters in
    reading order, the glossary, the solutions index and the solutions (``names`` from
    build_site.staged_names, of either edition)."""
    folder = next(k for k, v in names.items() if v == "index.ipynb").rsplit("/", 1)[0]
    chapters = [html_name(names[f"{folder}/{n}"]) for n in reading_order()]
    solutions = [html_name(s) for s in names.values()
                 if s.startswith("solutions/") and s.endswith(".ipynb")]
    return [*chapters, "glossary.html", "solutions/index.html", *solutions]


def figures(notebook: Path) -> list[str]:
    """The alt text of every figure a notebook stores, in order."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return [o["metadata"]["image/png"]["alt"] for c in nb["cells"] if c["cell_type"] == "code"
            for o in c.get("outputs", []) if "image/png" in o.get("data", {})]


def search_index(site: Path) -> dict:
    text = (site / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


def unique_term(index: dict, page: str, words: list[str]) -> str | None:
    """A word of ``page`` that Sphinx's search finds on that page and no other.

    The search stems the query (Snowball English, the stemmer the index was built with),
    looks the stem up in the page terms and title terms, and adds partial matches and
    title matches; a word qualifies only if none of those leads anywhere else.
    """
    import snowballstemmer

    stemmer = snowballstemmer.stemmer("english")
    doc = index["docnames"].index(page.removesuffix(".html"))
    other_titles = [t.lower() for t, hits in index["alltitles"].items()
                    if any(h[0] != doc for h in hits)]
    for word in sorted(set(words), key=lambda w: (-len(w), w)):
        stem = stemmer.stemWord(word.lower())
        if index["terms"].get(stem) != doc or stem in index["titleterms"]:
            continue
        if any(stem in term for term, docs in index["titleterms"].items()):
            continue
        if any(word.lower() in t for t in other_titles):
            continue
        return word
    return None
