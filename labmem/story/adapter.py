"""MemoryContractAdapter: the one stable interface the rest of a writing tool calls.

Behind it the stores stay what they are (scratchpad, index.db, summaries/, state.json);
callers only see these seven verbs. ``commit_chapter`` is the only writer, and it
validates the whole submission before touching any file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock
from labmem.core.errors import validated_as
from labmem.core.storage import write_text_atomic
from labmem.core.validation import require_text
from labmem.story.errors import StoryValidationError
from labmem.story.evidence import (
    ChapterSummary,
    advance_state,
    read_summary,
    summary_from_dict,
    write_summary,
)
from labmem.story.index import ChapterIndex
from labmem.story.matching import MentionText
from labmem.story.orchestrator import MemoryOrchestrator, MemoryPack
from labmem.story.project import StoryProject
from labmem.story.scratchpad import ACTIVE, MemoryItem, load_scratchpad
from labmem.story.writer import MemoryWriter, WriteReport, chapter_claims


@dataclass(frozen=True)
class CommitReport:
    chapter: int
    memory: WriteReport
    state: dict[str, Any]


class MemoryContractAdapter:
    """The seven-call contract over one project directory."""

    def __init__(self, project: str | Path | StoryProject, *, clock: Clock | None = None,
                 max_items: int = 60, timeline_window: int = 4, chapter_window: int = 3) -> None:
        """``max_items`` is the compactor's soft limit (current truth and open contradictions
        are never dropped to meet it; see :mod:`labmem.story.compactor`)."""
        self.project = project if isinstance(project, StoryProject) else StoryProject(project)
        self.clock = clock
        self.writer = MemoryWriter(self.project.scratchpad_path, clock=clock,
                                   max_items=max_items, timeline_window=timeline_window)
        self.index = ChapterIndex(self.project.index_path)
        self.orchestrator = MemoryOrchestrator(self.project, chapter_window=chapter_window)

    def commit_chapter(self, result: Mapping[str, Any], *, summary: Mapping[str, Any] | None
                       = None, outline: str | None = None) -> CommitReport:
        """Index the result, store summary and outline, update memory and state.json.

        The stores are written one after another (index, summary, outline, scratchpad,
        state.json). A crash in between is repaired by committing the same chapter
        again: the index replaces that chapter's rows and repeated claims are
        ``unchanged``, so a retry never duplicates anything.
        """
        chapter, _ = chapter_claims(result)
        parsed: ChapterSummary | None = summary_from_dict(summary) if summary else None
        if outline is not None:  # everything is validated before the first store is written
            validated_as(StoryValidationError, require_text, outline, "outline",
                         allow_blank=True)
        if parsed is not None and parsed.chapter != chapter:
            raise StoryValidationError("summary.chapter", f"is {parsed.chapter}, but the "
                                                          f"result is chapter {chapter}")
        self.index.record_chapter(result)
        if parsed is not None:
            write_summary(self.project, parsed)
        if outline is not None:
            write_text_atomic(self.project.outline_path(chapter), outline.strip() + "\n")
        report = self.writer.update_from_chapter_result(result)
        pad = load_scratchpad(self.project.scratchpad_path)
        state = advance_state(self.project, result, pad.items)
        return CommitReport(chapter, report, state)

    def load_context(self, chapter: int, *, budget: int = 400,
                     outline: str | None = None) -> MemoryPack:
        return self.orchestrator.build_memory_pack(chapter, outline=outline, budget=budget)

    def query_entity(self, name: str) -> list[MemoryItem]:
        """Every item that names ``name`` — in its subject, its field (a relationship's other
        side) or its value — any status, so the history shows; oldest first. The original
        matched the subject only, so a name that appears only in values found nothing."""
        if not isinstance(name, str) or not name.strip():
            raise StoryValidationError("name", "must be a non-blank entity name")
        pad = load_scratchpad(self.project.scratchpad_path)
        found = [i for i in pad.items
                 if any(MentionText.of(part).mentions(name) for part in (i.subject, i.field,
                                                                          i.value) if part)]
        return sorted(found, key=lambda i: (i.category, i.field, i.source_chapter, i.id))

    def query_rules(self) -> list[MemoryItem]:
        pad = load_scratchpad(self.project.scratchpad_path)
        return pad.active("world_rules")

    def read_summary(self, chapter: int) -> ChapterSummary:
        return read_summary(self.project, chapter)

    def get_open_loops(self) -> list[MemoryItem]:
        return load_scratchpad(self.project.scratchpad_path).open_loops()

    def get_timeline(self) -> list[tuple[int, str]]:
        """``(chapter, event)`` in story order, folded summaries expanded back to events."""
        pad = load_scratchpad(self.project.scratchpad_path)
        events = []
        for item in pad.items:
            if item.status != ACTIVE:
                continue
            if item.category == "timeline":
                events.append((item.source_chapter, item.field, item.value))
            elif item.category == "story_facts" and "folded_ids" in item.payload:
                events += [(item.source_chapter, f"folded {n:03d}", text)
                           for n, text in enumerate(item.payload["events"])]
        return [(chapter, text) for chapter, _, text in sorted(events)]
