"""Dense recall, part 3: rank by meaning (``dense``), and by words and meaning (``fused``).

:class:`DenseScorer` ranks every conversation record in scope by the cosine of its stored
vector (:mod:`labmem.recall.vectors`) with the query's (:mod:`labmem.recall.embedding`):
an exact scan with numpy, no approximate index — at the store sizes of this series a scan
of int8 rows stays in milliseconds (bench/results/locomo_eval.md says up to what size).
It finds paraphrases ("puppy" for "dog") that share no word with the query, and misses
what only the exact word carries: names, numbers, dates, rare words.

:class:`FusedScorer` combines the lexical contextual scorer
(:class:`~labmem.recall.contextual.ContextualScorer`) with the dense one by weighted
reciprocal-rank fusion (:func:`fuse_rankings`): each ranking is cut to its top ``depth``;
a record gets ``(1 − w)·(k + 1)/(k + lexical rank) + w·(k + 1)/(k + dense rank)``, a part
being 0 where the record is not in that list; rank 1 in both scores 1.0. Ranks, not scores,
are fused: a BM25 total and a cosine are on scales that move with every query, ranks do
not. ``k``, ``w`` and ``depth`` were chosen on the even-indexed LoCoMo conversations and
the labeled set's tune split only (``bench/tune_fused.py``); the odd half is held out.

Both scorers rank over the whole index (:class:`~labmem.recall.protocols.RanksIndex`), and
the reference backend answers with each too (:func:`dense_reference`,
:func:`fused_reference`: every record read, each cosine computed on its own); the two
backends return the same hits, scores and breakdowns (a property test holds them equal).
A stored record's vector is never computed at query time: only the query is embedded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

import numpy as np

from labmem.core.errors import InvalidInputError
from labmem.recall.contextual import ContextualScorer, rank_contextual_reference
from labmem.recall.embedding import Embedder, default_embedder
from labmem.recall.pipeline import (
    RecallHit,
    RecallQuery,
    RecallResult,
    _check_scope,
    order_key,
    ranked_hits,
)
from labmem.recall.protocols import (
    LendsPostings,
    NamesPositions,
    RanksIndex,
    SplitsCosine,
    offers,
)
from labmem.recall.pruning import shortlist
from labmem.recall.scorers import SCORE_DECIMALS, RecallScoreBreakdown, Scorer, register_scorer
from labmem.recall.store import MemoryKind, StoredMemory
from labmem.recall.vectors import ENCODINGS, StoredVectors, store_vectors

__all__ = ["DenseScorer", "FusedScorer", "DenseBreakdown", "FusedBreakdown", "FusedRank",
           "fuse_rankings", "dense_reference", "fused_reference", "FUSION_K", "DENSE_WEIGHT",
           "FUSION_DEPTH", "EMPTY_NO_RECORDS"]

# chosen by bench/tune_fused.py on the even LoCoMo half and the labeled tune split
FUSION_K = 10.0
DENSE_WEIGHT = 0.2
FUSION_DEPTH = 20
TOP_WORDS = 3
EMPTY_NO_RECORDS = "no_records"
_TOLERANCE = 1e-5  # float32 estimates vs the exact float64 cosine: far below this


def _r(value: float) -> float:
    return round(float(value), SCORE_DECIMALS)


# -- the fusion rule ---------------------------------------------------------------------

@dataclass(frozen=True)
class FusedRank:
    """One record in the fused ranking: its total, the two parts, its rank in each list."""

    memory_id: str
    total: float
    lexical_part: float
    dense_part: float
    lexical_rank: int | None
    dense_rank: int | None


def fuse_rankings(lexical: Sequence[str], dense: Sequence[str], *, k: float = FUSION_K,
                  dense_weight: float = DENSE_WEIGHT) -> list[FusedRank]:
    """Weighted reciprocal-rank fusion of two rankings (memory ids, best first).

    A record's part from a list is ``weight·(k + 1)/(k + rank)`` (ranks from 1; 0 when it
    is not in the list; a repeated id counts at its first rank), the lexical weight being
    ``1 − dense_weight``; each part and the total are rounded to 6 places. Best total
    first; equal totals by memory id.
    """
    def ranks(ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for rank, memory_id in enumerate(ids, start=1):
            found.setdefault(memory_id, rank)
        return found

    def part(weight: float, rank: int | None) -> float:
        return 0.0 if rank is None else _r(weight * (k + 1) / (k + rank))

    by_lexical, by_dense = ranks(lexical), ranks(dense)
    fused = []
    for memory_id in {**by_lexical, **by_dense}:
        lex, den = by_lexical.get(memory_id), by_dense.get(memory_id)
        lexical_part, dense_part = part(1 - dense_weight, lex), part(dense_weight, den)
        fused.append(FusedRank(memory_id, _r(lexical_part + dense_part), lexical_part,
                               dense_part, lex, den))
    return sorted(fused, key=lambda f: (-f.total, f.memory_id))


# -- breakdowns ---------------------------------------------------------------------------

class _WordParts:
    """The query words' shares of a cosine, computed when first read (a recall returns its
    hits without tokenizing the query once per hit for detail nobody asks for)."""

    _words: Callable[[], Mapping[str, float]] | None

    @functools.cached_property
    def word_contributions(self) -> Mapping[str, float]:
        """Each query word's share of the cosine, 6 places (they add up to it before
        rounding); empty when the model cannot split its cosine by word."""
        words = {} if self._words is None else self._words()
        return MappingProxyType({word: _r(value) for word, value in words.items()})

    @property
    def top_words(self) -> tuple[str, ...]:
        """The words that pulled the cosine up most, largest first (at most three)."""
        ordered = sorted(self.word_contributions.items(), key=lambda i: (-i[1], i[0]))
        return tuple(word for word, value in ordered[:TOP_WORDS] if value > 0)


@dataclass(frozen=True)
class DenseBreakdown(_WordParts, RecallScoreBreakdown):
    """A dense hit: ``total`` = ``contributions["dense"]`` = the cosine (6 places), and
    :attr:`word_contributions` / :attr:`top_words`: which query words pulled it up."""

    cosine: float = 0.0
    _words: Callable[[], Mapping[str, float]] | None = field(default=None, repr=False,
                                                              compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "cosine": self.cosine,
                "word_contributions": dict(self.word_contributions),
                "top_words": list(self.top_words)}


@dataclass(frozen=True)
class FusedBreakdown(_WordParts, RecallScoreBreakdown):
    """A fused hit: ``contributions`` = {"lexical": part, "dense": part}, adding up to
    ``total``; each part's rank (``None``: not in that list's top ``depth``), the lexical
    score (the contextual total) and the cosine behind them, the dense words
    (:attr:`word_contributions`, :attr:`top_words`), and the fusion's settings.
    ``lexical_breakdown`` is the contextual hit's own breakdown (its terms, fields, thread)
    when the fast backend ranked it; it is not part of :meth:`to_dict` nor of equality."""

    lexical_rank: int | None = None
    dense_rank: int | None = None
    lexical_score: float | None = None
    cosine: float | None = None
    fusion: Mapping[str, float] = field(default_factory=dict)
    lexical_breakdown: RecallScoreBreakdown | None = field(default=None, compare=False,
                                                           repr=False)
    _words: Callable[[], Mapping[str, float]] | None = field(default=None, repr=False,
                                                              compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "lexical_rank": self.lexical_rank,
                "dense_rank": self.dense_rank, "lexical_score": self.lexical_score,
                "cosine": self.cosine, "word_contributions": dict(self.word_contributions),
                "top_words": list(self.top_words), "fusion": dict(self.fusion)}


def _in_scope(record: StoredMemory, query: RecallQuery) -> StoredMemory:
    _check_scope(query, record)  # recall never crosses users
    return record


# -- dense --------------------------------------------------------------------------------

@register_scorer
@dataclass(frozen=True)
class DenseScorer(Scorer, RanksIndex):
    """Cosine of the query's vector with every stored record's (exact, numpy).

    ``embedder``: any :class:`~labmem.recall.embedding.Embedder` (default: the packaged
    WordLlama model); ``encoding``: how vectors are stored, ``"int8"`` or ``"float16"``.
    """

    embedder: Embedder | None = field(default=None, compare=False)
    encoding: str = "int8"
    name = "dense_cosine"
    key = "dense"

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise InvalidInputError("encoding", f"{self.encoding!r} is not a vector encoding",
                                    f"use one of {sorted(ENCODINGS)}")
        if self.embedder is not None and not isinstance(self.embedder, Embedder):
            raise InvalidInputError("embedder", f"{self.embedder!r} is not an Embedder",
                                    "pass an object with name, dimensions and embed(texts)")

    @functools.cached_property
    def model(self) -> Embedder:
        """The embedder in use (the packaged model is loaded on first need)."""
        return default_embedder() if self.embedder is None else self.embedder

    def _needs_the_index(self, *args: Any, **kwargs: Any):
        raise InvalidInputError(
            "scorer", f"the {self.key} scorer ranks every record in scope (by its stored "
            "vector), which one candidate alone does not carry",
            f"use RecallEngine(store, scorer='{self.key}').recall(...)")

    term_weights = combine = explain = estimate = _needs_the_index

    def vectors(self, store) -> StoredVectors:
        """``store``'s vectors for this model, brought up to date."""
        vectors = store_vectors(store, self.model, self.encoding)
        vectors.refresh()
        return vectors

    def query_vector(self, query: RecallQuery) -> np.ndarray:
        """The query text's unit vector, float64 (the one thing embedded per query)."""
        memo = self.__dict__.get("_last_query")
        if memo is not None and memo[0] == query.text:
            return memo[1]
        vector = self.model.embed([query.text])[0].astype(np.float64)
        object.__setattr__(self, "_last_query", (query.text, vector))  # frozen
        return vector

    def breakdown(self, query: RecallQuery, cosine: float,
                  unit: np.ndarray) -> DenseBreakdown:
        """The breakdown of a record whose exact cosine is ``cosine`` and whose stored
        vector, scaled to norm 1, is ``unit``."""
        total = _r(cosine)
        return DenseBreakdown(
            matched_terms=(), query_term_count=len(query.terms), lexical_coverage=0.0,
            recency=0.0, lexical_contribution=0.0, recency_contribution=0.0, total=total,
            scorer=self.name, weights=MappingProxyType({"dense": 1.0}),
            contributions=MappingProxyType({"dense": total}), cosine=total,
            _words=self.words(query, unit))

    def words(self, query: RecallQuery, unit: np.ndarray
              ) -> Callable[[], Mapping[str, float]] | None:
        """How to split the cosine with ``unit`` over the query's words (called only if a
        breakdown's words are read); ``None`` when the model cannot."""
        if not offers(self.model, SplitsCosine):
            return None
        return functools.partial(self.model.word_contributions, query.text, unit)

    def ranking(self, index, query: RecallQuery, limit: int
                ) -> tuple[list[tuple[int, StoredMemory | None, float]], StoredVectors, int]:
        """The top ``limit`` as (position, record or ``None`` if not decoded yet, cosine),
        best first; the vectors; how many records were candidates. The float32 estimates
        shortlist, the exact cosines (:func:`~labmem.recall.vectors.exact_cosine`) order."""
        index.refresh()
        vectors = self.vectors(index.store)
        end = index.records
        q = self.query_vector(query)
        positions = np.flatnonzero(vectors.rows()[2][:end])
        if not len(positions):
            return [], vectors, 0
        listed = shortlist(positions, vectors.cosines(q, end)[positions], limit,
                           _TOLERANCE).tolist()
        fast_ids = offers(index, NamesPositions) and offers(index, LendsPostings)
        captured = index.record_columns()[1] if fast_ids else None
        keyed = []
        for position in listed:
            cosine = _r(vectors.cosine(position, q))
            if fast_ids:
                key = order_key(cosine, 0.0, float(captured[position]),
                                index.memory_id(position))
                keyed.append((key, position, None, cosine))
            else:
                record = _in_scope(index.record(position), query)
                key = order_key(cosine, 0.0, record.source.captured_at.timestamp(),
                                record.memory_id)
                keyed.append((key, position, record, cosine))
        keyed.sort(key=lambda item: item[0])
        return [(position, record, cosine) for _, position, record, cosine in keyed[:limit]], \
            vectors, len(positions)

    def rank_index(self, index, query: RecallQuery, *, as_of: datetime) -> RecallResult:
        """Stages 2–4 over ``index``: every conversation record is a candidate
        (:meth:`ranking`); only the top ``query.limit`` records are decoded."""
        rows, vectors, candidates = self.ranking(index, query, query.limit)
        hits = ranked_hits(query, (
            (record or _in_scope(index.record(position), query),
             self.breakdown(query, cosine, vectors.unit(position)))
            for position, record, cosine in rows))
        return RecallResult(query, hits, index.searched_records, candidates,
                            None if candidates else EMPTY_NO_RECORDS)


def reference_ranking(store, query: RecallQuery, scorer: DenseScorer, limit: int
                      ) -> tuple[list[tuple[int, StoredMemory, float]], StoredVectors, int]:
    """:meth:`DenseScorer.ranking` the plain way: every record read, each cosine on its
    own, all sorted."""
    records = store.read_all()
    vectors = scorer.vectors(store)
    q = scorer.query_vector(query)
    rows = []
    for position, record in enumerate(records):
        if _in_scope(record, query).kind is not MemoryKind.CONVERSATION:
            continue
        cosine = _r(vectors.cosine(position, q))
        rows.append((order_key(cosine, 0.0, record.source.captured_at.timestamp(),
                               record.memory_id), position, record, cosine))
    rows.sort(key=lambda row: row[0])
    return [(position, record, cosine) for _, position, record, cosine in rows[:limit]], \
        vectors, len(rows)


def dense_reference(store, query: RecallQuery, scorer: DenseScorer,
                    as_of: datetime) -> RecallResult:
    """The dense ranking the plain way (:func:`reference_ranking`), as a result."""
    rows, vectors, searched = reference_ranking(store, query, scorer, query.limit)
    hits = ranked_hits(query, ((record, scorer.breakdown(query, cosine, vectors.unit(position)))
                               for position, record, cosine in rows))
    return RecallResult(query, hits, searched, searched,
                        None if searched else EMPTY_NO_RECORDS)


# -- fused --------------------------------------------------------------------------------

@register_scorer
@dataclass(frozen=True)
class FusedScorer(Scorer, RanksIndex):
    """The contextual lexical ranking and the dense one, fused by :func:`fuse_rankings`."""

    lexical: ContextualScorer = field(default_factory=ContextualScorer)
    dense: DenseScorer = field(default_factory=DenseScorer)
    k: float = FUSION_K
    dense_weight: float = DENSE_WEIGHT
    depth: int = FUSION_DEPTH
    name = "fused_rrf"
    key = "fused"

    def __post_init__(self) -> None:
        if not isinstance(self.lexical, ContextualScorer):
            raise InvalidInputError("lexical", "must be a ContextualScorer",
                                    "pass lexical=ContextualScorer(...)")
        if not isinstance(self.dense, DenseScorer):
            raise InvalidInputError("dense", "must be a DenseScorer",
                                    "pass dense=DenseScorer(...)")
        checks = (("k", self.k, 0, 1000), ("dense_weight", self.dense_weight, 0, 1))
        for name, value, low, high in checks:
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    low <= value <= high) or (name == "k" and value == 0):
                raise InvalidInputError(name, f"{value!r} is out of range",
                                        f"use {low} {'<' if name == 'k' else '≤'} {name} "
                                        f"≤ {high}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or not (
                1 <= self.depth <= 1000):
            raise InvalidInputError("depth", f"{self.depth!r} is out of range",
                                    "use a whole number 1 ≤ depth ≤ 1000")

    _needs_the_index = DenseScorer._needs_the_index
    term_weights = combine = explain = estimate = _needs_the_index

    @functools.cached_property
    def settings(self) -> Mapping[str, float]:
        return MappingProxyType({"k": float(self.k), "dense_weight": float(self.dense_weight),
                                 "depth": float(self.depth)})

    def fuse(self, query: RecallQuery, lexical: Sequence[tuple[str, float]],
             dense: Sequence[tuple[str, float]], searched: int,
             source: Callable[[str], RecallHit | StoredMemory],
             unit: Callable[[str], np.ndarray],
             details: Mapping[str, RecallScoreBreakdown]) -> RecallResult:
        """The fused top ``query.limit`` of a lexical and a dense list ((memory id, score),
        best first, each at most ``depth`` long). Only the fused top is built:
        ``source(id)`` gives its hit or record, ``unit(id)`` its stored unit vector."""
        lexical_scores, cosines = dict(lexical), dict(dense)
        fused = fuse_rankings([m for m, _ in lexical], [m for m, _ in dense],
                              k=self.k, dense_weight=self.dense_weight)
        weights = MappingProxyType({"lexical": _r(1 - self.dense_weight),
                                    "dense": _r(self.dense_weight)})
        hits = []
        for rank, item in enumerate(fused[:query.limit], start=1):
            cosine = cosines.get(item.memory_id)
            breakdown = FusedBreakdown(
                matched_terms=(), query_term_count=len(query.terms), lexical_coverage=0.0,
                recency=0.0, lexical_contribution=item.lexical_part, recency_contribution=0.0,
                total=item.total, scorer=self.name, weights=weights,
                contributions=MappingProxyType({"lexical": item.lexical_part,
                                                "dense": item.dense_part}),
                lexical_rank=item.lexical_rank, dense_rank=item.dense_rank,
                lexical_score=lexical_scores.get(item.memory_id), cosine=cosine,
                fusion=self.settings, lexical_breakdown=details.get(item.memory_id),
                _words=None if cosine is None else self.dense.words(
                    query, unit(item.memory_id)))
            found = source(item.memory_id)
            hits.append(replace(found, rank=rank, score_breakdown=breakdown)
                        if isinstance(found, RecallHit)
                        else replace(ranked_hits(query, [(found, breakdown)])[0], rank=rank))
        return RecallResult(query, tuple(hits), searched, len(fused),
                            None if hits else EMPTY_NO_RECORDS)

    def rank_index(self, index, query: RecallQuery, *, as_of: datetime) -> RecallResult:
        """Both rankings over ``index`` to ``depth``, then :meth:`fuse` (the dense list as
        positions and cosines: only its records that make the fused top are decoded)."""
        deep = replace(query, limit=self.depth)
        lexical = self.lexical.rank_index(index, deep, as_of=as_of)
        rows, vectors, _ = self.dense.ranking(index, query, self.depth)
        names = {position: (record.memory_id if record is not None
                            else index.memory_id(position)) for position, record, _ in rows}
        at = {names[position]: (position, record) for position, record, _ in rows}
        found = {hit.memory_id: hit for hit in lexical.hits}

        def source(memory_id: str) -> RecallHit | StoredMemory:
            if memory_id in found:
                return found[memory_id]
            position, record = at[memory_id]
            return record or _in_scope(index.record(position), query)

        return self.fuse(query, [(h.memory_id, h.score) for h in lexical.hits],
                         [(names[position], cosine) for position, _, cosine in rows],
                         index.searched_records, source,
                         lambda memory_id: vectors.unit(at[memory_id][0]),
                         {h.memory_id: h.score_breakdown for h in lexical.hits})


def fused_reference(store, query: RecallQuery, scorer: FusedScorer,
                    as_of: datetime) -> RecallResult:
    """The fused ranking the plain way: the contextual formula record by record
    (:func:`~labmem.recall.contextual.rank_contextual_reference`), the dense cosines one
    by one (:func:`reference_ranking`), both to ``depth``, then :meth:`FusedScorer.fuse`."""
    records = store.read_all()
    lexical = rank_contextual_reference(list(records), query.terms, scorer.lexical,
                                        scorer.depth)
    rows, vectors, searched = reference_ranking(store, query, scorer.dense, scorer.depth)
    by_id = {r.memory_id: r for r in records}
    positions = {r.memory_id: position for position, r in enumerate(records)}
    return scorer.fuse(query, lexical, [(r.memory_id, cosine) for _, r, cosine in rows],
                       searched, by_id.__getitem__,
                       lambda memory_id: vectors.unit(positions[memory_id]), {})
