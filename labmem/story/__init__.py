"""Case study: long-term memory for a serialized-novel writing tool.

Modules, in the order the data flows::

    scratchpad   MemoryItem + the upsert rules (claim_action; one JSON snapshot)
    writer       chapter result → items (MemoryWriter)
    compactor    keep the pad small without losing an event
    index        index.db (SQLite): state changes, relationships, appearances
    evidence     summaries/ with foreshadowing, state.json
    bootstrap    rebuild the pad from index + summaries, with a diff
    orchestrator the memory pack for one chapter, inside a token budget
    adapter      MemoryContractAdapter, the stable seven-call interface
    cli          ``labmem story …``
    project      where a project keeps its files; errors: the layer's error classes;
    known        what memory knew before a chapter (the pack's view; state.json's lists)
    matching     when a text mentions a phrase (outline filter, query_entity)
    sample       the sample serial in data/story/ and the sample project data/story/tide-lamp

Importing this package does no I/O.
"""

from labmem.story.adapter import CommitReport, MemoryContractAdapter
from labmem.story.bootstrap import BootstrapDiff, bootstrap, rebuild_scratchpad
from labmem.story.cli import register_story_commands
from labmem.story.compactor import CompactionReport, compact
from labmem.story.errors import (
    StoryCorruptionError,
    StoryMemoryError,
    StoryNotFoundError,
    StoryProjectError,
    StoryValidationError,
)
from labmem.story.index import ChapterIndex
from labmem.story.orchestrator import CUT_TIERS, MemoryOrchestrator, MemoryPack
from labmem.story.project import StoryProject
from labmem.story.sample import (
    load_sample_story,
    sample_project_dir,
    sample_story_dir,
    write_sample_project,
)
from labmem.story.scratchpad import (
    CATEGORIES,
    STATUSES,
    UPSERT_ACTIONS,
    MemoryItem,
    Scratchpad,
    claim_action,
    load_scratchpad,
)
from labmem.story.writer import MemoryWriter, WriteReport, chapter_claims

__all__ = [
    "CATEGORIES", "CUT_TIERS", "STATUSES", "BootstrapDiff", "ChapterIndex", "CommitReport",
    "CompactionReport", "MemoryContractAdapter", "MemoryItem", "MemoryOrchestrator",
    "MemoryPack", "MemoryWriter", "Scratchpad", "StoryCorruptionError", "StoryMemoryError",
    "StoryNotFoundError", "StoryProject", "StoryProjectError", "StoryValidationError",
    "WriteReport", "bootstrap", "chapter_claims", "compact", "load_scratchpad",
    "rebuild_scratchpad", "load_sample_story", "register_story_commands", "sample_project_dir",
    "sample_story_dir", "write_sample_project",
    "UPSERT_ACTIONS", "claim_action",
]
