"""The factor score: why a page is worth loading, as seven explainable numbers.

    score = clamp01( Σ weight_i · factor_i / Σ weight_i )

factors: relevance (query-term coverage over the shared-core terms), importance,
confidence, utility, recency (``2 ** (-age / half_life)``, age since last access),
salience and scope (1.0 for the caller's own scope, ``shared_scope_factor`` for a shared
one). Scope is *also* a filter applied before any of this: a page outside the caller's
scopes is never a candidate.

Bad inputs have documented results instead of crashes or random order:

* a factor that is NaN or negative counts as 0.0; above 1.0 counts as 1.0;
* a weight must be a finite number >= 0 (else :class:`MmuValidationError`);
* an all-zero weight set scores every page 0.0, so the tie-break alone decides;
* ties break by record id (ascending), so equal scores always come out in the same order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from datetime import timedelta

from labmem.mmu.errors import MmuValidationError

FACTOR_NAMES = ("relevance", "importance", "confidence", "utility", "recency",
                "salience", "scope")
SCORE_DECIMALS = 6
DEFAULT_HALF_LIFE = timedelta(days=1)


def clamp01(value: float) -> float:
    """NaN and negatives become 0.0, anything above 1.0 becomes 1.0."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, float(value)))


@dataclass(frozen=True)
class FactorWeights:
    """How much each factor counts; defaults from the original design (relevance leads)."""

    relevance: float = 0.35
    importance: float = 0.15
    confidence: float = 0.10
    utility: float = 0.10
    recency: float = 0.10
    salience: float = 0.10
    scope: float = 0.10

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value < 0):
                raise MmuValidationError(f"weights.{item.name}",
                                         f"must be a finite number >= 0, got {value!r}",
                                         "use 0 to switch a factor off")

    @property
    def total(self) -> float:
        # field order (= FACTOR_NAMES), as asdict gave it: the same float sum; asdict's
        # deep copy cost more than the whole score of a candidate
        return sum([getattr(self, name) for name in FACTOR_NAMES])

    def to_dict(self) -> dict[str, float]:
        """``{factor: weight}`` in :data:`FACTOR_NAMES` order."""
        return {name: getattr(self, name) for name in FACTOR_NAMES}


@dataclass(frozen=True)
class Factors:
    """The seven factor values of one page for one query (already clamped to [0, 1])."""

    relevance: float
    importance: float
    confidence: float
    utility: float
    recency: float
    salience: float
    scope: float

    def __post_init__(self) -> None:
        for item in fields(self):
            object.__setattr__(self, item.name, round(clamp01(getattr(self, item.name)),
                                                      SCORE_DECIMALS))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def relevance(query_terms: frozenset[str] | set[str],
              page_terms: frozenset[str] | int) -> float:
    """Fraction of the query's terms the page contains; 0.0 for a query without terms.

    ``page_terms`` is the page's term set, or already the count of query terms it holds
    (what the service's term index answers, without a set per page)."""
    if not query_terms:
        return 0.0
    held = page_terms if isinstance(page_terms, int) else len(query_terms & page_terms)
    return held / len(query_terms)


def recency(age: timedelta, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """``2 ** (-age / half_life)``: 1.0 now, 0.5 after one half-life; a future access is 1.0."""
    if half_life <= timedelta(0):
        raise MmuValidationError("half_life", f"must be positive, got {half_life!r}")
    seconds = age.total_seconds()
    if seconds <= 0:
        return 1.0
    return 2.0 ** (-seconds / half_life.total_seconds())


def contributions(factors: Factors, weights: FactorWeights) -> dict[str, float]:
    """What each factor adds to the score: ``weight · factor / Σ weight`` (all 0.0 when every
    weight is zero). The values sum to :func:`factor_score` (before its rounding)."""
    total = weights.total
    if total == 0:
        return {name: 0.0 for name in FACTOR_NAMES}
    return {name: getattr(weights, name) * getattr(factors, name) / total
            for name in FACTOR_NAMES}


def factor_score(factors: Factors, weights: FactorWeights) -> float:
    """The weighted mean, clamped to [0, 1]; 0.0 when every weight is zero."""
    return round(clamp01(sum(contributions(factors, weights).values())), SCORE_DECIMALS)


def page_rank_key(score: float, record_id: str) -> tuple[float, str]:
    """Sort key for a page or a service hit, "best first": higher score, then smaller
    record id (a recall hit has its own, :func:`labmem.recall.rank_key`)."""
    return (-score, record_id)
