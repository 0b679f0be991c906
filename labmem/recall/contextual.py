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
term by term and field by field, and its parts add up to the score.

A query is computed only where it can count, never as terms × records matrices: a term's
candidates are the records with a posting for it (the index counts a title with the
text), the records whose date has it, and the neighbours of those whose own text has it;
a thread's total comes from the same postings. Hits, order and breakdowns are the ones the
dense computation gives, bit for bit (a property test keeps it as the reference); an
estimate adds its terms one by one in term order, where numpy's column sum of a matrix not
laid out by rows adds pairwise — a last-bit difference the shortlist's tolerance absorbs.
Memory stays near what the index itself holds: a term's part at each candidate goes into
the query's sums as soon as it is computed, and only its counts (the index's own arrays)
are kept; at the few shortlisted positions every number is computed again from them, by
the same operations, so to the same bits.

The weights were chosen on the labeled set's tune split and the even-indexed LoCoMo
conversations only (``bench/tune_contextual.py``); the odd half is never used to tune.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

import numpy as np

from labmem.core.errors import InvalidInputError
from labmem.recall.analyzers import AnalyzedIndex, Analyzer, QueryWord, resolve_analyzer
from labmem.recall.fields import ContextArrays, RecordContext, record_context, thread_of
from labmem.recall.index import TermIndex, distinct, distinct_groups, union_sorted
from labmem.recall.pipeline import (
    EMPTY_NO_MATCHING_TERMS,
    RecallHit,
    RecallQuery,
    RecallResult,
    RecallScope,
    order_key,
    shortlist,
    snippet_of,
)
from labmem.recall.pruning import SEARCH_RATIO, lookup_postings
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
from labmem.recall.store import RemoteMemoryScopeError, StoredMemory

__all__ = ["ContextualScorer", "ContextualBreakdown", "ContextualTermPart", "ThreadBonus",
           "FIELDS", "EMPTY_ONLY_STOP_WORDS", "ablation_ladder"]

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
    in_date: np.ndarray | None  # per date value (None: no date weight)

    def title_at(self, values: np.ndarray, size: int) -> np.ndarray:
        """Its count in the titles with value ids ``values`` (0.0 for the others); value
        ids are below ``size``, ``values`` at most ``size`` (the sentinel)."""
        return _lookup(self.titles, self.in_title, values, size)

    def own_at(self, positions: np.ndarray, arrays: ContextArrays) -> np.ndarray:
        """Its count in the own text of the records at ``positions`` (any order; 0.0 at
        the sentinel): the index's count less the title's."""
        return (_at(self.held, self.counts, positions)
                - self.title_at(arrays.title[positions], _title_values(arrays)))


@dataclass(frozen=True, eq=False)
class _TermScores:
    """One query term: its counts and idfs. Its part at each candidate and its thread
    totals went into the query's sums (:class:`_Sums`) as they were computed; at the few
    positions the shortlist keeps they are computed again from the counts, by the same
    operations on the same numbers — so to the same bits."""

    counts: _TermCounts
    idf: float
    thread_idf: float
    # its threads (ascending) and their own-text counts, kept when few (KEPT_THREADS)
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


@dataclass(frozen=True, eq=False)
class _Scored:
    """One query's scores — nothing of size terms × records: ``positions`` (ascending) are
    where any term counts, ``estimates`` their scores, added term by term in term order;
    per term, only its counts (what the index already holds) and idfs."""

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

#: A term's thread totals are kept for the shortlist while it has at most this many
#: threads (a few KiB); beyond, the shortlist's are summed again from its counts.
KEPT_THREADS = 4096

#: Sums over keys (positions, threads) go through one slot per possible key once there are
#: at least 1/SLOT_SUMS as many keys as slots; below that, keys are grouped by sorting.
SLOT_SUMS = 4


def _sums(keys: list[np.ndarray], values: list[np.ndarray], size: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys ascending, per key the sum of its values): the lists' values added
    in list order, each starting from 0.0 (bincount adds in input order). Keys are below
    ``size``; with at least ``size`` / :data:`SLOT_SUMS` of them, one slot per possible key
    takes no more memory than grouping them, and much less time."""
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
    into one slot per key as they come, and no list of them is kept."""

    def __init__(self, size: int) -> None:
        self.size = size  # keys are 0 … size − 1
        self._keys: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._count = 0
        self._slots: np.ndarray | None = None  # size + 1 sums (the last stays 0.0)
        self._present: np.ndarray | None = None

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add ``values`` at ``keys`` (distinct)."""
        if self._slots is not None:
            self._slots[keys] += values
            self._present[keys] = True
            return
        self._keys.append(keys)
        self._values.append(values)
        self._count += len(keys)
        if self._count and SLOT_SUMS * self._count >= self.size:
            self._slots = np.zeros(self.size + 1)
            self._present = np.zeros(self.size + 1, dtype=bool)
            kept, self._keys, self._values = zip(self._keys, self._values, strict=True), [], []
            for more_keys, more_values in kept:
                self.add(more_keys, more_values)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct keys ascending, per key the sum of its values)."""
        if self._slots is None:
            return _sums(self._keys, self._values, self.size)
        keys = np.flatnonzero(self._present)
        return keys, self._slots[keys]

    def at(self, values: np.ndarray) -> np.ndarray:
        """The sum at each of ``values`` (at most ``size``; 0.0 where nothing was added)."""
        if self._slots is not None:
            return self._slots[values]
        keys, sums = self.result()
        return _at(keys, sums, values)


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
        at = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
        return np.where(keys[at] == probe, numbers[at], 0.0)
    slots = np.zeros(size + 1)
    slots[keys] = numbers
    return slots[values]


def _title_values(arrays: ContextArrays) -> int:
    """How many title values there are: the sentinel's."""
    return int(arrays.title[arrays.records])


def _surface_lists(index: TermIndex) -> Callable[[str], tuple[np.ndarray, np.ndarray]]:
    """(positions, counts) of one surface term: the index's own arrays when it lends them
    (``term_postings``: no copy, no per-record columns gathered), else from its postings."""
    lend = getattr(index, "term_postings", None)
    if lend is not None:
        return lend

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

    def total(self, value_ids: np.ndarray, numbers: np.ndarray) -> float:
        """Σ over positions of the number of each one's value, for values ``value_ids``
        with ``numbers`` (the others: 0). Exact for whole counts, in any order."""
        sizes = self.sizes()[value_ids].astype(np.float64)
        # einsum, not a BLAS dot: its threads cost more than this one pass
        return float(np.einsum("i,i->", numbers, sizes))

    def positions(self, value_ids: np.ndarray) -> np.ndarray:
        """The positions holding any of ``value_ids`` (grouped by value, not sorted)."""
        if self._order is None:
            self._order = np.argsort(self.values, kind="stable")
            self._starts = np.concatenate(([0], np.cumsum(self.sizes())))
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
class ContextualScorer(Scorer):
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
        id_at = getattr(index, "memory_id", None)
        captured = scored.arrays.captured_at
        keyed = []
        for position in listed.tolist():
            total, coverage = self._exact_total(columns, columns.column_of[position])
            if id_at is None:
                record = _in_scope(index.record(position), query)
                keyed.append((order_key(total, coverage, record.source.captured_at.timestamp(),
                                        record.memory_id), position, record))
            else:
                keyed.append((order_key(total, coverage, float(captured[position]),
                                        id_at(position)), position, None))
        keyed.sort(key=lambda item: item[0])
        top = [(key, position, record or _in_scope(index.record(position), query))
               for key, position, record in keyed[:query.limit]]
        explain = _Explainer(self, scored, columns, view, context, words,
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
        their own text (whose ``previous``/``next`` field reads that text)."""
        arrays = context.arrays()
        snapshot = _snapshot(arrays)
        # term by term, each estimate from 0.0 (what bincount over them all would add)
        estimates = _Sums(arrays.records)
        bonuses = _Sums(arrays.threads) if self.thread else None
        rows = tuple(self._term_scores(view, context, arrays, snapshot, term, estimates,
                                       bonuses) for term in terms)
        positions, totals = estimates.result()
        del estimates
        if bonuses is not None:
            totals = totals + bonuses.at(arrays.thread[positions])
        names = ("own", "title", *(name for name in ("date", "previous", "next")
                                   if getattr(self, name)))
        return _Scored(terms, names, rows, bool(self.thread), positions, totals, arrays,
                       view, context)

    def _term_scores(self, view: AnalyzedIndex, context: RecordContext,
                     arrays: ContextArrays, snapshot: _Snapshot, term: str,
                     estimates: _Sums, bonuses: _Sums | None) -> _TermScores:
        """One term at its candidates: its counts, where its weighted frequency is > 0 and
        its part there (added to ``estimates``), and its thread totals (to ``bonuses``)."""
        end = arrays.records  # the sentinel: no neighbour
        surfaces = view.surfaces(term)
        posted, counts = _term_lists(_surface_lists(view.index), surfaces, end)
        titles, in_title = context.titles.sparse_counts(surfaces)
        held, title = posted, None
        if len(titles):
            values = _title_values(arrays)
            title = _lookup(titles, in_title, arrays.title[held], values)
            if float(title.sum()) != snapshot.titles.total(titles, in_title):
                # a title the index did not count the term in (its own count is below 0)
                held = union_sorted([held, snapshot.titles.positions(titles)])
                title = _lookup(titles, in_title, arrays.title[held], values)
                counts = _at(posted, counts.astype(np.float64), held)
        term_counts = _TermCounts(held, counts, titles, in_title,
                                  context.dates.counts(surfaces) if self.date else None)
        more = []
        if term_counts.in_date is not None:
            dated = np.flatnonzero(term_counts.in_date)
            if len(dated):
                more.append(snapshot.dates.positions(dated))
        for name, links in (("previous", arrays.next), ("next", arrays.previous)):
            if snapshot.linked and getattr(self, name):  # the record after (before) it
                reached = links[held]                    # reads its text as a neighbour's
                more.append(reached[reached < end])
        at = union_sorted([held, *more]) if any(len(p) for p in more) else held
        fields = self._fields(term_counts, at, arrays, snapshot.linked, title)
        own = fields["own"] if at is held else (counts if title is None else counts - title)
        tf = self._tf(fields)
        del fields, title
        matched = tf > 0
        if not matched.all():
            at, tf = at[matched], tf[matched]
        idf = bm25_idf(len(at), view.searched_records)
        estimates.add(at, self._part(idf, tf, at, view, context, snapshot))
        del at, tf, matched
        thread_idf, kept = 0.0, (None, None)
        if bonuses is not None:
            of = arrays.thread[held]
            inside = of < arrays.threads  # profiles belong to no thread (and have no postings)
            if not inside.all():
                of, own = of[inside], own[inside]
            if not len(of) or (of[1:] > of[:-1]).all():  # a thread per position: no sums
                threads, thread_tf = of, own + 0.0  # what bincount's 0.0 + own would give
            else:
                threads, group = _groups(of)
                # position order within each thread: the order a sum over all records adds in
                thread_tf = np.bincount(group, weights=own, minlength=len(threads)
                                        ).astype(np.float64, copy=False)
            del own
            thread_idf = bm25_idf(int(np.count_nonzero(thread_tf > 0)), arrays.threads)
            bonuses.add(threads, self._bonus(thread_idf, thread_tf))
            if len(threads) <= KEPT_THREADS:
                kept = threads, thread_tf
        return _TermScores(term_counts, idf, thread_idf, *kept)

    def _bonus(self, thread_idf: float, thread_tf: np.ndarray) -> np.ndarray:
        """thread × the thread's BM25 part (its own text as one document), per thread:
        thread · (idf · tf·(k1 + 1) / (tf + k1)), the products taken in place (each is
        the same float either way round)."""
        out = np.zeros(len(thread_tf))
        np.divide(thread_tf * (self.k1 + 1), thread_tf + self.k1, out=out,
                  where=thread_tf > 0)
        out *= thread_idf
        out *= self.thread
        return out

    def _fields(self, counts: _TermCounts, at: np.ndarray, arrays: ContextArrays,
                linked: bool, title: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Raw counts per field at ``at`` (positions in any order), fields in weight order;
        a field that is 0 everywhere (no neighbours, no date with the term) is left out:
        adding its zeros would change no sum. ``title``: the title counts at ``held``,
        when ``at`` is ``held`` and they are known (``None``: none has the term, or not
        known)."""
        values = _title_values(arrays)
        if at is counts.held:
            if title is None:
                title = counts.title_at(arrays.title[at], values)
            fields = {"own": counts.counts - title, "title": title}
        else:  # no position outside ``held`` has the term in its title
            title = counts.title_at(arrays.title[at], values)
            fields = {"own": _at(counts.held, counts.counts, at) - title, "title": title}
        if counts.in_date is not None and counts.in_date.any():
            fields["date"] = counts.in_date[arrays.date[at]]
        for name, links in (("previous", arrays.previous), ("next", arrays.next)):
            if linked and getattr(self, name):
                fields[name] = counts.own_at(links[at], arrays)
        return fields

    def _tf(self, fields: dict[str, np.ndarray]) -> np.ndarray:
        """The weighted frequency: 0.0 + Σ weight × count, the fields added in their order,
        in place (none of the partial sums is −0.0, so a field of zeros left out changes no
        bit)."""
        total = None
        for name, values in fields.items():
            if total is None:
                total = getattr(self, name) * values
                total += 0.0
            else:
                total += getattr(self, name) * values
        return total

    def _part(self, idf: float, tf: np.ndarray, at: np.ndarray, view: AnalyzedIndex,
              context: RecordContext, snapshot: _Snapshot) -> np.ndarray:
        """idf × tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avg|d|)) at ``at``."""
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
        computed again from each term's counts, as :meth:`_term_scores` computed them."""
        arrays = scored.arrays
        snapshot = _snapshot(arrays)
        shape = (len(scored.terms), len(positions))
        fields = {name: np.zeros(shape) for name in scored.field_names}
        tf, part, matched = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
        thread_tf = bonus = None
        if scored.threaded:
            thread_tf, bonus = np.zeros(shape), np.zeros(shape)
            threads = arrays.thread[positions]
        for r, row in enumerate(scored.rows):
            here = self._fields(row.counts, positions, arrays, snapshot.linked)
            for name, values in here.items():
                fields[name][r] = values
            row_tf = self._tf(here)  # the same sum, so the same floats
            found = row_tf > 0  # exactly the positions where the term counted
            matched[r] = found
            tf[r, found] = row_tf[found]
            part[r, found] = self._part(row.idf, row_tf[found], positions[found],
                                        scored.view, scored.context, snapshot)
            if scored.threaded:
                if row.threads is None:
                    thread_tf[r] = self._thread_tf(row.counts, threads, arrays)
                else:
                    found, at = lookup_postings(row.threads, threads)
                    thread_tf[r, found] = row.thread_tf[at]
                bonus[r] = self._bonus(row.thread_idf, thread_tf[r])
        return _Columns({p: c for c, p in enumerate(positions.tolist())}, fields, tf,
                        matched, part, thread_tf, bonus)

    @staticmethod
    def _thread_tf(counts: _TermCounts, threads: np.ndarray, arrays: ContextArrays
                   ) -> np.ndarray:
        """The term's own-text count summed over each of ``threads`` (a few, any order; a
        sum of whole counts, so the same in any order)."""
        wanted = distinct(threads)
        hit, which = lookup_postings(wanted, arrays.thread[counts.held])
        if not len(which):
            return np.zeros(len(threads))
        at = counts.held[hit]
        own = counts.counts[hit] - counts.title_at(arrays.title[at], _title_values(arrays))
        sums = np.bincount(which, weights=own, minlength=len(wanted))
        return sums[np.searchsorted(wanted, threads)]

    @staticmethod
    def _exact_total(columns: _Columns, column: int) -> tuple[float, float]:
        """(total, coverage) of one position, rounded exactly as the breakdown shows them."""
        digits = SCORE_DECIMALS
        parts = columns.part[:, column].tolist()
        matched = columns.matched[:, column].tolist()
        lexical = round(sum(round(v, digits) for v, hit in zip(parts, matched, strict=True)
                            if hit), digits)
        bonus = 0.0
        if columns.bonus is not None:
            bonus = round(sum(round(v, digits) for v in columns.bonus[:, column].tolist()
                              if v > 0), digits)
        return round(lexical + bonus, digits), round(sum(matched) / len(matched), digits)


class _Explainer:
    """Builds the breakdowns of one query's hits; what every hit shares is computed once."""

    def __init__(self, scorer: ContextualScorer, scored: _Scored, columns: _Columns,
                 view: AnalyzedIndex, context: RecordContext, words: tuple[QueryWord, ...],
                 positions: np.ndarray) -> None:
        self.scorer = scorer
        self.columns: _Columns | None = columns
        self.terms = scored.terms
        self.arrays = scored.arrays
        self.context = context
        self.words = words
        self.weights = MappingProxyType(scorer.weights)
        self.field_weights = {name: float(getattr(scorer, name)) for name in FIELDS}
        self.words_of = {term: tuple(w.word for w in words if w.term == term)
                         for term in scored.terms}
        self.idf = [_r(v) for v in scored.idf]
        self.thread_idf = [_r(v) for v in scored.thread_idf]
        self.field_names = scored.field_names
        arrays = scored.arrays
        # the surface forms of terms that have several: their own-text counts at the hits
        # and at the hits' neighbours (a term with one form needs no look-up)
        self.at = distinct(np.concatenate(
            (positions, arrays.previous[positions], arrays.next[positions])))
        self.column_of = {int(at): column for column, at in enumerate(self.at)}
        self.surface_counts: dict[str, dict[str, list[int]]] = {}  # filled on first need
        self.lists = _surface_lists(view.index)
        self.several: dict[str, tuple[str, ...]] = {}
        self.single: dict[str, tuple[str, ...]] = {}
        for term in scored.terms:
            surfaces = view.surfaces(term)
            (self.several if len(surfaces) > 1 else self.single)[term] = surfaces

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
        columns = self.columns
        column = columns.column_of[position]
        digits = SCORE_DECIMALS
        part = columns.part[:, column].tolist()
        rows = [row for row, hit in enumerate(columns.matched[:, column].tolist()) if hit]
        term_contributions = {self.terms[row]: round(part[row], digits) for row in rows}
        lexical = round(sum(term_contributions.values()), digits)
        bonus = 0.0
        thread_column = thread_tf = None
        if columns.bonus is not None:
            thread_column = columns.bonus[:, column].tolist()
            thread_tf = columns.thread_tf[:, column].tolist()
            bonus = round(sum(round(v, digits) for v in thread_column if v > 0), digits)
        detail = functools.partial(
            self.detail, position, thread_of(record.source.source_id), rows,
            self._by_field(column), columns.tf[:, column].tolist(),
            term_contributions, thread_column, thread_tf)
        return ContextualBreakdown(
            matched_terms=tuple(term_contributions),
            query_term_count=len(self.terms),
            lexical_coverage=round(len(rows) / len(self.terms), digits),
            recency=0.0,
            lexical_contribution=lexical,
            recency_contribution=0.0,
            total=round(lexical + bonus, digits),
            age_days=_r(age_days(as_of, record.source.captured_at)),
            scorer=self.scorer.name,
            weights=self.weights,
            contributions=MappingProxyType({"terms": lexical, "thread": bonus}),
            term_contributions=MappingProxyType(term_contributions),
            query_words=self.words,
            _explain=detail,
        )

    def _by_field(self, column: int) -> list[list[float]]:
        """Term × field counts of one hit."""
        return np.array([counts[:, column] for counts in self.columns.fields.values()]
                        ).T.tolist()

    def release(self) -> None:
        """Drop the query's numbers: the hits' detail needs only what each one captured."""
        self.columns = None

    def detail(self, position: int, thread_name: str, rows: list[int],
               by_field: list[list[float]], tf_total: list[float],
               term_contributions: Mapping[str, float], thread_column: list[float] | None,
               thread_tf: list[float] | None
               ) -> tuple[tuple[ContextualTermPart, ...], ThreadBonus | None]:
        """The per-term, per-field parts and the thread line of one hit."""
        digits = SCORE_DECIMALS
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
