"""The sample serial in ``data/story/`` (see its README), loaded as plain dicts, and the
sample *project* ``data/story/tide-lamp`` built from its first chapters, so that
``labmem story stats --project data/story/tide-lamp`` works on a fresh checkout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.core.clock import SteppingClock
from labmem.core.validation import parse_json
from labmem.story.adapter import MemoryContractAdapter
from labmem.story.errors import StoryProjectError

#: The sample project: the serial's first seven chapters, committed with a fixed clock.
SAMPLE_PROJECT, SAMPLE_CHAPTERS, SAMPLE_CLOCK = "tide-lamp", 7, "2026-09-01T09:00:00Z"


@dataclass(frozen=True)
class SampleChapter:
    chapter: int
    result: dict[str, Any]
    summary: dict[str, Any]
    outline: str | None


def sample_story_dir() -> Path:
    """``data/story`` of this checkout (the package is installed editable)."""
    return Path(__file__).resolve().parents[2] / "data" / "story"


def _read_json(path: Path) -> Any:
    """One sample file through the one validating parser (bounded depth, no NaN): a
    broken file is the story project's error, naming the file, not a ``RecursionError``."""
    try:
        return parse_json(path.read_bytes())
    except ValueError as exc:
        raise StoryProjectError(f"{path.name}: cannot be read ({exc}); restore the sample "
                                "story from the repository") from None


def load_sample_story(directory: str | Path | None = None) -> list[SampleChapter]:
    root = Path(directory) if directory is not None else sample_story_dir()
    if not (root / "results").is_dir():
        raise StoryProjectError(f"no sample story under {root.name!r}/results")
    chapters = []
    for path in sorted((root / "results").glob("ch*.json")):
        result = _read_json(path)
        summary = _read_json(root / "summaries" / path.name)
        outline_path = root / "outlines" / f"{path.stem}.md"
        outline = outline_path.read_text(encoding="utf-8").strip() if outline_path.exists() \
            else None
        chapters.append(SampleChapter(result["chapter"], result, summary, outline))
    return chapters


def sample_project_dir() -> Path:
    """``data/story/tide-lamp`` of this checkout."""
    return sample_story_dir() / SAMPLE_PROJECT


def write_sample_project(destination: str | Path, *, chapters: int = SAMPLE_CHAPTERS) -> Path:
    """Commit the serial's first ``chapters`` chapters into an empty ``destination``.

    Deterministic (a stepping clock from :data:`SAMPLE_CLOCK`, no compaction), so the
    committed sample can be checked against a fresh build. Returns the project directory.
    """
    root = Path(destination)
    if root.exists() and any(root.iterdir()):
        raise StoryProjectError(f"project {root.name!r}: not empty; the sample project is "
                                "written into a new directory")
    root.mkdir(parents=True, exist_ok=True)
    memory = MemoryContractAdapter(root, clock=SteppingClock(SAMPLE_CLOCK), max_items=1000)
    for chapter in load_sample_story()[:chapters]:
        memory.commit_chapter(chapter.result, summary=chapter.summary, outline=chapter.outline)
    lock = memory.project.scratchpad_path.with_name(memory.project.scratchpad_path.name + ".lock")
    lock.unlink(missing_ok=True)  # the writer's lock file is not part of the project
    return root
