"""Text normalization, search terms and the project's one token estimate.

Three small functions that every layer shares, so that "the same words" and "how
big is this" mean the same thing in recall (s12), artifacts (s13), compaction and
the Context MMU (s14) and the story case study:

* :func:`normalize_text` — NFKC, casefold, whitespace collapse.
* :func:`extract_terms` — ASCII word tokens plus, for every run of CJK ideographs,
  its consecutive character bigrams (a one-character run gives that character).
* :func:`estimate_tokens` — each CJK character counts 1; every other run of
  characters counts ``ceil(len / 4)``; a message adds :data:`MESSAGE_ENVELOPE_TOKENS`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

MESSAGE_ENVELOPE_TOKENS = 4

# CJK Unified Ideographs: the main block, extensions A–H and the compatibility blocks.
_CJK_RANGES = (
    "\u3400-\u4dbf"
    "\u4e00-\u9fff"
    "\uf900-\ufaff"
    "\U00020000-\U0002a6df"
    "\U0002a700-\U0002ebef"
    "\U0002f800-\U0002fa1f"
    "\U00030000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{_CJK_RANGES}]+")
_CJK_OR_OTHER_RUN = re.compile(f"[{_CJK_RANGES}]+|[^{_CJK_RANGES}]+")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_WHITESPACE = re.compile(r"\s+")


def is_cjk(char: str) -> bool:
    """True for one CJK ideograph (the characters that get bigram terms)."""
    return bool(_CJK_RUN.fullmatch(char))


def collapse_whitespace(text: str) -> str:
    """Strip, and turn every run of whitespace into one space (readable form)."""
    return _WHITESPACE.sub(" ", text).strip()


def normalize_text(text: str) -> str:
    """NFKC + casefold + whitespace collapse: fullwidth, case and spacing stop mattering."""
    return collapse_whitespace(unicodedata.normalize("NFKC", text).casefold())


def term_frequencies(text: str) -> Counter[str]:
    """How often each search term occurs in ``text`` (after normalization).

    Recall's teaching scorer only needs the set of terms; the counts are kept so that
    a frequency-aware scorer (BM25, say) can be added without re-tokenizing.
    """
    normalized = normalize_text(text)
    counts: Counter[str] = Counter(_ASCII_WORD.findall(normalized))
    for run in _CJK_RUN.findall(normalized):
        if len(run) == 1:
            counts[run] += 1
        else:
            counts.update(run[i:i + 2] for i in range(len(run) - 1))
    return counts


def extract_terms(text: str) -> tuple[str, ...]:
    """Sorted unique search terms of ``text``; ``()`` when it has none."""
    return tuple(sorted(term_frequencies(text)))


def estimate_tokens(text: str) -> int:
    """A cheap, deterministic token estimate (no tokenizer download, same on every machine).

    CJK ideographs are roughly one token each; other text averages about four
    characters per token. Deliberately simple: budgets built on it are reproducible.
    """
    if text.isascii():  # no CJK possible: one "other" run (fast for megabytes of tool output)
        return math.ceil(len(text) / 4)
    total = 0
    for run in _CJK_OR_OTHER_RUN.findall(text):
        total += len(run) if is_cjk(run[0]) else math.ceil(len(run) / 4)
    return total


def estimate_message_tokens(text: str) -> int:
    """Tokens of one chat message whose text is ``text``: its content plus the envelope."""
    return estimate_tokens(text) + MESSAGE_ENVELOPE_TOKENS
