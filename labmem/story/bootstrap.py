"""Bootstrap: rebuild a scratchpad from the evidence stores, and say what differs.

An older project, or one whose scratchpad was lost, still has ``index.db`` and
``summaries/``. Replaying them through the same :meth:`Scratchpad.upsert` rules
reproduces three categories exactly — character state (with its history, late facts
and contradictions), relationships, and open loops from the foreshadowing blocks.
The other categories (world rules, timeline, reader promises, story facts) live only
in the scratchpad; bootstrap cannot invent them and lists them in the diff instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from labmem.core.clock import Clock
from labmem.story.evidence import read_summary, summary_chapters
from labmem.story.index import ChapterIndex
from labmem.story.project import StoryProject
from labmem.story.scratchpad import ACTIVE, Scratchpad, load_scratchpad

REPRODUCED = ("character_state", "relationships", "open_loops")


@dataclass(frozen=True)
class BootstrapDiff:
    """How the rebuilt pad compares with the stored one, key by key (active items only)."""

    matching: tuple[str, ...]
    differing: tuple[tuple[str, str, str], ...]   # (key, stored value, rebuilt value)
    only_stored: tuple[str, ...]                  # in the pad, not rebuildable (or lost)
    only_rebuilt: tuple[str, ...]                 # evidence the pad never absorbed

    def to_dict(self) -> dict[str, object]:
        return {"matching": list(self.matching), "differing": [list(d) for d in self.differing],
                "only_stored": list(self.only_stored), "only_rebuilt": list(self.only_rebuilt)}


def rebuild_scratchpad(project: StoryProject, *, clock: Clock | None = None) -> Scratchpad:
    """A fresh scratchpad replayed from ``index.db`` and the summaries' foreshadowing."""
    pad = Scratchpad(clock=clock)
    index = ChapterIndex(project.index_path)
    events: list[tuple[int, int, dict]] = []  # (chapter, order, upsert kwargs)
    for order, row in enumerate(index.state_changes()):
        events.append((row.chapter, order, {
            "category": "character_state", "subject": row.entity, "field": row.field,
            "value": row.new, "source_chapter": row.source_chapter,
            "evidence": (f"index:chapter:{row.chapter}",)}))
    for order, rel in enumerate(index.relationships()):
        events.append((rel.chapter, 10**6 + order, {
            "category": "relationships", "subject": rel.source, "field": rel.target,
            "value": rel.kind, "source_chapter": rel.chapter,
            "evidence": (f"index:chapter:{rel.chapter}",)}))
    for chapter in summary_chapters(project):
        for order, hint in enumerate(read_summary(project, chapter).foreshadowing):
            payload = {"closed": True, "closed_in": chapter} if hint.state == "closed" else {}
            events.append((chapter, 2 * 10**6 + order, {
                "category": "open_loops", "subject": hint.subject, "field": "",
                "value": hint.text or hint.subject, "source_chapter": chapter,
                "payload": payload, "evidence": (f"summary:chapter:{chapter}",)}))
    for _, _, kwargs in sorted(events, key=lambda e: (e[0], e[1])):
        pad.upsert(**kwargs)
    return pad


def _label(key: tuple[str, ...]) -> str:
    return "/".join(part for part in key if part)


def diff_scratchpads(stored: Scratchpad, rebuilt: Scratchpad) -> BootstrapDiff:
    def current(pad: Scratchpad) -> dict[tuple[str, ...], str]:
        # a closed loop is no longer remembered as current, on either side
        return {i.key: i.value for i in pad.items if i.status == ACTIVE and not i.is_closed}

    old, new = current(stored), current(rebuilt)
    matching = sorted(_label(k) for k in old.keys() & new.keys() if old[k] == new[k])
    differing = sorted((_label(k), old[k], new[k]) for k in old.keys() & new.keys()
                       if old[k] != new[k])
    return BootstrapDiff(tuple(matching), tuple(differing),
                         tuple(sorted(_label(k) for k in old.keys() - new.keys())),
                         tuple(sorted(_label(k) for k in new.keys() - old.keys())))


def bootstrap(project: StoryProject, *, clock: Clock | None = None,
              write: bool = False) -> tuple[Scratchpad, BootstrapDiff]:
    """Rebuild, diff against the stored pad; with ``write=True`` adopt the rebuilt pad
    for the reproducible categories and keep the stored items of the others."""
    stored = load_scratchpad(project.scratchpad_path, clock=clock)
    rebuilt = rebuild_scratchpad(project, clock=clock)
    diff = diff_scratchpads(stored, rebuilt)
    if write:
        kept = [i for i in stored.items if i.category not in REPRODUCED]
        merged = Scratchpad(clock=clock, next_id=max(stored.next_id, 1))
        for item in rebuilt.items:
            merged.items.append(replace(item, id=f"mem-{merged.next_id:04d}"))
            merged.next_id += 1
        merged.items.extend(kept)
        merged.save(project.scratchpad_path)
    return rebuilt, diff
