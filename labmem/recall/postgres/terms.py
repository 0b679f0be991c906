"""What the server indexes of a record: labmem's own analysis, computed at append.

PostgreSQL's full-text search has its own parser and stemmers; a configuration that
splits words exactly as :func:`labmem.core.text.term_frequencies` does (every script,
CJK and kana as character bigrams, NFKC and casefold) does not exist. So the server
does not analyze text at all: labmem computes each conversation record's terms and
counts once, when it is stored, and the row carries them (``terms``, ``term_counts``)
under a GIN index. Candidates found through that index are then exactly the records
the other backends find, and scores stay labmem's.
"""

from __future__ import annotations

from collections.abc import Iterable

from labmem.core.validation import parse_json
from labmem.recall.index import record_terms
from labmem.recall.store import MemoryKind, StoredMemory, record_from_object

__all__ = ["analyzed", "analyzed_row", "vocabulary_rows"]


def analyzed(record: StoredMemory) -> tuple[list[str] | None, list[int] | None, int]:
    """(sorted terms, their counts, length) of a conversation record; a profile is not
    searched, so it has no terms and length 0."""
    if record.kind is not MemoryKind.CONVERSATION:
        return None, None, 0
    counts = record_terms(record)
    terms = sorted(counts)
    return terms, [counts[t] for t in terms], sum(counts.values())


def analyzed_row(kind: str, payload: str) -> tuple[list[str] | None, list[int] | None, int]:
    """:func:`analyzed` of a stored row (the schema upgrade analyzes rows already stored)."""
    if kind != MemoryKind.CONVERSATION.value:
        return None, None, 0
    return analyzed(record_from_object(parse_json(payload)))


def vocabulary_rows(rows: Iterable[tuple[str, int, list[str] | None]]
                    ) -> list[tuple[str, str, int]]:
    """``(user_scope, term, first_ordinal)`` for every term's first use among ``rows``
    of ``(user_scope, ordinal, terms)`` given in storage order."""
    first: dict[tuple[str, str], int] = {}
    for scope, ordinal, terms in rows:
        for term in terms or ():
            first.setdefault((scope, term), ordinal)
    return [(scope, term, ordinal) for (scope, term), ordinal in first.items()]
