"""s12 recall, stage 2 at scale: an inverted index from term to the records that use it.

Stage 2 done by hand (:func:`~labmem.recall.pipeline.build_recall_candidates`) re-reads
and re-tokenizes every record for every query. An inverted index does that work once: for
each term it keeps a *postings list* — the positions of the records that contain the term,
with how often and in how long a record.
A query's candidates are then the union of its terms' postings, and a query that shares
no term with the store touches nothing.

The index answers only "which records, how often, how long, captured when"; scoring and
ranking stay in :mod:`labmem.recall.scorers` and :mod:`labmem.recall.pipeline`. Two backends
implement the same small :class:`TermIndex` protocol:

* :class:`InMemoryTermIndex` — built once from a JSONL :class:`RemoteMemoryStore` on the
  first query, then extended with only the records appended since (by any process);
* ``SqliteTermIndex`` (:mod:`labmem.recall.sqlite_store`) — postings kept in SQLite tables,
  written in the same transaction as each record.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from labmem.core.text import term_frequencies
from labmem.recall.store import MemoryKind, StoredMemory

__all__ = ["Postings", "TermIndex", "InMemoryTermIndex", "open_term_index", "record_terms",
           "merge_postings"]


def record_terms(record: StoredMemory):
    """Term counts of what a record is searchable by: source title, summary, content."""
    return term_frequencies("\n".join((record.source.title, record.summary, record.content)))


@dataclass(frozen=True, eq=False)
class Postings:
    """One term's postings list as parallel arrays, ascending by ``positions``.

    ``counts`` is the term's frequency in the record, ``lengths`` the record's length in
    terms (what BM25 normalizes by) and ``captured_at`` its source time in POSIX seconds
    (what recency needs), so a scorer never has to load a record to score it.
    """

    positions: np.ndarray  # int64 record positions in the store
    counts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    captured_at: np.ndarray  # float64 seconds

    def __len__(self) -> int:
        return len(self.positions)

    @classmethod
    def empty(cls) -> Postings:
        ints = np.zeros(0, dtype=np.int64)
        return cls(ints, ints, ints, np.zeros(0, dtype=np.float64))


class TermIndex(Protocol):
    """What the recall engine needs from a backend's index."""

    searched_records: int  # conversation records in scope: BM25's N
    total_length: int  # sum of their lengths: BM25's average length × N

    def refresh(self) -> None:
        """Catch up with records appended since the last call, by this or any process."""

    def postings(self, term: str) -> Postings:
        """The records containing ``term``; empty arrays when none does."""

    def record(self, position: int) -> StoredMemory:
        """The stored record at ``position`` (to build hits for the top of the ranking)."""

    @property
    def records(self) -> int:
        """Records of any kind this snapshot covers: positions run from 0 to records − 1."""

    def vocabulary(self, start: int = 0) -> tuple[str, ...]:
        """Surface terms first used by a record at a position from ``start`` on, in order
        of first use (an analyzer groups them; :mod:`labmem.recall.analyzers`)."""


class InMemoryTermIndex:
    """The inverted index of one JSONL store, kept in compact arrays.

    Per record it stores two numbers (length, capture time); per term a pair of integer
    arrays (positions, counts). Records are never re-tokenized after they are indexed,
    and positions only grow, so every postings list stays sorted by construction.
    """

    def __init__(self, store) -> None:
        self.store = store
        self.searched_records = 0
        self.total_length = 0
        self._records: tuple[StoredMemory, ...] = ()
        self._indexed = 0  # records (of any kind) indexed so far
        self._lengths = array("q")
        self._captured = array("d")
        self._postings: dict[str, tuple[array, array]] = {}
        self._vocabulary: list[str] = []  # every term once, in order of first use
        self._first_use = array("q")  # the position of each term's first record

    def __repr__(self) -> str:
        return f"InMemoryTermIndex(records={self._indexed}, terms={len(self._postings)})"

    def refresh(self) -> None:
        if len(self.store) == self._indexed:  # catches up with the file; no copy of it
            return
        self._records = self.store.read_all()
        for position in range(self._indexed, len(self._records)):
            self._add(position, self._records[position])
        self._indexed = len(self._records)

    def _add(self, position: int, record: StoredMemory) -> None:
        if record.kind is not MemoryKind.CONVERSATION:  # profiles are never recalled
            self._lengths.append(0)
            self._captured.append(0.0)
            return
        counts = record_terms(record)
        length = sum(counts.values())
        self._lengths.append(length)
        self._captured.append(record.source.captured_at.timestamp())
        self.searched_records += 1
        self.total_length += length
        for term, count in counts.items():
            entry = self._postings.get(term)
            if entry is None:
                entry = self._postings[term] = (array("q"), array("q"))
                self._vocabulary.append(term)
                self._first_use.append(position)
            entry[0].append(position)
            entry[1].append(count)

    def document_frequency(self, term: str) -> int:
        entry = self._postings.get(term)
        return 0 if entry is None else len(entry[0])

    def postings(self, term: str) -> Postings:
        entry = self._postings.get(term)
        if entry is None:
            return Postings.empty()
        # copies, not views: an array.array cannot grow while numpy holds its buffer
        positions = np.array(entry[0], dtype=np.int64)
        return Postings(
            positions=positions,
            counts=np.array(entry[1], dtype=np.int64),
            lengths=np.frombuffer(self._lengths, dtype=np.int64)[positions],
            captured_at=np.frombuffer(self._captured, dtype=np.float64)[positions],
        )

    def record(self, position: int) -> StoredMemory:
        return self._records[position]

    @property
    def records(self) -> int:
        return self._indexed

    def vocabulary(self, start: int = 0) -> tuple[str, ...]:
        return tuple(self._vocabulary[bisect_left(self._first_use, start):])


def open_term_index(store) -> TermIndex:
    """The index that fits ``store``: its own (``store.term_index()``) or an in-memory one."""
    own = getattr(store, "term_index", None)
    return own() if callable(own) else InMemoryTermIndex(store)


def merge_postings(postings: Iterable[Postings]) -> np.ndarray:
    """The ascending, distinct positions of every record in any of ``postings``."""
    arrays = [p.positions for p in postings if len(p)]
    if not arrays:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(arrays))
