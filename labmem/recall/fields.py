"""s12b recall: a record's context — its thread, its neighbours, its title and date as words.

The inverted index knows which records contain a term. A contextual scorer
(:mod:`labmem.recall.contextual`) also needs, for every record position:

* its **thread** — the source id up to its last ``:`` (``transcript:session-1:7`` belongs
  to ``transcript:session-1``; an id without ``:`` is a thread of its own) — and its
  **neighbours**, the conversation records of the same thread just before and after it
  in store order;
* its **title** (the source title) and its **date** rendered as words (``8 may 2023``),
  as small inverted lists of their own, so they can be weighted apart from the text.

:class:`RecordContext` keeps all of this in memory for one index, built once and
extended with only the records appended since. Appending a record sets the "next" link
of its thread's previous last record here, in memory: no stored record and no postings
list is ever rewritten.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from labmem.core.text import term_frequencies
from labmem.recall.analyzers import AnalyzedIndex, Analyzer
from labmem.recall.index import TermIndex, distinct_groups, record_terms
from labmem.recall.protocols import KeepsRecordContext, ReadsInBulk, offers
from labmem.recall.sidecar import packed_strings
from labmem.recall.store import MemoryKind, StoredMemory

__all__ = ["thread_of", "date_words", "RecordContext", "ContextArrays", "record_context",
           "MONTHS"]

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
NO_LINK = -1


def thread_of(source_id: str) -> str:
    """The thread a source id belongs to: everything before its last ``:``."""
    head, colon, _ = source_id.rpartition(":")
    return head if colon else source_id


def date_words(captured_at: datetime) -> str:
    """The capture date (UTC) as the words a question uses: day, month name, year."""
    day = captured_at.astimezone(timezone.utc)
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


class _ValueField:
    """A field whose values repeat (speaker names, dates): each value once, with its terms.

    Positions hold a value id; an inverted list maps each surface term to the values that
    contain it, so a term's count at every position is two array look-ups. A field read
    back from a sidecar (:meth:`from_columns`) leaves that list in the file: its terms stay
    packed (:class:`~labmem.recall.sidecar.PackedStrings`, no ``dict``), and one term's
    values are read from the file when a query asks for them.
    """

    def __init__(self) -> None:
        self._values: list[str] | None = []  # by id (None: not decoded from the sidecar yet)
        self._ids: dict[str, int] | None = {}
        self._count = 0
        self._overlay: dict[str, dict[int, int]] = {}  # surface term -> {value id: count}
        self._base = None  # (sidecar, prefix, packed terms) of a field read back

    def __len__(self) -> int:
        return self._count

    @property
    def ids(self) -> dict[str, int]:
        """Value -> id (decoded from the sidecar on first need: only appending needs it)."""
        if self._ids is None:
            self._ids = {value: i for i, value in enumerate(self.values)}
        return self._ids

    @property
    def values(self) -> list[str]:
        if self._values is None:
            sidecar, prefix, _ = self._base
            self._values = sidecar.strings(prefix + "values")
        return self._values

    def intern(self, value: str) -> tuple[int, tuple[str, ...]]:
        """The id of ``value``, and the surface terms it brought (when it is new)."""
        known = self.ids.get(value)
        if known is not None:
            return known, ()
        value_id = self.ids[value] = self._count
        self.values.append(value)
        self._count += 1
        counts = term_frequencies(value)
        for term, count in counts.items():
            self._overlay.setdefault(term, {})[value_id] = count
        return value_id, tuple(counts)

    def _base_slice(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        if self._base is None:
            return None
        sidecar, prefix, terms = self._base
        slot = terms.find(term)
        if slot is None:
            return None
        offsets = sidecar.arrays[prefix + "offsets"]
        lo, hi = int(offsets[slot]), int(offsets[slot + 1])
        return (sidecar.slice(prefix + "value_ids", lo, hi),
                sidecar.slice(prefix + "counts", lo, hi))

    def term_counts(self, term: str) -> dict[int, int]:
        """{value id: count} of the values that contain ``term`` (``{}`` when none does)."""
        found: dict[int, int] = {}
        base = self._base_slice(term)
        if base is not None:
            found = dict(zip(base[0].tolist(), base[1].tolist(), strict=True))
        extra = self._overlay.get(term)
        if extra:
            found.update(extra)
        return found

    def terms(self) -> list[str]:
        """Every surface term of any value (the base's first, in stored order)."""
        if self._base is None:
            return list(self._overlay)
        base = self._base[2]
        return list(base) + [t for t in self._overlay if base.find(t) is None]

    def counts(self, surfaces: tuple[str, ...]) -> np.ndarray:
        """Per value id (plus a trailing 0 for "no value"): how often ``surfaces`` occur."""
        out = np.zeros(self._count + 1)
        ids, counts = self.sparse_counts(surfaces)
        out[ids] = counts
        return out

    def sparse_counts(self, surfaces: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(value ids ascending, how often ``surfaces`` occur in each): :meth:`counts`
        where it is not 0, without an array over every value (a title per record makes
        that one float per record, for every term of every query)."""
        ids: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for surface in surfaces:
            base = self._base_slice(surface)
            if base is not None and len(base[0]):
                ids.append(base[0].astype(np.int64))
                counts.append(base[1].astype(np.float64))
            extra = self._overlay.get(surface)
            if extra:
                ids.append(np.fromiter(extra, dtype=np.int64, count=len(extra)))
                counts.append(np.fromiter(extra.values(), dtype=np.float64, count=len(extra)))
        if not ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        if len(ids) == 1 and (len(ids[0]) < 2 or (ids[0][1:] > ids[0][:-1]).all()):
            return ids[0], counts[0]
        every = np.concatenate(ids)
        distinct, _, group = distinct_groups(every)
        # whole counts: their sum is exact in any order
        return distinct, np.bincount(group, weights=np.concatenate(counts),
                                     minlength=len(distinct))

    def columns(self, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
        """Packed arrays and string lists that :meth:`from_columns` reads back."""
        terms = self.terms()
        offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        value_ids: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for slot, term in enumerate(terms):
            found = self.term_counts(term)
            ids = np.fromiter(sorted(found), dtype=np.uint32, count=len(found))
            value_ids.append(ids)
            counts.append(np.fromiter((found[int(i)] for i in ids), dtype=np.uint32,
                                      count=len(ids)))
            offsets[slot + 1] = offsets[slot] + len(ids)
        empty = np.zeros(0, dtype=np.uint32)
        arrays = {prefix + "offsets": offsets,
                  prefix + "value_ids": np.concatenate(value_ids) if value_ids else empty,
                  prefix + "counts": np.concatenate(counts) if counts else empty}
        return arrays, {prefix + "values": list(self.values), prefix + "terms": terms}

    @classmethod
    def from_columns(cls, sidecar, prefix: str, count: int) -> _ValueField:
        field_ = cls()
        field_._base = (sidecar, prefix, packed_strings(sidecar, prefix + "terms"))
        field_._values = field_._ids = None
        field_._count = count
        return field_


@dataclass(frozen=True, eq=False)
class ContextArrays:
    """One snapshot of the context as numpy arrays, each with a trailing sentinel slot.

    ``records`` positions are 0 … records − 1; index ``records`` is the sentinel: a
    missing neighbour points there, and every per-position array is 0 there. The link and
    value columns are int32 while the record count fits (see ``_linked``).
    """

    records: int
    conversation: np.ndarray  # bool per position
    thread: np.ndarray  # thread id per position (``threads`` for profiles and the sentinel)
    previous: np.ndarray  # position of the previous record of the thread, or the sentinel
    next: np.ndarray  # position of the next record of the thread, or the sentinel
    title: np.ndarray  # title value id (the sentinel value for profiles)
    date: np.ndarray  # date value id
    captured_at: np.ndarray  # POSIX seconds
    threads: int  # threads among the conversation records


class RecordContext:
    """Threads, neighbour links, titles and dates of one index's records, kept in step.

    One per index (see :func:`record_context`); analyzer-independent. The analyzed views
    of the index (:class:`~labmem.recall.analyzers.AnalyzedIndex`) that a scorer asks for
    are kept here too, so each analyzer groups the vocabulary once.

    A context read back from a sidecar (:meth:`from_columns`) leaves its columns there: a
    query's snapshot (:meth:`arrays`) is made from the file, one array per column, and the
    columns a record is appended to — with the thread names and each thread's last
    record — are read only when one is.
    """

    def __init__(self) -> None:
        self.records = 0
        self._conversation = array("b")
        self._thread = array("q")
        self._previous = array("q")
        self._next = array("q")
        self._title = array("q")
        self._date = array("q")
        self._captured = array("d")
        self._lengths = array("q")  # filled on demand (only length normalization needs it)
        self._thread_names: list[str] = []
        self._thread_ids: dict[str, int] | None = {}
        self._thread_last = array("q")  # each thread's last position
        self.titles = _ValueField()
        self.dates = _ValueField()
        self._analyzed: dict[Analyzer, AnalyzedIndex] = {}
        self._arrays: ContextArrays | None = None
        self._source: list[StoredMemory] = []  # records by position (for lengths on demand)
        self.fed_by_index = False  # True: the index adds every record (with its length)
        self._sidecar = None  # the sidecar whose columns are not read into memory yet

    def __repr__(self) -> str:
        return f"RecordContext(records={self.records}, threads={self.threads})"

    @property
    def thread_names(self) -> list[str]:
        """Each thread's name, by thread id."""
        self._read_columns()
        return self._thread_names

    @property
    def threads(self) -> int:
        """How many threads the conversation records form."""
        if self._sidecar is None:
            return len(self._thread_names)
        return self.arrays().threads

    def analyzed(self, index: TermIndex, analyzer: Analyzer) -> AnalyzedIndex:
        """The index seen through ``analyzer`` (created once, with the date words grouped)."""
        view = self._analyzed.get(analyzer)
        if view is None:
            view = self._analyzed[analyzer] = AnalyzedIndex(index, analyzer)
            view.add_surfaces(self.dates.terms())
        return view

    def refresh(self, index: TermIndex) -> None:
        """Add the records ``index`` covers beyond the ones seen (call after its refresh)."""
        bound = index.records
        if bound == self.records or self.fed_by_index:
            return
        if bound - self.records > 1 and offers(index, ReadsInBulk):
            index.read_records()  # SQLite: one read decodes them all, instead of row by row
        for position in range(self.records, bound):
            self.add(position, index.record(position))

    def add(self, position: int, record: StoredMemory, length: int | None = None) -> None:
        """Add the record at ``position`` (the next one); ``length``: its length in surface
        terms when the caller knows it (else it is counted when first needed)."""
        self._read_columns()
        date_terms = self._add(position, record, length)
        self.records = position + 1
        self._arrays = None
        if date_terms:
            for view in self._analyzed.values():
                view.add_surfaces(date_terms)

    def _add(self, position: int, record: StoredMemory, length: int | None) -> tuple[str, ...]:
        if length is None:
            self._source.append(record)
        else:
            self._lengths.append(length)
        self._captured.append(record.source.captured_at.timestamp())
        if record.kind is not MemoryKind.CONVERSATION:  # profiles are never recalled
            for column in (self._thread, self._previous, self._next, self._title, self._date):
                column.append(NO_LINK)
            self._conversation.append(0)
            return ()
        name = thread_of(record.source.source_id)
        if self._thread_ids is None:
            self._thread_ids = {name: i for i, name in enumerate(self._thread_names)}
        thread = self._thread_ids.get(name)
        if thread is None:
            thread = self._thread_ids[name] = len(self._thread_names)
            self._thread_names.append(name)
            self._thread_last.append(NO_LINK)
        previous = self._thread_last[thread]
        if previous != NO_LINK:
            self._next[previous] = position  # a link in memory, not a rewrite of the record
        self._thread_last[thread] = position
        title, _ = self.titles.intern(record.source.title)
        date, date_terms = self.dates.intern(date_words(record.source.captured_at))
        self._conversation.append(1)
        self._thread.append(thread)
        self._previous.append(previous)
        self._next.append(NO_LINK)
        self._title.append(title)
        self._date.append(date)
        return date_terms

    def arrays(self) -> ContextArrays:
        """The current snapshot as numpy arrays (rebuilt only after new records)."""
        if self._arrays is None:
            if self._sidecar is not None:
                self._arrays = self._arrays_from(self._sidecar)
                return self._arrays
            n = self.records

            def linked(column: array, missing: int) -> np.ndarray:
                return _linked(np.frombuffer(column, dtype=np.int64), missing)

            threads = len(self._thread_names)
            self._arrays = ContextArrays(
                records=n,
                conversation=np.append(np.array(self._conversation, dtype=bool), False),
                thread=linked(self._thread, threads),
                previous=linked(self._previous, n),
                next=linked(self._next, n),
                title=linked(self._title, len(self.titles)),
                date=linked(self._date, len(self.dates)),
                captured_at=np.append(np.array(self._captured, dtype=np.float64), 0.0),
                threads=threads,
            )
        return self._arrays

    def _arrays_from(self, sidecar) -> ContextArrays:
        """The snapshot made from the sidecar's columns: each read once, into its array."""
        n = self.records

        def column(name: str) -> np.ndarray:
            return sidecar.slice("context" + name, 0, n)

        thread = column("_thread")
        # thread ids are given in order of first use, so the largest one tells how many
        threads = int(thread.max()) + 1 if n else 0
        return ContextArrays(
            records=n,
            conversation=np.append(column("_conversation").astype(bool), False),
            thread=_linked(thread, threads),
            previous=_linked(column("_previous"), n),
            next=_linked(column("_next"), n),
            title=_linked(column("_title"), len(self.titles)),
            date=_linked(column("_date"), len(self.dates)),
            captured_at=np.append(column("_captured"), 0.0),
            threads=threads,
        )

    def lengths(self) -> np.ndarray:
        """Each position's length in surface terms (what BM25's ``b`` normalizes by)."""
        if self._sidecar is not None:
            return np.append(self._sidecar.slice("context_lengths", 0, self.records)
                             .astype(np.float64), 0.0)
        for record in self._source[len(self._lengths):]:
            conversation = record.kind is MemoryKind.CONVERSATION
            self._lengths.append(sum(record_terms(record).values()) if conversation else 0)
        return np.append(np.array(self._lengths, dtype=np.float64), 0.0)

    # -- kept in a sidecar (labmem.recall.sidecar), so a new process need not decode ----

    _COLUMNS = ("_conversation", "_thread", "_previous", "_next", "_title", "_date",
                "_captured", "_lengths")

    def columns(self) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
        """Everything this context holds, as arrays and string lists (positions in order)."""
        self._read_columns()
        self.lengths()
        arrays = {"context" + name: np.frombuffer(getattr(self, name),
                                                  dtype=getattr(self, name).typecode)
                  for name in self._COLUMNS}
        strings = {"context_threads": list(self._thread_names)}
        for name, value_field in (("titles", self.titles), ("dates", self.dates)):
            more_arrays, more_strings = value_field.columns(f"context_{name}_")
            arrays.update(more_arrays)
            strings.update(more_strings)
        return arrays, strings

    @classmethod
    def from_columns(cls, sidecar, records: int, *, titles: int, dates: int) -> RecordContext:
        """The context :meth:`columns` wrote, for ``records`` positions (fed by the index
        from then on). Nothing is read yet: see the class docstring."""
        context = cls()
        context.records = records
        context._sidecar = sidecar
        context.titles = _ValueField.from_columns(sidecar, "context_titles_", titles)
        context.dates = _ValueField.from_columns(sidecar, "context_dates_", dates)
        context.fed_by_index = True
        return context

    def _read_columns(self) -> None:
        """Read the sidecar's columns into the ones records are appended to (once)."""
        sidecar, self._sidecar = self._sidecar, None
        if sidecar is None:
            return
        for name in self._COLUMNS:
            getattr(self, name).frombytes(
                memoryview(sidecar.slice("context" + name, 0, self.records)).cast("B"))
        self._thread_names = sidecar.strings("context_threads")
        self._thread_ids = None  # built when a record is appended (only add() needs it)
        threads = np.frombuffer(self._thread, dtype=np.int64)
        last = np.full(len(self._thread_names), NO_LINK, dtype=np.int64)
        held = np.flatnonzero(threads != NO_LINK)
        np.maximum.at(last, threads[held], held)  # each thread's last position
        self._thread_last = array("q", last.tobytes())
        self._arrays = None


def _linked(column: np.ndarray, missing: int) -> np.ndarray:
    """A link column (``NO_LINK`` where there is none) with ``missing`` in place of
    ``NO_LINK`` and appended as the sentinel: one new array, nothing else copied. Its
    values are positions or ids, at most the record count: int32 while that fits (half the
    memory, and half of every array a query gathers from it)."""
    dtype = np.int32 if len(column) < np.iinfo(np.int32).max else np.int64
    out = np.empty(len(column) + 1, dtype=dtype)
    out[:-1] = column
    out[-1] = missing
    out[out == NO_LINK] = missing
    return out


_ATTRIBUTE = "_labmem_record_context"


def record_context(index: TermIndex) -> RecordContext:
    """The :class:`RecordContext` of ``index``, kept on the index object itself (so it lives
    and dies with it, and every engine over the same index shares it)."""
    if offers(index, KeepsRecordContext):  # the JSONL index keeps (and persists) its own
        return index.record_context()
    context = getattr(index, _ATTRIBUTE, None)
    if context is None:
        context = RecordContext()
        setattr(index, _ATTRIBUTE, context)
    return context
