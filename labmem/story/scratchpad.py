"""The semantic layer: a scratchpad of memory items, deduplicated by key.

``memory_scratchpad.json`` is the long-term memory's source of truth. Items are bucketed
by category and each category has a *dedup key*: two items with the same key talk about
the same thing, so only one of them can be current.

The rules of :meth:`Scratchpad.upsert` (decided by the pure :func:`claim_action`), and why:

* the same claim again (a retried commit) changes nothing;
* a newer chapter's value makes the current one ``outdated`` — kept for audit, not deleted;
* a value from an **older** chapter that arrives late (a revised chapter, a backfill)
  is stored as ``outdated`` and never demotes the newer active value — the original
  compared arrival order, not story order, and so let stale facts win;
* two different values for the same key *and* the same chapter cannot both be true:
  both become ``contradicted`` and surface as a warning until a later chapter settles it;
* an *uncertain or inferred* claim (``payload.certainty``, see :data:`UNCERTAIN`) is stored
  ``tentative``: it never demotes a confirmed value, only an older tentative one, and the
  next confirmed claim of its chapter or later settles it (it becomes ``outdated``).

Every item also records ``reported_chapter``: the chapter whose result reported it (a late
fact about chapter 3 reported by chapter 9 has ``source_chapter`` 3, ``reported_chapter``
9). The pack for a chapter never sees what a later result reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import validated_as
from labmem.core.storage import read_snapshot, write_snapshot
from labmem.core.validation import require_json, require_text
from labmem.story.errors import StoryCorruptionError, StoryValidationError

CATEGORIES = ("character_state", "story_facts", "world_rules", "timeline",
              "open_loops", "reader_promises", "relationships")
STATUSES = ("active", "outdated", "contradicted", "tentative")
ACTIVE, OUTDATED, CONTRADICTED, TENTATIVE = STATUSES
SCRATCHPAD_FORMAT = "labmem.story.scratchpad/v1"
MAX_VALUE_CHARS = 2_000
MAX_NAME_CHARS = 200  # a subject or field: part of an item's dedup key

#: Which fields make two items "the same thing": a place or a rule per subject and field,
#: a loop or a promise per subject.
KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "character_state": ("subject", "field"),
    "relationships": ("subject", "field"),
    "world_rules": ("subject", "field"),
    "story_facts": ("subject", "field"),
    "timeline": ("subject", "field"),
    "open_loops": ("subject",),
    "reader_promises": ("subject",),
}

UPSERT_ACTIONS = ("created", "superseded", "unchanged", "late", "contradicted")
CREATED, SUPERSEDED, UNCHANGED, LATE, CONFLICT = UPSERT_ACTIONS
#: What :meth:`Scratchpad.upsert` reports for an uncertain claim it stored as ``tentative``.
TENTATIVE_ACTION = "tentative"
#: ``payload["certainty"]`` values that make a claim tentative ("confirmed" is the default).
UNCERTAIN = ("uncertain", "inferred")
CERTAINTIES = ("confirmed", *UNCERTAIN)


@dataclass(frozen=True)
class MemoryItem:
    """One remembered thing, with the chapter that said it and the evidence for it."""

    id: str
    layer: str
    category: str
    subject: str
    field: str
    value: str
    payload: Mapping[str, Any]
    status: str
    source_chapter: int
    evidence: tuple[str, ...]
    updated_at: datetime
    reported_chapter: int | None = None   # None: the item's own source_chapter

    def __post_init__(self) -> None:
        check = StoryValidationError
        if self.category not in CATEGORIES:
            raise check("category", f"must be one of {', '.join(CATEGORIES)}, "
                                    f"got {self.category!r}")
        if self.status not in STATUSES:
            raise check("status", f"must be one of {', '.join(STATUSES)}, got {self.status!r}")
        validated_as(check, require_text, self.subject, "subject", max_chars=MAX_NAME_CHARS)
        validated_as(check, require_text, self.field, "field", max_chars=MAX_NAME_CHARS,
                     allow_blank=True)
        validated_as(check, require_text, self.value, "value", max_chars=MAX_VALUE_CHARS)
        if not isinstance(self.source_chapter, int) or isinstance(self.source_chapter, bool) \
                or self.source_chapter < 1:
            raise check("source_chapter", f"must be a chapter number ≥ 1, "
                                          f"got {self.source_chapter!r}")
        if self.reported_chapter is None:
            object.__setattr__(self, "reported_chapter", self.source_chapter)
        if not isinstance(self.reported_chapter, int) or isinstance(self.reported_chapter, bool) \
                or self.reported_chapter < self.source_chapter:
            raise check("reported_chapter", f"must be a chapter number ≥ source_chapter "
                                            f"{self.source_chapter}, got {self.reported_chapter!r}")
        if not isinstance(self.payload, Mapping):
            raise check("payload", "must be a mapping")
        validated_as(check, require_json, dict(self.payload), "payload")
        object.__setattr__(self, "payload", dict(self.payload))
        object.__setattr__(self, "evidence", tuple(self.evidence))
        object.__setattr__(self, "updated_at",
                           validated_as(check, parse_timestamp, self.updated_at,
                                        field="updated_at"))

    @property
    def key(self) -> tuple[str, ...]:
        return dedup_key(self.category, self.subject, self.field)

    @property
    def is_closed(self) -> bool:
        """An open loop that a later chapter paid off (it stays in the pad until compaction)."""
        return self.category == "open_loops" and bool(self.payload.get("closed"))

    @property
    def is_uncertain(self) -> bool:
        """The claim was reported as uncertain or inferred (it is, or was, ``tentative``)."""
        return self.payload.get("certainty") in UNCERTAIN

    @property
    def name(self) -> str:
        """``subject.field`` (or the subject alone)."""
        return f"{self.subject}.{self.field}" if self.field else self.subject

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "layer": self.layer, "category": self.category,
                "subject": self.subject, "field": self.field, "value": self.value,
                "payload": dict(self.payload), "status": self.status,
                "source_chapter": self.source_chapter, "evidence": list(self.evidence),
                "updated_at": format_timestamp(self.updated_at),
                "reported_chapter": self.reported_chapter}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryItem:
        # reported_chapter is optional: a pad written before it existed reads as "reported
        # by its own chapter"
        return cls(**{name: data[name] for name in _ITEM_FIELDS},
                   reported_chapter=data.get("reported_chapter"))


_ITEM_FIELDS = ("id", "layer", "category", "subject", "field", "value", "payload", "status",
                "source_chapter", "evidence", "updated_at")


def dedup_key(category: str, subject: str, field_name: str) -> tuple[str, ...]:
    """The key that decides which items compete: ``(category, subject[, field])``."""
    if category not in KEY_FIELDS:
        raise StoryValidationError("category", f"must be one of {', '.join(CATEGORIES)}, "
                                               f"got {category!r}")
    parts = {"subject": subject, "field": field_name}
    return (category, *(parts[name] for name in KEY_FIELDS[category]))


def _live(items: Iterable[MemoryItem]) -> list[MemoryItem]:
    """The items that still compete for their key: active, or contradicted and unsettled."""
    return [item for item in items if item.status in (ACTIVE, CONTRADICTED)]


def _restates(item: MemoryItem, claim: MemoryItem) -> bool:
    """``item`` already says what ``claim`` says: same chapter, value and payload.

    A late claim is stored with an extra ``late_arrival`` mark; that mark does not make
    the retried claim a different one.
    """
    return (item.source_chapter == claim.source_chapter and item.value == claim.value
            and item.payload in (claim.payload, {**claim.payload, "late_arrival": True}))


def claim_action(stored: Sequence[MemoryItem], claim: MemoryItem) -> str:
    """What upserting ``claim`` does, given the items already ``stored`` under its dedup key.

    One of :data:`UPSERT_ACTIONS`, decided in this order:

    1. ``unchanged`` — a stored item, whatever its status, already says the same thing
       (:func:`_restates`): a retried commit must not add a copy;
    2. ``late`` — a live rival (active or contradicted) comes from a newer chapter: story
       order decides, so the claim is filed as history and demotes nothing;
    3. ``contradicted`` — a live rival comes from the same chapter: two values for one
       chapter cannot both be true, so neither wins;
    4. ``superseded`` — every live rival is older: they become ``outdated``;
    5. ``created`` — nothing live competes.
    """
    if any(_restates(item, claim) for item in stored):
        return UNCHANGED
    rivals = _live(stored)
    if not rivals:
        return CREATED
    newest = max(item.source_chapter for item in rivals)
    if claim.source_chapter < newest:
        return LATE
    if claim.source_chapter == newest:
        return CONFLICT
    return SUPERSEDED


@dataclass(frozen=True)
class UpsertOutcome:
    """What one upsert did: the item as stored and the items whose status it changed."""

    action: str
    item: MemoryItem
    demoted: tuple[MemoryItem, ...] = ()


@dataclass
class Scratchpad:
    """The items in memory; :func:`load_scratchpad` / :meth:`save` move them to disk."""

    items: list[MemoryItem] = field(default_factory=list)
    next_id: int = 1
    clock: Clock | None = None

    def __post_init__(self) -> None:
        self.clock = resolve_clock(self.clock)

    # ---- reads -------------------------------------------------------------------
    def by_key(self, key: tuple[str, ...]) -> list[MemoryItem]:
        return [item for item in self.items if item.key == key]

    def active(self, category: str | None = None) -> list[MemoryItem]:
        return [item for item in self.items if item.status == ACTIVE
                and (category is None or item.category == category)]

    def contradictions(self) -> list[MemoryItem]:
        return [item for item in self.items if item.status == CONTRADICTED]

    def tentative(self) -> list[MemoryItem]:
        return [item for item in self.items if item.status == TENTATIVE]

    def open_loops(self) -> list[MemoryItem]:
        """Active loops that no chapter has closed yet."""
        return [item for item in self.active("open_loops") if not item.is_closed]

    def counts(self) -> dict[str, dict[str, int]]:
        """``{category: {status: n}}`` over every category and status (zeros included)."""
        table = {c: dict.fromkeys(STATUSES, 0) for c in CATEGORIES}
        for item in self.items:
            table[item.category][item.status] += 1
        return table

    # ---- the one write rule --------------------------------------------------------
    def upsert(self, *, category: str, subject: str, field: str = "", value: str,
               source_chapter: int, evidence: Iterable[str] = (), payload: Mapping[str, Any]
               | None = None, layer: str = "semantic",
               reported_chapter: int | None = None) -> UpsertOutcome:
        """Add a claim and settle it against the claims already stored for its key.

        ``payload["certainty"]`` in :data:`UNCERTAIN` makes the claim tentative;
        ``reported_chapter`` (default: ``source_chapter``) is the chapter whose result said it.
        """
        candidate = MemoryItem(
            id=f"mem-{self.next_id:04d}", layer=layer, category=category, subject=subject,
            field=field, value=value, payload=payload or {}, status=ACTIVE,
            source_chapter=source_chapter, evidence=tuple(evidence),
            updated_at=self.clock.now(), reported_chapter=reported_chapter)
        stored = self.by_key(candidate.key)
        action = claim_action(stored, candidate)
        if action == UNCHANGED:
            return UpsertOutcome(UNCHANGED, next(i for i in stored if _restates(i, candidate)))
        self.next_id += 1
        rivals = _live(stored)
        if action == LATE:
            # Limit 1 of the original, fixed: story order, not arrival order, decides.
            late = replace(candidate, status=OUTDATED, payload={**candidate.payload,
                                                                "late_arrival": True})
            self.items.append(late)
            return UpsertOutcome(LATE, late)
        # a claim of this chapter or later settles the older tentative claims; an uncertain
        # claim settles nothing confirmed, so it demotes only those
        settled = tuple(replace(item, status=OUTDATED) for item in stored
                        if item.status == TENTATIVE and item.source_chapter <= source_chapter)
        if candidate.is_uncertain:
            self._replace_all(settled)
            tentative = replace(candidate, status=TENTATIVE)
            self.items.append(tentative)
            return UpsertOutcome(TENTATIVE_ACTION, tentative, settled)
        if action == CONFLICT:
            # Same key, same chapter, different value: neither claim can win.
            demoted = tuple(replace(item, status=CONTRADICTED) for item in rivals
                            if item.source_chapter == source_chapter)
            self._replace_all(demoted + settled)
            contradicted = replace(candidate, status=CONTRADICTED)
            self.items.append(contradicted)
            return UpsertOutcome(CONFLICT, contradicted, demoted + settled)
        demoted = tuple(replace(item, status=OUTDATED) for item in rivals) + settled
        self._replace_all(demoted)
        self.items.append(candidate)
        return UpsertOutcome(action, candidate, demoted)

    def _replace_all(self, changed: Iterable[MemoryItem]) -> None:
        by_id = {item.id: item for item in changed}
        self.items = [by_id.get(item.id, item) for item in self.items]

    # ---- disk ----------------------------------------------------------------------
    def to_document(self) -> dict[str, Any]:
        return {"format": SCRATCHPAD_FORMAT, "next_id": self.next_id,
                "items": [item.to_dict() for item in self.items]}

    def save(self, path: str | Path) -> None:
        """Replace the snapshot atomically: a failed save leaves the old file intact."""
        write_snapshot(path, self.to_document())


def load_scratchpad(path: str | Path, *, clock: Clock | None = None) -> Scratchpad:
    """The scratchpad at ``path`` (empty when the file does not exist yet)."""
    path = Path(path)
    document = read_snapshot(path, corruption_error=StoryCorruptionError)
    if document is None:
        return Scratchpad(clock=clock)
    if not isinstance(document, dict) or document.get("format") != SCRATCHPAD_FORMAT:
        raise StoryCorruptionError(path.name, None, f"is not a {SCRATCHPAD_FORMAT} document")
    try:
        items = [MemoryItem.from_dict(raw) for raw in document["items"]]
        next_id = int(document["next_id"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StoryCorruptionError(path.name, None, f"holds an invalid item ({exc})") from None
    return Scratchpad(items=items, next_id=next_id, clock=clock)
