"""The story layer's errors: one base class, so a CLI can catch "the story refused"."""

from __future__ import annotations

from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError


class StoryMemoryError(LabmemError):
    """Base of every error the story layer raises on purpose."""


class StoryValidationError(StoryMemoryError, InvalidInputError):
    """A chapter result, item or argument was refused; the message names the field."""


class StoryCorruptionError(StoryMemoryError, CorruptionError):
    """A stored project file (scratchpad, state.json, index.db) cannot be trusted."""


class StoryProjectError(StoryMemoryError):
    """The project directory is missing or is not a story project."""


class StoryNotFoundError(StoryMemoryError):
    """A summary, outline or entity that was asked for does not exist."""
