"""s11 user memory: the teaching type — validate, lock, read-modify-write, append, project.

One :class:`UserMemory` owns one user's directory under a shared root::

    root/users/<scope_digest>/profile.json       canonical snapshot (has "user_scope")
    root/users/<scope_digest>/preferences.jsonl  canonical revision log: one line per change
    root/users/<scope_digest>/preferences.json   canonical snapshot compacted from that log
    root/users/<scope_digest>/MEMORY.md          projection: profile + active preferences
    root/users/<scope_digest>/user.lock          the cross-process lock for all of them

A write validates its arguments, takes user.lock, reads the state again, asks
:func:`~labmem.user.model.preference_write_status` what the write does, and acts on the
answer: one fsync'd line of the revision log is the commit, then MEMORY.md is rewritten
atomically, since what it shows changed. What makes this fast lives beside it, one trick
per module, each behind a small seam:

* :mod:`labmem.user.follow` — the state kept between calls, following the log
  incrementally (:class:`~labmem.user.follow.PreferenceFiles`);
* :mod:`labmem.user.compaction` — the compacted snapshot and when it is due;
* :mod:`labmem.user.blocks` — MEMORY.md's lines kept rendered in blocks (the
  :class:`~labmem.user.blocks.MemoryMdRenderer` seam: :attr:`UserMemory.memory_md_renderer`);
* :mod:`labmem.user.projection_memo` — which state MEMORY.md shows, so a write that
  changes nothing need not read it back.

A crash between the log line and a compaction loses nothing: the snapshot plus the log
lines it does not cover is the state, and the next write (or a retry) finishes the work.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import require_opaque_id, scope_digest
from labmem.core.storage import (
    FileSignature,
    LockFactory,
    file_lock,
    file_signature,
    sync_file,
    write_bytes_atomic,
    write_snapshot,
)
from labmem.core.validation import require_text
from labmem.user.blocks import MemoryMdBlocks, MemoryMdRenderer
from labmem.user.compaction import compaction_due, remove_crash_leftovers
from labmem.user.follow import PreferenceFiles, read_canonical
from labmem.user.model import (
    DELETED,
    KEY_PATTERN,
    MAX_PROFILE_FIELD_CHARS,
    MAX_PROFILE_NOTES_CHARS,
    MAX_VALUE_CHARS,
    PROFILE_FIELDS,
    PROFILE_FORMAT,
    STALE,
    UNCHANGED,
    Preference,
    PreferenceWrite,
    StalePreferenceUpdateError,
    UserMemoryCorruptionError,
    UserMemoryValidationError,
    UserProfile,
    _timestamp,
    _validated,
    check_document,
    preference_write_status,
)
from labmem.user.projection_memo import ProjectionMemo
from labmem.user.render import active_at, render_user_context

__all__ = ["UserMemory", "WRITE_BOUNDARIES"]

#: The durable steps of one preference write, in order; crash tests stop a child
#: process at each of them (the last two only when the write compacts).
WRITE_BOUNDARIES = ("revision_appended", "memory_md_written", "snapshot_written",
                    "log_removed")
_MEMORY_MD_AS_OF = re.compile(rb"; as_of: (\S+) -->")


def _reached(boundary: str) -> None:
    """Called after each durable step of a write (:data:`WRITE_BOUNDARIES`). A no-op:
    crash tests replace it in a child process with one that calls ``os._exit``."""



class UserMemory:
    """One user's profile and keyed preferences under a shared ``root``."""

    #: Makes the object that turns the preference state into MEMORY.md's bytes (the
    #: :class:`~labmem.user.blocks.MemoryMdRenderer` seam). ``PlainMemoryMd`` gives the
    #: same bytes without keeping any lines between writes.
    memory_md_renderer: Callable[[], MemoryMdRenderer] = MemoryMdBlocks

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        user_id: str,
        clock: Clock | None = None,
        lock_factory: LockFactory = file_lock,
    ) -> None:
        user_scope = _validated(scope_digest, user_id, field="user_id")
        if not isinstance(root, (str, os.PathLike)):
            raise UserMemoryValidationError(
                "root", f"must be a path, got {type(root).__name__}",
                "pass the directory that holds every user's memory",
            )
        self.root = Path(root)
        self.user_scope = user_scope
        self.clock = _validated(resolve_clock, clock)
        self.directory = self.root / "users" / self.user_scope
        self.profile_path = self.directory / "profile.json"
        self._files = PreferenceFiles(self.directory, user_scope, self.memory_md_renderer)
        self.preferences_path = self._files.snapshot_path
        self.preference_log_path = self._files.log_path
        self.memory_md_path = self.directory / "MEMORY.md"
        self._lock_factory = lock_factory
        self._lock: Any = None
        self._profile = UserProfile(user_scope=self.user_scope)
        self._profile_from: FileSignature | None = None
        self._profile_loaded = False
        self._shown = ProjectionMemo(self._version_at)  # the state MEMORY.md last showed

    def __repr__(self) -> str:
        return f"UserMemory(user_scope={self.user_scope!r})"

    def _locked(self):
        if self._lock is None:  # one lock object per instance: making one costs more than
            self._lock = self._lock_factory(self.directory / "user")  # taking it
        return self._lock

    def _version_at(self, as_of: datetime) -> tuple[Any, ...]:
        """What MEMORY.md shows: the state read from these files, at ``as_of``."""
        return (as_of, *self._files.version(), self._profile_from)

    # -- loading ----------------------------------------------------------------------

    def _load_preferences(self) -> dict[str, Preference]:
        """The current preferences by key (tombstones included); do not modify."""
        return self._files.load()

    def _load_profile(self) -> UserProfile:
        signature = file_signature(self.profile_path)
        if self._profile_loaded and signature == self._profile_from:
            return self._profile
        doc, signature = read_canonical(self.profile_path)
        if doc is None:
            profile = UserProfile(user_scope=self.user_scope)
        else:
            profile = self._decode_profile(check_document(doc, self.profile_path,
                                                          self.user_scope, (PROFILE_FORMAT,)))
        self._profile, self._profile_from, self._profile_loaded = profile, signature, True
        return profile


    def _decode_profile(self, doc: dict[str, Any]) -> UserProfile:
        fields = doc.get("fields")
        if not isinstance(fields, dict) or set(fields) - set(PROFILE_FIELDS) or not all(
            isinstance(v, str) for v in fields.values()
        ):
            raise UserMemoryCorruptionError(self.profile_path.name, None,
                                            "'fields' is not a mapping of known profile fields")
        try:
            updated_at = parse_timestamp(doc["updated_at"], field="updated_at")
            revision = doc["revision"]
            if not isinstance(revision, int) or revision < 1:
                raise ValueError(f"revision {revision!r}")
        except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
            raise UserMemoryCorruptionError(self.profile_path.name, None,
                                            f"bad profile header ({exc})") from None
        return UserProfile(user_scope=self.user_scope, revision=revision,
                           updated_at=updated_at, **fields)

    # -- writing (inside the lock) --------------------------------------------------------

    def _append_revision(self, pref: Preference) -> None:
        """The commit of one change: one fsync'd line of the revision log."""
        self._files.append(pref)
        _reached("revision_appended")

    def _commit(self, pref: Preference, profile: UserProfile, now: datetime) -> None:
        """Append the change, show it in MEMORY.md, compact the log when it is due.

        The new MEMORY.md is staged first (so a full disk fails the write before its commit)
        and replaces the old one right after the revision line is durable. It is the one
        file a change rewrites whole, atomically but without an fsync of its own: it is a
        projection. A killed process loses nothing (the kernel has the bytes); a power cut
        may bring back the previous MEMORY.md, which the next write of this user replaces
        (a retry included). A compaction — every delete — syncs it to disk first, so a
        deleted value does not come back from a stale projection either.
        """
        try:
            self._files.cache.put(pref)  # the state MEMORY.md will show
            text = self._files.cache.render(self.user_scope, profile, now)
            write_bytes_atomic(self.memory_md_path, text,
                               alongside=lambda: self._append_revision(pref), durable=False)
        except BaseException:
            self._files.loaded = False  # the cache may hold a change that is not on disk
            raise
        self._shown.remember(now)
        _reached("memory_md_written")
        self._compact_if_due()

    def _compact_if_due(self) -> None:
        files = self._files
        if compaction_due(files.cache, has_snapshot=files.signature is not None):
            self._save_preferences(files.cache.state)
        elif files.cache.stale_log:  # a compaction died after its snapshot: finish it
            files.remove_log()
            self._remove_crash_leftovers()

    def _save_preferences(self, prefs: Mapping[str, Preference]) -> None:
        """Compact: write ``prefs`` as the whole state in a snapshot of the next log
        generation, then remove the log it covers (a crash in between is harmless: lines
        of an older generation than the snapshot's are ignored, then removed)."""
        files = self._files
        if not files.loaded:
            files.load()
        fresh = prefs is files.cache.state and self._shown.shows()
        sync_file(self.memory_md_path)  # made durable with the snapshot's directory sync
        files.write_snapshot(prefs)
        _reached("snapshot_written")
        files.remove_log()
        _reached("log_removed")
        self._remove_crash_leftovers()
        if fresh:  # the same state in other files: MEMORY.md still shows it
            self._shown.moved()

    def _remove_crash_leftovers(self) -> None:
        remove_crash_leftovers(self.directory, (self.profile_path, self.preferences_path,
                                                self.memory_md_path))


    def _save_profile(self, profile: UserProfile) -> None:
        write_snapshot(self.profile_path, {
            "format": PROFILE_FORMAT,
            "user_scope": self.user_scope,
            "fields": profile.fields(),
            "revision": profile.revision,
            "updated_at": format_timestamp(profile.updated_at),
        })
        self._profile, self._profile_from = profile, file_signature(self.profile_path)

    def _project(self, profile: UserProfile, as_of: datetime) -> None:
        """Rewrite MEMORY.md (atomically) from the profile and the active preferences."""
        write_bytes_atomic(self.memory_md_path,
                           self._files.cache.render(self.user_scope, profile, as_of))
        self._shown.remember(as_of)

    def _repair_projection(self, profile: UserProfile, now: datetime) -> None:
        """For a write that changed nothing: finish what a crashed write left undone.

        The log is compacted if that is due, and MEMORY.md is rewritten if it does not show
        the current state (at the ``as_of`` in its own header) — as after a crash between
        the log line and the projection. A MEMORY.md this instance wrote is not re-read.
        """
        self._compact_if_due()
        if self._shown.shows():
            return
        try:
            current = self.memory_md_path.read_bytes()
        except FileNotFoundError:
            current = None
        found = None if current is None else _MEMORY_MD_AS_OF.search(current)
        if found is not None:
            try:
                shown = parse_timestamp(found.group(1).decode("ascii"), field="as_of")
            except (InvalidInputError, UnicodeDecodeError):
                shown = None
            if shown is not None and \
                    current == self._files.cache.render(self.user_scope, profile, shown):
                self._shown.remember(shown)
                return
        self._project(profile, now)


    # -- profile --------------------------------------------------------------------

    def read_profile(self) -> UserProfile:
        """The stored profile (an empty one, revision 0, before the first update)."""
        return self._load_profile()

    def update_profile(self, changes: Mapping[str, str | None]) -> UserProfile:
        """Patch the known profile fields; ``None`` removes one. Returns the profile.

        Nothing is written (same revision, same bytes) when the patch changes nothing.
        """
        if not isinstance(changes, Mapping):
            raise UserMemoryValidationError(
                "changes", f"must be a mapping of field → value, got {type(changes).__name__}",
                "pass e.g. {'preferred_name': 'Ali'}",
            )
        unknown = sorted(str(k) for k in changes if k not in PROFILE_FIELDS)
        if unknown:
            raise UserMemoryValidationError(
                f"changes.{unknown[0]}", "is not a profile field",
                f"use only {', '.join(PROFILE_FIELDS)}; keep anything else as a preference",
            )
        for name, value in changes.items():
            if value is not None:
                limit = MAX_PROFILE_NOTES_CHARS if name == "notes" else MAX_PROFILE_FIELD_CHARS
                _validated(require_text, value, f"changes.{name}", max_chars=limit)
        with self._locked():
            current = self._load_profile()
            self._load_preferences()  # checked before anything is written
            fields = current.fields()
            for name, value in changes.items():
                if value is None:
                    fields.pop(name, None)
                else:
                    fields[name] = value
            if fields == current.fields():
                return current
            now = _timestamp(self.clock.now(), "clock.now()")
            updated = UserProfile(user_scope=self.user_scope, revision=current.revision + 1,
                                  updated_at=now, **fields)
            self._save_profile(updated)
            self._project(updated, now)
        return updated

    # -- preferences ----------------------------------------------------------------

    @staticmethod
    def _check_key(key: Any) -> str:
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise UserMemoryValidationError(
                "key", f"{key!r} is not a preference key",
                "use 1-64 characters from a-z 0-9 _ . -, starting with a letter or digit "
                "(e.g. 'reply.language')",
            )
        return key

    def set_preference(
        self,
        key: str,
        value: str,
        *,
        expires_at: datetime | str | None = None,
        source_event_id: str | None = None,
        updated_at: datetime | str | None = None,
    ) -> PreferenceWrite:
        """Create, update or confirm one keyed preference (see the module docstring)."""
        self._check_key(key)
        _validated(require_text, value, "value", max_chars=MAX_VALUE_CHARS)
        if source_event_id is not None:  # an opaque id, like a transcript event id
            _validated(require_opaque_id, source_event_id, "source_event_id")
        expires = None if expires_at is None else _timestamp(expires_at, "expires_at")
        now = _timestamp(self.clock.now(), "clock.now()")
        at = now if updated_at is None else _timestamp(updated_at, "updated_at")
        if expires is not None and expires <= at:
            raise UserMemoryValidationError(
                "expires_at", f"{format_timestamp(expires)} is not later than updated_at "
                f"{format_timestamp(at)}", "give a future expiry, or None for no expiry",
            )
        with self._locked():
            prefs = self._load_preferences()
            profile = self._load_profile()  # checked before anything is written
            old = prefs.get(key)
            status = preference_write_status(old, value, expires, source_event_id, at)
            if status == UNCHANGED:
                self._repair_projection(profile, now)
                return PreferenceWrite(UNCHANGED, key, old.value, old.value, old.revision)
            if status == STALE:
                raise StalePreferenceUpdateError(key, at, old.updated_at, old.revision,
                                                 old.deleted)
            revision = 1 if old is None else old.revision + 1
            self._commit(Preference(key=key, value=value, revision=revision, updated_at=at,
                                    expires_at=expires, source_event_id=source_event_id),
                         profile, now)
        previous = None if old is None else old.value
        return PreferenceWrite(status, key, previous, value, revision)

    def delete_preference(self, key: str, *,
                          deleted_at: datetime | str | None = None) -> PreferenceWrite:
        """Replace the key's value by a tombstone stamped ``deleted_at`` (default: now).

        Deleting a key twice is ``unchanged``; deleting a key never set still leaves a
        tombstone, so a late, older write of it stays refused. The tombstone is logged,
        then the log is compacted at once: the deleted value is gone from every file.
        """
        self._check_key(key)
        now = _timestamp(self.clock.now(), "clock.now()")
        at = now if deleted_at is None else _timestamp(deleted_at, "deleted_at")
        with self._locked():
            prefs = self._load_preferences()
            profile = self._load_profile()  # checked before anything is written
            old = prefs.get(key)
            status = preference_write_status(old, None, None, None, at)
            if status == UNCHANGED:
                self._repair_projection(profile, now)
                return PreferenceWrite(UNCHANGED, key, None, None, old.revision)
            if status == STALE:
                raise StalePreferenceUpdateError(key, at, old.updated_at, old.revision, False)
            revision = 1 if old is None else old.revision + 1
            self._commit(Preference(key=key, value=None, revision=revision, updated_at=at,
                                    deleted_at=at), profile, now)
        return PreferenceWrite(DELETED, key, None if old is None else old.value, None, revision)

    def get_preference(self, key: str) -> Preference | None:
        """The stored state of ``key`` (tombstones included), or ``None``."""
        self._check_key(key)
        return self._load_preferences().get(key)

    def list_preferences(self) -> tuple[Preference, ...]:
        """Every stored, non-deleted preference by key — expired ones included."""
        prefs = self._load_preferences()
        return tuple(prefs[k] for k in sorted(prefs) if not prefs[k].deleted)

    def _as_of(self, as_of: datetime | str | None) -> datetime:
        if as_of is None:
            return _timestamp(self.clock.now(), "clock.now()")
        return _timestamp(as_of, "as_of")

    def list_active_preferences(self, as_of: datetime | str | None = None
                                ) -> tuple[Preference, ...]:
        """The preferences that are not deleted and not expired at ``as_of`` (default now)."""
        return active_at(self._load_preferences(), self._as_of(as_of))

    def get_context_for_agent(self, as_of: datetime | str | None = None) -> str:
        """A ``<user_memory>`` prompt block: profile + active preferences, all escaped."""
        at = self._as_of(as_of)
        return render_user_context(self.user_scope, self._load_profile(),
                                   active_at(self._load_preferences(), at), at)

    def refresh_memory_md(self, as_of: datetime | str | None = None) -> Path:
        """Re-project MEMORY.md for ``as_of`` (expiry passes without a write)."""
        at = self._as_of(as_of)
        with self._locked():
            profile = self._load_profile()
            self._load_preferences()
            self._project(profile, at)
        return self.memory_md_path
