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


@dataclass(frozen=True, order=True)
class Exclusion:
    """A matching record that was not a candidate, and why (its status, an expiry, a
    better claim of the same origin). ``version`` is the version that was looked at."""

    record_id: str
    status: str
    reason: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "status": self.status, "reason": self.reason,
                "version": self.version}


@dataclass(frozen=True)
class StaleHit:
    """A candidate whose record changed (``revised``) or went (``forgotten``) between
    candidate selection and promotion: skipped, never loaded with the wrong text."""

    record_id: str
    reason: str
    expected_hash: str
    found_hash: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "reason": self.reason,
                "expected_hash": self.expected_hash, "found_hash": self.found_hash}


@dataclass(frozen=True)
class CandidateTrace:
    record_id: str
    factors: dict[str, float]
    score: float
    level: str  # the level this page ended the recall at: L2, L1 or L0 (cold)
    version: int = 0  # the record version scored: with content_hash, what a replay checks
    content_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, **self.factors, "score": self.score,
                "level": self.level, "version": self.version,
                "content_hash": self.content_hash}


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
    excluded: tuple[Exclusion, ...] = ()
    stale: tuple[StaleHit, ...] = ()

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
                "hot": self.hot, "warm": self.warm,
                "excluded": [e.to_dict() for e in self.excluded],
                "stale": [s.to_dict() for s in self.stale]}


@dataclass(frozen=True)
class ReplayRow:
    """One candidate of a trace against the record as it is now."""

    record_id: str
    traced_version: int
    current_version: int | None  # None: the record is gone (forgotten or purged)
    state: str  # "same", "changed" or "gone"

    def to_dict(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "traced_version": self.traced_version,
                "current_version": self.current_version, "state": self.state}


@dataclass(frozen=True)
class ReplayCheck:
    """Can this trace be replayed against the same snapshot? Only if no candidate changed."""

    query_hash: str
    rows: tuple[ReplayRow, ...]

    @property
    def same_snapshot(self) -> bool:
        return all(row.state == "same" for row in self.rows)

    @property
    def changed(self) -> tuple[str, ...]:
        return tuple(row.record_id for row in self.rows if row.state != "same")
