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

The weights were chosen on the labeled set's tune split and the even-indexed LoCoMo
conversations only (``bench/tune_contextual.py``); the odd half is never used to tune.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

import numpy as np

from labmem.core.errors import InvalidInputError
from labmem.recall.analyzers import AnalyzedIndex, Analyzer, QueryWord, resolve_analyzer
from labmem.recall.fields import ContextArrays, RecordContext, record_context, thread_of
from labmem.recall.index import Postings, TermIndex, distinct
from labmem.recall.pipeline import (
    EMPTY_NO_MATCHING_TERMS,
    RecallHit,
    RecallQuery,
    RecallResult,
    RecallScope,
    shortlist,
    snippet_of,
)
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
class _Scored:
    """Every number of one query over all positions (rows: terms; columns: positions)."""

    terms: tuple[str, ...]
    fields: dict[str, np.ndarray]  # raw counts per field
    tf: np.ndarray
    matched: np.ndarray
    idf: tuple[float, ...]
    part: np.ndarray
    thread_tf: np.ndarray | None
    thread_idf: tuple[float, ...]
    bonus: np.ndarray | None
    arrays: ContextArrays


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
        estimates = scored.part.sum(axis=0)
        if scored.bonus is not None:
            estimates = estimates + scored.bonus.sum(axis=0)
        positions = np.flatnonzero(scored.matched.any(axis=0))
        tolerance = 1e-5 + 2e-6 * len(terms)
        # Ties are broken by capture time and memory id. An index that knows a position's
        # id (the JSONL one) spares decoding every tied record: only the top ones are read.
        id_at = getattr(index, "memory_id", None)
        captured = scored.arrays.captured_at
        keyed = []
        for position in shortlist(positions, estimates[positions], query.limit, tolerance):
            position = int(position)
            total, coverage = self._exact_total(scored, position)
            if id_at is None:
                record = _in_scope(index.record(position), query)
                keyed.append(((-total, -coverage, -record.source.captured_at.timestamp(),
                               record.memory_id), position, record))
            else:
                keyed.append(((-total, -coverage, -float(captured[position]),
                               id_at(position)), position, None))
        keyed.sort(key=lambda item: item[0])
        top = [(key, position, record or _in_scope(index.record(position), query))
               for key, position, record in keyed[:query.limit]]
        explain = _Explainer(self, scored, view, context, words,
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
        return RecallResult(query, hits, view.searched_records, len(positions),
                            None if hits else EMPTY_NO_MATCHING_TERMS)

    def _score(self, view: AnalyzedIndex, context: RecordContext,
               terms: tuple[str, ...]) -> _Scored:
        arrays = context.arrays()
        width = arrays.records + 1  # the last column is the sentinel: always 0
        own = np.zeros((len(terms), width))
        title = np.zeros((len(terms), width))
        date = np.zeros((len(terms), width)) if self.date else None
        for row, term in enumerate(terms):
            postings = view.postings(term)
            own[row, postings.positions] = postings.counts
            surfaces = view.surfaces(term)
            title[row] = context.titles.counts(surfaces)[arrays.title]
            if date is not None:
                date[row] = context.dates.counts(surfaces)[arrays.date]
        own -= title  # the index counts the title with the text; "own" is summary + content
        fields = {"own": own, "title": title}
        if date is not None:
            fields["date"] = date
        if self.previous:
            fields["previous"] = own[:, arrays.previous]
        if self.next:
            fields["next"] = own[:, arrays.next]
        tf = sum(getattr(self, name) * counts for name, counts in fields.items())
        matched = tf > 0
        searched = view.searched_records
        idf = tuple(bm25_idf(int(df), searched) for df in matched.sum(axis=1))
        if self.b:
            average = view.total_length / searched if searched else 0.0
            ratio = context.lengths() / average if average else np.zeros(width)
            norm = 1.0 - self.b + self.b * ratio
        else:
            norm = 1.0
        saturated = np.divide(tf * (self.k1 + 1), tf + self.k1 * norm,
                              out=np.zeros_like(tf), where=matched)
        part = np.asarray(idf)[:, None] * saturated
        thread_tf = bonus = None
        thread_idf: tuple[float, ...] = ()
        if self.thread:
            threads = arrays.threads
            thread_tf = np.stack([np.bincount(arrays.thread, weights=row, minlength=threads + 1)
                                  for row in own])
            thread_tf[:, threads] = 0.0  # profiles and the sentinel belong to no thread
            thread_idf = tuple(bm25_idf(int(df), threads)
                               for df in (thread_tf > 0).sum(axis=1))
            thread_part = np.asarray(thread_idf)[:, None] * np.divide(
                thread_tf * (self.k1 + 1), thread_tf + self.k1, out=np.zeros_like(thread_tf),
                where=thread_tf > 0)
            bonus = self.thread * thread_part[:, arrays.thread]
        return _Scored(terms, fields, tf, matched, idf, part, thread_tf, thread_idf, bonus,
                       arrays)

    @staticmethod
    def _exact_total(scored: _Scored, position: int) -> tuple[float, float]:
        """(total, coverage) of one position, rounded exactly as the breakdown shows them."""
        digits = SCORE_DECIMALS
        parts = scored.part[:, position].tolist()
        matched = scored.matched[:, position].tolist()
        lexical = round(sum(round(v, digits) for v, hit in zip(parts, matched, strict=True)
                            if hit), digits)
        bonus = 0.0
        if scored.bonus is not None:
            bonus = round(sum(round(v, digits) for v in scored.bonus[:, position].tolist()
                              if v > 0), digits)
        return round(lexical + bonus, digits), round(sum(matched) / len(scored.terms), digits)


class _Explainer:
    """Builds the breakdowns of one query's hits; what every hit shares is computed once."""

    def __init__(self, scorer: ContextualScorer, scored: _Scored, view: AnalyzedIndex,
                 context: RecordContext, words: tuple[QueryWord, ...],
                 positions: np.ndarray) -> None:
        self.scorer = scorer
        self.scored: _Scored | None = scored
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
        self.field_names = tuple(scored.fields)
        arrays = scored.arrays
        # the surface forms of terms that have several: their own-text counts at the hits
        # and at the hits' neighbours (a term with one form needs no look-up)
        self.at = distinct(np.concatenate(
            (positions, arrays.previous[positions], arrays.next[positions])))
        self.column_of = {int(at): column for column, at in enumerate(self.at)}
        self.surface_counts: dict[str, dict[str, list[int]]] = {}  # filled on first need
        self.surface_postings: dict[str, dict[str, Postings]] = {}
        self.single: dict[str, tuple[str, ...]] = {}
        for term in scored.terms:
            surfaces = view.surfaces(term)
            if len(surfaces) > 1:
                self.surface_postings[term] = view.surface_postings(term)
            else:
                self.single[term] = surfaces

    def _own_counts(self, surface: str, postings: Postings) -> np.ndarray:
        """Own-text counts (index count − title count) of one surface form at ``self.at``."""
        arrays = self.arrays
        i = np.minimum(np.searchsorted(postings.positions, self.at), max(len(postings) - 1, 0))
        found = (postings.counts[i] * (postings.positions[i] == self.at) if len(postings)
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
                s: self._own_counts(s, p).tolist()
                for s, p in self.surface_postings[term].items()}
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
        scored = self.scored
        digits = SCORE_DECIMALS
        part = scored.part[:, position].tolist()
        rows = [row for row, hit in enumerate(scored.matched[:, position].tolist()) if hit]
        term_contributions = {scored.terms[row]: round(part[row], digits) for row in rows}
        lexical = round(sum(term_contributions.values()), digits)
        bonus = 0.0
        thread_column = thread_tf = None
        if scored.bonus is not None:
            thread_column = scored.bonus[:, position].tolist()
            thread_tf = scored.thread_tf[:, int(scored.arrays.thread[position])].tolist()
            bonus = round(sum(round(v, digits) for v in thread_column if v > 0), digits)
        detail = functools.partial(
            self.detail, position, thread_of(record.source.source_id), rows,
            self._by_field(position), scored.tf[:, position].tolist(),
            term_contributions, thread_column, thread_tf)
        return ContextualBreakdown(
            matched_terms=tuple(term_contributions),
            query_term_count=len(scored.terms),
            lexical_coverage=round(len(rows) / len(scored.terms), digits),
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

    def _by_field(self, position: int) -> list[list[float]]:
        """Term × field counts of one hit (gathered per hit: stacking every field's full
        term × record matrix would copy them all for ten columns)."""
        return np.array([counts[:, position] for counts in self.scored.fields.values()]
                        ).T.tolist()

    def release(self) -> None:
        """Drop the query's matrices: the hits' detail needs only what each one captured."""
        self.scored = None

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
