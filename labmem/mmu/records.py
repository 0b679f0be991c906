"""Canonical long-term memory records: what to *keep*.

A :class:`MemoryRecord` is the durable fact. Everything the Context MMU loads (L0/L1/L2
pages) is derived from it, never the other way round. The record carries why we
believe it (``evidence``, ``source_kind``), how much (``confidence``, ``status``) and how
much it matters (``importance``, ``utility``, ``salience``) — the inputs of the factor score.

Write gate (:func:`check_write_gate`): only an outcome that *succeeded* and carries
evidence may become a record. "I plan to create the file" must never turn into
"the file was created" in memory.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.core.errors import validated_as
from labmem.core.validation import require_text
from labmem.mmu.errors import MemoryValidationError, WriteGateError

MEMORY_TYPES = ("working", "episodic", "semantic", "procedural")
SOURCE_KINDS = ("user_stated", "tool_observed", "model_inferred")
STATUSES = ("provisional", "trusted", "contradicted", "archived")
OUTCOMES = ("succeeded", "planned", "failed", "cancelled")

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

    def __post_init__(self) -> None:
        check = MemoryValidationError
        validated_as(check, require_text, self.record_id, "record_id", max_chars=100)
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

    @property
    def content_hash(self) -> str:
        return content_hash(self.text)

    @property
    def visible(self) -> bool:
        """Archived (forgotten) records are invisible to every recall path."""
        return self.status != "archived"

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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryRecord:
        fields = cls.__dataclass_fields__
        missing = sorted(set(fields) - set(data))
        if missing:
            raise MemoryValidationError("record", f"is missing fields {missing}")
        return cls(**{name: data[name] for name in fields})

    def describe(self) -> dict[str, Any]:
        """Metadata without the text: what a table or a trace may show."""
        row = self.to_dict()
        del row["text"]
        row["chars"] = len(self.text)
        return row
