"""Bootstrap: rebuild a scratchpad from the evidence stores, and say what differs.

An older project, or one whose scratchpad was lost, still has ``index.db`` and
``summaries/``. Replaying them through the same :meth:`Scratchpad.upsert` rules
reproduces three categories exactly — character state (with its history, late facts,
contradictions and tentative claims), relationships, and open loops: every thread a
chapter's ``memory_facts`` opened or closed (the index's ``loops`` table) and every
foreshadowing line of the summaries that the index does not already hold for its chapter.
The original read closures from the summaries only, so ``--write`` reopened a thread a
chapter had closed through ``memory_facts.closed_loops``.
The other categories (world rules, timeline, reader promises, story facts) live only
in the scratchpad; bootstrap cannot invent them and lists them in the diff instead.

:attr:`BootstrapDiff.changes` is what ``write=True`` will change in the stored pad, key by
key — computed by the same :func:`view_changes` that compares the pad before and after a
write, so the dry run and the write agree by construction (and a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from labmem.core.clock import Clock
from labmem.story.evidence import read_summary, summary_chapters
from labmem.story.index import ChapterIndex
from labmem.story.project import StoryProject
from labmem.story.scratchpad import (
    ACTIVE,
    CONTRADICTED,
    TENTATIVE,
    MemoryItem,
    Scratchpad,
    load_scratchpad,
)

REPRODUCED = ("character_state", "relationships", "open_loops")
#: How a key reads in :func:`view_changes` when the pad holds nothing current for it.
ABSENT = "(nothing)"


@dataclass(frozen=True)
class BootstrapDiff:
    """How the rebuilt pad compares with the stored one, key by key (active items only)."""

    matching: tuple[str, ...]
    differing: tuple[tuple[str, str, str], ...]   # (key, stored value, rebuilt value)
    only_stored: tuple[str, ...]                  # in the pad, not rebuildable (or lost)
    only_rebuilt: tuple[str, ...]                 # evidence the pad never absorbed
    changes: tuple[tuple[str, str, str], ...] = ()  # (key, now, after --write)

    def to_dict(self) -> dict[str, object]:
        return {"matching": list(self.matching), "differing": [list(d) for d in self.differing],
                "only_stored": list(self.only_stored), "only_rebuilt": list(self.only_rebuilt),
                "changes": [list(c) for c in self.changes]}


def rebuild_scratchpad(project: StoryProject, *, clock: Clock | None = None) -> Scratchpad:
    """A fresh scratchpad replayed from ``index.db`` and the summaries' foreshadowing."""
    pad = Scratchpad(clock=clock)
    index = ChapterIndex(project.index_path)
    events: list[tuple[int, int, dict]] = []  # (chapter, order, upsert kwargs)
    for order, row in enumerate(index.state_changes()):
        events.append((row.chapter, order, {
            "category": "character_state", "subject": row.entity, "field": row.field,
            "value": row.new, "source_chapter": row.source_chapter,
            "reported_chapter": row.chapter, "payload": _certainty(row.certainty),
            "evidence": (f"index:chapter:{row.chapter}",)}))
    for order, rel in enumerate(index.relationships()):
        events.append((rel.chapter, 10**6 + order, {
            "category": "relationships", "subject": rel.source, "field": rel.target,
            "value": rel.kind, "source_chapter": rel.chapter,
            "payload": _certainty(rel.certainty),
            "evidence": (f"index:chapter:{rel.chapter}",)}))
    indexed_loops: set[tuple[int, str]] = set()
    for order, loop in enumerate(index.loops()):
        indexed_loops.add((loop.chapter, loop.subject))
        events.append((loop.chapter, 2 * 10**6 + order, _loop_claim(
            loop.chapter, loop.subject, loop.state, loop.text, f"index:chapter:{loop.chapter}")))
    for chapter in summary_chapters(project):
        for order, hint in enumerate(read_summary(project, chapter).foreshadowing):
            if (chapter, hint.subject) not in indexed_loops:  # the result's own words win
                events.append((chapter, 3 * 10**6 + order, _loop_claim(
                    chapter, hint.subject, hint.state, hint.text or hint.subject,
                    f"summary:chapter:{chapter}")))
    for _, _, kwargs in sorted(events, key=lambda e: (e[0], e[1])):
        pad.upsert(**kwargs)
    return pad


def _loop_claim(chapter: int, subject: str, state: str, text: str, evidence: str) -> dict:
    payload = {"closed": True, "closed_in": chapter} if state == "closed" else {}
    return {"category": "open_loops", "subject": subject, "field": "", "value": text,
            "source_chapter": chapter, "payload": payload, "evidence": (evidence,)}


def _certainty(certainty: str) -> dict[str, str]:
    return {} if certainty == "confirmed" else {"certainty": certainty}


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
                         tuple(sorted(_label(k) for k in new.keys() - old.keys())),
                         view_changes(stored.items, adopt(stored, rebuilt).items))


def _view(items: list[MemoryItem]) -> dict[tuple[str, ...], str]:
    """What the pad holds as current per reproduced key: active, contradicted and tentative
    values (a closed loop is not current, the same as no loop)."""
    claims: dict[tuple[str, ...], list[str]] = {}
    for item in items:
        if item.category in REPRODUCED and item.status in (ACTIVE, CONTRADICTED, TENTATIVE) \
                and not item.is_closed:
            claims.setdefault(item.key, []).append(f"{item.status} {item.value!r}")
    return {key: "; ".join(sorted(values)) for key, values in claims.items()}


def view_changes(before: list[MemoryItem],
                 after: list[MemoryItem]) -> tuple[tuple[str, str, str], ...]:
    """``(key, before, after)`` for every reproduced key whose current claims differ."""
    old, new = _view(before), _view(after)
    return tuple(sorted((_label(key), old.get(key, ABSENT), new.get(key, ABSENT))
                        for key in old.keys() | new.keys() if old.get(key) != new.get(key)))


def adopt(stored: Scratchpad, rebuilt: Scratchpad) -> Scratchpad:
    """The pad ``write=True`` saves: the rebuilt items of the reproduced categories, with
    fresh ids, then the stored items of every other category."""
    merged = Scratchpad(clock=stored.clock, next_id=max(stored.next_id, 1))
    for item in rebuilt.items:
        merged.items.append(replace(item, id=f"mem-{merged.next_id:04d}"))
        merged.next_id += 1
    merged.items.extend(i for i in stored.items if i.category not in REPRODUCED)
    return merged


def bootstrap(project: StoryProject, *, clock: Clock | None = None,
              write: bool = False) -> tuple[Scratchpad, BootstrapDiff]:
    """Rebuild, diff against the stored pad; with ``write=True`` adopt the rebuilt pad
    for the reproducible categories and keep the stored items of the others."""
    stored = load_scratchpad(project.scratchpad_path, clock=clock)
    rebuilt = rebuild_scratchpad(project, clock=clock)
    diff = diff_scratchpads(stored, rebuilt)
    if write:
        adopt(stored, rebuilt).save(project.scratchpad_path)
    return rebuilt, diff
