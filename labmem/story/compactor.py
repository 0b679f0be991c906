"""The compactor: keep the scratchpad small without losing what the story still needs.

Runs when the pad holds more than ``max_items`` items, in four steps, each reported:

1. per key keep only the latest ``outdated`` item (older history is noise);
2. remove closed loops — the loop's items and its closure (a paid-off promise is done);
3. fold timeline events older than ``timeline_window`` chapters into one summary
   ``story_facts`` item per chapter, which lists every folded event in its payload.
   Every event is folded, a lone one too: the original skipped single-event
   chapters and so dropped them silently;
4. if still over, trim ``outdated`` then ``tentative`` items (uncertain or inferred claims,
   see :data:`~labmem.story.scratchpad.UNCERTAIN`), oldest chapter first.
   ``active`` and ``contradicted`` items are never trimmed: one is the story's current
   truth, the other an open question a human must settle.

``max_items`` is therefore a **soft** limit: the compactor removes what it may and stops
there, so a pad whose current truth and open contradictions alone exceed ``max_items``
stays above it (``CompactionReport.after`` says by how much) rather than forget either.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

from labmem.story.scratchpad import (
    ACTIVE,
    MAX_VALUE_CHARS,
    OUTDATED,
    TENTATIVE,
    MemoryItem,
    Scratchpad,
)

DEFAULT_MAX_ITEMS = 60
DEFAULT_TIMELINE_WINDOW = 4
FOLDED_SUBJECT = "timeline of chapter {chapter}"


@dataclass(frozen=True)
class CompactionReport:
    """Before/after sizes and every item that left, with the step that removed it."""

    before: int
    after: int
    removed: tuple[tuple[str, str], ...]   # (item id, reason)
    folded: tuple[tuple[str, tuple[str, ...]], ...]  # (summary id, folded event ids)

    def reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, reason in self.removed:
            counts[reason] = counts.get(reason, 0) + 1
        return dict(sorted(counts.items()))


def compact(pad: Scratchpad, *, current_chapter: int, max_items: int = DEFAULT_MAX_ITEMS,
            timeline_window: int = DEFAULT_TIMELINE_WINDOW) -> CompactionReport:
    """Compact ``pad`` in place and say what happened."""
    before = len(pad.items)
    removed: list[tuple[str, str]] = []

    # 1. only the latest outdated item per key survives
    latest: dict[tuple[str, ...], MemoryItem] = {}
    for item in pad.items:
        if item.status == OUTDATED:
            kept = latest.get(item.key)
            if kept is None or _freshness(item) > _freshness(kept):
                latest[item.key] = item
    survivors = []
    for item in pad.items:
        if item.status == OUTDATED and latest[item.key] is not item:
            removed.append((item.id, "older outdated"))
        else:
            survivors.append(item)

    # 2. closed loops leave with their whole history
    closed_keys = {item.key for item in survivors if item.status == ACTIVE and item.is_closed}
    kept_items = []
    for item in survivors:
        if item.key in closed_keys:
            removed.append((item.id, "closed loop"))
        else:
            kept_items.append(item)

    # 3. old timeline events fold into per-chapter summaries — every one of them
    horizon = current_chapter - timeline_window
    by_chapter: dict[int, list[MemoryItem]] = {}
    rest = []
    for item in kept_items:
        if item.category == "timeline" and item.source_chapter < horizon:
            by_chapter.setdefault(item.source_chapter, []).append(item)
        else:
            rest.append(item)
    folded = []
    for chapter in sorted(by_chapter):
        events = by_chapter[chapter]
        summary, rest = _fold(pad, rest, chapter, events)
        folded.append((summary.id, tuple(e.id for e in events)))
        removed.extend((e.id, "folded into " + summary.id) for e in events)

    # 4. still too many: trim outdated, then tentative, oldest first (a partial selection)
    excess = len(rest) - max_items
    if excess > 0:
        rank = {OUTDATED: 0, TENTATIVE: 1}
        trimmable = [item for item in rest if item.status in rank]
        cut = heapq.nsmallest(excess, trimmable,
                              key=lambda i: (rank[i.status], _freshness(i), i.id))
        cut_ids = {item.id for item in cut}
        removed.extend((item.id, f"trimmed ({item.status})") for item in cut)
        rest = [item for item in rest if item.id not in cut_ids]

    pad.items = rest
    return CompactionReport(before, len(rest), tuple(removed), tuple(folded))


def _freshness(item: MemoryItem) -> tuple[int, object, str]:
    return (item.source_chapter, item.updated_at, item.id)


def _summary_text(events: list[str]) -> str:
    """The readable value of a folded summary; the payload keeps every event in full."""
    text = "; ".join(events)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def _fold(pad: Scratchpad, rest: list[MemoryItem], chapter: int,
          events: list[MemoryItem]) -> tuple[MemoryItem, list[MemoryItem]]:
    """Merge ``events`` into chapter ``chapter``'s summary fact (created if missing)."""
    subject = FOLDED_SUBJECT.format(chapter=chapter)
    existing = next((i for i in rest if i.category == "story_facts"
                     and i.subject == subject and i.field == "summary"), None)
    old_events = list(existing.payload.get("events", [])) if existing else []
    old_ids = list(existing.payload.get("folded_ids", [])) if existing else []
    new_events = old_events + [e.value for e in events]
    payload = {"events": new_events, "folded_ids": old_ids + [e.id for e in events]}
    evidence = sorted({ev for e in events for ev in e.evidence}
                      | set(existing.evidence if existing else ()))
    # the summary is known from the chapter that reported its last event on
    reported = max([e.reported_chapter for e in events]
                   + ([existing.reported_chapter] if existing else []))
    if existing is not None:
        summary = replace(existing, value=_summary_text(new_events), payload=payload,
                          evidence=tuple(evidence), updated_at=pad.clock.now(),
                          reported_chapter=reported)
        return summary, [summary if i is existing else i for i in rest]
    summary = MemoryItem(id=f"mem-{pad.next_id:04d}", layer="semantic", category="story_facts",
                         subject=subject, field="summary", value=_summary_text(new_events),
                         payload=payload, status=ACTIVE, source_chapter=chapter,
                         evidence=tuple(evidence), updated_at=pad.clock.now(),
                         reported_chapter=reported)
    pad.next_id += 1
    return summary, [*rest, summary]
