"""Measuring a recall: did the right pages get loaded, and at a level that keeps the facts?

* :func:`recall_at_k` / :func:`precision_at_k` — over the *loaded working set* (HOT then
  WARM, best first), against the labeled relevant ids of a query: the shared definitions of
  :mod:`labmem.core.metrics` themselves, so a query with no relevant ids is refused here as
  everywhere (a :class:`LabeledQuery` cannot be built without one).
* :func:`information_loss` — for records whose decisive detail is a negation, a number, a
  condition or an exception: is the detail still in L1, or must the page go to L2 before
  anyone decides on it?
* :func:`evaluate` — a run of labeled queries (:class:`LabeledQuery`: what to load, what
  must *not* be loaded, when it is asked), reporting beside recall@k and precision@k the
  share of loaded pages at L2, relevant pages refused for budget, stale hits (a
  must-not-load page loaded, or a record that changed mid-recall) and re-hits of pages
  evicted earlier in the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from labmem.core.clock import parse_timestamp
from labmem.core.errors import validated_as
from labmem.core.metrics import precision_at_k, recall_at_k
from labmem.core.text import normalize_text
from labmem.core.validation import parse_json, require_int
from labmem.mmu.errors import MmuValidationError
from labmem.mmu.pages import derive_l1, derive_l2
from labmem.mmu.records import MemoryRecord


def _require_k(k: int) -> int:
    return validated_as(MmuValidationError, require_int, k, "k", minimum=1)


def load_json(path: str | Path) -> Any:
    """A small data file written for this project (``data/mmu/*.json``)."""
    try:  # the one validating parser: bounded depth, no NaN, no lone surrogate
        return parse_json(Path(path).read_bytes())
    except ValueError as exc:
        raise MmuValidationError("path", f"{Path(path).name} cannot be read ({exc})",
                                 "fix the file: labmem reads plain UTF-8 JSON") from None


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


def remember_rows(service, rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Write the labeled rows (``data/mmu/labeled_queries.json``: ``records`` or
    ``updates``) in order; return ``{key: record id}``. ``origin`` defaults to the key."""
    ids = {}
    for row in rows:
        record = service.remember(
            row["type"], scope=row["scope"], title=row["title"], text=row["text"],
            outcome="succeeded", evidence=[f"ev:{row['key']}"], source_kind=row["source_kind"],
            origin_key=row.get("origin", row["key"]), importance=row["importance"],
            valid_until=row.get("valid_until"))
        ids[row["key"]] = record.record_id
    return ids


@dataclass(frozen=True)
class LabeledQuery:
    """A query with the record ids it should load, those it must not, and when it is asked."""

    query: str
    scope: str
    relevant: tuple[str, ...]
    must_not_load: tuple[str, ...]
    at: datetime

    def __post_init__(self) -> None:
        if not self.relevant:
            raise MmuValidationError(
                "relevant", f"query {self.query!r} names no relevant record",
                "label at least one record it should load; recall@k and precision@k are "
                "not defined for a query with nothing relevant (count such queries apart)")

    @classmethod
    def from_row(cls, row: dict[str, Any], ids: dict[str, str]) -> LabeledQuery:
        """A labeled row whose keys are mapped to record ids through ``ids``."""
        return cls(row["query"], row["scope"], tuple(ids[k] for k in row["relevant"]),
                   tuple(ids[k] for k in row.get("must_not_load", ())),
                   parse_timestamp(row["at"], field="at"))


@dataclass(frozen=True)
class QueryScore:
    """One recall of an evaluation run, measured."""

    query: str
    scope: str
    loaded: tuple[str, ...]
    recall: float
    precision: float
    at_l2: int  # loaded pages that are HOT (full text)
    refused_relevant: tuple[str, ...]  # relevant pages rejected for budget
    stale_hits: tuple[str, ...]  # must-not-load pages loaded, and mid-recall changes
    rehits: tuple[str, ...]  # loaded pages that an earlier recall of the run evicted

    @property
    def l2_share(self) -> float:
        return round(self.at_l2 / len(self.loaded), 6) if self.loaded else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "scope": self.scope, "loaded": list(self.loaded),
                "recall": self.recall, "precision": self.precision,
                "l2_share": self.l2_share, "refused_relevant": list(self.refused_relevant),
                "stale_hits": list(self.stale_hits), "rehits": list(self.rehits)}


@dataclass(frozen=True)
class EvaluationReport:
    k: int
    rows: tuple[QueryScore, ...]

    def summary(self) -> dict[str, float | int]:
        n = len(self.rows) or 1
        loaded = sum(len(r.loaded) for r in self.rows)
        return {"queries": len(self.rows), f"mean recall@{self.k}": round(
                    sum(r.recall for r in self.rows) / n, 3),
                f"mean precision@{self.k}": round(sum(r.precision for r in self.rows) / n, 3),
                "L2 share": round(sum(r.at_l2 for r in self.rows) / loaded, 3) if loaded else 0.0,
                "relevant refused for budget": sum(len(r.refused_relevant) for r in self.rows),
                "stale hits": sum(len(r.stale_hits) for r in self.rows),
                "re-hits of evicted pages": sum(len(r.rehits) for r in self.rows)}


def evaluate(mmu, queries: Sequence[LabeledQuery], *, k: int = 3) -> EvaluationReport:
    """Recall each query in order (at its own time) on ``mmu`` and measure each recall."""
    _require_k(k)
    evicted: set[str] = set()
    rows = []
    for q in queries:
        if not isinstance(q, LabeledQuery):
            raise MmuValidationError("queries", "must hold LabeledQuery values",
                                     "build them with LabeledQuery.from_row(row, ids)")
        trace = mmu.recall(q.query, scope=q.scope, now=q.at)
        loaded = trace.loaded
        rehits = tuple(i for i in loaded if i in evicted)
        evicted = (evicted - set(loaded)) | set(trace.evicted)
        rows.append(QueryScore(
            q.query, q.scope, loaded, round(recall_at_k(loaded, q.relevant, k), 6),
            round(precision_at_k(loaded, q.relevant, k), 6),
            sum(c.level == "L2" for c in trace.candidates),
            tuple(r.record_id for r in trace.rejected if r.record_id in q.relevant),
            tuple(i for i in loaded if i in q.must_not_load)
            + tuple(s.record_id for s in trace.stale), rehits))
    return EvaluationReport(k, tuple(rows))
