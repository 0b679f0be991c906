"""Measuring a recall: did the right pages get loaded, and at a level that keeps the facts?

* :func:`recall_at_k` / :func:`precision_at_k` — over the *loaded working set* (HOT then
  WARM, best first), against the labeled relevant ids of a query (the shared definitions
  of :mod:`labmem.core.metrics`, plus the MMU's convention for a query with no relevant ids).
* :func:`information_loss` — for records whose decisive detail is a negation, a number, a
  condition or an exception: is the detail still in L1, or must the page go to L2 before
  anyone decides on it?
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.core import metrics
from labmem.core.errors import validated_as
from labmem.core.text import normalize_text
from labmem.core.validation import require_int
from labmem.mmu.errors import MmuValidationError
from labmem.mmu.pages import derive_l1, derive_l2
from labmem.mmu.records import MemoryRecord


def _require_k(k: int) -> int:
    return validated_as(MmuValidationError, require_int, k, "k", minimum=1)


def recall_at_k(loaded: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """Share of the relevant ids found among the first ``k`` loaded; 1.0 if none are relevant."""
    _require_k(k)
    return metrics.recall_at_k(loaded, relevant, k) if relevant else 1.0


def precision_at_k(loaded: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """Relevant ids among the first ``k`` loaded, divided by ``k``; 0.0 when none is relevant."""
    _require_k(k)
    return metrics.precision_at_k(loaded, relevant, k) if relevant else 0.0


def load_json(path: str | Path) -> Any:
    """A small data file written for this project (``data/mmu/*.json``)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class LossRow:
    case_id: str
    kind: str
    fact: str
    in_l1: bool
    in_l2: bool

    @property
    def needs_l2(self) -> bool:
        """The decisive detail is only in the full text: load L2 before deciding."""
        return self.in_l2 and not self.in_l1

    def to_dict(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "kind": self.kind, "fact": self.fact,
                "in_L1": self.in_l1, "in_L2": self.in_l2, "needs_L2": self.needs_l2}


def information_loss(cases: Sequence[tuple[str, str, str, MemoryRecord]]) -> list[LossRow]:
    """One row per ``(case_id, kind, fact, record)``: is ``fact`` kept by L1 and by L2?"""
    rows = []
    for case_id, kind, fact, record in cases:
        needle = normalize_text(fact)
        rows.append(LossRow(case_id, kind, fact,
                            in_l1=needle in normalize_text(derive_l1(record)),
                            in_l2=needle in normalize_text(derive_l2(record))))
    return rows


def churn(mmu, queries: Sequence[str], *, scope: str, start, step) -> list[dict[str, Any]]:
    """Run ``queries`` in order (recall *i* at ``start + i·step``) and count, per recall,
    the promotions, evictions and rejections it caused — the promote/evict churn."""
    rows = []
    for i, query in enumerate(queries):
        before = (mmu.promotions, mmu.evictions, sum(mmu.rejections.values()))
        trace = mmu.recall(query, scope=scope, now=start + i * step)
        rows.append({"recall": trace.recall_no, "query": query,
                     "promotions": mmu.promotions - before[0],
                     "evictions": mmu.evictions - before[1],
                     "rejections": sum(mmu.rejections.values()) - before[2],
                     "token_used": trace.budget_used, "hot": trace.hot, "warm": trace.warm})
    return rows
