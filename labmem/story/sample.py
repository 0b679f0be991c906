"""The sample serial in ``data/story/`` (see its README), loaded as plain dicts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.story.errors import StoryProjectError


@dataclass(frozen=True)
class SampleChapter:
    chapter: int
    result: dict[str, Any]
    summary: dict[str, Any]
    outline: str | None


def sample_story_dir() -> Path:
    """``data/story`` of this checkout (the package is installed editable)."""
    return Path(__file__).resolve().parents[2] / "data" / "story"


def load_sample_story(directory: str | Path | None = None) -> list[SampleChapter]:
    root = Path(directory) if directory is not None else sample_story_dir()
    if not (root / "results").is_dir():
        raise StoryProjectError(f"no sample story under {root.name!r}/results")
    chapters = []
    for path in sorted((root / "results").glob("ch*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        summary = json.loads((root / "summaries" / path.name).read_text(encoding="utf-8"))
        outline_path = root / "outlines" / f"{path.stem}.md"
        outline = outline_path.read_text(encoding="utf-8").strip() if outline_path.exists() \
            else None
        chapters.append(SampleChapter(result["chapter"], result, summary, outline))
    return chapters
