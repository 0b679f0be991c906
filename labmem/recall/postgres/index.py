"""The recall engine's inverted index, answered by the PostgreSQL server.

Stage 2 (candidates) runs on the server: a term's postings are the rows whose ``terms``
array holds it, found through a GIN index keyed by ``<scope>:<term>`` — the same structure
as any inverted index (term → rows), kept by the database in the record's own
transaction, one posting list per user and term. Scoring, the stable rank and the
explained breakdown stay labmem's (:mod:`labmem.recall.packed`), so a recall here equals
a recall on the JSONL store.

A snapshot: :meth:`PostgresTermIndex.refresh` reads the scope's totals and then the
lengths and times of rows appended since (by any process on any host); postings are
cut at the refreshed record count, so statistics and postings describe the same
records however many writers append meanwhile. A record a posting proposes is checked
against the terms its row was indexed by before it is returned.
"""

from __future__ import annotations

import numpy as np

from labmem.recall.index import Postings, TermIndex, record_terms
from labmem.recall.protocols import LendsPostings, NamesPositions, ReadsInBulk
from labmem.recall.store import (
    MemoryKind,
    RemoteMemoryCorruptionError,
    RemoteMemoryValidationError,
    StoredMemory,
)

__all__ = ["PostgresTermIndex"]

#: Terms whose decoded postings are kept between queries (dropped oldest first).
CACHED_TERMS = 4096


class PostgresTermIndex(TermIndex, LendsPostings, NamesPositions, ReadsInBulk):
    """The :class:`~labmem.recall.index.TermIndex` of one :class:`PostgresMemoryStore`."""

    def __init__(self, store) -> None:
        self.store = store
        self._stats = (0, 0, 0)
        self._lengths = np.zeros(0, dtype=np.int64)  # per ordinal
        self._captured = np.zeros(0, dtype=np.float64)
        self._ids: list[str] = []  # per ordinal (ties are broken by id before decoding)
        # term -> (the record count it was read at, its postings below that count)
        self._postings: dict[str, tuple[int, Postings]] = {}
        self._checked: set[int] = set()  # ordinals whose record matched its row's terms
        self.refresh()

    def __repr__(self) -> str:
        return (f"PostgresTermIndex({self.store!r}, records={self.records}, "
                f"searched_records={self.searched_records})")

    @property
    def records(self) -> int:
        return self._stats[0]

    @property
    def searched_records(self) -> int:
        return self._stats[1]

    @property
    def total_length(self) -> int:
        return self._stats[2]

    def refresh(self) -> None:
        """Catch up with records appended since (reads only the new rows' columns)."""
        stats = self.store.stats()
        if stats == self._stats:
            return
        known = len(self._lengths)
        if stats[0] < known:
            raise self._corrupt(f"the scope's record count fell from {known} to {stats[0]}; "
                                "records are never removed")
        rows = self.store._db.query(
            "SELECT ordinal, length, captured_at, memory_id FROM memories WHERE "
            "user_scope = %s AND ordinal >= %s AND ordinal < %s ORDER BY ordinal",
            (self.store.user_scope, known, stats[0]))
        ordinals = np.array([r[0] for r in rows], dtype=np.int64)
        if not np.array_equal(ordinals, np.arange(known, stats[0])):
            raise self._corrupt(f"rows {known}–{stats[0] - 1} are not all there")
        self._lengths = np.concatenate([self._lengths,
                                        np.array([r[1] for r in rows], dtype=np.int64)])
        self._captured = np.concatenate([self._captured,
                                         np.array([r[2] for r in rows], dtype=np.float64)])
        self._ids.extend(r[3] for r in rows)
        self._stats = stats

    def _corrupt(self, detail: str) -> RemoteMemoryCorruptionError:
        return RemoteMemoryCorruptionError(
            self.store.name, None, f"user scope {self.store.user_scope}: {detail}")

    def postings(self, term: str) -> Postings:
        """The records (below the refreshed count) whose terms hold ``term``: one GIN
        index scan on the server, through ``labmem_postings`` (the connection's scope
        only; :mod:`labmem.recall.postgres.schema` says why it is a function). A term
        read before is extended with the rows appended since, not read again."""
        bound = self.records
        cached = self._postings.pop(term, None)  # (re)inserted below: most recent last
        since = 0 if cached is None else cached[0]
        if cached is not None and since == bound:
            found = cached[1]
        else:
            (ordinals, term_counts), = self.store._db.query(
                "SELECT ordinals, term_counts FROM labmem_postings(%s, %s, %s)",
                (term, since, bound))
            positions = np.array(ordinals, dtype=np.int64)
            counts = np.array(term_counts, dtype=np.int64)
            if len(counts) and counts.min() < 1:
                raise self._corrupt(f"a row holding term {term!r} has no count for it")
            if cached is not None:
                positions = np.concatenate([cached[1].positions, positions])
                counts = np.concatenate([cached[1].counts, counts])
            found = Postings(positions, counts, self._lengths[positions],
                             self._captured[positions])
        if len(self._postings) >= CACHED_TERMS:
            self._postings.pop(next(iter(self._postings)))  # the least recently used
        self._postings[term] = (bound, found)
        return found

    def term_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        found = self.postings(term)
        return found.positions, found.counts

    def record_columns(self) -> tuple[np.ndarray, np.ndarray]:
        return self._lengths, self._captured

    def memory_id(self, position: int) -> str:
        """The memory id of the row at ``position`` (read at refresh; a hit's record is
        checked against it when decoded)."""
        return self._ids[position]

    def document_frequency(self, term: str) -> int:
        return len(self.postings(term))

    def vocabulary(self, start: int = 0) -> tuple[str, ...]:
        """Surface terms first used at a position from ``start`` on (below
        :attr:`records`), in order of first use."""
        rows = self.store._db.query(
            "SELECT term FROM vocabulary WHERE user_scope = %s AND first_ordinal >= %s "
            "AND first_ordinal < %s ORDER BY first_ordinal, term",
            (self.store.user_scope, start, self.records))
        return tuple(row[0] for row in rows)

    def read_records(self) -> None:
        """Decode every record in one query (later :meth:`record` calls are look-ups)."""
        self.store.read_all()

    def record(self, position: int) -> StoredMemory:
        """The record at ``position``, checked once against the terms, length, time and
        id its row was indexed by (one query reads the record and those columns
        together): recall never returns a record its postings misdescribe."""
        if (isinstance(position, bool) or not isinstance(position, (int, np.integer))
                or not 0 <= position < self.records):
            raise RemoteMemoryValidationError(
                "position", f"{position!r} is not a position of this index (0 to "
                f"{self.records - 1})", "pass a position from postings(); refresh() to see "
                "newer records")
        if position in self._checked:
            return self.store.record_at(position)
        store = self.store
        rows = store._db.query(
            "SELECT ordinal, memory_id, user_scope, record, terms, term_counts, length, "
            "captured_at FROM memories WHERE user_scope = %s AND ordinal = %s",
            (store.user_scope, int(position)))
        if not rows:
            raise self._corrupt(f"row {position} is gone")
        record = store._decode_row(*rows[0][:4])
        terms, counts, length, captured = rows[0][4:]
        if record.kind is MemoryKind.CONVERSATION:
            expected = record_terms(record)
            indexed = dict(zip(terms or (), counts or (), strict=False))
            if (indexed != expected or length != sum(expected.values())
                    or captured != record.source.captured_at.timestamp()
                    or int(self._lengths[position]) != length
                    or self._ids[position] != record.memory_id):
                raise RemoteMemoryCorruptionError(
                    store.name, None,
                    f"row {position} of user scope {store.user_scope} (memory_id "
                    f"{record.memory_id!r}): its indexed terms, length or time do not match "
                    "the record — the record or its terms were edited after they were stored")
        store._decoded[int(position)] = record
        self._checked.add(int(position))
        return record
