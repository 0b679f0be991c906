"""Every term a chapter sets in bold is in the glossary, or is defined where it stands.

The start page promises: "words in bold where a chapter first uses them are defined in the
glossary". This test holds every chapter (and the start page) to it, with one rule:

* **What counts as a bold term.** Every ``**…**`` span in a markdown cell, outside code, except
  a *lead-in*: a span that opens a paragraph, a list item, a quote line or a table cell
  (``**Exercise 2.** …``, ``**prose**, 200 words a minute``), or whose text ends in ``.``,
  ``:``, ``?`` or ``!``. Plain emphasis is written in *italics*, never in bold.
* **In the glossary.** The term, lower-cased, without backticks or link syntax, turned into a
  slug (``keep score`` → ``keep-score``), equals the slug of an entry's ``###`` heading, of
  a part of it (``HOT / WARM / COLD`` gives ``hot``, ``warm``, ``cold``; ``MRR (mean
  reciprocal rank)`` gives ``mrr`` and ``mean-reciprocal-rank``) or one of the entry's
  ``<a id>`` anchors (an entry lists its other spellings as anchors). A plural matches its
  singular (``-s``, ``-es``, ``-ies`` → ``-y``). A bold link into the glossary
  (``**[sealed](glossary.md#seal)**``) matches the entry it links to.
* **Defined where it stands.** Right after the bold span (after an optional parenthesis)
  comes a colon, a dash, or ``is`` / ``are`` / ``means``; or right before it ``called``,
  ``call it`` or ``known as`` (an article may come between).

A violation is reported as ``chapter: term``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labmem.notebook import CHAPTERS, GLOSSARY, START_PAGE

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PAGES = [START_PAGE, *(chapter.notebook for chapter in CHAPTERS)]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
LINK = re.compile(r"\[([^\]]*)\]\(([^)]*)\)")
LINE_START = re.compile(r"(?:^|\n)[ \t]*(?:>[ \t]*)*(?:(?:[*+-]|\d+[.)])[ \t]+)?$")
TABLE_CELL_START = re.compile(r"\|[ \t]*$")
DEFINED_AFTER = re.compile(r"^\s*(?:\([^)]*\)\s*)?(?::|—|–| -- | - |,?\s+(?:is|are|means)\b)")
DEFINED_BEFORE = re.compile(r"\b(?:called|call it|call them|known as)(?:\s+(?:a|an|the))?\s*$",
                            re.I)

# The terms the series promises its glossary explains, whatever the chapters bold today.
REQUIRED = [
    "inverted index", "analyzer", "postings", "turn", "tool round", "warm set",
    "protected page", "revision chain", "hit@k", "precision@k", "hybrid",
    "episodic memory", "semantic memory", "procedural memory", "working memory",
    "keep score", "from-scratch module", "contract suite", "reference backend",
    "fast backend", "BM25", "recall@k", "MRR", "idf", "tool pair", "torn tail",
]


def slug(text: str) -> str:
    return re.sub(r"[^\w@]+", "-", text.lower().replace("`", "")).strip("-")


def singulars(term_slug: str) -> set[str]:
    """The slug and the singular forms a plural of it may stand for."""
    out = {term_slug}
    if term_slug.endswith("ies"):
        out.add(term_slug[:-3] + "y")
    if term_slug.endswith("es"):
        out.add(term_slug[:-2])
    if term_slug.endswith("s"):
        out.add(term_slug[:-1])
    return out


def glossary_names(text: str) -> set[str]:
    """Every slug a bold term may match: headings, their parts, and the entries' anchors."""
    names = set(re.findall(r'<a id="([\w\-@]+)"></a>', text))
    for heading in re.findall(r"^### (.+)$", text, re.M):
        heading = heading.split(" · ")[0]  # "### recall · 召回": the English term, then the Chinese
        names.add(slug(heading))
        for part in re.split(r"\s*/\s*|\s*\(|\)", heading):
            if part.strip():
                names.add(slug(part))
    return names


def _mask_code(markdown: str) -> str:
    """Markdown with code blocks dropped and asterisks inside code spans neutralized."""
    markdown = FENCE.sub("", markdown)
    return CODE_SPAN.sub(lambda m: m.group(1) + m.group(2).replace("*", "∗") + m.group(1),
                         markdown)


def bold_terms(markdown: str) -> list[tuple[str, str, str]]:
    """(term, text before it, text after it) for every bold span that is not a lead-in."""
    text = _mask_code(markdown)
    out = []
    for match in BOLD.finditer(text):
        inner = match.group(1).strip()
        before, after = text[:match.start()], text[match.end():]
        if LINE_START.search(before) or TABLE_CELL_START.search(before):
            continue                                   # a paragraph, item or cell lead-in
        if inner[-1] in ".:?!" or after[:1] in (":",) and not inner:
            continue
        out.append((inner, before, after))
    return out


def in_glossary(term: str, names: set[str]) -> bool:
    link = LINK.fullmatch(term)
    if link and "glossary.md#" in link.group(2):
        return link.group(2).split("#", 1)[1] in names
    plain = LINK.sub(lambda m: m.group(1), term).replace("∗", "*")
    return bool(singulars(slug(plain)) & names)


def defined_here(before: str, after: str) -> bool:
    return bool(DEFINED_AFTER.match(after) or DEFINED_BEFORE.search(before))


def violations(name: str, markdown_cells: list[str], names: set[str]) -> list[str]:
    found = []
    for cell in markdown_cells:
        for term, before, after in bold_terms(cell):
            if not in_glossary(term, names) and not defined_here(before, after):
                found.append(f"{name}: {term}")
    return found


def learner_markdown(path: Path) -> list[str]:
    """The markdown cells a learner reads (generated instructor notes left out)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
            and not c.get("metadata", {}).get("labmem", {}).get("generated")]


@pytest.fixture(scope="module")
def names() -> set[str]:
    return glossary_names((NOTEBOOKS / GLOSSARY).read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", PAGES)
def test_every_bold_term_is_in_the_glossary_or_defined_where_it_stands(page, names):
    assert violations(page, learner_markdown(NOTEBOOKS / page), names) == []


@pytest.mark.parametrize("term", REQUIRED)
def test_the_glossary_explains_the_terms_the_series_promises(term, names):
    assert in_glossary(term, names), f"glossary.md has no entry for {term!r}"


def test_every_glossary_entry_has_an_anchor_and_a_chapter():
    lines = (NOTEBOOKS / GLOSSARY).read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        if line.startswith("### "):
            assert lines[i - 1].startswith('<a id="'), f"{line}: no <a id> anchor above it"
            body = []
            for following in lines[i + 1:]:
                if following.startswith(("<a id=", "## ", "### ")):
                    break
                body.append(following)
            assert re.search(r"\[[^\]]+\]\s*$", "\n".join(body).strip()), \
                f"{line}: no [chapter] at the end"


# -- the rule bites ----------------------------------------------------------------------

NAMES = glossary_names("### keep score\nx [s14]\n\n### HOT / WARM / COLD\nx [s14]\n"
                       '<a id="fails-closed"></a>\n### MRR (mean reciprocal rank)\nx [s12b]\n')


@pytest.mark.parametrize("markdown", [
    "A page has a **keep score** too.",
    "Both **keep scores** drop.",
    "It is loaded **WARM** now.",
    "Ranked by **MRR** and by **mean reciprocal rank**.",
    "The view **fails closed** here.",
    "This is a **flurb**: a made-up thing.",
    "A **flurb** (a made-up thing) is defined here.",
    "A **flurb** means nothing at all.",
    "Something called a **flurb** appears.",
    "**Flurb.** A lead-in opens a paragraph.",
    "* **flurb**, a list item's lead-in",
    "| **flurb** | a table cell's lead-in |",
    "Use `a**b**c` in code.",
    "```python\nx = a**b**c\n```",
])
def test_accepted(markdown):
    assert violations("page", [markdown], NAMES) == []


@pytest.mark.parametrize("markdown, term", [
    ("Now the **flurb** arrives.", "flurb"),
    ("It is **not** the same.", "not"),
    ("Each **keep scorer** runs.", "keep scorer"),
    ("Link to a missing entry: **[flurb](glossary.md#flurb)**.", "[flurb](glossary.md#flurb)"),
    ("The **flurb** and then: nothing.", "flurb"),
])
def test_rejected_with_chapter_and_term(markdown, term):
    assert violations("s99_made_up.ipynb", [markdown], NAMES) == [f"s99_made_up.ipynb: {term}"]
