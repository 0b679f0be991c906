"""The reference recall backend: the five stages, plainly, over every stored record.

``RecallEngine(store, backend="reference")`` answers through :func:`recall_reference`. It
runs the stages of the chapter's from-scratch module (:mod:`labmem.scratch.s12`: read
every record, match its terms, score it, sort by the rank key) on the store's own records,
and returns them as the library's types. There is one plain statement of stages 2–4, the
chapter's; this module only adapts its records. The fast backend is held equal to it
(``tests/contracts/test_s12_equal.py``: identical ranked ids, scores and breakdowns).

Scorers the reference implements: the teaching scorer (``lexical_recency``), BM25
(``bm25``, with :mod:`labmem.scratch.s12b`'s inverted index), and the dense and fused
scorers (``dense_cosine``, ``fused_rrf``: :func:`labmem.recall.dense.dense_reference`,
:func:`~labmem.recall.dense.fused_reference`). Any other scorer is refused
with an :class:`~labmem.core.errors.InvalidInputError` that names it; a scorer is added by
one entry in :data:`REFERENCE_SCORERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType

from labmem.core.errors import InvalidInputError
from labmem.recall.pipeline import (
    RecallHit,
    RecallQuery,
    RecallResult,
    RecallScope,
    RecallScoreBreakdown,
)
from labmem.recall.scorers import Scorer
from labmem.recall.store import MemoryKind, RemoteMemoryScopeError
from labmem.scratch import s12 as scratch

__all__ = ["recall_reference", "REFERENCE_SCORERS", "library_result"]


def library_result(result: scratch.RecallResult, query: RecallQuery, scorer: str,
                   weights: dict[str, float]) -> RecallResult:
    """A from-scratch result (over the library's records) as a library :class:`RecallResult`."""
    hits = tuple(RecallHit(
        query_id=hit.query_id,
        memory_id=hit.memory_id,
        rank=hit.rank,
        snippet=hit.snippet,
        scope=RecallScope(hit.scope.user_scope, MemoryKind(hit.scope.memory_kind)),
        provenance=hit.provenance,
        score_breakdown=_breakdown(hit.score_breakdown, scorer, weights),
    ) for hit in result.hits)
    return RecallResult(query, hits, result.searched_records, result.candidate_records,
                        result.empty_reason)


def _breakdown(b: scratch.RecallScoreBreakdown, scorer: str,
               weights: dict[str, float]) -> RecallScoreBreakdown:
    return RecallScoreBreakdown(
        matched_terms=b.matched_terms, query_term_count=b.query_term_count,
        lexical_coverage=b.lexical_coverage, recency=b.recency,
        lexical_contribution=b.lexical_contribution,
        recency_contribution=b.recency_contribution, total=b.total, age_days=b.age_days,
        scorer=scorer, weights=MappingProxyType(dict(weights)),
        contributions=MappingProxyType({"lexical": b.lexical_contribution,
                                        "recency": b.recency_contribution}),
        term_contributions=MappingProxyType(dict(b.term_contributions)),
    )


def _teaching(store, query: RecallQuery, scorer, as_of: datetime) -> RecallResult:
    """0.85 × coverage + 0.15 × recency over every conversation record (labmem.scratch.s12)."""
    try:
        result = scratch.recall_records(query, store.read_all(), as_of=as_of)
    except scratch.ScopeError as exc:
        raise RemoteMemoryScopeError(str(exc)) from None
    weights = {"lexical": scratch.LEXICAL_WEIGHT, "recency": scratch.RECENCY_WEIGHT}
    return library_result(result, query, "lexical_recency", weights)


def _bm25(store, query: RecallQuery, scorer, as_of: datetime) -> RecallResult:
    """BM25 over an inverted index of every conversation record (labmem.scratch.s12b)."""
    from labmem.scratch import s12b  # chapter s12b's module, built on s12's

    try:
        index = s12b.build_index(store.read_all(), query.user_scope)
        result = s12b.rank_bm25(query, index, as_of=as_of, k1=scorer.k1, b=scorer.b)
    except scratch.ScopeError as exc:
        raise RemoteMemoryScopeError(str(exc)) from None
    shown = library_result(result, query, scorer.name, dict(scorer.shown_weights))
    return replace(shown, hits=tuple(  # BM25's two contributions: all of it, and no recency
        replace(hit, score_breakdown=replace(hit.score_breakdown, contributions=(
            MappingProxyType({"bm25": hit.score_breakdown.total, "recency": 0.0}))))
        for hit in shown.hits))


def _dense(store, query: RecallQuery, scorer, as_of: datetime) -> RecallResult:
    """Every conversation record's cosine, one at a time (labmem.recall.dense)."""
    from labmem.recall.dense import dense_reference

    return dense_reference(store, query, scorer, as_of)


def _fused(store, query: RecallQuery, scorer, as_of: datetime) -> RecallResult:
    """The contextual formula and the cosines, record by record, fused (labmem.recall.dense)."""
    from labmem.recall.dense import fused_reference

    return fused_reference(store, query, scorer, as_of)


#: scorer name → how the reference answers with it.
REFERENCE_SCORERS: dict[str, Callable[..., RecallResult]] = {
    "lexical_recency": _teaching,
    "bm25": _bm25,
    "dense_cosine": _dense,
    "fused_rrf": _fused,
}


def recall_reference(store, query: RecallQuery, *, scorer, as_of: datetime) -> RecallResult:
    """Stages 2–4 of recall for a normalized ``query``, by reading every record of ``store``."""
    name = scorer.name if isinstance(scorer, Scorer) else scorer
    answer = REFERENCE_SCORERS.get(name) if isinstance(name, str) else None
    if answer is None:
        raise InvalidInputError(
            "scorer", f"the reference backend does not implement the {name!r} scorer",
            f"use one of {sorted(REFERENCE_SCORERS)}, or backend='fast'",
        )
    return answer(store, query, scorer, as_of)
