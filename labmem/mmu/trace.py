"""The trace of one recall: enough to explain every decision, and no record text.

A trace names pages by record id and the query by a hash, so it can be logged by
default; the texts stay with their owner (the memory service).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labmem.core.clock import format_timestamp
from labmem.core.text import normalize_text


def query_hash(query: str) -> str:
    """A short stable hash of the normalized query (``q-`` + 12 hex digits)."""
    return "q-" + hashlib.sha256(normalize_text(query).encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class CandidateTrace:
    record_id: str
    factors: dict[str, float]
    score: float
    level: str  # the level this page ended the recall at: L2, L1 or L0 (cold)

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, **self.factors, "score": self.score,
                "level": self.level}


@dataclass(frozen=True)
class Rejection:
    record_id: str
    level: str
    reason: str
    need: int
    free: int

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "level": self.level, "reason": self.reason,
                "need": self.need, "free": self.free}


@dataclass(frozen=True)
class RecallTrace:
    recall_no: int
    query_hash: str
    scope: str
    at: datetime
    candidates: tuple[CandidateTrace, ...]
    rejected: tuple[Rejection, ...]
    evicted: tuple[str, ...]
    budget_used: int
    budget_limit: int
    pin_overflow: bool
    hot: int
    warm: int

    @property
    def loaded(self) -> tuple[str, ...]:
        """Ids of candidates loaded into context (L2 first, then L1), best first."""
        hot = [c.record_id for c in self.candidates if c.level == "L2"]
        warm = [c.record_id for c in self.candidates if c.level == "L1"]
        return tuple(hot + warm)

    def to_dict(self) -> dict[str, Any]:
        return {"recall_no": self.recall_no, "query_hash": self.query_hash,
                "scope": self.scope, "at": format_timestamp(self.at),
                "candidates": [c.to_dict() for c in self.candidates],
                "rejected": [r.to_dict() for r in self.rejected],
                "evicted": list(self.evicted), "budget_used": self.budget_used,
                "budget_limit": self.budget_limit, "pin_overflow": self.pin_overflow,
                "hot": self.hot, "warm": self.warm}
