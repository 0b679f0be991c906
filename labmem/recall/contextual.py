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
from labmem.recall.pruning import lookup_postings
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
    positions whose own text or title may have it (``held``, ascending) with those two
    counts there, and its count per date value."""

    held: np.ndarray
    own: np.ndarray  # index count − title count (the index counts the title with the text)
    title: np.ndarray
    in_date: np.ndarray | None  # per date value (None: no date weight)


@dataclass(frozen=True, eq=False)
class _TermScores:
    """One query term where it counts: the positions (ascending) whose weighted frequency
    is > 0 with its part there, and the threads whose own text has it."""

    counts: _TermCounts
    positions: np.ndarray
    part: np.ndarray
    idf: float
    threads: np.ndarray  # ascending thread ids
    thread_tf: np.ndarray
    bonus: np.ndarray  # thread weight × the thread's part, per thread in ``threads``
    thread_idf: float


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
    """Every number of one query, kept only where it is not 0 — nothing of size
    terms × records: per term, its positions and threads; ``positions`` (ascending) are
    where any term counts, ``estimates`` their scores, added term by term in term order."""

    terms: tuple[str, ...]
    field_names: tuple[str, ...]
    rows: tuple[_TermScores, ...]
    threaded: bool
    positions: np.ndarray
    estimates: np.ndarray
    arrays: ContextArrays

    @property
    def idf(self) -> tuple[float, ...]:
        return tuple(row.idf for row in self.rows)

    @property
    def thread_idf(self) -> tuple[float, ...]:
        return tuple(row.thread_idf for row in self.rows) if self.threaded else ()


_NO_POSITIONS = np.zeros(0, dtype=np.int64)

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


def _lookup(keys: np.ndarray, sums: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """``sums`` at each of ``values`` (0.0 where a value is not one of ``keys``); keys are
    below ``size``, values at most ``size``. Through one slot per key, as :func:`_sums`."""
    if SLOT_SUMS * len(keys) < size:
        return _at(keys, sums, values)
    slots = np.zeros(size + 1)
    slots[keys] = sums
    return slots[values]


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
        self._weights: np.ndarray | None = None
        self._order: np.ndarray | None = None
        self._starts: np.ndarray | None = None

    def sizes(self) -> np.ndarray:
        """How many positions hold each value id."""
        if self._sizes is None:
            self._sizes = np.bincount(self.values, minlength=self.count)
        return self._sizes

    def total(self, per_value: np.ndarray) -> float:
        """Σ over positions of ``per_value`` at each one's value (exact for whole counts)."""
        if self._weights is None:
            self._weights = self.sizes().astype(np.float64)
        # einsum, not a BLAS dot: its threads cost more than this one pass
        return float(np.einsum("i,i->", per_value[:self.count], self._weights))

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
        rows = tuple(self._term_scores(view, context, arrays, snapshot, term)
                     for term in terms)
        # bincount adds in input order: term by term, each estimate from 0.0
        positions, estimates = _sums([row.positions for row in rows],
                                     [row.part for row in rows], arrays.records)
        if self.thread:
            threads, totals = _sums([row.threads for row in rows], [row.bonus for row in rows],
                                    arrays.threads)
            estimates = estimates + _lookup(threads, totals, arrays.thread[positions],
                                            arrays.threads)
        names = ("own", "title", *(name for name in ("date", "previous", "next")
                                   if getattr(self, name)))
        return _Scored(terms, names, rows, bool(self.thread), positions, estimates, arrays)

    def _term_scores(self, view: AnalyzedIndex, context: RecordContext,
                     arrays: ContextArrays, snapshot: _Snapshot, term: str) -> _TermScores:
        """One term at its candidates: its counts, where its weighted frequency is > 0,
        its part there, and its thread totals."""
        end = arrays.records  # the sentinel: no neighbour
        surfaces = view.surfaces(term)
        posted, counts = _term_lists(_surface_lists(view.index), surfaces, end)
        in_title = context.titles.counts(surfaces)  # per title value
        held = posted
        title = in_title[arrays.title[held]]
        if float(title.sum()) != snapshot.titles.total(in_title):
            # a title the index did not count the term in (its own count is below 0)
            held = union_sorted([held, snapshot.titles.positions(np.flatnonzero(in_title))])
            title = in_title[arrays.title[held]]
            counts = _at(posted, counts.astype(np.float64), held)
        term_counts = _TermCounts(held, counts - title, title,
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
        tf = self._tf(self._fields(term_counts, at, arrays, snapshot.linked))
        matched = tf > 0
        if not matched.all():
            at, tf = at[matched], tf[matched]
        idf = bm25_idf(len(at), view.searched_records)
        part = self._part(idf, tf, at, view, context, snapshot)
        threads, thread_tf, bonus, thread_idf = _NO_POSITIONS, np.zeros(0), np.zeros(0), 0.0
        if self.thread:
            of, own = arrays.thread[held], term_counts.own
            inside = of < arrays.threads  # profiles belong to no thread (and have no postings)
            if not inside.all():
                of, own = of[inside], own[inside]
            threads, group = _groups(of)
            # position order within each thread: the order a sum over all records adds in
            thread_tf = np.bincount(group, weights=own, minlength=len(threads)
                                    ).astype(np.float64, copy=False)
            thread_idf = bm25_idf(int(np.count_nonzero(thread_tf > 0)), arrays.threads)
            bonus = self.thread * (thread_idf * np.divide(
                thread_tf * (self.k1 + 1), thread_tf + self.k1,
                out=np.zeros_like(thread_tf), where=thread_tf > 0))
        return _TermScores(term_counts, at, part, idf, threads, thread_tf, bonus, thread_idf)

    def _fields(self, counts: _TermCounts, at: np.ndarray, arrays: ContextArrays,
                linked: bool) -> dict[str, np.ndarray]:
        """Raw counts per field at ``at`` (ascending positions), fields in weight order;
        a field that is 0 everywhere (no neighbours, no date with the term) is left out:
        adding its zeros would change no sum."""
        if at is counts.held:
            fields = {"own": counts.own, "title": counts.title}
        else:
            found, i = lookup_postings(counts.held, at)
            fields = {"own": np.zeros(len(at)), "title": np.zeros(len(at))}
            fields["own"][found] = counts.own[i]
            fields["title"][found] = counts.title[i]
        if counts.in_date is not None and counts.in_date.any():
            fields["date"] = counts.in_date[arrays.date[at]]
        for name, links in (("previous", arrays.previous), ("next", arrays.next)):
            if linked and getattr(self, name):
                fields[name] = _at(counts.held, counts.own, links[at])
        return fields

    def _tf(self, fields: dict[str, np.ndarray]) -> np.ndarray:
        """The weighted frequency: Σ weight × count, the fields added in their order (none
        of the partial sums is −0.0, so a field of zeros left out changes no bit)."""
        return sum(getattr(self, name) * values for name, values in fields.items())

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
        return idf * (tf * (self.k1 + 1) / (tf + self.k1 * norm))

    def _columns(self, scored: _Scored, positions: np.ndarray) -> _Columns:
        """The numbers at ``positions`` (a few: the shortlist), 0 where a term is absent."""
        arrays = scored.arrays
        linked = _snapshot(arrays).linked
        shape = (len(scored.terms), len(positions))
        fields = {name: np.zeros(shape) for name in scored.field_names}
        tf, part, matched = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
        thread_tf = bonus = None
        if scored.threaded:
            thread_tf, bonus = np.zeros(shape), np.zeros(shape)
            threads = arrays.thread[positions]
        for r, row in enumerate(scored.rows):
            here = self._fields(row.counts, positions, arrays, linked)
            for name, values in here.items():
                fields[name][r] = values
            found, at = lookup_postings(row.positions, positions)
            matched[r] = found
            tf[r, found] = self._tf(here)[found]  # the same sum, so the same floats
            part[r, found] = row.part[at]
            if scored.threaded:
                found, at = lookup_postings(row.threads, threads)
                thread_tf[r, found] = row.thread_tf[at]
                bonus[r, found] = row.bonus[at]
        return _Columns({p: c for c, p in enumerate(positions.tolist())}, fields, tf,
                        matched, part, thread_tf, bonus)

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
