"""s11 speed-up: the compacted snapshot of the revision log, and when it is due.

The revision log alone is the whole state: fold its lines in order. Reading a long log
again and again gets slow, so now and then the whole state goes into ``preferences.json``
(atomically, stamped with the log *generation* it covers) and the log starts again empty.
The state is then the snapshot plus the log lines of its generation.

This module is the trick's two halves, both pure: the policy (:func:`compaction_due`) and
the snapshot's format (:func:`snapshot_document`, :func:`decode_snapshot`). The files are
written by :class:`labmem.user.follow.PreferenceFiles`; :class:`labmem.user.UserMemory`
asks the policy after each change.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from labmem.core.errors import InvalidInputError
from labmem.user.model import (
    LEGACY_PREFERENCES_FORMAT,
    PREFERENCES_FORMAT,
    Preference,
    UserMemoryCorruptionError,
    check_document,
)

__all__ = ["COMPACT_MIN_LINES", "LogTally", "compaction_due", "snapshot_document",
           "decode_snapshot", "remove_crash_leftovers"]

#: The log is compacted once it holds more lines than this and than the snapshot has keys
#: (so reading both costs at most about twice the snapshot, and compaction is amortized).
COMPACT_MIN_LINES = 64


class LogTally(Protocol):
    """What the policy looks at: the snapshot's size and what the log adds on top."""

    snapshot_keys: int
    log_lines: int
    log_tombstones: bool


def compaction_due(tally: LogTally, has_snapshot: bool) -> bool:
    """Compact on a user's first write (no snapshot yet), after any delete (so the deleted
    value leaves every file), and once the log outgrows the snapshot."""
    return not has_snapshot or tally.log_tombstones or \
        tally.log_lines > max(COMPACT_MIN_LINES, tally.snapshot_keys)


def snapshot_document(user_scope: str, generation: int,
                      prefs: Mapping[str, Preference]) -> dict[str, Any]:
    """The snapshot of ``prefs`` that starts log ``generation`` (whose lines it holds: 0)."""
    return {
        "format": PREFERENCES_FORMAT,
        "user_scope": user_scope,
        "log": {"generation": generation, "lines": 0},
        "preferences": {key: prefs[key].to_dict() for key in sorted(prefs)},
    }


def decode_snapshot(doc: Any, path: Path, user_scope: str
                    ) -> tuple[int, int, Iterator[Preference], int]:
    """``(generation, covered lines, preferences, how many)`` of a snapshot document.

    A snapshot from before the log (format v1) covers generation 0, no lines.
    """
    name = path.name
    check_document(doc, path, user_scope, (PREFERENCES_FORMAT, LEGACY_PREFERENCES_FORMAT))
    generation = covered = 0
    if doc["format"] == PREFERENCES_FORMAT:
        log = doc.get("log")
        generation = log.get("generation") if isinstance(log, dict) else None
        covered = log.get("lines") if isinstance(log, dict) else None
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                   for v in (generation, covered)):
            raise UserMemoryCorruptionError(name, None, "'log' is not "
                                            "{generation, lines} (integers ≥ 0)")
    items = doc.get("preferences")
    if not isinstance(items, dict):
        raise UserMemoryCorruptionError(name, None, "'preferences' is not an object")
    return generation, covered, _decoded(items, name), len(items)


def _decoded(items: dict[str, Any], name: str) -> Iterator[Preference]:
    for key, data in items.items():
        try:
            pref = Preference.from_dict(data)
        except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
            problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise UserMemoryCorruptionError(name, None,
                                            f"preference {key!r}: {problem}") from None
        if pref.key != key:
            raise UserMemoryCorruptionError(name, None,
                                            f"preference {key!r} is stored as {pref.key!r}")
        yield pref


def remove_crash_leftovers(directory: Path, paths: tuple[Path, ...]) -> None:
    """Temp files of ``paths``' atomic writes that a killed writer left behind.

    Every such write happens under user.lock, which the caller holds: a temp file seen
    now belongs to no running write.
    """
    prefixes = tuple(f".{p.name}." for p in paths)
    for entry in os.scandir(directory):
        if entry.name.startswith(prefixes) and entry.name.endswith(".tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
