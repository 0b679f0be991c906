"""Where a story project keeps its files (the original tool's layout, one directory).

::

    <project>/memory_scratchpad.json   semantic memory (the long-term source of truth)
    <project>/index.db                 SQLite chapter index: state changes, relationships,
                                       appearances (episodic evidence)
    <project>/summaries/chNNN.md       chapter summaries with a "## Foreshadowing" block
    <project>/outlines/chNNN.md        chapter outlines (optional)
    <project>/state.json               runtime snapshot: protagonist, progress, plot threads
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labmem.story.errors import StoryProjectError, StoryValidationError

#: What to do about a missing project directory; the same words wherever one is refused.
NEW_PROJECT_HINT = ("create the directory (an empty one starts a new project) and commit a "
                    "chapter with `labmem story update RESULT.json --project DIR`, or look "
                    "at the sample project: --project data/story/tide-lamp")


@dataclass(frozen=True)
class StoryProject:
    """Paths of one project; constructing it touches no file."""

    root: Path

    def __post_init__(self) -> None:
        if not isinstance(self.root, (str, Path)):
            raise StoryValidationError("project", f"must be a path, got {type(self.root).__name__}")
        object.__setattr__(self, "root", Path(self.root))

    @property
    def scratchpad_path(self) -> Path:
        return self.root / "memory_scratchpad.json"

    @property
    def index_path(self) -> Path:
        return self.root / "index.db"

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def summaries_dir(self) -> Path:
        return self.root / "summaries"

    @property
    def outlines_dir(self) -> Path:
        return self.root / "outlines"

    def summary_path(self, chapter: int) -> Path:
        return self.summaries_dir / f"ch{require_chapter(chapter):03d}.md"

    def outline_path(self, chapter: int) -> Path:
        return self.outlines_dir / f"ch{require_chapter(chapter):03d}.md"

    def require_existing(self) -> StoryProject:
        """Refuse a directory that is missing or holds no story memory at all."""
        if not self.root.is_dir():
            raise StoryProjectError(f"project {self.root.name!r}: directory does not exist; "
                                    + NEW_PROJECT_HINT)
        if not (self.scratchpad_path.exists() or self.index_path.exists()):
            raise StoryProjectError(f"project {self.root.name!r}: no memory_scratchpad.json "
                                    "or index.db; commit a chapter first (`story update`)")
        return self


def require_chapter(value: object, field: str = "chapter") -> int:
    """A chapter number: an int ≥ 1 (bools refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise StoryValidationError(field, f"must be a chapter number ≥ 1, got {value!r}")
    return value
