"""s11 speed-up: MEMORY.md's preference lines kept rendered, in blocks, between writes.

Every change rewrites MEMORY.md whole. Rendering it from the state formats one line per
live key, so at 1,000 keys a one-key change would format 1,000 lines. :class:`MemoryMdBlocks`
keeps the lines of the live keys encoded in key order, joined in blocks of
:data:`BLOCK_LINES`: after a change it formats one line and joins one block again.

The seam is :class:`MemoryMdRenderer`: told every change (``put``), asked for the bytes of
MEMORY.md (``render``). :class:`PlainMemoryMd` is the same answer without the trick — it
calls :func:`~labmem.user.render.render_memory_md` each time — and is what the block
renderer is tested against.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from labmem.user.model import Preference, UserProfile
from labmem.user.render import (
    active_at,
    encoded_line,
    memory_md_head,
    memory_md_profile,
    render_memory_md,
)

__all__ = ["BLOCK_LINES", "MemoryMdRenderer", "PlainMemoryMd", "MemoryMdBlocks"]

#: Lines per block: a change of one line joins one block again, then the blocks.
BLOCK_LINES = 32


class MemoryMdRenderer(Protocol):
    """Turns the preference state into MEMORY.md's bytes (those of ``render_memory_md``)."""

    def put(self, old: Preference | None, new: Preference) -> None:
        """``new`` replaced ``old`` (``None``: the key was unknown) in the state."""

    def render(self, state: Mapping[str, Preference], user_scope: str,
               profile: UserProfile, as_of: datetime) -> bytes:
        """MEMORY.md of ``state`` (which every change so far was ``put`` into)."""


class PlainMemoryMd:
    """No cache: render MEMORY.md from the whole state every time."""

    def put(self, old: Preference | None, new: Preference) -> None:
        pass

    def render(self, state: Mapping[str, Preference], user_scope: str,
               profile: UserProfile, as_of: datetime) -> bytes:
        return render_memory_md(user_scope, profile, active_at(state, as_of),
                                as_of).encode("utf-8")


class MemoryMdBlocks:
    """The lines of the live keys, rendered once a projection needed them, kept in blocks."""

    def __init__(self) -> None:
        self._keys: list[str] | None = None  # live keys, sorted (None: not built yet)
        self._lines: list[bytes] = []  # their MEMORY.md lines (with "\n"), in that order
        self._blocks: list[bytes] = []  # _lines joined by BLOCK_LINES
        self._stale: set[int] = set()  # the blocks whose lines changed since
        self._expiring: set[str] = set()  # live keys with an expiry
        self._profile: tuple[UserProfile | None, bytes] = (None, b"")  # its rendered part

    def put(self, old: Preference | None, new: Preference) -> None:
        key = new.key
        was_live, live = old is not None and not old.deleted, not new.deleted
        if live and new.expires_at is not None:
            self._expiring.add(key)
        else:
            self._expiring.discard(key)
        keys = self._keys
        if keys is None or not (was_live or live):
            return
        at = bisect.bisect_left(keys, key)
        if was_live and live:
            self._lines[at] = encoded_line(new)
            self._stale.add(at // BLOCK_LINES)
            return
        if live:  # a key became live: its line goes in at its place
            keys.insert(at, key)
            self._lines.insert(at, encoded_line(new))
        else:  # it stopped being live
            del keys[at]
            del self._lines[at]
        first, count = at // BLOCK_LINES, -(-len(keys) // BLOCK_LINES)
        del self._blocks[count:]  # every block from ``first`` on moved
        self._blocks += [b""] * (count - len(self._blocks))
        self._stale.intersection_update(range(count))  # a block past the end is gone
        self._stale.update(range(first, count))

    def render(self, state: Mapping[str, Preference], user_scope: str,
               profile: UserProfile, as_of: datetime) -> bytes:
        if self._keys is None:
            self._keys = sorted(k for k, p in state.items() if not p.deleted)
            self._lines = [encoded_line(state[k]) for k in self._keys]
            self._blocks = [b""] * (-(-len(self._keys) // BLOCK_LINES))
            self._stale = set(range(len(self._blocks)))
        lines, blocks = self._lines, self._blocks
        for number in self._stale:
            blocks[number] = b"".join(lines[number * BLOCK_LINES:(number + 1) * BLOCK_LINES])
        self._stale.clear()
        if self._profile[0] is not profile:
            self._profile = (profile, memory_md_profile(profile).encode("utf-8"))
        head = memory_md_head(user_scope, as_of).encode("utf-8") + self._profile[1]
        hidden = self._hidden_at(state, as_of)
        if not hidden:
            return head + (b"".join(blocks) if lines else b"- (none active)\n")
        shown = b"".join(line for i, line in enumerate(lines) if i not in hidden)
        return head + (shown or b"- (none active)\n")

    def _hidden_at(self, state: Mapping[str, Preference], as_of: datetime) -> set[int]:
        """The places of the live keys that have expired at ``as_of``."""
        if not self._expiring:
            return set()
        keys = self._keys
        assert keys is not None
        return {bisect.bisect_left(keys, key) for key in self._expiring
                if not as_of < state[key].expires_at}
