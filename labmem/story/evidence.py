"""The two file-based evidence stores beside the index: summaries and ``state.json``.

* ``summaries/chNNN.md`` — a chapter's summary, with a ``## Foreshadowing`` block whose
  lines read ``- open: <subject> — <text>`` or ``- closed: <subject> — <text>``.
  The working memory reads the latest summaries; bootstrap reads the foreshadowing.
* ``state.json`` — the runtime snapshot (protagonist, progress, plot threads, keys awaiting
  disambiguation), replaced atomically. It is a cache of "now", not long-term knowledge,
  and is derived from the scratchpad (:mod:`labmem.story.known`) after every commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from labmem.core.errors import validated_as
from labmem.core.storage import read_snapshot, write_snapshot, write_text_atomic
from labmem.core.validation import require_text
from labmem.story.errors import StoryCorruptionError, StoryNotFoundError, StoryValidationError
from labmem.story.known import awaiting_disambiguation, open_threads, protagonist_snapshot
from labmem.story.project import StoryProject, require_chapter
from labmem.story.scratchpad import MemoryItem

FORESHADOWING_HEADING = "## Foreshadowing"
STATE_FORMAT = "labmem.story.state/v1"
LOOP_STATES = ("open", "closed")


@dataclass(frozen=True)
class Foreshadowing:
    state: str     # "open" or "closed"
    subject: str
    text: str


@dataclass(frozen=True)
class ChapterSummary:
    chapter: int
    title: str
    text: str
    foreshadowing: tuple[Foreshadowing, ...]


def render_summary(summary: ChapterSummary) -> str:
    lines = [f"# Chapter {summary.chapter}: {summary.title}", "", summary.text.strip(), ""]
    if summary.foreshadowing:
        lines += [FORESHADOWING_HEADING]
        lines += [f"- {f.state}: {f.subject} — {f.text}" for f in summary.foreshadowing]
        lines.append("")
    return "\n".join(lines)


def parse_summary(chapter: int, text: str, *, name: str = "summary") -> ChapterSummary:
    """Read a summary file back; a malformed foreshadowing line is corruption, not skipped."""
    lines = text.split("\n")
    if not lines or not lines[0].startswith("# Chapter "):
        raise StoryCorruptionError(name, 1, "must start with '# Chapter N: title'")
    title = lines[0].partition(":")[2].strip()
    body, block, in_block = [], [], False
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() == FORESHADOWING_HEADING:
            in_block = True
        elif in_block and line.strip():
            state, _, rest = line.removeprefix("- ").partition(": ")
            subject, sep, detail = rest.partition(" — ")
            if state not in LOOP_STATES or not sep or not subject.strip():
                raise StoryCorruptionError(
                    name, number, "foreshadowing lines read '- open|closed: subject — text'")
            block.append(Foreshadowing(state, subject.strip(), detail.strip()))
        elif not in_block:
            body.append(line)
    return ChapterSummary(chapter, title, "\n".join(body).strip(), tuple(block))


def write_summary(project: StoryProject, summary: ChapterSummary) -> None:
    write_text_atomic(project.summary_path(summary.chapter), render_summary(summary))


def read_summary(project: StoryProject, chapter: int) -> ChapterSummary:
    path = project.summary_path(chapter)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StoryNotFoundError(f"chapter {chapter}: no summary at summaries/{path.name}; "
                                 "commit the chapter with a summary first") from None
    return parse_summary(chapter, text, name=f"summaries/{path.name}")


def summary_chapters(project: StoryProject) -> list[int]:
    if not project.summaries_dir.is_dir():
        return []
    found = []
    for path in project.summaries_dir.glob("ch*.md"):
        digits = path.stem[2:]
        if digits.isdigit() and int(digits) >= 1:
            found.append(int(digits))
    return sorted(found)


def summary_from_dict(data: Mapping[str, Any]) -> ChapterSummary:
    """The summary part of a chapter submission: {chapter, title, text, foreshadowing[]}."""
    chapter = require_chapter(data.get("chapter"), "summary.chapter")
    title = validated_as(StoryValidationError, require_text, data.get("title"), "summary.title")
    text = validated_as(StoryValidationError, require_text, data.get("text"), "summary.text")
    items = []
    for i, raw in enumerate(data.get("foreshadowing", [])):
        if not isinstance(raw, Mapping) or raw.get("state") not in LOOP_STATES:
            raise StoryValidationError(f"summary.foreshadowing[{i}].state",
                                       "must be 'open' or 'closed'")
        subject = validated_as(StoryValidationError, require_text, raw.get("subject"),
                               f"summary.foreshadowing[{i}].subject")
        detail = validated_as(StoryValidationError, require_text, raw.get("text", ""),
                              f"summary.foreshadowing[{i}].text", allow_blank=True)
        items.append(Foreshadowing(raw["state"], subject, detail))
    return ChapterSummary(chapter, title, text, tuple(items))


# ---- state.json -------------------------------------------------------------------
def read_state(project: StoryProject) -> dict[str, Any]:
    """The runtime snapshot, or an empty one before the first commit."""
    document = read_snapshot(project.state_path, corruption_error=StoryCorruptionError)
    if document is None:
        return {"format": STATE_FORMAT, "protagonist": {}, "progress": {"last_chapter": 0},
                "plot_threads": [], "disambiguation": []}
    if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
        raise StoryCorruptionError("state.json", None, f"is not a {STATE_FORMAT} document")
    return document


def advance_state(project: StoryProject, result: Mapping[str, Any],
                  items: Iterable[MemoryItem]) -> dict[str, Any]:
    """Fold one committed chapter into ``state.json`` and replace it atomically.

    ``items`` is the scratchpad after the commit: the protagonist's fields, the open plot
    threads and the keys awaiting disambiguation are read off it, so a contradicted field
    shows both claims instead of whichever was written last.
    """
    state = read_state(project)
    items = list(items)
    protagonist = dict(state["protagonist"])
    name = protagonist.get("name") or result.get("protagonist")
    if name:
        protagonist["name"] = name
    last = max(state["progress"].get("last_chapter", 0), result["chapter"])
    state = {"format": STATE_FORMAT,
             "protagonist": protagonist_snapshot(protagonist, items, items),
             "progress": {"last_chapter": last}, "plot_threads": open_threads(items),
             "disambiguation": awaiting_disambiguation(items)}
    write_snapshot(project.state_path, state)
    return state
