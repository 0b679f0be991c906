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
from labmem.recall.index import TermIndex, record_terms
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
    contain it, so a term's count at every position is two array look-ups.
    """

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.by_term: dict[str, dict[int, int]] = {}  # surface term -> {value id: count}

    def intern(self, value: str) -> tuple[int, tuple[str, ...]]:
        """The id of ``value``, and the surface terms it brought (when it is new)."""
        known = self.ids.get(value)
        if known is not None:
            return known, ()
        value_id = self.ids[value] = len(self.ids)
        counts = term_frequencies(value)
        for term, count in counts.items():
            self.by_term.setdefault(term, {})[value_id] = count
        return value_id, tuple(counts)

    def counts(self, surfaces: tuple[str, ...]) -> np.ndarray:
        """Per value id (plus a trailing 0 for "no value"): how often ``surfaces`` occur."""
        out = np.zeros(len(self.ids) + 1)
        for surface in surfaces:
            for value_id, count in self.by_term.get(surface, {}).items():
                out[value_id] += count
        return out


@dataclass(frozen=True, eq=False)
class ContextArrays:
    """One snapshot of the context as numpy arrays, each with a trailing sentinel slot.

    ``records`` positions are 0 … records − 1; index ``records`` is the sentinel: a
    missing neighbour points there, and every per-position array is 0 there.
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
        self.thread_names: list[str] = []
        self._thread_ids: dict[str, int] = {}
        self._thread_last: list[int] = []
        self.titles = _ValueField()
        self.dates = _ValueField()
        self._analyzed: dict[Analyzer, AnalyzedIndex] = {}
        self._arrays: ContextArrays | None = None
        self._source: list[StoredMemory] = []  # records by position (for lengths on demand)

    def __repr__(self) -> str:
        return f"RecordContext(records={self.records}, threads={len(self.thread_names)})"

    def analyzed(self, index: TermIndex, analyzer: Analyzer) -> AnalyzedIndex:
        """The index seen through ``analyzer`` (created once, with the date words grouped)."""
        view = self._analyzed.get(analyzer)
        if view is None:
            view = self._analyzed[analyzer] = AnalyzedIndex(index, analyzer)
            view.add_surfaces(self.dates.by_term)
        return view

    def refresh(self, index: TermIndex) -> None:
        """Add the records ``index`` covers beyond the ones seen (call after its refresh)."""
        bound = index.records
        if bound == self.records:
            return
        store = getattr(index, "store", None)
        if bound - self.records > 1 and hasattr(store, "record_at"):
            store.read_all()  # SQLite: one read decodes them all, instead of row by row
        new_date_terms: list[str] = []
        for position in range(self.records, bound):
            new_date_terms += self._add(position, index.record(position))
        self.records = bound
        self._arrays = None
        if new_date_terms:
            for view in self._analyzed.values():
                view.add_surfaces(new_date_terms)

    def _add(self, position: int, record: StoredMemory) -> tuple[str, ...]:
        self._source.append(record)
        self._captured.append(record.source.captured_at.timestamp())
        if record.kind is not MemoryKind.CONVERSATION:  # profiles are never recalled
            for column in (self._thread, self._previous, self._next, self._title, self._date):
                column.append(NO_LINK)
            self._conversation.append(0)
            return ()
        name = thread_of(record.source.source_id)
        thread = self._thread_ids.get(name)
        if thread is None:
            thread = self._thread_ids[name] = len(self.thread_names)
            self.thread_names.append(name)
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
            n = self.records

            def linked(column: array, missing: int) -> np.ndarray:
                values = np.array(column, dtype=np.int64)
                values[values == NO_LINK] = missing
                return np.append(values, missing)

            threads = len(self.thread_names)
            self._arrays = ContextArrays(
                records=n,
                conversation=np.append(np.array(self._conversation, dtype=bool), False),
                thread=linked(self._thread, threads),
                previous=linked(self._previous, n),
                next=linked(self._next, n),
                title=linked(self._title, len(self.titles.ids)),
                date=linked(self._date, len(self.dates.ids)),
                captured_at=np.append(np.array(self._captured, dtype=np.float64), 0.0),
                threads=threads,
            )
        return self._arrays

    def lengths(self) -> np.ndarray:
        """Each position's length in surface terms (what BM25's ``b`` normalizes by)."""
        for record in self._source[len(self._lengths):]:
            conversation = record.kind is MemoryKind.CONVERSATION
            self._lengths.append(sum(record_terms(record).values()) if conversation else 0)
        return np.append(np.array(self._lengths, dtype=np.float64), 0.0)


_ATTRIBUTE = "_labmem_record_context"


def record_context(index: TermIndex) -> RecordContext:
    """The :class:`RecordContext` of ``index``, kept on the index object itself (so it lives
    and dies with it, and every engine over the same index shares it)."""
    context = getattr(index, _ATTRIBUTE, None)
    if context is None:
        context = RecordContext()
        setattr(index, _ATTRIBUTE, context)
    return context
