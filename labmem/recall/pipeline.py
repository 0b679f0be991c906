"""s12 recall: normalize → candidate → score → stable rank → render.

Each stage is a plain function over frozen records, so a learner can run and check
one stage at a time, and a failure points at the stage that caused it:

1. :func:`normalize_recall_query` — readable text, normalized text, stable terms.
2. :func:`build_recall_candidates` — conversation records sharing a term with the query.
3. :func:`score_recall_candidate` — an explainable breakdown, not a bare number, from a
   pluggable scorer (:mod:`labmem.recall.scorers`: teaching, BM25, BM25 with recency).
4. :func:`stable_rank_recall_candidates` — an explicit, total order; cut to ``limit``.
5. :func:`render_recalled_context` — the selected hits as an escaped prompt block.

:class:`RecallEngine` runs them against a store: stage 1 here, stages 2–4 by a backend —
``"reference"`` (:mod:`labmem.recall.reference`: every record read, the specification) or
``"fast"`` (:mod:`labmem.recall.packed`: an inverted index, every candidate estimated at
once), which return the same result.
Recall never writes: a hit is a per-query view of a stored record, not a new memory.

The plain statement of the stages is the chapter's from-scratch module,
:mod:`labmem.scratch.s12`: stage 2 (:func:`build_recall_candidates`) and the order of stage 4
(:func:`rank_key`) here call it, adapted to the library's records; the reference backend
runs its stages 2–4 whole. What this module adds around them is the library's: stage 1's
typed errors and term bound, pluggable scorers for stage 3 (the teaching scorer's exact
``explain`` lives in :mod:`labmem.recall.scorers`, held equal to the chapter's by
``tests/contracts/test_s12_equal.py``), and stage 5 through the series' one renderer.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import InvalidInputError, validated_as
from labmem.core.provenance import MemorySource
from labmem.core.render import XML, count, fixed, join_lines
from labmem.core.text import collapse_whitespace, normalize_text, term_frequencies
from labmem.core.validation import prechecked, require_int, require_text
from labmem.recall.index import TermIndex, open_term_index, record_terms
from labmem.recall.scorers import (  # noqa: F401 (weights re-exported for chapter s12)
    LEXICAL_WEIGHT,
    RECENCY_WEIGHT,
    SCORE_DECIMALS,
    CorpusStats,
    RecallScoreBreakdown,
    Scorer,
    recency_weight,
    resolve_scorer,
)
from labmem.recall.store import MemoryKind, RecallStore, RemoteMemoryScopeError, StoredMemory
from labmem.scratch import s12 as scratch

__all__ = [
    "RecallQuery", "RecallCandidate", "RecallScoreBreakdown", "RecallScope", "RecallHit",
    "RecallResult", "RecallQueryError", "RecallEngine", "normalize_recall_query",
    "build_recall_candidates", "score_recall_candidate", "stable_rank_recall_candidates",
    "render_recalled_context", "render_remote_profile", "recency_weight", "record_terms",
    "corpus_stats", "Scorer", "MAX_QUERY_TERMS",
]

MIN_LIMIT, MAX_LIMIT = 1, 10
#: The most distinct search terms one recall query may have (stage 1 refuses more). Real
#: questions have a handful (the labeled set's longest has 11); the bound keeps one
#: call's work bounded, since scoring costs grow with the terms asked.
MAX_QUERY_TERMS = 64
SNIPPET_FALLBACK_CHARS = 240
EMPTY_NO_MATCHING_TERMS = "no_matching_terms"


class RecallQueryError(InvalidInputError):
    """The recall request itself is unusable (blank, no terms, bad limit)."""


# -- 1. normalize ------------------------------------------------------------------


@dataclass(frozen=True)
class RecallQuery:
    """One recall request, normalized once; every later stage uses only ``terms``."""

    query_id: str
    text: str
    normalized_text: str
    terms: tuple[str, ...]
    user_scope: str
    limit: int
    issued_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "text": self.text,
            "normalized_text": self.normalized_text,
            "terms": list(self.terms),
            "user_scope": self.user_scope,
            "limit": self.limit,
            "issued_at": None if self.issued_at is None else format_timestamp(self.issued_at),
        }


def default_query_id(user_scope: str, normalized_text: str, issued_at: datetime | None) -> str:
    """Deterministic id: the same scope, text and time always name the same query."""
    stamp = "" if issued_at is None else format_timestamp(issued_at)
    basis = "\x1f".join((user_scope, normalized_text, stamp))
    return "query-" + hashlib.sha256(basis.encode()).hexdigest()[:12]


def _check_term_count(terms: tuple[str, ...]) -> None:
    """Refuse more than :data:`MAX_QUERY_TERMS` distinct terms: every stage's work grows
    with the terms (a posting list read and a lookup per term, per record scored), so an
    unbounded query is unbounded work for one call (2,000 terms took 12 s)."""
    if len(terms) > MAX_QUERY_TERMS:
        raise RecallQueryError(
            "text", f"has {len(terms):,} distinct search terms, more than the limit of "
            f"{MAX_QUERY_TERMS}",
            "ask for one thing at a time, in the few words that name it; recall is not a "
            "way to compare a whole document against memory",
        )


def normalize_recall_query(
    text: str,
    *,
    user_scope: str,
    limit: int,
    query_id: str | None = None,
    issued_at: datetime | str | None = None,
) -> RecallQuery:
    """Validate and normalize a raw recall request (stage 1)."""
    # a lone surrogate (undecodable bytes on a command line arrive as one) has no UTF-8
    # form: refused here, not as a UnicodeEncodeError from a scorer that hashes terms
    validated_as(RecallQueryError, require_text, text, "text", allow_blank=True)
    readable = collapse_whitespace(text)
    if not readable:
        raise RecallQueryError(
            "text", "must not be empty",
            "describe the past information you need, e.g. 'layered memory design'",
        )
    normalized = normalize_text(readable)
    terms = tuple(sorted(term_frequencies(normalized)))
    if not terms:
        raise RecallQueryError(
            "text", f"{readable!r} has no searchable terms",
            "use at least one word or CJK character; recall never falls back to 'everything'",
        )
    _check_term_count(terms)
    validated_as(RecallQueryError, require_int, limit, "limit", minimum=MIN_LIMIT,
                 maximum=MAX_LIMIT)
    if not isinstance(user_scope, str) or not user_scope:
        raise RecallQueryError("user_scope", "must be a non-empty scope digest")
    stamp = None if issued_at is None else parse_timestamp(issued_at, field="issued_at")
    if query_id is None:
        query_id = default_query_id(user_scope, normalized, stamp)
    elif not isinstance(query_id, str) or not query_id.strip():
        raise RecallQueryError("query_id", "must be a non-blank string or None")
    return RecallQuery(query_id, readable, normalized, terms, user_scope, limit, stamp)


# -- 2. candidate --------------------------------------------------------------------


@dataclass(frozen=True)
class RecallCandidate:
    """A conversation record that shares at least one term with the query (no score yet)."""

    query_id: str
    record: StoredMemory
    searchable_terms: tuple[str, ...]
    matched_terms: tuple[str, ...]
    captured_at: datetime
    term_counts: Mapping[str, int] = field(default_factory=dict)  # matched term -> count
    document_length: int = 0  # all its term occurrences: what BM25 normalizes by


def _check_scope(query: RecallQuery, record: StoredMemory) -> None:
    if record.user_scope != query.user_scope:
        raise RemoteMemoryScopeError(
            f"record {record.memory_id!r} belongs to user scope {record.user_scope!r}, "
            f"not the query's {query.user_scope!r}; recall never crosses users"
        )


def _candidate(query: RecallQuery, record: StoredMemory,
               counts: Mapping[str, int]) -> RecallCandidate | None:
    matched = tuple(term for term in query.terms if term in counts)
    if not matched:
        return None
    return RecallCandidate(
        query_id=query.query_id,
        record=record,
        searchable_terms=tuple(sorted(counts)),
        matched_terms=matched,
        captured_at=record.source.captured_at,
        term_counts=MappingProxyType({term: counts[term] for term in matched}),
        document_length=sum(counts.values()),
    )


def build_recall_candidates(
    query: RecallQuery, records: Iterable[StoredMemory]
) -> tuple[RecallCandidate, ...]:
    """Stage 2: conversation records (scope re-checked) with any query term, in input order.

    The rule is stated once, in the chapter's from-scratch module
    (:func:`labmem.scratch.s12.build_recall_candidates`); this adapts its candidates to the
    library's type and its scope error to :class:`RemoteMemoryScopeError`.
    """
    try:
        found = scratch.build_recall_candidates(query, records)
    except scratch.ScopeError as exc:
        raise RemoteMemoryScopeError(str(exc)) from None
    return tuple(RecallCandidate(c.query_id, c.record, c.searchable_terms, c.matched_terms,
                                 c.captured_at, MappingProxyType(c.term_counts),
                                 c.document_length) for c in found)


def count_searched_records(records: Iterable[StoredMemory]) -> int:
    """How many records recall examines: the conversation records (profiles excluded)."""
    return sum(1 for record in records if record.kind is MemoryKind.CONVERSATION)


# -- 3. score ------------------------------------------------------------------------


def corpus_stats(query: RecallQuery, records: Iterable[StoredMemory]) -> CorpusStats:
    """BM25's statistics computed the slow, obvious way: by reading every record.

    The engine gets the same numbers from its index; a test checks that they agree.
    """
    searched = total_length = 0
    frequency = dict.fromkeys(query.terms, 0)
    for record in records:
        _check_scope(query, record)
        if record.kind is not MemoryKind.CONVERSATION:
            continue
        counts = record_terms(record)
        searched += 1
        total_length += sum(counts.values())
        for term in query.terms:
            frequency[term] += term in counts
    return CorpusStats(searched, total_length, MappingProxyType(frequency))


def score_recall_candidate(
    query: RecallQuery,
    candidate: RecallCandidate,
    *,
    as_of: datetime | str,
    scorer: str | Scorer | None = None,
    stats: CorpusStats | None = None,
) -> RecallScoreBreakdown:
    """Stage 3: the scorer's breakdown (default: the teaching 0.85 × coverage + 0.15 × recency).

    BM25-based scorers also need ``stats`` (see :func:`corpus_stats`).
    """
    as_of = parse_timestamp(as_of, field="as_of")
    return resolve_scorer(scorer).explain(
        query.terms, candidate.term_counts, candidate.document_length,
        candidate.captured_at, as_of=as_of, stats=stats,
    )


# -- 4. stable rank ------------------------------------------------------------------


@dataclass(frozen=True)
class RecallScope:
    """The boundary a hit was found in: whose records, and which kind."""

    user_scope: str
    memory_kind: MemoryKind

    def to_dict(self) -> dict[str, str]:
        return {"user_scope": self.user_scope, "memory_kind": self.memory_kind.value}


@dataclass(frozen=True)
class RecallHit:
    """A per-query projection of one stored record; never written back as a memory."""

    query_id: str
    memory_id: str
    rank: int
    snippet: str
    scope: RecallScope
    provenance: MemorySource
    score_breakdown: RecallScoreBreakdown

    @property
    def score(self) -> float:
        """The hit's total score (``score_breakdown.total``), for short listings."""
        return self.score_breakdown.total

    def to_dict(self) -> dict[str, Any]:
        provenance = self.provenance.to_dict()
        return {
            "memory_id": self.memory_id,
            "rank": self.rank,
            "snippet": self.snippet,
            "scope": self.scope.to_dict(),
            "provenance": provenance,
            "score": self.score,
            "score_breakdown": self.score_breakdown.to_dict(),
        }


def rank_key(candidate: RecallCandidate, breakdown: RecallScoreBreakdown) -> tuple:
    """total ↓, coverage ↓, captured_at ↓, memory_id ↑ — a total order, so ties are stable
    (the chapter's :func:`labmem.scratch.s12.rank_key`, the one statement of the order)."""
    return scratch.rank_key(candidate, breakdown)


def order_key(total: float, coverage: float, captured_seconds: float, memory_id: str) -> tuple:
    """:func:`rank_key` from its four numbers (what an index knows without the record)."""
    return (-total, -coverage, -captured_seconds, memory_id)


def snippet_of(record: StoredMemory) -> str:
    """The record's summary, or the start of its content when the summary is empty."""
    if record.summary.strip():
        return record.summary
    return record.content[:SNIPPET_FALLBACK_CHARS]


def stable_rank_recall_candidates(
    query: RecallQuery,
    candidates: Iterable[RecallCandidate],
    *,
    as_of: datetime | str,
    scorer: str | Scorer | None = None,
    stats: CorpusStats | None = None,
) -> tuple[RecallHit, ...]:
    """Stage 4: score, order by :func:`rank_key`, keep the top ``query.limit``, rank from 1.

    Uses a bounded heap, not a full sort: the cost is O(n log limit).
    """
    as_of = parse_timestamp(as_of, field="as_of")
    scorer = resolve_scorer(scorer)
    scored = ((rank_key(c, b), c, b) for c in candidates
              for b in (score_recall_candidate(query, c, as_of=as_of, scorer=scorer,
                                               stats=stats),))
    top = heapq.nsmallest(query.limit, scored, key=lambda item: item[0])
    return ranked_hits(query, ((c.record, b) for _, c, b in top))


def ranked_hits(query: RecallQuery,
                ordered: Iterable[tuple[StoredMemory, RecallScoreBreakdown]]
                ) -> tuple[RecallHit, ...]:
    """(record, breakdown) pairs, best first, as hits ranked from 1."""
    return tuple(  # built from checked parts (the records, the scorer's breakdowns)
        prechecked(
            RecallHit,
            query_id=query.query_id,
            memory_id=record.memory_id,
            rank=rank,
            snippet=snippet_of(record),
            scope=prechecked(RecallScope, user_scope=record.user_scope,
                             memory_kind=record.kind),
            provenance=record.source,
            score_breakdown=breakdown,
        )
        for rank, (record, breakdown) in enumerate(ordered, start=1)
    )


# -- the result ----------------------------------------------------------------------


@dataclass(frozen=True)
class RecallResult:
    """Hits plus the counts that explain an empty or short result."""

    query: RecallQuery
    hits: tuple[RecallHit, ...]
    searched_records: int
    candidate_records: int
    empty_reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query.to_dict(),
            "hits": [hit.to_dict() for hit in self.hits],
            "searched_records": self.searched_records,
            "candidate_records": self.candidate_records,
            "empty_reason": self.empty_reason,
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    def to_frame(self):
        """One row per hit with the score breakdown spread into columns (pandas)."""
        import pandas as pd  # imported lazily: importing labmem stays light

        columns = ["rank", "memory_id", "total", "lexical_coverage", "recency",
                   "lexical_contribution", "recency_contribution", "matched_terms",
                   "age_days", "captured_at", "source_id", "snippet"]
        rows = [
            {
                "rank": hit.rank,
                "memory_id": hit.memory_id,
                "total": hit.score_breakdown.total,
                "lexical_coverage": hit.score_breakdown.lexical_coverage,
                "recency": hit.score_breakdown.recency,
                "lexical_contribution": hit.score_breakdown.lexical_contribution,
                "recency_contribution": hit.score_breakdown.recency_contribution,
                "matched_terms": ", ".join(hit.score_breakdown.matched_terms),
                "age_days": hit.score_breakdown.age_days,
                "captured_at": format_timestamp(hit.provenance.captured_at),
                "source_id": hit.provenance.source_id,
                "snippet": hit.snippet,
            }
            for hit in self.hits
        ]
        return pd.DataFrame(rows, columns=columns)


def assemble_result(query: RecallQuery, candidates: tuple[RecallCandidate, ...],
                    searched_records: int, *, as_of: datetime,
                    scorer: str | Scorer | None = None,
                    stats: CorpusStats | None = None) -> RecallResult:
    """Stages 3–4 plus the counts: what both the engine and a by-hand pipeline return."""
    hits = stable_rank_recall_candidates(query, candidates, as_of=as_of, scorer=scorer,
                                         stats=stats)
    return RecallResult(
        query=query,
        hits=hits,
        searched_records=searched_records,
        candidate_records=len(candidates),
        empty_reason=None if hits else EMPTY_NO_MATCHING_TERMS,
    )


#: The two ways :class:`RecallEngine` answers stages 2–4 (see its docstring).
RECALL_BACKENDS = ("fast", "reference")


class RecallEngine:
    """Runs the recall stages over one user's store; read-only by construction.

    Stage 1 (:func:`normalize_recall_query`) runs here for both backends; stages 2–4
    (candidates, scores, a stable top ``limit``) are the backend's:

    * ``backend="reference"`` — :func:`labmem.recall.reference.recall_reference`: every
      record read, each candidate scored on its own; the specification.
    * ``backend="fast"`` (the default) — :class:`labmem.recall.packed.PackedRecall` over
      the store's inverted index (:func:`labmem.recall.index.open_term_index`): every
      candidate estimated at once, only the shortlist explained exactly.

    Both return the same :class:`RecallResult` (property tests hold them equal); stage 5 is
    :func:`render_recalled_context` of that result.
    """

    def __init__(self, store, *, scorer: str | Scorer | None = None,
                 clock: Clock | None = None, backend: str = "fast") -> None:
        if not (isinstance(store, RecallStore) and isinstance(store.user_scope, str)):
            raise InvalidInputError(
                "store", f"must be a RemoteMemoryStore or SqliteMemoryStore, "
                f"got {type(store).__name__}",
            )
        if not isinstance(backend, str) or backend not in RECALL_BACKENDS:
            raise InvalidInputError(
                "backend", f"{backend!r} is not a recall backend",
                "use 'fast' (the default: the store's inverted index) or 'reference' "
                "(every record read, the specification)",
            )
        self.store = store
        self.clock = resolve_clock(clock if clock is not None else store.clock)
        self.backend = backend
        self._scorer = resolve_scorer(scorer)
        self.fast = None
        if backend == "fast":
            from labmem.recall.packed import PackedRecall  # the sibling that imports us

            self.fast = PackedRecall(open_term_index(store), self._scorer)

    def __repr__(self) -> str:
        return (f"RecallEngine({self.store!r}, scorer={self.scorer!r}, "
                f"backend={self.backend!r})")

    @property
    def scorer(self) -> Scorer:
        return self._scorer

    @scorer.setter
    def scorer(self, scorer: Scorer) -> None:
        """Another scorer over the same index (a tuning loop reuses one engine)."""
        self._scorer = scorer
        if self.fast is not None:
            self.fast.scorer = scorer

    @property
    def index(self) -> TermIndex | None:
        """The fast backend's inverted index (``None`` for the reference backend)."""
        return None if self.fast is None else self.fast.index

    @index.setter
    def index(self, index: TermIndex) -> None:
        if self.fast is None:
            raise InvalidInputError("index", "the reference backend reads records, not an "
                                    "index", "use RecallEngine(store, backend='fast')")
        self.fast.index = index

    def candidates(self, query: RecallQuery) -> tuple[RecallCandidate, ...]:
        """Stage 2 alone, as the backend finds it: the same for both."""
        if self.fast is None:
            return build_recall_candidates(query, self.store.read_all())
        return self.fast.candidates(query)

    def recall(
        self,
        text: str,
        *,
        limit: int = 5,
        as_of: datetime | str | None = None,
        query_id: str | None = None,
    ) -> RecallResult:
        """Stage 1 (normalize), then stages 2–4 by the backend: a :class:`RecallResult`."""
        issued_at = parse_timestamp(self.clock.now(), field="clock.now()")
        query = normalize_recall_query(
            text, user_scope=self.store.user_scope, limit=limit,
            query_id=query_id, issued_at=issued_at,
        )
        as_of = issued_at if as_of is None else parse_timestamp(as_of, field="as_of")
        if self.fast is None:
            from labmem.recall.reference import recall_reference

            return recall_reference(self.store, query, scorer=self.scorer, as_of=as_of)
        return self.fast.answer(query, as_of)


# -- 5. render -----------------------------------------------------------------------


def _attr(value: Any, field: str = "value") -> str:
    return XML.text(str(value), field)


def _fixed(value: float, field: str = "score") -> str:
    return fixed(value, field, SCORE_DECIMALS)


CONTRIBUTION_NAME = re.compile(r"[a-z][a-z0-9_]*")


def score_contributions(breakdown: RecallScoreBreakdown) -> dict[str, float]:
    """Every part of the total, by name (they add up to it, each rounded as shown).

    A breakdown built without ``contributions`` (by hand, say) has two parts: lexical and
    recency.
    """
    parts = dict(breakdown.contributions) or {"lexical": breakdown.lexical_contribution,
                                              "recency": breakdown.recency_contribution}
    for name in parts:
        if not isinstance(name, str) or not CONTRIBUTION_NAME.fullmatch(name):
            raise InvalidInputError(
                "score_breakdown.contributions", f"{name!r} is not a contribution name",
                "name each part with lower-case letters, digits and '_'")
    return parts


def render_recalled_context(result: RecallResult) -> str:
    """Stage 5: the hits as a ``<recalled_context>`` block; ``""`` when there are none.

    Every attribute and text node goes through the core renderer (:data:`labmem.core.render
    .XML`): markup is escaped, so stored text cannot close an element early or inject a fake
    hit, and line breaks and control characters become ``\\uXXXX``, so each element stays
    on its line. Scores must be finite and ranks positive. The ``<score>`` element lists
    every contribution as ``<name>_contribution`` (:func:`score_contributions`): they add
    up to ``total``, whichever scorer ranked the hits.
    """
    if not result.hits:
        return ""
    query = result.query
    lines = [
        f'<recalled_context query_id="{_attr(query.query_id)}" '
        f'normalized_query="{_attr(query.normalized_text)}" '
        f'user_scope="{_attr(query.user_scope)}">'
    ]
    for hit in result.hits:
        b = hit.score_breakdown
        p = hit.provenance
        parts = "".join(f' {name}_contribution="{_fixed(value)}"'
                        for name, value in score_contributions(b).items())
        lines += [
            f'  <hit rank="{count(hit.rank, "hit.rank", 1)}" '
            f'memory_id="{_attr(hit.memory_id, "hit.memory_id")}" '
            f'user_scope="{_attr(hit.scope.user_scope)}" '
            f'memory_kind="{_attr(hit.scope.memory_kind.value)}">',
            f'    <score total="{_fixed(b.total)}" '
            f'lexical_coverage="{_fixed(b.lexical_coverage)}" '
            f'recency="{_fixed(b.recency)}"{parts}/>',
            f'    <provenance source_id="{_attr(p.source_id)}" '
            f'source_type="{_attr(p.source_type)}" title="{_attr(p.title)}" '
            f'captured_at="{_attr(format_timestamp(p.captured_at))}"/>',
            f"    <snippet>{_attr(hit.snippet, 'hit.snippet')}</snippet>",
            "  </hit>",
        ]
    lines.append("</recalled_context>")
    return join_lines(lines, "recalled_context")


def render_remote_profile(record: StoredMemory | None) -> str:
    """The latest profile snapshot as a ``<remote_profile>`` block for session start.

    Keeps ``memory_id``, ``source_id`` and ``captured_at`` so the prompt says *which*
    snapshot was injected; ``""`` when there is no profile. The content is one escaped
    line (the core renderer), so a profile cannot close the block or add lines to it.
    """
    if record is None:
        return ""
    if not isinstance(record, StoredMemory) or record.kind is not MemoryKind.PROFILE:
        raise InvalidInputError(
            "record", "must be a profile StoredMemory (use store.latest_profile())"
        )
    return join_lines([
        f'<remote_profile memory_id="{_attr(record.memory_id, "memory_id")}" '
        f'source_id="{_attr(record.source.source_id, "source.source_id")}" '
        f'captured_at="{_attr(format_timestamp(record.source.captured_at))}">',
        _attr(record.content, "content"),
        "</remote_profile>",
    ], "remote_profile")
