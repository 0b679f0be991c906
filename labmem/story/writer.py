"""MemoryWriter: a chapter's structured result becomes scratchpad items.

A chapter result is the JSON the writing pipeline produces after a chapter is
committed. Each part maps to one category::

    state_changes[]       {entity, field, new[, source_chapter]}  → character_state
    entities_new[]        {name, type, description}               → story_facts
    relationships_new[]   {from, to, type}                        → relationships
    chapter_meta.hook     "…"                                     → reader_promises
    memory_facts.timeline_events[]  {event}                       → timeline
    memory_facts.world_rules[]      {subject, field, value}       → world_rules
    memory_facts.open_loops[]       {subject, value}              → open_loops
    memory_facts.reader_promises[]  {subject, value}              → reader_promises
    memory_facts.closed_loops[]     {subject, resolution}         closes an open loop

Any entry may add ``"certainty": "uncertain"`` or ``"inferred"`` (default ``"confirmed"``):
the claim is stored ``tentative`` and the pack marks it so.

``source_chapter`` on a state change lets a revised or backfilled result say "this was
already true in chapter 4"; the scratchpad then files it by story order, and every item
remembers the chapter that reported it (``reported_chapter``). Closing a loop
writes a newer item for the loop's key marked ``closed`` — so it stops being open, and
the compactor can remove it (the original never closed loops at all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock
from labmem.core.errors import validated_as
from labmem.core.storage import LockFactory, file_lock
from labmem.core.validation import require_json, require_text
from labmem.story.compactor import (
    DEFAULT_MAX_ITEMS,
    DEFAULT_TIMELINE_WINDOW,
    CompactionReport,
    compact,
)
from labmem.story.errors import StoryValidationError
from labmem.story.project import require_chapter
from labmem.story.scratchpad import (
    CERTAINTIES,
    CONFLICT,
    MAX_NAME_CHARS,
    MAX_VALUE_CHARS,
    Scratchpad,
    UpsertOutcome,
    load_scratchpad,
)


@dataclass(frozen=True)
class WriteReport:
    """What one chapter did to memory: every upsert, the warnings, the compaction (if any)."""

    chapter: int
    outcomes: tuple[UpsertOutcome, ...]
    warnings: tuple[str, ...]
    compaction: CompactionReport | None

    def actions(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            counts[outcome.action] = counts.get(outcome.action, 0) + 1
        return dict(sorted(counts.items()))


def _entries(data: Mapping[str, Any], name: str, where: str) -> list[Mapping[str, Any]]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise StoryValidationError(f"{where}{name}", "must be a list of objects")
    return value


def _text(entry: Mapping[str, Any], name: str, where: str,
          max_chars: int = MAX_VALUE_CHARS) -> str:
    """``entry[name]`` as non-blank, storable text of at most ``max_chars``; a refusal names
    the caller's path (``result.state_changes[0].new``), not the item field it becomes."""
    value = entry.get(name)
    if not isinstance(value, str) or not value.strip():
        raise StoryValidationError(f"{where}.{name}", f"must be a non-blank string, got {value!r}",
                                   "fill it in or drop the entry")
    return validated_as(StoryValidationError, require_text, value, f"{where}.{name}",
                        max_chars=max_chars)


def _name(entry: Mapping[str, Any], name: str, where: str) -> str:
    """A subject, field or other name part of an item's key (at most 200 characters)."""
    return _text(entry, name, where, MAX_NAME_CHARS)


def chapter_claims(result: Mapping[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """Validate a chapter result and list its claims as upsert keyword arguments.

    Everything is validated before anything is written, so a bad result changes nothing.
    """
    if not isinstance(result, Mapping):
        raise StoryValidationError("result", f"must be a JSON object, got {type(result).__name__}")
    # the whole result is JSON that can be stored (the index and state.json keep parts the
    # claims below do not read): bounded nesting, no lone surrogate, no NaN
    validated_as(StoryValidationError, require_json, result, "result")
    chapter = require_chapter(result.get("chapter"), "result.chapter")
    if result.get("protagonist") is not None:
        _name(result, "protagonist", "result")
    evidence = (f"chapter:{chapter}",)
    claims: list[dict[str, Any]] = []

    def claim(entry: Mapping[str, Any], at: str, category: str, subject: str, field: str,
              value: str, where: str, source: Any = None,
              payload: Mapping[str, Any] | None = None) -> None:
        """One claim of the entry at path ``at``; ``where`` names its chapter field."""
        source_chapter = chapter if source is None else require_chapter(source, where)
        if source_chapter > chapter:
            raise StoryValidationError(where, f"is chapter {source_chapter}, after the "
                                              f"committing chapter {chapter}",
                                       "a result can only report what was true by its chapter")
        payload = {**(payload or {}), **_certainty(entry, at)}
        claims.append({"category": category, "subject": subject, "field": field,
                       "value": value, "source_chapter": source_chapter,
                       "reported_chapter": chapter, "evidence": evidence, "payload": payload})

    for i, e in enumerate(_entries(result, "state_changes", "result.")):
        w = f"result.state_changes[{i}]"
        claim(e, w, "character_state", _name(e, "entity", w), _name(e, "field", w),
              _text(e, "new", w), f"{w}.source_chapter", e.get("source_chapter"))
    for i, e in enumerate(_entries(result, "entities_new", "result.")):
        w = f"result.entities_new[{i}]"
        kind = _name(e, "type", w) if e.get("type") is not None else "unknown"
        claim(e, w, "story_facts", _name(e, "name", w), "introduced",
              _text(e, "description", w), w, payload={"type": kind})
    for i, e in enumerate(_entries(result, "relationships_new", "result.")):
        w = f"result.relationships_new[{i}]"
        claim(e, w, "relationships", _name(e, "from", w), _name(e, "to", w),
              _text(e, "type", w), w)
    meta = result.get("chapter_meta", {})
    if not isinstance(meta, Mapping):
        raise StoryValidationError("result.chapter_meta", "must be an object")
    if meta.get("hook") is not None:
        hook = _text(meta, "hook", "result.chapter_meta")
        claim(meta, "result.chapter_meta", "reader_promises", f"hook of chapter {chapter}",
              "", hook, "result.chapter_meta")
    facts = result.get("memory_facts", {})
    if not isinstance(facts, Mapping):
        raise StoryValidationError("result.memory_facts", "must be an object")
    where = "result.memory_facts."
    for i, e in enumerate(_entries(facts, "timeline_events", where)):
        w = f"{where}timeline_events[{i}]"
        claim(e, w, "timeline", f"chapter {chapter}", f"event {i + 1}", _text(e, "event", w), w)
    for i, e in enumerate(_entries(facts, "world_rules", where)):
        w = f"{where}world_rules[{i}]"
        claim(e, w, "world_rules", _name(e, "subject", w), _name(e, "field", w),
              _text(e, "value", w), w)
    for i, e in enumerate(_entries(facts, "open_loops", where)):
        w = f"{where}open_loops[{i}]"
        claim(e, w, "open_loops", _name(e, "subject", w), "", _text(e, "value", w), w)
    for i, e in enumerate(_entries(facts, "reader_promises", where)):
        w = f"{where}reader_promises[{i}]"
        claim(e, w, "reader_promises", _name(e, "subject", w), "", _text(e, "value", w), w)
    for i, e in enumerate(_entries(facts, "closed_loops", where)):
        w = f"{where}closed_loops[{i}]"
        claim(e, w, "open_loops", _name(e, "subject", w), "", _text(e, "resolution", w), w,
              payload={"closed": True, "closed_in": chapter})
    return chapter, claims


def _certainty(entry: Mapping[str, Any], at: str) -> dict[str, str]:
    """``{"certainty": …}`` for an uncertain or inferred entry, ``{}`` for a confirmed one."""
    certainty = entry.get("certainty", "confirmed")
    if certainty not in CERTAINTIES:
        raise StoryValidationError(f"{at}.certainty", f"must be one of "
                                   f"{', '.join(CERTAINTIES)}, got {certainty!r}")
    return {} if certainty == "confirmed" else {"certainty": certainty}


def apply_claims(pad: Scratchpad, claims: list[dict[str, Any]]) -> list[UpsertOutcome]:
    return [pad.upsert(**claim) for claim in claims]


class MemoryWriter:
    """Writes chapter results into one scratchpad file.

    Load, upsert, compact and save happen inside one cross-process lock: without it two
    writers would each load the same old pad and the second save would erase the first.
    """

    def __init__(self, scratchpad_path: str | Path, *, clock: Clock | None = None,
                 max_items: int = DEFAULT_MAX_ITEMS,
                 timeline_window: int = DEFAULT_TIMELINE_WINDOW,
                 lock_factory: LockFactory = file_lock) -> None:
        self.path = Path(scratchpad_path)
        self.lock_factory = lock_factory  # swappable only so a test can show the race
        self.clock = clock
        self.max_items = max_items
        self.timeline_window = timeline_window

    def update_from_chapter_result(self, result: Mapping[str, Any]) -> WriteReport:
        chapter, claims = chapter_claims(result)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock_factory(self.path):
            pad = load_scratchpad(self.path, clock=self.clock)
            outcomes = apply_claims(pad, claims)
            report = None
            if len(pad.items) > self.max_items:
                report = compact(pad, current_chapter=chapter, max_items=self.max_items,
                                 timeline_window=self.timeline_window)
            pad.save(self.path)
        warnings = tuple(conflict_warning(o) for o in outcomes if o.action == CONFLICT)
        return WriteReport(chapter, tuple(outcomes), warnings, report)


def conflict_warning(outcome: UpsertOutcome) -> str:
    item = outcome.item
    rivals = ", ".join(repr(d.value) for d in outcome.demoted)
    name = f"{item.subject}.{item.field}" if item.field else item.subject
    return (f"contradiction in {item.category} {name} at chapter {item.source_chapter}: "
            f"{item.value!r} vs {rivals}")
