"""Retrieval metrics over plain lists of ids: one definition for every chapter.

``ranked`` is what a system returned, best first; ``gold`` is what it should have
returned. Recall chapters (s12b, LoCoMo) and the Context MMU (s14) both measure with
these, so "recall@5" means the same thing wherever a learner meets it.

One rule for an empty ``gold``: every metric refuses it (:class:`InvalidInputError` naming
``gold``). Recall@k of a query with nothing relevant would be 0/0; calling it 1.0 ("nothing
was missed") would lift a mean for free, and 0.0 would sink it. A labeled set leaves such
queries out and counts them apart (both labeled-set readers refuse them when they load).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from labmem.core.errors import InvalidInputError
from labmem.core.validation import require_int

__all__ = ["recall_at_k", "precision_at_k", "any_hit_at_k", "full_hit_at_k",
           "reciprocal_rank"]


def _gold_set(gold: Iterable[str]) -> frozenset[str]:
    gold = frozenset(gold)
    if not gold:
        raise InvalidInputError(
            "gold", "is empty", "a query without relevant ids cannot be scored; leave it out "
            "and count it separately")
    return gold


def _top(ranked: Sequence[str], k: int) -> Sequence[str]:
    require_int(k, "k", minimum=1)
    return ranked[:k]


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Share of the gold ids found in the first ``k`` ranked ids (0.0 … 1.0)."""
    top = _top(ranked, k)
    gold = _gold_set(gold)
    return len(gold.intersection(top)) / len(gold)


def precision_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Gold ids among the first ``k`` ranked, divided by ``k`` (the standard definition).

    Divided by ``k`` even when fewer than ``k`` came back: a system that returns one right
    answer when asked for five has precision@5 = 0.2, not 1.0. (The share of what *was*
    returned is a different number; it would need a name of its own.)
    """
    top = _top(ranked, k)
    gold = _gold_set(gold)
    return len(gold.intersection(top)) / k


def any_hit_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when at least one gold id is in the first ``k`` (LoCoMo's "any evidence")."""
    top = _top(ranked, k)
    return 1.0 if _gold_set(gold).intersection(top) else 0.0


def full_hit_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 only when *every* gold id is in the first ``k`` ("full evidence")."""
    top = _top(ranked, k)
    return 1.0 if _gold_set(gold).issubset(top) else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: Iterable[str]) -> float:
    """1 / rank of the first gold id (ranks from 1); 0.0 when none was ranked."""
    gold = _gold_set(gold)
    for rank, memory_id in enumerate(ranked, start=1):
        if memory_id in gold:
            return 1.0 / rank
    return 0.0
