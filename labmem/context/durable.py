"""s14 durable state: what must survive compaction, each item with a source pointer.

Confirmed facts, pending items and the s12 retrieval evidence selected for a prompt. None of
them ever enters a compaction layer or the summarizer: :func:`~labmem.context.compact_context`
hands the state back as it was given, and :func:`~labmem.context.sources.render_durable_context`
prints it, beside the resolver that says whether each pointer still checks out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labmem.core.clock import parse_timestamp
from labmem.core.errors import InvalidInputError
from labmem.core.validation import require_int, require_text

__all__ = ["DurableFact", "PendingItem", "RetrievalEvidence", "DurableContextState"]


def _positive_int(value: Any, field: str) -> int:
    return require_int(value, field, minimum=1)


def _aware(value: datetime | str, field: str) -> datetime:
    return parse_timestamp(value, field=field)


def _pointer(value: Any, field: str) -> str:
    require_text(value, field, max_chars=500)
    return value


@dataclass(frozen=True)
class DurableFact:
    """A confirmed fact: owned by its source, not by the conversation."""

    fact_id: str
    content: str
    source_pointer: str
    last_confirmed_at: datetime

    def __post_init__(self) -> None:
        require_text(self.fact_id, "fact.fact_id", max_chars=200)
        require_text(self.content, "fact.content", max_chars=4_000)
        _pointer(self.source_pointer, "fact.source_pointer")
        object.__setattr__(self, "last_confirmed_at",
                           _aware(self.last_confirmed_at, "fact.last_confirmed_at"))


@dataclass(frozen=True)
class PendingItem:
    """Work that is not done until its source says so — a summary cannot close it."""

    item_id: str
    description: str
    source_pointer: str
    last_confirmed_at: datetime

    def __post_init__(self) -> None:
        require_text(self.item_id, "pending.item_id", max_chars=200)
        require_text(self.description, "pending.description", max_chars=4_000)
        _pointer(self.source_pointer, "pending.source_pointer")
        object.__setattr__(self, "last_confirmed_at",
                           _aware(self.last_confirmed_at, "pending.last_confirmed_at"))


@dataclass(frozen=True)
class RetrievalEvidence:
    """A recall hit selected for this prompt, with its score and rank (s12)."""

    memory_id: str
    source_pointer: str
    score: float
    rank: int
    captured_at: datetime
    conflict_key: str | None = None

    def __post_init__(self) -> None:
        require_text(self.memory_id, "evidence.memory_id", max_chars=200)
        _pointer(self.source_pointer, "evidence.source_pointer")
        if (isinstance(self.score, bool) or not isinstance(self.score, (int, float))
                or not math.isfinite(self.score)):
            raise InvalidInputError("evidence.score",
                                    f"must be a finite number, got {self.score!r}")
        _positive_int(self.rank, "evidence.rank")
        object.__setattr__(self, "captured_at", _aware(self.captured_at, "evidence.captured_at"))
        if self.conflict_key is not None:
            require_text(self.conflict_key, "evidence.conflict_key", max_chars=200)


@dataclass(frozen=True)
class DurableContextState:
    """Everything that must survive compaction, each item with a source pointer."""

    facts: tuple[DurableFact, ...] = ()
    pending_items: tuple[PendingItem, ...] = ()
    retrieval_evidence: tuple[RetrievalEvidence, ...] = ()

    def __post_init__(self) -> None:
        for name, kind, id_of in (("facts", DurableFact, lambda x: x.fact_id),
                                  ("pending_items", PendingItem, lambda x: x.item_id),
                                  ("retrieval_evidence", RetrievalEvidence,
                                   lambda x: x.memory_id)):
            items = tuple(getattr(self, name))
            for item in items:
                if not isinstance(item, kind):
                    raise InvalidInputError(name, f"holds a {type(item).__name__}, "
                                                  f"not a {kind.__name__}")
            ids = [id_of(item) for item in items]
            duplicates = sorted({i for i in ids if ids.count(i) > 1})
            if duplicates:
                raise InvalidInputError(name, f"ids must be unique, {duplicates[0]!r} repeats")
            object.__setattr__(self, name, items)

    def pointers(self) -> tuple[str, ...]:
        """Every distinct source pointer, in render order."""
        seen: dict[str, None] = {}
        for item in (*self.facts, *self.pending_items, *self.retrieval_evidence):
            seen.setdefault(item.source_pointer, None)
        return tuple(seen)
