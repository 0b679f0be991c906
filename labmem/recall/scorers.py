"""s12 recall, stage 3: pluggable scorers, each explainable term by term.

A scorer turns "this record matched these query terms" into a number *and* the reasons
for it (:class:`RecallScoreBreakdown`). Three are provided:

* :class:`TeachingScorer` — s12's ranker: 0.85 × share of query terms matched +
  0.15 × recency. Every matched term counts the same, however common it is.
* :class:`Bm25Scorer` — Okapi BM25: a rare term counts more than a common one (inverse
  document frequency), repeating a term helps with diminishing returns (``k1``), and a
  long record is discounted against the average length (``b``); one term's part is
  :func:`bm25_term_weight`. Statistics are those of the user's own records: one user's
  vocabulary never weighs another user's recall.
* :class:`Bm25RecencyScorer` (``bm25_recency``) — BM25 scaled into [0, 1] by the query's
  best possible BM25 score, blended with the same recency term the teaching scorer uses.
  ``"hybrid"`` and ``HybridScorer`` are deprecated names for it (a ``DeprecationWarning``
  says so); they go in the next release.

Two more rank over a whole index and register themselves: the contextual BM25
(:mod:`labmem.recall.contextual`) and the dense and fused scorers
(:mod:`labmem.recall.dense`).

Every scorer has two faces that compute the same formula: :meth:`explain` scores one
candidate exactly, with each part rounded to 6 places as it is shown; :meth:`estimate`
scores every candidate of a query at once with numpy arrays, so the engine can find the
few worth explaining without building an object per candidate.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

import numpy as np

from labmem.core.errors import InvalidInputError
from labmem.core.validation import prechecked
from labmem.recall.index import Postings, distinct_groups

__all__ = [
    "RecallScoreBreakdown", "CorpusStats", "Scorer", "TeachingScorer", "Bm25Scorer",
    "Bm25RecencyScorer", "HybridScorer", "SCORERS", "resolve_scorer", "recency_weight",
    "age_days", "bm25_idf", "DEPRECATED_SCORERS",
    "bm25_term_weight", "BM25_K1", "BM25_B", "register_scorer",
]

SCORE_DECIMALS = 6
LEXICAL_WEIGHT = 0.85  # the teaching scorer's weights: matching dominates, time separates
RECENCY_WEIGHT = 0.15
RECENCY_SCALE_DAYS = 30.0
SECONDS_PER_DAY = 86_400
BM25_K1 = 1.2  # the textbook defaults (see Bm25Scorer for why they were kept)
BM25_B = 0.75


def _r(value: float) -> float:
    return round(value, SCORE_DECIMALS)


@dataclass(frozen=True)
class RecallScoreBreakdown:
    """Why a candidate scored what it did: every input, weight and contribution.

    ``contributions`` add up to ``total`` (each rounded as shown); ``term_contributions``
    says how much each matched query term brought to the lexical part.
    """

    matched_terms: tuple[str, ...]
    query_term_count: int
    lexical_coverage: float
    recency: float
    lexical_contribution: float
    recency_contribution: float
    total: float
    age_days: float = 0.0
    scorer: str = "lexical_recency"
    weights: Mapping[str, float] = field(default_factory=dict)
    contributions: Mapping[str, float] = field(default_factory=dict)
    term_contributions: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "matched_terms": list(self.matched_terms),
            "query_term_count": self.query_term_count,
            "lexical_coverage": self.lexical_coverage,
            "recency": self.recency,
            "lexical_contribution": self.lexical_contribution,
            "recency_contribution": self.recency_contribution,
            "age_days": self.age_days,
            "scorer": self.scorer,
            "weights": dict(self.weights),
            "contributions": dict(self.contributions),
            "term_contributions": dict(self.term_contributions),
            "total": self.total,
        }


@dataclass(frozen=True)
class CorpusStats:
    """What BM25 needs to know about the user's records besides the candidate itself."""

    searched_records: int  # N: conversation records in the user's scope
    total_length: int  # sum of their lengths in terms
    document_frequency: Mapping[str, int]  # term -> records containing it (query terms)

    @functools.cached_property  # asked once per scored record and term
    def average_length(self) -> float:
        return self.total_length / self.searched_records if self.searched_records else 0.0


def recency_weight(age_in_days: float) -> float:
    """1 today, 1/2 after 30 days, 1/3 after 60: a slow hyperbolic decay."""
    return 1.0 / (1.0 + max(0.0, age_in_days) / RECENCY_SCALE_DAYS)


def age_days(as_of: datetime, captured_at: datetime) -> float:
    """Days from capture to ``as_of``; a capture in the future counts as age 0."""
    return max(0.0, (as_of - captured_at).total_seconds() / SECONDS_PER_DAY)


def bm25_idf(document_frequency: int, searched_records: int) -> float:
    """ln(1 + (N − df + ½) / (df + ½)): never negative, even for a term in every record."""
    return math.log1p((searched_records - document_frequency + 0.5) / (document_frequency + 0.5))


def _saturated_part(idf, count, length, average_length, k1, b):
    """idf × count·(k1 + 1) / (count + k1·(1 − b + b·length/average_length))."""
    norm = 1.0 - b + b * (length / average_length if average_length else 0.0)
    return idf * count * (k1 + 1) / (count + k1 * norm)


def bm25_term_weight(count: float | np.ndarray, document_frequency: int, searched_records: int,
                     length: float | np.ndarray, average_length: float,
                     k1: float = BM25_K1, b: float = BM25_B) -> float | np.ndarray:
    """One query term's BM25 part in one record: idf × saturated, length-normalized count.

    ``count`` is how often the term occurs in the record, ``length`` how many terms the
    record has; ``document_frequency`` of the ``searched_records`` contain the term, and
    ``average_length`` is their mean length. Repeating a term helps less each time (``k1``
    bounds the count factor by k1 + 1), and a record longer than average is discounted
    (``b`` = 0: not at all, 1: fully); an average length of 0 (an empty collection) counts
    the length ratio as 0 rather than dividing by it. ``count`` and ``length`` may be numpy
    arrays: the vectorized :meth:`Scorer.estimate` and the exact :meth:`Scorer.explain` share
    this one formula, so what the engine prunes by is what the breakdown shows.
    """
    return _saturated_part(bm25_idf(document_frequency, searched_records), count, length,
                           average_length, k1, b)


def _recency_vector(captured_at: np.ndarray, as_of_seconds: float) -> np.ndarray:
    days = np.maximum(0.0, (as_of_seconds - captured_at) / SECONDS_PER_DAY)
    return 1.0 / (1.0 + days / RECENCY_SCALE_DAYS)


@dataclass(frozen=True)
class _Accumulated:
    """Per candidate position: summed per-term lexical weight, terms matched, capture time."""

    positions: np.ndarray
    lexical: np.ndarray
    matched: np.ndarray
    captured_at: np.ndarray


def join_postings(postings: Sequence[Postings]) -> Postings:
    """Several terms' postings laid end to end, in the order given (one array each)."""
    if not postings:
        return Postings.empty()
    return Postings(*(np.concatenate([getattr(p, name) for p in postings])
                      for name in ("positions", "counts", "lengths", "captured_at")))


def _accumulate(scorer: Scorer, terms: Sequence[str], sizes: Sequence[int], joined: Postings,
                stats: CorpusStats) -> _Accumulated:
    """The per-record sums of :meth:`Scorer.estimate`: every posting in query-term order
    (``joined``, ``sizes[i]`` of ``terms[i]``), grouped by position (``bincount`` adds in
    that order, so each sum is the one a loop over the terms would give). Sorting the
    postings costs less than a slot per record (measured: bench/results/
    recall_design_notes.md)."""
    distinct, first, group = distinct_groups(joined.positions)
    matched = np.bincount(group, minlength=len(distinct)).astype(np.int64)
    if scorer.weighs_postings:
        weights = scorer.posting_weights(terms, sizes, joined, stats)
        lexical = np.bincount(group, weights=weights, minlength=len(distinct))
    else:  # every posting weighs 1.0: the sum is the count (exact)
        lexical = matched.astype(np.float64)
    return _Accumulated(distinct.astype(np.int64, copy=False), lexical, matched,
                        np.asarray(joined.captured_at[first], dtype=np.float64))


class Scorer:
    """Base class: subclasses define the per-term weight and how the parts combine."""

    name = "scorer"
    key = "scorer"
    #: False: every posting weighs 1.0 (:meth:`posting_weights` is all ones), so what counts
    #: is only *which* records hold a term (labmem.recall.pruning reads that from bits).
    weighs_postings = True

    def term_weights(self, term: str, postings: Postings, stats: CorpusStats) -> np.ndarray:
        raise NotImplementedError

    def posting_weights(self, terms: Sequence[str], sizes: Sequence[int], joined: Postings,
                        stats: CorpusStats) -> np.ndarray:
        """:meth:`term_weights` of several terms at once: ``joined`` holds their postings
        end to end, ``sizes[i]`` of them ``terms[i]``'s. A scorer whose weight is one
        formula over arrays overrides this to compute it in one pass (a query's numpy
        steps then do not grow with its terms); the numbers are the same, element by
        element."""
        parts, start = [], 0
        for term, size in zip(terms, sizes, strict=True):
            part = Postings(*(column[start:start + size] for column in
                              (joined.positions, joined.counts, joined.lengths,
                               joined.captured_at)))
            parts.append(np.asarray(self.term_weights(term, part, stats), dtype=np.float64))
            start += size
        return np.concatenate(parts) if parts else np.zeros(0)

    def combine(self, acc: _Accumulated, query_terms: tuple[str, ...], as_of_seconds: float,
                stats: CorpusStats) -> np.ndarray:
        raise NotImplementedError

    def explain(self, query_terms: tuple[str, ...], term_counts: Mapping[str, int],
                document_length: int, captured_at: datetime, *, as_of: datetime,
                stats: CorpusStats | None) -> RecallScoreBreakdown:
        raise NotImplementedError

    # -- upper bounds, for pruning (labmem.recall.pruning) ----------------------------
    #
    # A scorer that defines both may have terms skipped when they cannot change the top
    # of the ranking; one that does not (None) is always scored exhaustively.

    def term_bound(self, term: str, max_count: int, min_length: int,
                   stats: CorpusStats) -> float | None:
        """At least :meth:`term_weights` of ``term`` in any record holding it at most
        ``max_count`` times with at least ``min_length`` terms; ``None``: no bound."""
        return None

    def total_bound(self, lexical: float, matched: int, query_terms: tuple[str, ...],
                    stats: CorpusStats) -> float | None:
        """At least :meth:`combine` of any record whose summed term weights are at most
        ``lexical`` over at most ``matched`` query terms (any capture time)."""
        return None

    def estimate(self, query_terms: tuple[str, ...], postings: Mapping[str, Postings], *,
                 as_of_seconds: float, stats: CorpusStats) -> tuple[np.ndarray, np.ndarray]:
        """(positions, totals) of every candidate, unrounded — for pruning, not showing."""
        present = [t for t in query_terms if len(postings.get(t, ()))]
        joined = join_postings([postings[t] for t in present])
        return self.joined_estimate(query_terms, present, [len(postings[t]) for t in present],
                                    joined, as_of_seconds=as_of_seconds, stats=stats)

    def joined_estimate(self, query_terms: tuple[str, ...], present: Sequence[str],
                        sizes: Sequence[int], joined: Postings, *, as_of_seconds: float,
                        stats: CorpusStats) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`estimate` of postings already joined (:func:`join_postings`): the
        ``present`` query terms' (those with postings), ``sizes[i]`` of ``present[i]``, in
        query order."""
        if not present:
            empty = np.zeros(0)
            return empty.astype(np.int64), empty
        acc = _accumulate(self, present, sizes, joined, stats)
        return acc.positions, self.combine(acc, query_terms, as_of_seconds, stats)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TeachingScorer(Scorer):
    """s12's scorer: 0.85 × coverage + 0.15 × recency, reported as ``lexical_recency``."""

    name = "lexical_recency"
    key = "teaching"
    weighs_postings = False  # coverage: a matched term counts once, however often it occurs
    lexical_weight = LEXICAL_WEIGHT
    recency_weight = RECENCY_WEIGHT

    @functools.cached_property
    def shown_weights(self) -> Mapping[str, float]:  # one read-only dict for every breakdown
        return MappingProxyType({"lexical": self.lexical_weight, "recency": self.recency_weight})

    def term_weights(self, term, postings, stats):
        return np.ones(len(postings))

    def posting_weights(self, terms, sizes, joined, stats):
        return np.ones(len(joined))

    def term_bound(self, term, max_count, min_length, stats):
        return 1.0

    def total_bound(self, lexical, matched, query_terms, stats):
        return self.lexical_weight * matched / len(query_terms) + self.recency_weight

    def combine(self, acc, query_terms, as_of_seconds, stats):
        coverage = acc.matched / len(query_terms)
        return (self.lexical_weight * coverage
                + self.recency_weight * _recency_vector(acc.captured_at, as_of_seconds))

    def explain(self, query_terms, term_counts, document_length, captured_at, *, as_of,
                stats=None):
        matched = tuple(t for t in query_terms if t in term_counts)
        age = age_days(as_of, captured_at)
        coverage = _r(len(matched) / len(query_terms))
        recency = _r(recency_weight(age))
        lexical_part = _r(self.lexical_weight * coverage)
        recency_part = _r(self.recency_weight * recency)
        share = _r(self.lexical_weight / len(query_terms))
        return prechecked(
            RecallScoreBreakdown,
            matched_terms=matched,
            query_term_count=len(query_terms),
            lexical_coverage=coverage,
            recency=recency,
            lexical_contribution=lexical_part,
            recency_contribution=recency_part,
            total=_r(lexical_part + recency_part),
            age_days=_r(age),
            scorer=self.name,
            weights=self.shown_weights,
            contributions=MappingProxyType({"lexical": lexical_part,
                                            "recency": recency_part}),
            term_contributions=MappingProxyType({t: share for t in matched}),
        )


def _require_stats(stats: CorpusStats | None, scorer: str) -> CorpusStats:
    if not isinstance(stats, CorpusStats):
        raise InvalidInputError(
            "stats", f"the {scorer} scorer needs corpus statistics",
            "pass stats=corpus_stats(query, records) , or use a RecallEngine",
        )
    return stats


@dataclass(frozen=True, repr=True)
class Bm25Scorer(Scorer):
    """Okapi BM25 over the user's own records; the total is the sum of its term parts.

    ``k1`` and ``b`` keep the textbook defaults: on the labeled set's tune split the best
    grid point (b = 0.9) gained 0.008 MRR, less than one query moving up one rank.
    """

    k1: float = BM25_K1
    b: float = BM25_B
    name = "bm25"
    key = "bm25"

    def __post_init__(self) -> None:
        if not (isinstance(self.k1, int | float) and 0 <= self.k1 <= 10):
            raise InvalidInputError("k1", f"{self.k1!r} is out of range", "use 0 ≤ k1 ≤ 10")
        if not (isinstance(self.b, int | float) and 0 <= self.b <= 1):
            raise InvalidInputError("b", f"{self.b!r} is out of range", "use 0 ≤ b ≤ 1")

    @functools.cached_property
    def shown_weights(self) -> Mapping[str, float]:  # one read-only dict for every breakdown
        return MappingProxyType({"bm25": 1.0, "recency": 0.0, "k1": self.k1, "b": self.b})

    def term_part(self, count: int, length: int, idf: float, average_length: float) -> float:
        """:func:`bm25_term_weight` for a given ``idf`` (to plot saturation and length alone)."""
        return _saturated_part(idf, count, length, average_length, self.k1, self.b)

    def term_weights(self, term, postings, stats):
        # df from the statistics: ``postings`` may be the part of a term's list that
        # pruning looks up (labmem.recall.pruning), not all of it
        return bm25_term_weight(postings.counts.astype(np.float64),
                                stats.document_frequency.get(term, len(postings)),
                                stats.searched_records, postings.lengths,
                                stats.average_length, self.k1, self.b)

    def posting_weights(self, terms, sizes, joined, stats):
        # each posting's idf, by term: the same products as term by term, in one pass
        idf = np.repeat([bm25_idf(stats.document_frequency.get(term, size),
                                  stats.searched_records)
                         for term, size in zip(terms, sizes, strict=True)], sizes)
        return _saturated_part(idf, joined.counts.astype(np.float64), joined.lengths,
                               stats.average_length, self.k1, self.b)

    def term_bound(self, term, max_count, min_length, stats):
        # the weight grows with the count and shrinks with the length (b ≥ 0)
        return float(bm25_term_weight(float(max_count), stats.document_frequency[term],
                                      stats.searched_records, float(min_length),
                                      stats.average_length, self.k1, self.b))

    def total_bound(self, lexical, matched, query_terms, stats):
        return lexical

    def combine(self, acc, query_terms, as_of_seconds, stats):
        return acc.lexical

    def term_parts(self, query_terms, term_counts, document_length, stats):
        """Each matched term's contribution, rounded as shown."""
        frequency, records, average = (stats.document_frequency, stats.searched_records,
                                       stats.average_length)
        return {
            t: _r(bm25_term_weight(term_counts[t], frequency.get(t, 0), records,
                                   document_length, average, self.k1, self.b))
            for t in query_terms if t in term_counts
        }

    def explain(self, query_terms, term_counts, document_length, captured_at, *, as_of,
                stats=None):
        stats = _require_stats(stats, self.name)
        parts = self.term_parts(query_terms, term_counts, document_length, stats)
        total = _r(sum(parts.values()))
        return prechecked(
            RecallScoreBreakdown,
            matched_terms=tuple(parts),
            query_term_count=len(query_terms),
            lexical_coverage=_r(len(parts) / len(query_terms)),
            recency=0.0,
            lexical_contribution=total,
            recency_contribution=0.0,
            total=total,
            age_days=_r(age_days(as_of, captured_at)),
            scorer=self.name,
            weights=self.shown_weights,
            contributions=MappingProxyType({"bm25": total, "recency": 0.0}),
            term_contributions=MappingProxyType(parts),
        )


@dataclass(frozen=True, repr=True)
class Bm25RecencyScorer(Scorer):
    """(1 − w) × BM25 ÷ the query's best possible BM25 + w × recency.

    The best possible BM25 of a query is Σ idf × (k1 + 1) over its terms — what a record
    containing every term infinitely often would get — so the lexical part is a share in
    [0, 1) that depends on the query and the record only, never on the other candidates.
    """

    # Chosen on the labeled set's tune split (bench/tune_scorers.py): the only setting whose
    # gain over the textbook defaults was worth more than one query moving up one rank.
    k1: float = 1.2
    b: float = 1.0
    recency_weight: float = 0.1
    name = "bm25_recency"
    key = "bm25_recency"

    def __post_init__(self) -> None:
        Bm25Scorer(self.k1, self.b)  # validates k1 and b
        if not (isinstance(self.recency_weight, int | float) and 0 <= self.recency_weight <= 1):
            raise InvalidInputError("recency_weight", f"{self.recency_weight!r} is out of range",
                                    "use 0 ≤ recency_weight ≤ 1")

    @functools.cached_property
    def bm25(self) -> Bm25Scorer:  # made once: explain asks for it for every hit
        return Bm25Scorer(self.k1, self.b)

    @functools.cached_property
    def shown_weights(self) -> Mapping[str, float]:  # one read-only dict for every breakdown
        return MappingProxyType({"bm25_share": 1 - self.recency_weight,
                                 "recency": self.recency_weight, "k1": self.k1, "b": self.b})

    def best_possible(self, query_terms: tuple[str, ...], stats: CorpusStats) -> float:
        """Σ idf × (k1 + 1) over the query's terms, worked out once per query: every
        shortlisted record's :meth:`explain` and every pruning try asks for it, and
        summing the terms anew each time made a long query's cost grow with the square
        of its terms."""
        memo = self.__dict__.get("_best_possible")  # (stats, terms, value) of the last query
        if memo is not None and memo[0] is stats and memo[1] == query_terms:
            return memo[2]
        value = sum(bm25_idf(stats.document_frequency.get(t, 0), stats.searched_records)
                    for t in query_terms) * (self.k1 + 1)
        object.__setattr__(self, "_best_possible", (stats, query_terms, value))  # frozen
        return value

    def term_weights(self, term, postings, stats):
        return self.bm25.term_weights(term, postings, stats)

    def posting_weights(self, terms, sizes, joined, stats):
        return self.bm25.posting_weights(terms, sizes, joined, stats)

    def term_bound(self, term, max_count, min_length, stats):
        return self.bm25.term_bound(term, max_count, min_length, stats)

    def total_bound(self, lexical, matched, query_terms, stats):
        ceiling = self.best_possible(query_terms, stats)
        share = lexical / ceiling if ceiling else 0.0
        return (1 - self.recency_weight) * share + self.recency_weight

    def combine(self, acc, query_terms, as_of_seconds, stats):
        ceiling = self.best_possible(query_terms, stats)
        lexical = acc.lexical / ceiling if ceiling else acc.lexical * 0.0
        return ((1 - self.recency_weight) * lexical
                + self.recency_weight * _recency_vector(acc.captured_at, as_of_seconds))

    def explain(self, query_terms, term_counts, document_length, captured_at, *, as_of,
                stats=None):
        stats = _require_stats(stats, self.name)
        parts = self.bm25.term_parts(query_terms, term_counts, document_length, stats)
        ceiling = self.best_possible(query_terms, stats)
        lexical_weight = 1 - self.recency_weight
        age = age_days(as_of, captured_at)
        lexical = _r(sum(parts.values()) / ceiling) if ceiling else 0.0
        recency = _r(recency_weight(age))
        lexical_part = _r(lexical_weight * lexical)
        recency_part = _r(self.recency_weight * recency)
        return prechecked(
            RecallScoreBreakdown,
            matched_terms=tuple(parts),
            query_term_count=len(query_terms),
            lexical_coverage=_r(len(parts) / len(query_terms)),
            recency=recency,
            lexical_contribution=lexical_part,
            recency_contribution=recency_part,
            total=_r(lexical_part + recency_part),
            age_days=_r(age),
            scorer=self.name,
            weights=self.shown_weights,
            contributions=MappingProxyType({"bm25_share": lexical_part,
                                            "recency": recency_part}),
            term_contributions=MappingProxyType(
                {t: _r(lexical_weight * v / ceiling) for t, v in parts.items()}),
        )


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"the scorer name {old!r} is deprecated and goes in the next release; "
                  f"use {new!r} (BM25 with recency, the same scorer)", DeprecationWarning,
                  stacklevel=3)


@dataclass(frozen=True, repr=True)
class HybridScorer(Bm25RecencyScorer):
    """Deprecated name of :class:`Bm25RecencyScorer` (removed in the next release)."""

    def __post_init__(self) -> None:
        _deprecated("HybridScorer", "Bm25RecencyScorer")
        super().__post_init__()


#: Old scorer names still resolved, with a DeprecationWarning, for one release.
DEPRECATED_SCORERS: Mapping[str, str] = MappingProxyType({"hybrid": "bm25_recency"})

_REGISTERED: dict[str, type[Scorer]] = {
    "teaching": TeachingScorer, "bm25": Bm25Scorer, "bm25_recency": Bm25RecencyScorer,
}
SCORERS: Mapping[str, type[Scorer]] = MappingProxyType(_REGISTERED)  # a live, read-only view


def register_scorer(cls: type[Scorer]) -> type[Scorer]:
    """Make ``cls`` resolvable by its ``key``: a scorer that lives in a module of its own
    (``labmem.recall.contextual``, which imports this one) registers itself."""
    _REGISTERED[cls.key] = cls
    return cls


def resolve_scorer(scorer: str | Scorer | None) -> Scorer:
    """A scorer object from a name (``"teaching"``, ``"bm25"``, ``"bm25_recency"``, …:
    :data:`SCORERS`) or itself; a deprecated name (:data:`DEPRECATED_SCORERS`) resolves
    to its new scorer with a ``DeprecationWarning``."""
    if scorer is None:
        return TeachingScorer()
    if isinstance(scorer, Scorer):
        return scorer
    if isinstance(scorer, str) and scorer in DEPRECATED_SCORERS:
        _deprecated(scorer, DEPRECATED_SCORERS[scorer])
        return SCORERS[DEPRECATED_SCORERS[scorer]]()
    if isinstance(scorer, str) and scorer in SCORERS:
        return SCORERS[scorer]()
    raise InvalidInputError(
        "scorer", f"{scorer!r} is not a scorer",
        f"use one of {', '.join(map(repr, SCORERS))}, or a labmem.recall.scorers.Scorer",
    )
