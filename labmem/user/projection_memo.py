"""s11 speed-up: remember which state MEMORY.md shows, so a write that changes nothing
need not read MEMORY.md back.

A write that changes nothing (a retried event) still repairs what a crashed write left
undone: MEMORY.md must show the current state. Checking that means reading MEMORY.md and
rendering the state to compare. :class:`ProjectionMemo` skips both when this instance
wrote MEMORY.md itself for exactly the state it holds now — the state named by its
*version* (what the snapshot, the log and the profile were read from) at an ``as_of``.

The seam: :meth:`~ProjectionMemo.remember` after each projection, :meth:`~ProjectionMemo.
shows` to ask. Without the memo (``shows`` always ``False``) the answer is the same, only
read from the file.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import datetime

__all__ = ["ProjectionMemo"]

#: The version of the state at an ``as_of``: (as_of, whatever names the files read).
VersionAt = Callable[[datetime], tuple[Hashable, ...]]


class ProjectionMemo:
    """The version of the state this instance last wrote to MEMORY.md, and its ``as_of``."""

    def __init__(self, version_at: VersionAt) -> None:
        self._version_at = version_at
        self._shown: tuple[Hashable, ...] | None = None

    def remember(self, as_of: datetime) -> None:
        """MEMORY.md was just written (or found to be right) for the current state at
        ``as_of``."""
        self._shown = self._version_at(as_of)

    def shows(self) -> bool:
        """Did this instance write MEMORY.md for the state it holds now?"""
        shown = self._shown
        return shown is not None and shown == self._version_at(shown[0])

    def moved(self) -> None:
        """The same state now lives in other files (a compaction): MEMORY.md, if it showed
        the state before, still shows it. Call with :meth:`shows` asked before the move."""
        assert self._shown is not None
        self._shown = self._version_at(self._shown[0])
