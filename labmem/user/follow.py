"""s11 speed-up: the preference state kept between calls, following the log incrementally.

Every read-modify-write reads the state again inside the lock, so two instances (or two
processes) writing to the same user never lose an update. Reading it from scratch means
decoding the snapshot and folding every log line. :class:`PreferenceFiles` keeps the
decoded state instead and refreshes it by the files' identity and size: two ``stat`` calls
when nothing changed, a read of only the log lines another process appended since, and
the snapshot decoded again only when it was replaced.

The seam is small: :meth:`PreferenceFiles.load` (the state, tombstones included),
:meth:`~PreferenceFiles.append` (one fsync'd revision line: the commit),
:meth:`~PreferenceFiles.write_snapshot` and :meth:`~PreferenceFiles.remove_log` (the two
steps of a compaction, :mod:`labmem.user.compaction`), and :meth:`~PreferenceFiles.version`
(what the state was read from, for :mod:`labmem.user.projection_memo`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import labmem.user as _package
from labmem.core.errors import InvalidInputError
from labmem.core.storage import (
    FileSignature,
    JsonlLog,
    file_signature,
    fsync_directory,
    write_snapshot,
)
from labmem.user.blocks import MemoryMdBlocks, MemoryMdRenderer
from labmem.user.compaction import decode_snapshot, snapshot_document
from labmem.user.model import (
    KEY_PATTERN,
    Preference,
    UserMemoryCorruptionError,
    UserProfile,
    UserScopeError,
)

__all__ = ["PreferenceCache", "PreferenceFiles", "read_canonical"]


def read_canonical(path: Path) -> tuple[Any, FileSignature | None]:
    """One canonical snapshot of this layer, decoded, and the signature it was read at.

    Read through ``labmem.user.read_snapshot_signed``, looked up at call time: wrapping
    that one name (as the chapter does, to count decodes) sees every snapshot read.
    """
    return _package.read_snapshot_signed(path, corruption_error=UserMemoryCorruptionError)


class PreferenceCache:
    """The decoded preferences and where they came from, kept between calls.

    ``generation``/``covered``: the log generation the snapshot was compacted at, and how
    many of its lines it already holds. ``log_*``: what the log file adds on top. Every
    change is also told to ``renderer``, which turns the state into MEMORY.md.
    """

    def __init__(self, renderer: MemoryMdRenderer | None = None) -> None:
        self.state: dict[str, Preference] = {}
        self.renderer = MemoryMdBlocks() if renderer is None else renderer
        self.generation = 0
        self.covered = 0
        self.snapshot_keys = 0
        self.log_generation: int | None = None
        self.log_lines = 0  # lines of the current generation beyond the snapshot
        self.log_tombstones = False  # a delete is in the log: compact, so its value goes
        self.stale_log = False  # the log holds an older generation than the snapshot

    def put(self, pref: Preference) -> None:
        old = self.state.get(pref.key)
        self.state[pref.key] = pref
        self.renderer.put(old, pref)

    def render(self, user_scope: str, profile: UserProfile, as_of: datetime) -> bytes:
        """MEMORY.md of this state at ``as_of``, UTF-8 encoded."""
        return self.renderer.render(self.state, user_scope, profile, as_of)


class PreferenceFiles:
    """One user's ``preferences.json`` + ``preferences.jsonl``, read incrementally.

    Not locked: the caller (:class:`labmem.user.UserMemory`) holds user.lock around every
    read-modify-write and every compaction.
    """

    def __init__(self, directory: Path, user_scope: str,
                 renderer: Callable[[], MemoryMdRenderer] = MemoryMdBlocks) -> None:
        self.directory = directory
        self.user_scope = user_scope
        self.snapshot_path = directory / "preferences.json"
        self.log_path = directory / "preferences.jsonl"
        self._renderer = renderer
        self.cache = PreferenceCache(renderer())
        self.signature: FileSignature | None = None  # the snapshot the cache was built on
        self.loaded = False
        self._log = self._new_log()

    def _new_log(self) -> JsonlLog[tuple[int, Preference]]:
        return JsonlLog(self.log_path, decode=self._decode_revision,
                        corruption_error=UserMemoryCorruptionError,
                        lock_factory=lambda path: contextlib.nullcontext())  # user.lock

    def version(self) -> tuple[Any, ...]:
        """What the state was read from: the snapshot's signature, the log's identity and
        length. Equal versions, equal states."""
        return (self.signature, self._log.identity, self._log.line_count)

    def _decode_revision(self, line: int, record: dict[str, Any]) -> tuple[int, Preference]:
        name = self.log_path.name
        if record.get("user_scope") != self.user_scope:
            raise UserScopeError(
                f"{name} line {line}: belongs to user scope {record.get('user_scope')!r}, "
                f"not {self.user_scope!r}; a log copied from another user is refused — "
                "restore this user's own file or remove the copy")
        generation = record.get("generation")
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise UserMemoryCorruptionError(name, line, f"generation {generation!r} is not "
                                                        "an integer ≥ 0")
        try:
            pref = Preference.from_dict(record)
            if not isinstance(pref.key, str) or not KEY_PATTERN.fullmatch(pref.key):
                raise ValueError(f"{pref.key!r} is not a preference key")
        except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
            problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise UserMemoryCorruptionError(name, line, f"not a revision ({problem})") from None
        return generation, pref

    # -- reading -----------------------------------------------------------------------

    def load(self) -> dict[str, Preference]:
        """The current preferences by key (tombstones included); do not modify.

        Costs two ``stat`` calls when nothing changed, plus the log lines another process
        appended since; the snapshot is decoded again only when it was replaced.
        """
        for _ in range(10):
            reloaded = not self.loaded or file_signature(self.snapshot_path) != self.signature
            if reloaded:
                self._reload()
            try:
                moved = self._follow_log()
            except UserMemoryCorruptionError:
                self.loaded = False  # never serve a state that skipped a bad line
                if reloaded and file_signature(self.snapshot_path) == self.signature:
                    raise
                continue  # perhaps read while a compaction replaced the files: again
            if moved is None:
                return self.cache.state
            self.loaded = False
            if reloaded and file_signature(self.snapshot_path) == self.signature:
                raise UserMemoryCorruptionError(self.log_path.name, None, moved)
            # a compaction replaced the snapshot and its log while this reader looked
        raise UserMemoryCorruptionError(self.snapshot_path.name, None,
                                        "the snapshot and its log kept changing while read")

    def _reload(self) -> None:
        doc, signature = read_canonical(self.snapshot_path)
        cache = PreferenceCache(self._renderer())
        if doc is not None:
            generation, covered, prefs, keys = decode_snapshot(doc, self.snapshot_path,
                                                               self.user_scope)
            cache.generation, cache.covered = generation, covered
            for pref in prefs:
                cache.put(pref)
            cache.snapshot_keys = keys
        self.cache, self.signature, self.loaded = cache, signature, True
        self._log = self._new_log()

    def _follow_log(self) -> str | None:
        """Apply the log lines appended since the last look (a ``stat``, and a read only
        of what was appended).

        Returns ``None``, or what moved under this reader — which a compaction explains
        only if the snapshot was replaced too (the caller checks).
        """
        log, cache = self._log, self.cache
        if cache.stale_log:  # on a log its snapshot covers: the compaction may remove it
            stat = file_signature(self.log_path)
            if stat is None or (stat.device, stat.inode) != log.identity:
                self._log = log = self._new_log()
                cache.stale_log, cache.log_generation = False, None
        # (a log replaced or removed under a live reader makes refresh() raise: the
        # caller reads the snapshot again, which a compaction replaced first)
        name, first = self.log_path.name, log.line_count + 1
        for line, (generation, pref) in enumerate(log.refresh(), start=first):
            if cache.log_generation is None:
                cache.log_generation = generation
            elif generation != cache.log_generation:
                raise UserMemoryCorruptionError(name, line, f"generation {generation} in a "
                                                f"log of generation {cache.log_generation}")
            if generation > cache.generation:
                return (f"line {line} is of log generation {generation}, newer than the "
                        f"snapshot's {cache.generation} (was preferences.json replaced by "
                        "an older copy?)")
            if generation < cache.generation:
                cache.stale_log = True  # compacted already; the next writer removes it
                continue
            if line <= cache.covered:
                continue
            old = cache.state.get(pref.key)
            expected = 1 if old is None else old.revision + 1
            if pref.revision != expected:
                raise UserMemoryCorruptionError(
                    name, line, f"revision {pref.revision} of {pref.key!r} where {expected} "
                    "was expected (a lost or repeated line)")
            cache.put(pref)
            cache.log_lines += 1
            cache.log_tombstones = cache.log_tombstones or pref.deleted
        return None

    # -- writing (inside the lock) ---------------------------------------------------

    def append(self, pref: Preference) -> None:
        """The commit of one change: one fsync'd line of the revision log."""
        cache = self.cache
        if cache.stale_log:  # a compaction crashed before removing the log it covered
            self.remove_log()
        self._log.append({"user_scope": self.user_scope, "generation": cache.generation,
                          **pref.to_dict()})
        cache.log_generation = cache.generation
        cache.log_lines += 1
        cache.log_tombstones = cache.log_tombstones or pref.deleted

    def write_snapshot(self, prefs: Mapping[str, Preference]) -> None:
        """Compaction, step 1: ``prefs`` as the whole state in a snapshot of the next log
        generation (a crash after it is harmless: lines of an older generation than the
        snapshot's are ignored, then removed)."""
        generation = self.cache.generation + 1
        write_snapshot(self.snapshot_path, snapshot_document(self.user_scope, generation,
                                                             prefs),
                       records=("preferences",))
        cache = PreferenceCache(self._renderer())
        cache.generation, cache.snapshot_keys = generation, len(prefs)
        for key in sorted(prefs):
            cache.put(prefs[key])
        self.cache, self.signature = cache, file_signature(self.snapshot_path)

    def remove_log(self) -> None:
        """Compaction, step 2: remove the log the snapshot covers."""
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass
        else:
            fsync_directory(self.directory)
        cache = self.cache
        cache.stale_log, cache.log_lines = False, 0
        cache.log_tombstones, cache.log_generation = False, None
        self._log = self._new_log()
