"""Canonical long-term memory records: what to *keep*.

A :class:`MemoryRecord` is the durable fact. Everything the Context MMU loads (L0/L1/L2
pages) is derived from it, never the other way round. The record carries why we
believe it (``evidence``, ``source_kind``), how much (``confidence``, ``status``) and how
much it matters (``importance``, ``utility``, ``salience``) — the inputs of the factor score.

Write gate (:func:`check_write_gate`): only an outcome that *succeeded* and carries
evidence may become a record. "I plan to create the file" must never turn into
"the file was created" in memory.

What is *true now* (:func:`exclusion_reason`, the one rule the service's ``recall_query``
and the Context MMU both apply): only a ``provisional`` or ``trusted`` record whose
``valid_until`` has not passed is current. Two records are claims about the same thing
when they share ``(scope, origin_key)``; a newer claim supersedes an older one only if its
source ranks at least as high (:data:`SOURCE_RANK`: ``user_stated`` > ``tool_observed`` >
``model_inferred``); a lower-ranked one is kept as a pending conflict, never loaded.

This module is the plain record and its rules. Reading records back from the log
(:func:`labmem.mmu.logline.trusted_record`) and records filled from the fold snapshot on
first use (:class:`labmem.mmu.lazy.LazyRecord`) belong to the persistence side.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.core.errors import validated_as
from labmem.core.validation import require_text
from labmem.mmu.errors import MemoryValidationError, WriteGateError

MEMORY_TYPES = ("working", "episodic", "semantic", "procedural")
SOURCE_KINDS = ("user_stated", "tool_observed", "model_inferred")
#: ``superseded``: replaced by a newer claim of equal or higher rank; ``conflicted``: a
#: lower-ranked claim waiting for a decision; ``contradicted``: the older name of
#: superseded, still read from existing logs; ``archived``: forgotten.
STATUSES = ("provisional", "trusted", "superseded", "conflicted", "contradicted", "archived")
CURRENT_STATUSES = ("provisional", "trusted")
#: Which source may replace which: a claim supersedes only claims of equal or lower rank.
SOURCE_RANK = {"user_stated": 3, "tool_observed": 2, "model_inferred": 1}
OUTCOMES = ("succeeded", "planned", "failed", "cancelled")

OPTIONAL_TIMES = ("valid_until", "verified_at")
OPTIONAL_FIELDS = (*OPTIONAL_TIMES, "superseded_by", "conflicts_with")

MAX_TEXT_CHARS = 200_000
MAX_TITLE_CHARS = 200


def content_hash(text: str) -> str:
    """SHA-256 of the record text: the key that makes a stale derived page unusable."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def require_choice(value: Any, field: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise MemoryValidationError(field, f"must be one of {list(choices)}, got {value!r}")
    return value


def require_unit(value: Any, field: str) -> float:
    """A finite number in [0, 1]; records refuse anything else (pages clamp, records don't)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MemoryValidationError(field, f"must be a number in [0, 1], got {value!r}")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise MemoryValidationError(field, f"must be a finite number in [0, 1], got {value!r}")
    return float(value)


def check_write_gate(outcome: str, evidence: Sequence[str]) -> None:
    """Refuse anything that is not a succeeded, evidenced outcome — with the reason."""
    require_choice(outcome, "outcome", OUTCOMES)
    if outcome != "succeeded":
        raise WriteGateError(
            "outcome", f"a {outcome} task is not a fact to keep",
            "only write long-term memory after the task succeeded, with its evidence",
        )
    if not evidence:
        raise WriteGateError("evidence", "a succeeded outcome needs at least one evidence id",
                             "pass the tool run, message or file that shows it happened")


#: the longest record id: a scope (at most 100 characters), ``:m-`` and the number
MAX_ID_CHARS = 120


def record_id_of(scope: str, number: int) -> str:
    """The id of ``scope``'s ``number``-th record (from 1): ``alice:m-000001``.

    Numbered within the scope, so an id says nothing about what other scopes wrote, and
    prefixed by the scope, so ids are unique across scopes (the suffix has one fixed form,
    so a scope that contains ``:`` cannot produce another scope's id)."""
    return f"{scope}:m-{number:06d}"


@dataclass(frozen=True)
class MemoryRecord:
    """One canonical long-term memory, exactly as it is stored on disk."""

    record_id: str
    memory_type: str
    scope: str
    title: str
    text: str
    status: str
    importance: float
    confidence: float
    utility: float
    salience: float
    source_kind: str
    origin_key: str
    evidence: tuple[str, ...]
    version: int
    created_at: datetime
    updated_at: datetime
    valid_until: datetime | None = None  # after this instant the claim is expired
    verified_at: datetime | None = None  # when a source last confirmed it (optional)
    superseded_by: str | None = None  # the record that replaced this one
    conflicts_with: str | None = None  # the current record this pending claim disagrees with

    def __post_init__(self) -> None:
        check = MemoryValidationError
        validated_as(check, require_text, self.record_id, "record_id", max_chars=MAX_ID_CHARS)
        require_choice(self.memory_type, "memory_type", MEMORY_TYPES)
        validated_as(check, require_text, self.scope, "scope", max_chars=100)
        validated_as(check, require_text, self.title, "title", max_chars=MAX_TITLE_CHARS)
        validated_as(check, require_text, self.text, "text", max_chars=MAX_TEXT_CHARS)
        require_choice(self.status, "status", STATUSES)
        for name in ("importance", "confidence", "utility", "salience"):
            object.__setattr__(self, name, require_unit(getattr(self, name), name))
        require_choice(self.source_kind, "source_kind", SOURCE_KINDS)
        validated_as(check, require_text, self.origin_key, "origin_key", max_chars=200)
        if isinstance(self.evidence, str) or not isinstance(self.evidence, Sequence):
            raise MemoryValidationError("evidence", "must be a list of evidence ids")
        for i, item in enumerate(self.evidence):
            validated_as(check, require_text, item, f"evidence[{i}]", max_chars=200)
        object.__setattr__(self, "evidence", tuple(self.evidence))
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise MemoryValidationError("version", f"must be an int >= 1, got {self.version!r}")
        for name in ("created_at", "updated_at"):
            at = validated_as(check, parse_timestamp, getattr(self, name), field=name)
            object.__setattr__(self, name, at)
        for name in OPTIONAL_TIMES:
            if getattr(self, name) is not None:
                at = validated_as(check, parse_timestamp, getattr(self, name), field=name)
                object.__setattr__(self, name, at)
        for name in ("superseded_by", "conflicts_with"):
            if getattr(self, name) is not None:
                validated_as(check, require_text, getattr(self, name), name, max_chars=100)

    @cached_property
    def content_hash(self) -> str:
        """Worked out on first use and kept (the record is frozen, so is its text)."""
        return content_hash(self.text)

    @property
    def visible(self) -> bool:
        """Archived (forgotten) records are invisible to every recall path."""
        return self.status != "archived"

    def expired(self, now: datetime) -> bool:
        return self.valid_until is not None and self.valid_until <= now

    def to_dict(self) -> dict[str, Any]:
        return {
            "record_id": self.record_id, "memory_type": self.memory_type, "scope": self.scope,
            "title": self.title, "text": self.text, "status": self.status,
            "importance": self.importance, "confidence": self.confidence,
            "utility": self.utility, "salience": self.salience,
            "source_kind": self.source_kind, "origin_key": self.origin_key,
            "evidence": list(self.evidence), "version": self.version,
            "created_at": format_timestamp(self.created_at),
            "updated_at": format_timestamp(self.updated_at),
        } | self._optional_dict()

    def _optional_dict(self) -> dict[str, Any]:
        """The optional fields that are set (absent ones are not written: older logs and
        records without them read the same)."""
        out: dict[str, Any] = {}
        for name in OPTIONAL_TIMES:
            if getattr(self, name) is not None:
                out[name] = format_timestamp(getattr(self, name))
        for name in ("superseded_by", "conflicts_with"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryRecord:
        fields = cls.__dataclass_fields__
        missing = sorted(set(fields) - set(data) - set(OPTIONAL_FIELDS))
        if missing:
            raise MemoryValidationError("record", f"is missing fields {missing}")
        return cls(**{name: data[name] for name in fields if name in data})

    def describe(self) -> dict[str, Any]:
        """Metadata without the text: what a table or a trace may show."""
        row = self.to_dict()
        del row["text"]
        row["chars"] = len(self.text)
        return row


def exclusion_reason(claim: Any, now: datetime) -> str | None:
    """Why ``claim`` (a record, or a page carrying the same fields) is not current at
    ``now`` — ``None`` when it is. The one status filter of every recall path."""
    if claim.status == "archived":
        return "forgotten"
    if claim.status in ("superseded", "contradicted"):
        by = f" by {claim.superseded_by}" if claim.superseded_by else ""
        return f"{claim.status}{by}"
    if claim.status == "conflicted":
        return f"pending conflict with {claim.conflicts_with}"
    if claim.valid_until is not None and claim.valid_until <= now:
        return f"expired at {format_timestamp(claim.valid_until)}"
    return None


def claim_key(claim: Any) -> tuple[int, datetime, str]:
    """Sort key among current claims of one ``(scope, origin_key)``: the highest source rank
    wins, then the newest, then the larger id (written later)."""
    return (SOURCE_RANK[claim.source_kind], claim.updated_at, claim.record_id)


def may_supersede(new_source: str, old: MemoryRecord, now: datetime) -> bool:
    """A new claim replaces ``old`` if it ranks at least as high, or if ``old`` expired."""
    return SOURCE_RANK[new_source] >= SOURCE_RANK[old.source_kind] or old.expired(now)


PURGED_TEXT = "[purged]"


@dataclass(frozen=True)
class Tombstone:
    """What is left of a forgotten record after :meth:`FileMemoryService.purge`: who it was
    and when it was forgotten — no title, text or evidence. It keeps the forget in force
    (a replayed remember of the same origin still writes nothing)."""

    record_id: str
    scope: str
    origin_key: str
    memory_type: str
    source_kind: str
    version: int
    forgotten_at: datetime

    def __post_init__(self) -> None:
        at = validated_as(MemoryValidationError, parse_timestamp, self.forgotten_at,
                          field="forgotten_at")
        object.__setattr__(self, "forgotten_at", at)

    @classmethod
    def of(cls, record: MemoryRecord) -> Tombstone:
        return cls(record.record_id, record.scope, record.origin_key, record.memory_type,
                   record.source_kind, record.version, record.updated_at)

    def to_dict(self) -> dict[str, Any]:
        return {"tombstone": True, "record_id": self.record_id, "scope": self.scope,
                "origin_key": self.origin_key, "memory_type": self.memory_type,
                "source_kind": self.source_kind, "version": self.version,
                "forgotten_at": format_timestamp(self.forgotten_at)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tombstone:
        names = [n for n in cls.__dataclass_fields__]
        missing = sorted(set(names) - set(data))
        if missing:
            raise MemoryValidationError("tombstone", f"is missing fields {missing}")
        return cls(**{name: data[name] for name in names})

    def as_record(self) -> MemoryRecord:
        """An archived stand-in (text and title :data:`PURGED_TEXT`), for the callers that
        expect a record: a replayed ``remember`` and the MMU's sync."""
        return MemoryRecord(
            record_id=self.record_id, memory_type=self.memory_type, scope=self.scope,
            title=PURGED_TEXT, text=PURGED_TEXT, status="archived", importance=0.0,
            confidence=0.0, utility=0.0, salience=0.0, source_kind=self.source_kind,
            origin_key=self.origin_key, evidence=(), version=self.version,
            created_at=self.forgotten_at, updated_at=self.forgotten_at)
