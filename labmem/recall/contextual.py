"""s12b recall: a contextual BM25 — each record scored together with the words around it.

A conversation turn is short and leans on the turns around it: "Yes, we adopted her in
May" answers a question whose words ("dog", "shelter") were said one turn earlier. The
contextual scorer is BM25 over an analyzer's terms (stop words out, stems merged;
:mod:`labmem.recall.analyzers`) with weighted fields (:mod:`labmem.recall.fields`):

=========  ==========================================================================
own        the record's summary and content
title      its source title (a speaker, a document name)
date       its capture date as words: day, month name, year (``8 may 2023``)
previous   the own text of the record before it in its thread
next       the own text of the record after it in its thread
=========  ==========================================================================

For a query term *t* and a record *d*, the weighted frequency is
``tf(t, d) = Σ_f w_f · tf_f(t, d)``; the term's part is
``idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avg|d|))``, where ``idf`` counts the
records whose weighted document contains *t*. A thread-level score is added: the thread's
own text (all its records) scored as one BM25 document among the threads, times
``thread``. The breakdown (:class:`ContextualBreakdown`) shows every one of these numbers,
term by term and field by field, and its parts add up to the score. The formula is
written out plainly, one record at a time, at the end of this module
(:func:`contextual_score`, :func:`rank_contextual_reference`): that is the specification.

A query is computed only where it can count, never as terms × records matrices: a term's
candidates are the records with a posting for it (the index counts a title with the
text), the records whose date has it, and the neighbours of those whose own text has it;
a thread's total comes from the same postings. Hits, order and breakdowns are the ones the
plain one gives, bit for bit (a property test holds them equal); an
estimate adds its terms one by one in term order, where numpy's column sum of a matrix not
laid out by rows adds pairwise — a last-bit difference the shortlist's tolerance absorbs.
Memory stays near what the index itself holds: terms are scored a few at a time — rare
ones together, as one array, so that a query of rare words pays numpy's cost per call
once; a common one alone — their parts go into the query's sums as soon as they are
computed, and what is kept of a term is its counts (the index's own arrays) and its total
per thread; at the few shortlisted positions every number is computed again from them,
by the same operations, so to the same bits.

The weights were chosen on the labeled set's tune split and the even-indexed LoCoMo
conversations only (``bench/tune_contextual.py``); the odd half is never used to tune.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from labmem.core.errors import InvalidInputError
from labmem.recall.analyzers import AnalyzedIndex, Analyzer, QueryWord, resolve_analyzer
from labmem.recall.fields import (
    ContextArrays,
    RecordContext,
    date_words,
    record_context,
    thread_of,
)
from labmem.recall.index import (
    TermIndex,
    distinct,
    distinct_groups,
    record_terms,
    union_sorted,
)
from labmem.recall.pipeline import (
    EMPTY_NO_MATCHING_TERMS,
    RecallHit,
    RecallQuery,
    RecallResult,
    RecallScope,
    order_key,
    snippet_of,
)
from labmem.recall.protocols import LendsPostings, NamesPositions, RanksIndex, offers
from labmem.recall.pruning import SEARCH_RATIO, lookup_postings, shortlist
from labmem.recall.scorers import (
    BM25_B,
    BM25_K1,
    SCORE_DECIMALS,
    RecallScoreBreakdown,
    Scorer,
    age_days,
    bm25_idf,
    register_scorer,
)
from labmem.recall.store import MemoryKind, RemoteMemoryScopeError, StoredMemory

__all__ = ["ContextualScorer", "ContextualBreakdown", "ContextualTermPart", "ThreadBonus",
           "FIELDS", "EMPTY_ONLY_STOP_WORDS", "ablation_ladder", "ContextualDocument",
           "contextual_documents", "contextual_tf", "contextual_score",
           "rank_contextual_reference"]

FIELDS = ("own", "title", "date", "previous", "next")
EMPTY_ONLY_STOP_WORDS = "only_stop_words"


def _r(value: float) -> float:
    return round(float(value), SCORE_DECIMALS)


@dataclass(frozen=True)
class ContextualTermPart:
    """One analyzed query term in one record: every number of its BM25 part.

    ``tf`` is the raw count per field (``previous``/``next``: in that neighbour's own
    text), ``weighted_tf`` the weight × count per field; ``tf_total`` is what saturates;
    ``surfaces`` says which surface forms were found in which field.
    """

    term: str
    words: tuple[str, ...]
    idf: float
    tf: Mapping[str, int]
    weighted_tf: Mapping[str, float]
    tf_total: float
    surfaces: Mapping[str, tuple[str, ...]]
    contribution: float

    def to_dict(self) -> dict[str, Any]:
        return {"term": self.term, "words": list(self.words), "idf": self.idf,
                "tf": dict(self.tf), "weighted_tf": dict(self.weighted_tf),
                "tf_total": self.tf_total,
                "surfaces": {f: list(s) for f, s in self.surfaces.items()},
                "contribution": self.contribution}


@dataclass(frozen=True)
class ThreadBonus:
    """The thread-level line: the thread scored as one document among the threads.

    ``contributions`` holds weight × the term's thread part, per term; ``bonus`` is their
    sum — the amount added to the record's score.
    """

    thread: str
    weight: float
    tf: Mapping[str, int]
    idf: Mapping[str, float]
    contributions: Mapping[str, float]
    bonus: float

    def to_dict(self) -> dict[str, Any]:
        return {"thread": self.thread, "weight": self.weight, "tf": dict(self.tf),
                "idf": dict(self.idf), "contributions": dict(self.contributions),
                "bonus": self.bonus}


@dataclass(frozen=True)
class ContextualBreakdown(RecallScoreBreakdown):
    """A :class:`RecallScoreBreakdown` plus the contextual detail.

    ``total`` = ``lexical_contribution`` (the sum of ``term_contributions``) +
    ``contributions["thread"]`` (the thread bonus), each rounded as shown. ``query_words``
    lists every query word with the term it became (``None``: a stop word, dropped).

    :attr:`terms` (per term and field) and :attr:`thread` are built when first read — a
    recall returns its ranked hits without paying for detail nobody asks for; the numbers
    they show were fixed when the query ran.
    """

    query_words: tuple[QueryWord, ...] = ()
    _explain: Callable[[], tuple[tuple[ContextualTermPart, ...], ThreadBonus | None]] | None = (
        field(default=None, repr=False, compare=False))

    @functools.cached_property
    def _detail(self) -> tuple[tuple[ContextualTermPart, ...], ThreadBonus | None]:
        return ((), None) if self._explain is None else self._explain()

    @property
    def terms(self) -> tuple[ContextualTermPart, ...]:
        """One :class:`ContextualTermPart` per matched query term, in term order."""
        return self._detail[0]

    @property
    def thread(self) -> ThreadBonus | None:
        """The thread-level line (``None`` when the scorer has no thread weight)."""
        return self._detail[1]

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["query_words"] = [w.to_dict() for w in self.query_words]
        out["terms"] = [t.to_dict() for t in self.terms]
        out["thread"] = None if self.thread is None else self.thread.to_dict()
        return out


@dataclass(frozen=True, eq=False)
class _TermCounts:
    """One query term's raw counts, enough to read any field at any position: the
    positions whose own text or title may have it (``held``, ascending) with the index's
    count there, the title values that have it with its count in each, and its count per
    date value. ``held`` and ``counts`` are the index's own arrays when it lends them (one
    surface form, every title counted): nothing per record that the index does not hold."""

    held: np.ndarray
    counts: np.ndarray  # the index's count: own text and title together
    titles: np.ndarray  # title value ids (ascending) whose title has the term
    in_title: np.ndarray  # its count in each of those
    in_date: np.ndarray | None  # per date value (None: no date has it, or no date weight)


@dataclass(frozen=True, eq=False)
class _TermScores:
    """One query term: its counts, idfs and thread totals. Its part at each candidate went
    into the query's sums (:class:`_Sums`) as it was computed; at the few positions the
    shortlist keeps it is computed again from the counts, by the same operations on the
    same numbers — so to the same bits. Its thread totals are kept: summing the
    shortlist's again would mean a pass over all its postings (one number per thread the
    term is in, no more than its postings)."""

    counts: _TermCounts
    idf: float
    thread_idf: float
    # its threads (ascending) and their own-text counts (None: no thread weight)
    threads: np.ndarray | None = None
    thread_tf: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class _Columns:
    """The query's numbers at a few positions (the shortlist) as small matrices
    (rows: terms; columns: those positions; 0 where a term does not count)."""

    column_of: dict[int, int]
    fields: dict[str, np.ndarray]
    tf: np.ndarray
    matched: np.ndarray
    part: np.ndarray
    thread_tf: np.ndarray | None  # None: no thread weight
    bonus: np.ndarray | None


class _Exact(NamedTuple):
    """One shortlisted position's numbers, rounded as its breakdown shows them."""

    rows: list[int]  # the terms that count there
    contributions: list[float]  # theirs, in that order
    lexical: float
    bonus: float
    total: float
    coverage: float


@dataclass(frozen=True, eq=False)
class _Scored:
    """One query's scores — nothing of size terms × records: ``positions`` (ascending) are
    where any term counts, ``estimates`` their scores, added term by term in term order;
    per term, its counts (what the index already holds), idfs and thread totals."""

    terms: tuple[str, ...]
    field_names: tuple[str, ...]
    rows: tuple[_TermScores, ...]
    threaded: bool
    positions: np.ndarray
    estimates: np.ndarray
    arrays: ContextArrays
    view: AnalyzedIndex
    context: RecordContext

    @property
    def idf(self) -> tuple[float, ...]:
        return tuple(row.idf for row in self.rows)

    @property
    def thread_idf(self) -> tuple[float, ...]:
        return tuple(row.thread_idf for row in self.rows) if self.threaded else ()


_NO_POSITIONS = np.zeros(0, dtype=np.int64)

#: Sums over keys (positions, threads) go through one slot per possible key once there are
#: at least 1/SLOT_SUMS as many keys as slots; below that, keys are grouped by sorting.
#: (At 16, sorting the keys and one pass over the slots take about the same time.)
SLOT_SUMS = 16


def _sums(keys: list[np.ndarray], values: list[np.ndarray], size: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys ascending, per key the sum of its values): the lists' values added
    in list order, each starting from 0.0 (bincount adds in input order). Keys are below
    ``size``; with at least ``size`` / :data:`SLOT_SUMS` of them, one slot per possible key
    takes less time than grouping them, and a few times their memory at most."""
    every = np.concatenate(keys) if keys else _NO_POSITIONS
    if not len(every):
        return _NO_POSITIONS, np.zeros(0)
    weights = np.concatenate(values)
    if SLOT_SUMS * len(every) >= size:
        present = np.zeros(size, dtype=bool)
        present[every] = True
        distinct_keys = np.flatnonzero(present)
        return distinct_keys, np.bincount(every, weights=weights, minlength=size)[distinct_keys]
    distinct_keys, _, group = distinct_groups(every)
    return distinct_keys, np.bincount(group, weights=weights, minlength=len(distinct_keys))


class _Sums:
    """Sums per key (a position, a thread) of arrays added one after another: each key's
    sum starts from 0.0 and takes its values in the order added — what :func:`_sums` over
    them all gives, bit for bit. While the keys are few they are kept, and grouped at the
    end; once there are at least 1/:data:`SLOT_SUMS` as many as possible keys, they go
    into one slot per key as they come, and no list of them is kept. :meth:`result` asks
    for values > 0 (a term's part always is): a key was added to exactly where its slot is
    not 0."""

    def __init__(self, size: int) -> None:
        self.size = size  # keys are 0 … size − 1
        self._keys: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._count = 0
        self._slots: np.ndarray | None = None  # size + 1 sums (the last stays 0.0)

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add ``values`` at ``keys`` (a key may repeat: its values are added in order)."""
        if self._slots is not None:
            np.add.at(self._slots, keys, values)  # unbuffered: one add after the other
            return
        self._keys.append(keys)
        self._values.append(values)
        self._count += len(keys)
        if self._count and SLOT_SUMS * self._count >= self.size:
            self._slots = np.zeros(self.size + 1)
            kept, self._keys, self._values = zip(self._keys, self._values, strict=True), [], []
            for more_keys, more_values in kept:
                self.add(more_keys, more_values)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct keys ascending, per key the sum of its values > 0)."""
        if self._slots is None:
            return _sums(self._keys, self._values, self.size)
        keys = np.flatnonzero(self._slots > 0)  # (a boolean array is read much faster)
        return keys, self._slots[keys]

    def at(self, values: np.ndarray) -> np.ndarray:
        """The sum at each of ``values`` (at most ``size``; 0.0 where nothing was added).
        The keys are not grouped for it: one pass over a slot per key, for a moment, costs
        less than sorting them."""
        if self._slots is not None:
            return self._slots[values]
        if not self._keys:
            return np.zeros(len(values))
        return np.bincount(np.concatenate(self._keys), weights=np.concatenate(self._values),
                           minlength=self.size + 1)[values]


def _groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, each element's group): without a sort when the values
    already ascend (threads stored one after the other)."""
    if len(values) and not (values[1:] < values[:-1]).any():
        starts = np.empty(len(values), dtype=bool)
        starts[0] = True
        np.not_equal(values[1:], values[:-1], out=starts[1:])
        return values[starts], np.cumsum(starts) - 1
    distinct_values, _, group = distinct_groups(values)
    return distinct_values, group


def _at(ascending: np.ndarray, numbers: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``numbers[i]`` for each of ``values`` that is ``ascending[i]``; 0.0 for the others."""
    out = np.zeros(len(values))
    found, at = lookup_postings(ascending, values)
    out[found] = numbers[at]
    return out


def _lookup(keys: np.ndarray, numbers: np.ndarray, values: np.ndarray, size: int
            ) -> np.ndarray:
    """``numbers[i]`` (as a float) for each of ``values`` that is ``keys[i]``, 0.0 for the
    others; ``keys`` ascending and below ``size``, ``values`` at most ``size``. Many values
    read one float per possible key; few, a binary search each."""
    if not len(keys):
        return np.zeros(len(values))
    if SEARCH_RATIO * len(values) < size:
        probe = values.astype(keys.dtype, copy=False)  # no copy of the keys
        at = np.searchsorted(keys, probe)  # "clip": past the end reads the last key
        return np.where(keys.take(at, mode="clip") == probe, numbers.take(at, mode="clip"),
                        0.0)
    slots = np.zeros(size + 1)
    slots[keys] = numbers
    return slots[values]


def _title_values(arrays: ContextArrays) -> int:
    """How many title values there are: the sentinel's."""
    return int(arrays.title[arrays.records])


def _date_values(arrays: ContextArrays) -> int:
    """How many date values there are: the sentinel's."""
    return int(arrays.date[arrays.records])


def _in_date(counts: _TermCounts, width: int) -> np.ndarray:
    """A term's count per date value (``width`` of them): zeros when no date has it."""
    return np.zeros(width) if counts.in_date is None else counts.in_date


def _surface_lists(index: TermIndex) -> Callable[[str], tuple[np.ndarray, np.ndarray]]:
    """(positions, counts) of one surface term: the index's own arrays when it lends them
    (:class:`~labmem.recall.protocols.LendsPostings`: no copy, no per-record columns
    gathered), else from its postings."""
    if offers(index, LendsPostings):
        return index.term_postings

    def lists(surface: str) -> tuple[np.ndarray, np.ndarray]:
        postings = index.postings(surface)
        return postings.positions, postings.counts
    return lists


def _term_lists(lists: Callable[[str], tuple[np.ndarray, np.ndarray]],
                surfaces: tuple[str, ...], records: int) -> tuple[np.ndarray, np.ndarray]:
    """An analyzed term's (positions, counts): its surface forms' counts summed per record
    (:meth:`AnalyzedIndex.postings`' numbers, without keeping a copy per term queried)."""
    parts = [found for found in map(lists, surfaces) if len(found[0])]
    if len(parts) <= 1:
        return parts[0] if parts else (_NO_POSITIONS, _NO_POSITIONS)
    positions, counts = _sums([p for p, _ in parts], [c for _, c in parts], records)
    return positions, counts.astype(np.int64)


class _ByValue:
    """The positions that hold each value of a repeating field (a title, a date), grouped
    on first need: a query reaches a value's records without scanning every position."""

    def __init__(self, values: np.ndarray, count: int) -> None:
        self.values = values  # value id per position
        self.count = count  # value ids are 0 … count − 1
        self._sizes: np.ndarray | None = None
        self._order: np.ndarray | None = None
        self._starts: np.ndarray | None = None

    def sizes(self) -> np.ndarray:
        """How many positions hold each value id (int32: at most the record count)."""
        if self._sizes is None:
            self._sizes = np.bincount(self.values, minlength=self.count).astype(
                self.values.dtype, copy=False)
        return self._sizes

    def positions(self, value_ids: np.ndarray) -> np.ndarray:
        """The positions holding any of ``value_ids`` (grouped by value, not sorted)."""
        if self._order is None:  # (as the values' int32 while the record count fits)
            kind = self.values.dtype
            self._order = np.argsort(self.values, kind="stable").astype(kind, copy=False)
            self._starts = np.concatenate(([0], np.cumsum(self.sizes()))).astype(
                kind, copy=False)
        starts = self._starts[value_ids]
        sizes = self._starts[value_ids + 1] - starts
        begin = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes)
        return self._order[begin + np.arange(len(begin))]


class _Snapshot:
    """What a query reads from one :class:`ContextArrays` beyond the arrays themselves,
    computed once per snapshot (the snapshot changes only when records are added)."""

    def __init__(self, arrays: ContextArrays) -> None:
        end = arrays.records  # the arrays' last slot is the sentinel; its value: the count
        self.titles = _ByValue(arrays.title[:end], int(arrays.title[end]) + 1)
        self.dates = _ByValue(arrays.date[:end], int(arrays.date[end]) + 1)
        self._lengths: np.ndarray | None = None
        # does any record have a neighbour? (if none does, the neighbour fields are all 0)
        self.linked = bool((arrays.previous[:end] < end).any())

    def lengths(self, context: RecordContext) -> np.ndarray:
        if self._lengths is None:
            self._lengths = context.lengths()
        return self._lengths


_SNAPSHOTS: weakref.WeakKeyDictionary[ContextArrays, _Snapshot] = weakref.WeakKeyDictionary()


def _snapshot(arrays: ContextArrays) -> _Snapshot:
    found = _SNAPSHOTS.get(arrays)
    if found is None:
        found = _SNAPSHOTS[arrays] = _Snapshot(arrays)
    return found


#: Consecutive terms are scored as one array while their postings together are at most
#: this many: a query of rare words pays numpy's cost per call once, not once per term
#: (most of its time, at a few hundred postings a term); a commoner word goes alone, with
#: no pass spent on telling its rows apart, and a query never holds more than about one
#: common word's arrays at a time.
BATCH_POSTINGS = 1 << 12


def _batches(sizes: list[int]) -> list[slice]:
    """Consecutive runs of terms (``sizes``: their postings) of at most
    :data:`BATCH_POSTINGS` postings together, or one term alone."""
    runs, start, total = [], 0, 0
    for end, size in enumerate(sizes):
        if end > start and total + size > BATCH_POSTINGS:
            runs.append(slice(start, end))
            start, total = end, 0
        total += size
    if sizes:
        runs.append(slice(start, len(sizes)))
    return runs


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The parts one after the other (the part itself, not a copy, when there is one)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _lift(values: np.ndarray, width: int, sizes: list[int]) -> np.ndarray:
    """Rows of values (row ``r``: the next ``sizes[r]``, each below ``width``) as keys
    ``r × width + value``: ascending rows become one ascending array. One row: the values
    themselves, no pass over them."""
    if len(sizes) == 1:
        return values
    return values + np.repeat(np.arange(len(sizes)) * width, sizes)


def _row_sizes(keys: np.ndarray, width: int, rows: int) -> list[int]:
    """How many of :func:`_lift`'s keys (ascending) are in each of ``rows`` rows."""
    if rows == 1:
        return [len(keys)]
    return np.diff(np.searchsorted(keys, np.arange(rows + 1) * width)).tolist()


def _unlift(keys: np.ndarray, width: int, rows: int) -> tuple[np.ndarray, list[int]]:
    """(the values, the row sizes) of :func:`_lift`'s keys (ascending)."""
    sizes = _row_sizes(keys, width, rows)
    if rows == 1:
        return keys, sizes
    return keys - np.repeat(np.arange(rows) * width, sizes), sizes


def _by_row(numbers: list[float], sizes: list[int]) -> float | np.ndarray:
    """Row ``r``'s number for each of its ``sizes[r]`` elements (the one number, when there
    is one row): a product by either is the same float."""
    return numbers[0] if len(numbers) == 1 else np.repeat(numbers, sizes)


def _row_counts(marked: np.ndarray, sizes: list[int]) -> list[int]:
    """How many of each row's elements are ``marked`` (a boolean per element)."""
    if len(sizes) == 1:
        return [int(np.count_nonzero(marked))]
    rows = len(sizes)
    return np.bincount(np.repeat(np.arange(rows), sizes)[marked], minlength=rows).tolist()


def _row_totals(counts: np.ndarray, sizes: list[int]) -> list[float]:
    """The sum of each row's counts (whole numbers: exact, in any order)."""
    if len(sizes) == 1:
        return [float(counts.sum())]
    rows = len(sizes)
    return np.bincount(np.repeat(np.arange(rows), sizes), weights=counts,
                       minlength=rows).tolist()


#: A batch's title counts are read from the titles' side while the records holding its
#: titles are fewer than 1/TITLE_RATIO of its postings (finding those records costs a few
#: passes over them; looking up every posting, a search each).
TITLE_RATIO = 8


class _ValueRows:
    """Some terms' title and date counts side by side, row ``r`` for the ``r``-th term
    (:func:`_lift`), so that one look-up reads every row's count at its positions."""

    def __init__(self, rows: list[_TermCounts], arrays: ContextArrays) -> None:
        self.arrays = arrays
        self.rows = len(rows)
        self.title_width = _title_values(arrays) + 1  # ids, and the sentinel's
        self.title_sizes = [len(c.titles) for c in rows]
        self.titles = _joined([c.titles for c in rows]).astype(np.int64, copy=False)
        self.in_title = _joined([c.in_title for c in rows])
        self.dates: np.ndarray | None = None  # None: no row has the term in a date
        self.date_width = 0
        if any(c.in_date is not None for c in rows):
            self.date_width = _date_values(arrays) + 1
            self.dates = _joined([_in_date(c, self.date_width) for c in rows])

    def title_at(self, at: np.ndarray, sizes: list[int]) -> np.ndarray:
        """Each row's count in the titles of its positions (row ``r``: the next
        ``sizes[r]`` of ``at``; 0.0 at the sentinel)."""
        probe = _lift(self.arrays.title[at], self.title_width, sizes)
        keys = _lift(self.titles, self.title_width, self.title_sizes)
        return _lookup(keys, self.in_title, probe, self.rows * self.title_width)

    def date_at(self, at: np.ndarray, sizes: list[int]) -> np.ndarray:
        """Each row's count in the dates of its positions."""
        return self.dates[_lift(self.arrays.date[at], self.date_width, sizes)]

    def missed_titles(self, title: np.ndarray, sizes: list[int], snapshot: _Snapshot
                      ) -> list[int]:
        """The rows whose title counts at their postings (``title``) fall short of their
        counts over every record: a title the index did not count the term in."""
        found = _row_totals(title, sizes)
        every = _row_totals(self.in_title * snapshot.titles.sizes()[self.titles],
                            self.title_sizes)
        return [r for r in range(self.rows) if found[r] != every[r]]

    def title_at_postings(self, held: np.ndarray, sizes: list[int], keys: np.ndarray,
                          stride: int, snapshot: _Snapshot) -> tuple[np.ndarray, list[int]]:
        """(each row's count in the titles of its postings, the rows with a title the index
        did not count the term in: a record that holds it has no posting). ``held``: the
        rows' postings (row ``r``: the next ``sizes[r]``), ``keys``: the same as
        :func:`_lift` gives them with ``stride``. A term is mostly in far fewer titles
        than records: then each record that holds one of them is searched among the
        postings, rather than each posting among the titles (:data:`TITLE_RATIO`)."""
        holders = snapshot.titles.sizes()[self.titles]  # records per (row, title value)
        if TITLE_RATIO * int(holders.sum()) >= len(keys):
            title = self.title_at(held, sizes)
            return title, self.missed_titles(title, sizes, snapshot)
        reached = snapshot.titles.positions(self.titles)  # grouped the same way
        if self.rows > 1:
            reached = reached + np.repeat(
                np.repeat(np.arange(self.rows) * stride, self.title_sizes), holders)
        title = np.zeros(len(keys))
        if not len(reached):
            return title, []
        at = np.minimum(np.searchsorted(keys, reached), max(len(keys) - 1, 0))
        found = keys[at] == reached if len(keys) else np.zeros(len(reached), dtype=bool)
        if not found.all():
            row_of = np.repeat(np.repeat(np.arange(self.rows), self.title_sizes), holders)
            return title, np.unique(row_of[~found]).tolist()
        title[at] = np.repeat(self.in_title, holders)  # one record, one title: no repeats
        return title, []


def _check_weight(name: str, value: float, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidInputError(name, f"{value!r} is out of range",
                                f"use {low:g} ≤ {name} ≤ {high:g}")


def _in_scope(record: StoredMemory, query: RecallQuery) -> StoredMemory:
    """``record``, after checking it is the querying user's: recall never crosses users."""
    if record.user_scope != query.user_scope:
        raise RemoteMemoryScopeError(
            f"record {record.memory_id!r} belongs to user scope {record.user_scope!r},"
            f" not the query's {query.user_scope!r}; recall never crosses users")
    return record


@register_scorer
@dataclass(frozen=True)
class ContextualScorer(Scorer, RanksIndex):
    """BM25 with weighted fields (own text, title, date, neighbours) plus a thread score.

    ``analyzer`` is ``"english"`` (stop words and stems), ``"plain"`` or an
    :class:`~labmem.recall.analyzers.Analyzer`. With ``analyzer="plain"``, ``b=0.75``,
    ``title=1`` and every other weight 0 it is exactly :class:`~labmem.recall.scorers.Bm25Scorer`
    (a test checks it); each weight turns on one step of the ablation in
    ``bench/locomo_eval.py``. The defaults are the tuned ones (``bench/tune_contextual.py``).
    """

    # chosen by bench/tune_contextual.py on the allowed data (bench/results/tune_contextual.md)
    analyzer: Analyzer | str = "english"
    k1: float = 1.5
    b: float = 0.0
    own: float = 1.0
    title: float = 2.0
    date: float = 1.5
    previous: float = 0.5
    next: float = 0.25
    thread: float = 0.5
    name = "contextual_bm25"
    key = "contextual"

    def __post_init__(self) -> None:
        object.__setattr__(self, "analyzer", resolve_analyzer(self.analyzer))
        _check_weight("k1", self.k1, 0.01, 10)
        _check_weight("b", self.b, 0, 1)
        _check_weight("own", self.own, 0.01, 10)
        for name in ("title", "date", "previous", "next", "thread"):
            _check_weight(name, getattr(self, name), 0, 10)

    @property
    def weights(self) -> dict[str, float]:
        """The field weights, the thread weight, k1 and b (what the breakdown reports)."""
        return {**{f: float(getattr(self, f)) for f in FIELDS}, "thread": float(self.thread),
                "k1": float(self.k1), "b": float(self.b)}

    # -- the Scorer interface that needs only one candidate: not enough context ----------

    def _needs_the_index(self, *args: Any, **kwargs: Any):
        raise InvalidInputError(
            "scorer", "the contextual scorer reads a record's neighbours and thread, which "
            "one candidate alone does not carry",
            "use RecallEngine(store, scorer='contextual').recall(...)",
        )

    term_weights = combine = explain = estimate = _needs_the_index

    # -- ranking through the index -------------------------------------------------------

    def rank_index(self, index: TermIndex, query: RecallQuery, *,
                   as_of: datetime) -> RecallResult:
        """Stages 2–4 over ``index``: candidates, scores, a stable top ``query.limit``."""
        context = record_context(index)
        view = context.analyzed(index, self.analyzer)
        view.refresh()
        context.refresh(index)
        # the query's surface terms are already extracted (stage 1); analyze each once
        words = tuple(QueryWord(word, self.analyzer.term(word)) for word in query.terms)
        terms = tuple(sorted({w.term for w in words if w.term is not None}))
        if not terms:
            return RecallResult(query, (), view.searched_records, 0, EMPTY_ONLY_STOP_WORDS)
        scored = self._score(view, context, terms)
        tolerance = 1e-5 + 2e-6 * len(terms)
        listed = shortlist(scored.positions, scored.estimates, query.limit, tolerance)
        columns = self._columns(scored, listed)
        # Ties are broken by capture time and memory id. An index that knows a position's
        # id (the JSONL one) spares decoding every tied record: only the top ones are read.
        id_at = index.memory_id if offers(index, NamesPositions) else None
        captured = scored.arrays.captured_at[listed].tolist()
        keyed = []
        exact = self._exact_totals(columns)
        for position, (*_, total, coverage), at in zip(listed.tolist(), exact, captured,
                                                       strict=True):
            if id_at is None:
                record = _in_scope(index.record(position), query)
                keyed.append((order_key(total, coverage, record.source.captured_at.timestamp(),
                                        record.memory_id), position, record))
            else:
                keyed.append((order_key(total, coverage, at, id_at(position)), position, None))
        keyed.sort(key=lambda item: item[0])
        top = [(key, position, record or _in_scope(index.record(position), query))
               for key, position, record in keyed[:query.limit]]
        explain = _Explainer(self, scored, columns, exact, view, context, words,
                             np.array([position for _, position, _ in top], dtype=np.int64))
        hits = tuple(
            RecallHit(
                query_id=query.query_id, memory_id=record.memory_id, rank=rank,
                snippet=snippet_of(record), scope=RecallScope(record.user_scope, record.kind),
                provenance=record.source,
                score_breakdown=explain(position, record, as_of),
            )
            for rank, (_, position, record) in enumerate(top, start=1)
        )
        explain.release()
        return RecallResult(query, hits, view.searched_records, len(scored.positions),
                            None if hits else EMPTY_NO_MATCHING_TERMS)

    def _score(self, view: AnalyzedIndex, context: RecordContext,
               terms: tuple[str, ...]) -> _Scored:
        """Every term scored at its candidates only: the records with a posting for it,
        the records whose title or date has it, and the neighbours of those with it in
        their own text (whose ``previous``/``next`` field reads that text). Terms go in
        batches (:func:`_batches`), each one numpy pass, in term order."""
        arrays = context.arrays()
        snapshot = _snapshot(arrays)
        lists = _surface_lists(view.index)
        counts = [self._term_counts(view, context, lists, term, arrays.records)
                  for term in terms]
        # term by term, each estimate from 0.0 (what bincount over them all would add)
        estimates = _Sums(arrays.records)
        bonuses = _Sums(arrays.threads) if self.thread else None
        rows: list[_TermScores] = []
        for batch in _batches([len(c.held) for c in counts]):
            rows.extend(self._batch_scores(counts[batch], view, context, arrays, snapshot,
                                           estimates, bonuses))
        positions, totals = estimates.result()
        del estimates
        if bonuses is not None:
            totals = totals + bonuses.at(arrays.thread[positions])
        names = ("own", "title", *(name for name in ("date", "previous", "next")
                                   if getattr(self, name)))
        return _Scored(terms, names, tuple(rows), bool(self.thread), positions, totals,
                       arrays, view, context)

    def _term_counts(self, view: AnalyzedIndex, context: RecordContext,
                     lists: Callable[[str], tuple[np.ndarray, np.ndarray]], term: str,
                     records: int) -> _TermCounts:
        """One term's counts as the index and the title and date fields hold them."""
        surfaces = view.surfaces(term)
        held, counts = _term_lists(lists, surfaces, records)
        titles, in_title = context.titles.sparse_counts(surfaces)
        in_date = None  # most terms are in no date: no array over the dates for them
        if self.date:
            dated, on_date = context.dates.sparse_counts(surfaces)
            if len(dated):
                in_date = np.zeros(len(context.dates) + 1)  # (and "no value")
                in_date[dated] = on_date
        return _TermCounts(held, counts, titles, in_title, in_date)

    def _batch_scores(self, batch: list[_TermCounts], view: AnalyzedIndex,
                      context: RecordContext, arrays: ContextArrays, snapshot: _Snapshot,
                      estimates: _Sums, bonuses: _Sums | None) -> list[_TermScores]:
        """Some consecutive terms at their candidates, as one array: row ``r`` (the batch's
        ``r``-th term) reads position ``p`` as key ``r × (records + 1) + p``, so the rows'
        keys ascend one row after the other and each step below is one numpy call for all
        of them. Their parts go to ``estimates``, their thread totals to ``bonuses``, both
        in term order; what is returned is each term's counts and idfs."""
        end = arrays.records  # the sentinel: no neighbour
        stride = end + 1
        rows = len(batch)
        values = _ValueRows(batch, arrays)
        sizes = [len(counts.held) for counts in batch]
        # as numpy's own index type: every gather and sum below indexes by it
        held = _joined([counts.held for counts in batch]).astype(np.intp, copy=False)
        keys = _lift(held, stride, sizes)
        title, missed = values.title_at_postings(held, sizes, keys, stride, snapshot)
        if missed:  # a title the index did not count the term in (its own count is < 0):
            for r in missed:  # that title's records are candidates too, with count 0 there
                counts = batch[r]
                more = union_sorted([counts.held, snapshot.titles.positions(counts.titles)])
                batch[r] = replace(counts, held=more, counts=_at(
                    counts.held, counts.counts.astype(np.float64), more))
            return self._batch_scores(batch, view, context, arrays, snapshot, estimates,
                                      bonuses)
        own = _joined([counts.counts for counts in batch]) - title
        more = []
        for r, counts in enumerate(batch):
            if counts.in_date is not None:
                dated = np.flatnonzero(counts.in_date)
                more.append(r * stride + snapshot.dates.positions(dated))
        for name, links in (("previous", arrays.next), ("next", arrays.previous)):
            if snapshot.linked and getattr(self, name):  # the record after (before) it
                reached = links[held]                    # reads its text as a neighbour's
                more.append(_lift(reached, stride, sizes)[reached < end])
        if any(len(p) for p in more):
            at = union_sorted([keys, *more])
            # ``held`` is among them, and no other position has the term in its title
            where = np.searchsorted(at, keys)
            fields = {"own": np.zeros(len(at)), "title": np.zeros(len(at))}
            fields["own"][where] = own
            fields["title"][where] = title
        else:
            at = keys
            fields = {"own": own, "title": title}
        positions, at_sizes = _unlift(at, stride, rows)
        if values.dates is not None:
            fields["date"] = values.date_at(positions, at_sizes)
        for name, links in (("previous", arrays.previous), ("next", arrays.next)):
            if snapshot.linked and getattr(self, name):  # its neighbour's own text
                fields[name] = _lookup(keys, own, _lift(links[positions], stride, at_sizes),
                                       rows * stride)
        tf = self._tf(fields)
        del fields, title
        matched = tf > 0
        if not matched.all():
            at, tf = at[matched], tf[matched]
            positions, at_sizes = _unlift(at, stride, rows)
        idf = [bm25_idf(df, view.searched_records) for df in at_sizes]
        estimates.add(positions, self._part(_by_row(idf, at_sizes), tf, positions, view,
                                            context, snapshot))
        del at, positions, tf, matched
        thread_idf = [0.0] * rows
        kept: list[tuple[np.ndarray | None, np.ndarray | None]] = [(None, None)] * rows
        if bonuses is not None:
            of = arrays.thread[held]
            width = arrays.threads + 1
            lifted = _lift(of, width, sizes)
            inside = of < arrays.threads  # profiles belong to no thread (and have no postings)
            if not inside.all():
                lifted, own = lifted[inside], own[inside]
            if not len(lifted) or (lifted[1:] > lifted[:-1]).all():  # a thread per position
                groups, thread_tf = lifted, own  # bincount's 0.0 + own: own (never −0.0)
            else:
                groups, group = _groups(lifted)
                # position order within each thread: the order a sum over all records adds in
                thread_tf = np.bincount(group, weights=own, minlength=len(groups)
                                        ).astype(np.float64, copy=False)
            del own
            threads, thread_sizes = _unlift(groups, width, rows)
            positive = thread_tf > 0
            thread_idf = [bm25_idf(df, arrays.threads)
                          for df in _row_counts(positive, thread_sizes)]
            bonuses.add(threads, self._bonus(_by_row(thread_idf, thread_sizes), thread_tf,
                                             positive))
            bounds = list(itertools.accumulate(thread_sizes, initial=0))
            kept = [(threads[lo:hi], thread_tf[lo:hi])
                    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        return [_TermScores(counts, idf[r], thread_idf[r], *kept[r])
                for r, counts in enumerate(batch)]

    def _bonus(self, thread_idf: float | np.ndarray, thread_tf: np.ndarray,
               positive: np.ndarray | None = None) -> np.ndarray:
        """thread × the thread's BM25 part (its own text as one document), per thread:
        thread · (idf · tf·(k1 + 1) / (tf + k1)), 0.0 where tf is not > 0 (``positive``,
        when known), the products taken in place (each is the same float either way
        round). Every element is divided and the others set to 0.0 after: a division
        with ``where`` takes about twice as long (and a tf ≤ 0 may divide by 0 there)."""
        if positive is None:
            positive = thread_tf > 0
        out = thread_tf + self.k1
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(thread_tf * (self.k1 + 1), out, out=out)
        if not positive.all():
            out[~positive] = 0.0
        out *= thread_idf
        out *= self.thread
        return out

    def _tf(self, fields: dict[str, np.ndarray]) -> np.ndarray:
        """The weighted frequency: 0.0 + Σ weight × count, the fields added in their order,
        in place. No count is −0.0 (a difference of whole counts never is), so neither is
        any partial sum: the leading 0.0 changes no bit, nor does a field of zeros left
        out."""
        total = None
        for name, values in fields.items():
            if total is None:
                total = getattr(self, name) * values
            else:
                total += getattr(self, name) * values
        return total

    def _part(self, idf: float | np.ndarray, tf: np.ndarray, at: np.ndarray,
              view: AnalyzedIndex, context: RecordContext, snapshot: _Snapshot) -> np.ndarray:
        """idf × tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avg|d|)) at ``at`` (``idf``: one,
        one per element, or one per row of a terms × positions ``tf``)."""
        if self.b:
            searched = view.searched_records
            average = view.total_length / searched if searched else 0.0
            ratio = (snapshot.lengths(context)[at] / average if average
                     else np.zeros(len(at)))
            norm = 1.0 - self.b + self.b * ratio
        else:
            norm = 1.0
        out = tf * (self.k1 + 1)
        out /= tf + self.k1 * norm
        out *= idf  # idf × (…): the same product
        return out

    def _columns(self, scored: _Scored, positions: np.ndarray) -> _Columns:
        """The numbers at ``positions`` (a few: the shortlist), 0 where a term is absent:
        computed again from each term's counts, by the operations :meth:`_batch_scores`
        used, on terms × positions matrices. (A few positions: a binary search per term
        and list finds them; the batches' lifted keys would take more numpy calls.)"""
        arrays = scored.arrays
        snapshot = _snapshot(arrays)
        terms, width = len(scored.terms), len(positions)
        linked = snapshot.linked and bool(self.previous or self.next)
        # each term's count at the positions (and at their neighbours)
        probe = (np.concatenate((positions, arrays.previous[positions],
                                 arrays.next[positions])) if linked else positions)
        titles = arrays.title[probe]
        title_values = _title_values(arrays) + 1
        counts = np.empty((terms, len(probe)))
        title = np.empty((terms, len(probe)))
        for r, row in enumerate(scored.rows):
            term = row.counts
            counts[r] = _lookup(term.held, term.counts, probe, arrays.records)
            title[r] = _lookup(term.titles, term.in_title, titles, title_values)
        own = counts - title
        fields = {"own": own[:, :width], "title": title[:, :width]}
        if any(row.counts.in_date is not None for row in scored.rows):
            width_of_dates = _date_values(arrays) + 1
            dated = [_in_date(row.counts, width_of_dates) for row in scored.rows]
            fields["date"] = np.stack(dated)[:, arrays.date[positions]]
        for name, block in (("previous", 1), ("next", 2)):
            if linked and getattr(self, name):
                fields[name] = own[:, block * width:(block + 1) * width]
        tf = self._tf(fields)  # the same sum, so the same floats
        found = tf > 0  # exactly the positions where the term counted
        # every term × position at once, each element by the same operations as in the
        # batches; where the term does not count, 0.0 (a tf ≤ 0 may divide by 0 there)
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(found, self._part(np.array(scored.idf)[:, None], tf, positions,
                                              scored.view, scored.context, snapshot), 0.0)
        thread_tf = bonus = None
        if scored.threaded:
            threads = arrays.thread[positions]
            thread_tf = np.stack([_lookup(term.threads, term.thread_tf, threads, arrays.threads)
                                  for term in scored.rows])
            bonus = self._bonus(np.array(scored.thread_idf)[:, None], thread_tf)
        named = {name: fields.get(name) for name in scored.field_names}
        for name, values in named.items():
            if values is None:
                named[name] = np.zeros((terms, width))
        return _Columns({p: c for c, p in enumerate(positions.tolist())}, named,
                        np.where(found, tf, 0.0), found, part, thread_tf, bonus)

    @staticmethod
    def _exact_totals(columns: _Columns) -> list[_Exact]:
        """Each position's numbers rounded exactly as the breakdown shows them (read as
        Python lists once: a few positions, a few terms); the hits' breakdowns reuse them."""
        digits = SCORE_DECIMALS
        matched = columns.matched.T.tolist()
        bonuses = (columns.bonus.T.tolist() if columns.bonus is not None
                   else [None] * len(matched))
        totals = []
        for parts, hits, bonus_parts in zip(columns.part.T.tolist(), matched, bonuses,
                                            strict=True):
            rows = [row for row, hit in enumerate(hits) if hit]
            contributions = [round(parts[row], digits) for row in rows]
            lexical = round(sum(contributions), digits)
            bonus = (0.0 if bonus_parts is None else
                     round(sum([round(v, digits) for v in bonus_parts if v > 0]), digits))
            totals.append(_Exact(rows, contributions, lexical, bonus,
                                 round(lexical + bonus, digits),
                                 round(len(rows) / len(hits), digits)))
        return totals


class _Explainer:
    """Builds the breakdowns of one query's hits; what every hit shares is computed once."""

    def __init__(self, scorer: ContextualScorer, scored: _Scored, columns: _Columns,
                 exact: list[_Exact], view: AnalyzedIndex, context: RecordContext,
                 words: tuple[QueryWord, ...], positions: np.ndarray) -> None:
        self.scorer = scorer
        # the hits' columns, as Python lists (what each breakdown reads)
        self.hit_of = {position: hit for hit, position in enumerate(positions.tolist())}
        hits = [columns.column_of[position] for position in positions.tolist()]
        self.exact = [exact[column] for column in hits]
        self.tf = columns.tf[:, hits].T.tolist()
        self.bonus = self.thread_tf = None
        if columns.bonus is not None:
            self.bonus = columns.bonus[:, hits].T.tolist()
            self.thread_tf = columns.thread_tf[:, hits].T.tolist()
        # per field, the term × hit counts (read as lists when a hit's detail is asked for)
        self.fields = [counts[:, hits] for counts in columns.fields.values()]
        self.terms = scored.terms
        self.arrays = scored.arrays
        self.context = context
        self.view = view
        self.words = words
        self.weights = MappingProxyType(scorer.weights)
        self.field_names = scored.field_names
        self.exact_idf, self.exact_thread_idf = scored.idf, scored.thread_idf
        # the surface forms of terms that have several: their own-text counts at the hits
        # and at the hits' neighbours (a term with one form needs no look-up)
        self.positions = positions
        self.at: np.ndarray | None = None  # those positions, on first need
        self.column_of: dict[int, int] = {}
        self.surface_counts: dict[str, dict[str, list[int]]] = {}  # filled on first need
        self.lists = _surface_lists(view.index)

    # -- what only the detail reads: made on its first call ----------------------------

    @functools.cached_property
    def field_weights(self) -> dict[str, float]:
        return {name: float(getattr(self.scorer, name)) for name in FIELDS}

    @functools.cached_property
    def words_of(self) -> dict[str, tuple[str, ...]]:
        return {term: tuple(w.word for w in self.words if w.term == term)
                for term in self.terms}

    @functools.cached_property
    def idf(self) -> list[float]:
        return [_r(v) for v in self.exact_idf]

    @functools.cached_property
    def thread_idf(self) -> list[float]:
        return [_r(v) for v in self.exact_thread_idf]

    @functools.cached_property
    def single(self) -> dict[str, tuple[str, ...]]:
        """The terms with one surface form, and it."""
        return {term: surfaces for term, surfaces in self._forms.items() if len(surfaces) == 1}

    @functools.cached_property
    def several(self) -> dict[str, tuple[str, ...]]:
        """The terms with several surface forms, and them."""
        return {term: surfaces for term, surfaces in self._forms.items() if len(surfaces) > 1}

    @functools.cached_property
    def _forms(self) -> dict[str, tuple[str, ...]]:
        return {term: self.view.surfaces(term) for term in self.terms}

    def _own_counts(self, surface: str) -> np.ndarray:
        """Own-text counts (index count − title count) of one surface form at ``self.at``."""
        arrays = self.arrays
        positions, counts = self.lists(surface)
        i = np.minimum(np.searchsorted(positions, self.at), max(len(positions) - 1, 0))
        found = (counts[i] * (positions[i] == self.at) if len(positions)
                 else np.zeros(len(self.at), dtype=np.int64))
        in_title = self.context.titles.term_counts(surface)
        if in_title:  # rare: a form that is also in some title
            found = found - np.array([in_title.get(int(t), 0) for t in arrays.title[self.at]])
        return found

    def surfaces(self, term: str, position: int, tf: Mapping[str, int]
                 ) -> dict[str, tuple[str, ...]]:
        """Which surface forms of ``term`` occur in which field of the record at ``position``."""
        if term in self.single:  # one form, found wherever the term was counted
            return {name: self.single[term] for name in tf}
        if self.at is None:
            positions, arrays = self.positions, self.arrays
            self.at = distinct(np.concatenate(
                (positions, arrays.previous[positions], arrays.next[positions])))
            self.column_of = {int(at): column for column, at in enumerate(self.at)}
        counts = self.surface_counts.get(term)
        if counts is None:
            counts = self.surface_counts[term] = {
                s: self._own_counts(s).tolist() for s in self.several[term]}
        arrays = self.arrays
        column = {"own": self.column_of[position],
                  "previous": self.column_of[int(arrays.previous[position])],
                  "next": self.column_of[int(arrays.next[position])]}
        found: dict[str, tuple[str, ...]] = {}
        for name in tf:
            if name == "title":
                title = int(arrays.title[position])
                hits = [s for s in counts
                        if self.context.titles.term_counts(s).get(title)]
            elif name == "date":
                date = int(arrays.date[position])
                hits = [s for s in counts if self.context.dates.term_counts(s).get(date)]
            else:
                hits = [s for s, values in counts.items() if values[column[name]] > 0]
            found[name] = tuple(hits)
        return found

    def __call__(self, position: int, record: StoredMemory,
                 as_of: datetime) -> ContextualBreakdown:
        """The breakdown of the hit at ``position``: its totals now, its detail on demand."""
        hit = self.hit_of[position]
        exact = self.exact[hit]
        rows, lexical, bonus = exact.rows, exact.lexical, exact.bonus
        term_contributions = {self.terms[row]: value
                              for row, value in zip(rows, exact.contributions, strict=True)}
        thread_column = thread_tf = None
        if self.bonus is not None:
            thread_column = self.bonus[hit]
            thread_tf = self.thread_tf[hit]
        detail = functools.partial(
            self.detail, position, thread_of(record.source.source_id), rows,
            hit, self.tf[hit], term_contributions, thread_column, thread_tf)
        return ContextualBreakdown(
            matched_terms=tuple(term_contributions),
            query_term_count=len(self.terms),
            lexical_coverage=exact.coverage,
            recency=0.0,
            lexical_contribution=lexical,
            recency_contribution=0.0,
            total=exact.total,
            age_days=_r(age_days(as_of, record.source.captured_at)),
            scorer=self.scorer.name,
            weights=self.weights,
            contributions=MappingProxyType({"terms": lexical, "thread": bonus}),
            term_contributions=MappingProxyType(term_contributions),
            query_words=self.words,
            _explain=detail,
        )

    def release(self) -> None:
        """Drop the query's numbers: the hits' detail needs only what each one captured
        (and the hits' field counts: a few terms × the hits)."""
        self.tf = self.bonus = self.thread_tf = None

    def detail(self, position: int, thread_name: str, rows: list[int], hit: int,
               tf_total: list[float], term_contributions: Mapping[str, float],
               thread_column: list[float] | None, thread_tf: list[float] | None
               ) -> tuple[tuple[ContextualTermPart, ...], ThreadBonus | None]:
        """The per-term, per-field parts and the thread line of the ``hit``-th hit."""
        digits = SCORE_DECIMALS
        by_field = list(zip(*(counts[:, hit].tolist() for counts in self.fields),
                            strict=True))  # term × field
        parts = []
        for row in rows:
            term = self.terms[row]
            tf = {}
            weighted = {}
            for name, count in zip(self.field_names, by_field[row], strict=True):
                if count:
                    tf[name] = int(count)
                    weighted[name] = round(self.field_weights[name] * count, digits)
            parts.append(ContextualTermPart(
                term=term,
                words=self.words_of[term],
                idf=self.idf[row],
                tf=MappingProxyType(tf),
                weighted_tf=MappingProxyType(weighted),
                tf_total=round(tf_total[row], digits),
                surfaces=MappingProxyType(self.surfaces(term, position, tf)),
                contribution=term_contributions[term],
            ))
        thread = None
        if thread_column is not None:
            thread_rows = [row for row, value in enumerate(thread_column) if value > 0]
            contributions = {self.terms[row]: round(thread_column[row], digits)
                             for row in thread_rows}
            thread = ThreadBonus(
                thread=thread_name,
                weight=float(self.scorer.thread),
                tf=MappingProxyType({self.terms[row]: int(thread_tf[row])
                                     for row in thread_rows}),
                idf=MappingProxyType({self.terms[row]: self.thread_idf[row]
                                      for row in thread_rows}),
                contributions=MappingProxyType(contributions),
                bonus=round(sum(contributions.values()), digits),
            )
        return tuple(parts), thread


def ablation_ladder() -> tuple[tuple[str, ContextualScorer], ...]:
    """The contextual scorer built one step at a time: ``(step name, scorer)`` pairs.

    The first step is plain BM25 (plain terms, the textbook ``k1``/``b``, the title counted
    with the text: exactly :class:`~labmem.recall.scorers.Bm25Scorer`); each next step
    changes one thing of the one before; the last is ``ContextualScorer()``, the tuned
    default. ``bench/locomo_eval.py`` reports each step's gain under these names, and
    chapter s12b shows each step's breakdown.
    """
    final = ContextualScorer()
    steps = [("BM25, plain terms (= labmem bm25)",
              ContextualScorer(analyzer="plain", k1=BM25_K1, b=BM25_B, title=1.0, date=0.0,
                               previous=0.0, next=0.0, thread=0.0))]

    def add(name: str, **changes: Any) -> None:
        steps.append((name, replace(steps[-1][1], **changes)))

    add("+ stop words and Snowball stemming", analyzer=final.analyzer)
    add(f"+ b = {final.b:g} (no length normalization)", b=final.b)
    add(f"+ k1 = {final.k1:g} (term-frequency saturation)", k1=final.k1)
    add(f"+ title {final.title:g} and date {final.date:g} as fields", title=final.title,
        date=final.date)
    add(f"+ neighbours: previous {final.previous:g}, next {final.next:g}",
        previous=final.previous, next=final.next)
    add(f"+ thread score × {final.thread:g}", thread=final.thread)
    return tuple(steps)


# -- the formula, plainly: one record at a time, from the records alone ------------------
#
# What follows is the specification the vectorized evaluator above is held equal to
# (``tests/recall/test_contextual.py`` compares them on generated stores): no index, no
# arrays, every number computed from the records by the formula in the module docstring —
# slow on purpose (every idf is recounted per record), so that each line is the formula.


@dataclass(frozen=True)
class ContextualDocument:
    """One conversation record as the contextual scorer reads it: its analyzed fields,
    its length (what ``b`` normalizes by), its thread and its neighbours in that thread."""

    memory_id: str
    captured_seconds: float
    thread: str
    own: Mapping[str, int]  # analyzed terms of summary + content
    title: Mapping[str, int]  # of the source title
    date: Mapping[str, int]  # of the capture date in words (fields.date_words)
    length: int  # all its plain terms (record_terms), as BM25 counts a document
    previous: int | None  # index of the thread's record before it, among the documents
    next: int | None


def contextual_documents(records: list[StoredMemory],
                         analyzer: Analyzer) -> list[ContextualDocument]:
    """The conversation records of ``records``, in order, with their threads linked."""
    conversation = [r for r in records if r.kind is MemoryKind.CONVERSATION]
    members: dict[str, list[int]] = {}
    for at, record in enumerate(conversation):
        members.setdefault(thread_of(record.source.source_id), []).append(at)
    before: dict[int, int | None] = {}
    after: dict[int, int | None] = {}
    for chain in members.values():
        for i, at in enumerate(chain):
            before[at] = chain[i - 1] if i else None
            after[at] = chain[i + 1] if i + 1 < len(chain) else None
    return [ContextualDocument(
        memory_id=r.memory_id, captured_seconds=r.source.captured_at.timestamp(),
        thread=thread_of(r.source.source_id),
        own=Counter(analyzer.terms(r.summary + "\n" + r.content)),
        title=Counter(analyzer.terms(r.source.title)),
        date=Counter(analyzer.terms(date_words(r.source.captured_at))),
        length=sum(record_terms(r).values()), previous=before[at], next=after[at],
    ) for at, r in enumerate(conversation)]


def contextual_tf(documents: list[ContextualDocument], at: int, term: str,
                  scorer: ContextualScorer) -> float:
    """``tf(t, d) = Σ_f w_f · tf_f(t, d)`` over the fields own, title, date, previous and
    next (a neighbour's field is that neighbour's own text; none: 0)."""
    d = documents[at]
    counts = {"own": d.own.get(term, 0), "title": d.title.get(term, 0),
              "date": d.date.get(term, 0),
              "previous": 0 if d.previous is None else documents[d.previous].own.get(term, 0),
              "next": 0 if d.next is None else documents[d.next].own.get(term, 0)}
    return sum(getattr(scorer, name) * count for name, count in counts.items())


def contextual_score(documents: list[ContextualDocument], at: int, terms: list[str],
                     scorer: ContextualScorer) -> tuple[float, float] | None:
    """(total, coverage) of document ``at`` for the analyzed query ``terms``; ``None``
    when no term has a weighted count in it (it is not a candidate).

    * term part: ``idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avg|d|))``, where
      ``idf`` (:func:`~labmem.recall.scorers.bm25_idf`) counts the documents whose
      weighted ``tf`` is positive;
    * thread bonus: ``thread · Σ_t idf_threads(t) · x·(k1 + 1) / (x + k1)``, ``x`` = the
      term's count in the own text of all the thread's records, ``idf_threads`` counting
      the threads that hold it (no length normalization at thread level);
    * ``total`` = round(Σ term parts) + round(bonus), every part rounded to 6 places as
      the breakdown shows it; ``coverage`` = matched terms ÷ query terms.
    """
    n = len(documents)
    tf = {t: contextual_tf(documents, at, t, scorer) for t in terms}
    matched = [t for t in terms if tf[t] > 0]
    if not matched:
        return None
    average = sum(d.length for d in documents) / n
    norm = 1 - scorer.b + scorer.b * documents[at].length / average
    k1 = scorer.k1

    def idf(term: str) -> float:
        return bm25_idf(sum(1 for i in range(n) if contextual_tf(documents, i, term, scorer)
                            > 0), n)

    parts = [round(idf(t) * tf[t] * (k1 + 1) / (tf[t] + k1 * norm), SCORE_DECIMALS)
             for t in matched]
    bonus = 0.0
    if scorer.thread:
        threads = sorted({d.thread for d in documents})
        thread_tf = {(name, t): sum(d.own.get(t, 0) for d in documents if d.thread == name)
                     for name in threads for t in terms}
        mine = documents[at].thread
        bonus = round(sum(
            round(scorer.thread * bm25_idf(sum(1 for name in threads if thread_tf[name, t]),
                                           len(threads))
                  * x * (k1 + 1) / (x + k1), SCORE_DECIMALS)
            for t in terms for x in (thread_tf[mine, t],) if x), SCORE_DECIMALS)
    total = round(round(sum(parts), SCORE_DECIMALS) + bonus, SCORE_DECIMALS)
    return total, round(len(matched) / len(terms), SCORE_DECIMALS)


def rank_contextual_reference(records: list[StoredMemory], query_terms: tuple[str, ...],
                              scorer: ContextualScorer, limit: int
                              ) -> list[tuple[str, float]]:
    """The top ``limit`` (memory id, total) of the contextual scorer over ``records``,
    every document scored by :func:`contextual_score` and ordered as every recall is
    (total ↓, coverage ↓, captured time ↓, memory id ↑)."""
    documents = contextual_documents(records, scorer.analyzer)
    terms = sorted({scorer.analyzer.term(w) for w in query_terms} - {None})
    if not documents or not terms:
        return []
    rows = []
    for at, d in enumerate(documents):
        scored = contextual_score(documents, at, terms, scorer)
        if scored is not None:
            total, coverage = scored
            rows.append((order_key(total, coverage, d.captured_seconds, d.memory_id),
                         d.memory_id, total))
    rows.sort()
    return [(memory_id, total) for _, memory_id, total in rows[:limit]]
