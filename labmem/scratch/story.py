# Generated from notebooks/case_story_memory.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""Case study from scratch: story memory as a scratchpad, one current value per dedup key.

Every claim a chapter makes is an item; items that talk about the same thing share a dedup
key, and the upsert settles a claim against them by story order, giving each item one of
four statuses. The compactor keeps the pad small without losing a timeline event. The pad
is one JSON snapshot, replaced atomically; a snapshot that cannot be read is never empty.
"""

import json
import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

CATEGORIES = ("character_state", "story_facts", "world_rules", "timeline",
              "open_loops", "reader_promises", "relationships")
KEY_FIELDS = {  # which fields make two items talk about the same thing
    "character_state": ("subject", "field"), "relationships": ("subject", "field"),
    "world_rules": ("subject", "field"), "story_facts": ("subject", "field"),
    "timeline": ("subject", "field"), "open_loops": ("subject",),
    "reader_promises": ("subject",),
}
STATUSES = ("active", "outdated", "contradicted", "tentative")
ACTIVE, OUTDATED, CONTRADICTED, TENTATIVE = STATUSES
UNCERTAIN = ("uncertain", "inferred")  # payload["certainty"] values that make a claim tentative
FORMAT = "labmem.story.scratchpad/v1"


class StoryMemoryError(Exception):
    """Every error of this layer."""


class StoryValidationError(StoryMemoryError, ValueError):
    """A claim was refused before anything changed."""


class StoryCorruptionError(StoryMemoryError):
    """The scratchpad file cannot be trusted; the message names it."""


def refuse(field_name: str, problem: str) -> StoryValidationError:
    return StoryValidationError(f"{field_name}: {problem}")


@dataclass(frozen=True)
class MemoryItem:
    """One remembered claim: what it is about, its value, the chapter it is true of."""

    id: str
    layer: str
    category: str
    subject: str
    field: str
    value: str
    payload: dict[str, Any]
    status: str
    source_chapter: int
    evidence: tuple[str, ...]
    updated_at: str

    @property
    def key(self) -> tuple[str, ...]:
        return dedup_key(self.category, self.subject, self.field)

    @property
    def is_closed(self) -> bool:
        """An open loop a later chapter paid off."""
        return self.category == "open_loops" and bool(self.payload.get("closed"))

    @property
    def is_uncertain(self) -> bool:
        return self.payload.get("certainty") in UNCERTAIN

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "payload": dict(self.payload), "evidence": list(self.evidence)}


def dedup_key(category: str, subject: str, field_name: str) -> tuple[str, ...]:
    """``(category, subject[, field])``: the items under one key compete to be current."""
    parts = {"subject": subject, "field": field_name}
    return (category, *(parts[name] for name in KEY_FIELDS[category]))


def check_claim(category: Any, subject: Any, field_name: Any, value: Any,
                source_chapter: Any, payload: Any) -> None:
    """Refuse a claim that cannot be stored, naming the field, before anything changes."""
    if category not in CATEGORIES:
        raise refuse("category", f"must be one of {', '.join(CATEGORIES)}, got {category!r}")
    for name, text in (("subject", subject), ("value", value)):
        if not isinstance(text, str) or not text.strip():
            raise refuse(name, "must be non-blank text")
    if not isinstance(field_name, str):
        raise refuse("field", "must be text")
    if type(source_chapter) is not int or source_chapter < 1:
        raise refuse("source_chapter", f"must be a chapter number ≥ 1, got {source_chapter!r}")
    if not isinstance(payload, dict):
        raise refuse("payload", "must be a dict")


def live(items: list[MemoryItem]) -> list[MemoryItem]:
    """The items still competing for their key: active, or contradicted and unsettled."""
    return [item for item in items if item.status in (ACTIVE, CONTRADICTED)]


def restates(item: MemoryItem, claim: MemoryItem) -> bool:
    """``item`` already says what ``claim`` says (a stored late claim carries one more mark)."""
    return (item.source_chapter == claim.source_chapter and item.value == claim.value
            and item.payload in (claim.payload, {**claim.payload, "late_arrival": True}))


def claim_action(stored: list[MemoryItem], claim: MemoryItem) -> str:
    """What upserting ``claim`` does, given the items ``stored`` under its key: the rules
    in order — unchanged, created, late, contradicted, superseded."""
    if any(restates(item, claim) for item in stored):
        return "unchanged"
    rivals = live(stored)
    if not rivals:
        return "created"
    newest = max(item.source_chapter for item in rivals)
    if claim.source_chapter < newest:
        return "late"
    if claim.source_chapter == newest:
        return "contradicted"
    return "superseded"


@dataclass(frozen=True)
class UpsertOutcome:
    """What one upsert did: the action, the item as stored, the items it demoted."""

    action: str
    item: MemoryItem
    demoted: tuple[MemoryItem, ...] = ()


def timestamp(clock: Any) -> str:
    now = clock.now() if clock is not None else datetime.now(timezone.utc)
    return now.astimezone(timezone.utc).replace(tzinfo=None).isoformat() + "Z"


@dataclass
class Scratchpad:
    """The items in memory; ``save`` and :func:`load_scratchpad` move them to disk."""

    items: list[MemoryItem] = field(default_factory=list)
    next_id: int = 1
    clock: Any = None

    def by_key(self, key: tuple[str, ...]) -> list[MemoryItem]:
        return [item for item in self.items if item.key == key]

    def active(self, category: str | None = None) -> list[MemoryItem]:
        return [item for item in self.items if item.status == ACTIVE
                and category in (None, item.category)]

    def contradictions(self) -> list[MemoryItem]:
        return [item for item in self.items if item.status == CONTRADICTED]

    def open_loops(self) -> list[MemoryItem]:
        """Active loops no chapter has closed yet."""
        return [item for item in self.active("open_loops") if not item.is_closed]

    def upsert(self, *, category: str, subject: str, field: str = "", value: str,
               source_chapter: int, evidence: tuple[str, ...] = (),
               payload: dict[str, Any] | None = None, layer: str = "semantic") -> UpsertOutcome:
        """Store a claim and settle it against the items of its key (:func:`claim_action`)."""
        payload = {} if payload is None else payload
        check_claim(category, subject, field, value, source_chapter, payload)
        claim = MemoryItem(f"mem-{self.next_id:04d}", layer, category, subject, field, value,
                           dict(payload), ACTIVE, source_chapter, tuple(evidence),
                           timestamp(self.clock))
        stored = self.by_key(claim.key)
        action = claim_action(stored, claim)
        if action == "unchanged":  # a retried commit adds nothing, not even an id
            return UpsertOutcome(action, next(i for i in stored if restates(i, claim)))
        self.next_id += 1
        if action == "late":  # story order decides: history, demoting nothing
            late = replace(claim, status=OUTDATED, payload={**claim.payload,
                                                            "late_arrival": True})
            self.items.append(late)
            return UpsertOutcome(action, late)
        settled = tuple(replace(item, status=OUTDATED) for item in stored
                        if item.status == TENTATIVE and item.source_chapter <= source_chapter)
        if claim.is_uncertain:  # settles older guesses, never a confirmed value
            return self._store(replace(claim, status=TENTATIVE), "tentative", settled)
        rivals = live(stored)
        if action == "contradicted":  # one chapter, two values: neither can win
            demoted = tuple(replace(item, status=CONTRADICTED) for item in rivals
                            if item.source_chapter == source_chapter)
            return self._store(replace(claim, status=CONTRADICTED), action, demoted + settled)
        demoted = tuple(replace(item, status=OUTDATED) for item in rivals)
        return self._store(claim, action, demoted + settled)

    def _store(self, item: MemoryItem, action: str,
               demoted: tuple[MemoryItem, ...]) -> UpsertOutcome:
        """Put the demoted versions in place of their items, then append ``item``."""
        by_id = {old.id: old for old in demoted}
        self.items = [by_id.get(old.id, old) for old in self.items] + [item]
        return UpsertOutcome(action, item, demoted)

    def save(self, path: "str | os.PathLike[str]") -> None:
        save_snapshot(Path(path), {"format": FORMAT, "next_id": self.next_id,
                                   "items": [item.to_dict() for item in self.items]})


def save_snapshot(path: Path, document: dict[str, Any]) -> None:
    """Write a temp file beside ``path``, fsync it, rename it over ``path``, fsync the
    directory: a crash leaves the old snapshot or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    data = json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    os.fsync(dir_fd)
    os.close(dir_fd)


def load_scratchpad(path: "str | os.PathLike[str]", *, clock: Any = None) -> Scratchpad:
    """The pad at ``path``; empty only when there is no file. Anything unreadable is
    corruption, raised with the file's name, and the file is left as it is."""
    path = Path(path)
    if not path.exists():
        return Scratchpad(clock=clock)
    try:
        document = json.loads(path.read_bytes())
        if document.get("format") != FORMAT:
            raise ValueError(f"format is {document.get('format')!r}, expected {FORMAT!r}")
        items = [MemoryItem(**{**raw, "evidence": tuple(raw["evidence"])})
                 for raw in document["items"]]
        return Scratchpad(items, int(document["next_id"]), clock)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoryCorruptionError(f"{path.name}: cannot be read ({exc}); the file was not "
                                   "changed") from None


@dataclass(frozen=True)
class CompactionReport:
    """Sizes before and after, every item that left and why, and what was folded where."""

    before: int
    after: int
    removed: tuple[tuple[str, str], ...]
    folded: tuple[tuple[str, tuple[str, ...]], ...]


def freshness(item: MemoryItem) -> tuple[int, str, str]:
    return (item.source_chapter, item.updated_at, item.id)


def compact(pad: Scratchpad, *, current_chapter: int, max_items: int,
            timeline_window: int) -> CompactionReport:
    """Four steps: only the latest outdated item per key stays; closed loops go with their
    history; timeline events older than the window fold into one summary per chapter;
    then, only while over ``max_items``, outdated and then tentative items go, oldest
    first. Active and contradicted items are never trimmed."""
    before, removed, folded = len(pad.items), [], []
    latest = {}
    for item in pad.items:
        if item.status == OUTDATED and (item.key not in latest
                                        or freshness(item) > freshness(latest[item.key])):
            latest[item.key] = item
    closed = {item.key for item in pad.items if item.status == ACTIVE and item.is_closed}
    kept, old_events = [], {}
    for item in pad.items:
        if item.status == OUTDATED and latest[item.key] is not item:
            removed.append((item.id, "older outdated"))
        elif item.key in closed:
            removed.append((item.id, "closed loop"))
        elif item.category == "timeline" and item.source_chapter < current_chapter \
                - timeline_window:
            old_events.setdefault(item.source_chapter, []).append(item)
        else:
            kept.append(item)
    for chapter, events in sorted(old_events.items()):
        summary = fold_into_summary(pad, kept, chapter, events)
        kept = [i for i in kept if i.id != summary.id] + [summary]
        folded.append((summary.id, tuple(e.id for e in events)))
        removed += [(e.id, f"folded into {summary.id}") for e in events]
    rank = {OUTDATED: 0, TENTATIVE: 1}
    trimmable = sorted((i for i in kept if i.status in rank),
                       key=lambda i: (rank[i.status], freshness(i)))
    cut = {i.id for i in trimmable[:max(len(kept) - max_items, 0)]}
    removed += [(i.id, f"trimmed ({i.status})") for i in kept if i.id in cut]
    pad.items = [i for i in kept if i.id not in cut]
    return CompactionReport(before, len(pad.items), tuple(removed), tuple(folded))


def fold_into_summary(pad: Scratchpad, kept: list[MemoryItem], chapter: int,
                      events: list[MemoryItem]) -> MemoryItem:
    """Chapter ``chapter``'s summary fact with ``events`` added: every event's text in
    its payload, so nothing is lost (made new when the chapter has none yet)."""
    subject = f"timeline of chapter {chapter}"
    old = next((i for i in kept if i.key == ("story_facts", subject, "summary")), None)
    texts = (old.payload["events"] if old else []) + [e.value for e in events]
    ids = (old.payload["folded_ids"] if old else []) + [e.id for e in events]
    evidence = tuple(sorted({ev for e in events for ev in e.evidence}
                            | set(old.evidence if old else ())))
    if old is None:
        pad.next_id += 1
    return MemoryItem(old.id if old else f"mem-{pad.next_id - 1:04d}", "semantic",
                      "story_facts", subject, "summary", "; ".join(texts),
                      {"events": texts, "folded_ids": ids}, ACTIVE, chapter, evidence,
                      timestamp(pad.clock))
