"""s11 user memory: a profile and keyed preferences — keyed, scoped, revisioned.

One :class:`UserMemory` owns one user's directory under a shared root::

    root/users/<scope_digest>/profile.json       canonical snapshot (has "user_scope")
    root/users/<scope_digest>/preferences.jsonl  canonical revision log: one line per change
    root/users/<scope_digest>/preferences.json   canonical snapshot compacted from that log
    root/users/<scope_digest>/MEMORY.md          projection: profile + active preferences
    root/users/<scope_digest>/user.lock          the cross-process lock for all of them

Preferences are updated by key, never appended fuzzily. Each key carries a revision
that counts from 1; a write whose state ``(value, expires_at, source_event_id)`` equals
the stored one is ``unchanged`` (no write, no new revision), and a *changing* write
whose ``updated_at`` is not later than the stored one is refused as stale. A delete
leaves a tombstone stamped ``deleted_at``, so an older write cannot resurrect the key.
That decision is the pure function :func:`preference_write_status`.

A change is one fsync'd line of the revision log (tombstones included): that line is the
commit. MEMORY.md is then rewritten atomically, since what it shows changed. Now and then
the log is *compacted*: the whole state goes into ``preferences.json`` (atomically, with
the log generation it covers) and the log starts again empty. That happens on a user's
first write, when the log holds more lines than the snapshot holds keys, and on every
delete — so a deleted value leaves the log and the snapshot as well as MEMORY.md. A crash
between the line and its compaction loses nothing: the snapshot plus the log lines it does
not cover is the state, and the next write (or a retry) finishes the compaction.

Every read-modify-write reads the state again inside the lock, so two instances (or two
processes) writing to the same user never lose an update. Reading again is cheap: the
decoded state is cached and refreshed by the files' identity and size — only the log
lines another process appended are read, and the snapshot only when it was replaced.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from labmem.core.clock import (
    UTC,
    Clock,
    format_timestamp,
    parse_stored_timestamp,
    parse_timestamp,
    resolve_clock,
)
from labmem.core.errors import (
    CorruptionError,
    InvalidInputError,
    LabmemError,
    ScopeError,
    validated_as,
)
from labmem.core.provenance import require_opaque_id, scope_digest
from labmem.core.render import XML, count, join_lines, xml_attributes
from labmem.core.storage import (
    FileSignature,
    JsonlLog,
    LockFactory,
    file_lock,
    file_signature,
    fsync_directory,
    read_snapshot_signed,
    sync_file,
    write_bytes_atomic,
    write_snapshot,
)
from labmem.core.validation import require_text

__all__ = [
    "PROFILE_FIELDS",
    "Preference",
    "PreferenceWrite",
    "UserProfile",
    "UserMemory",
    "UserMemoryError",
    "UserMemoryValidationError",
    "UserMemoryCorruptionError",
    "UserScopeError",
    "StalePreferenceUpdateError",
    "is_active",
    "preference_write_status",
    "CREATED",
    "UPDATED",
    "UNCHANGED",
    "DELETED",
    "STALE",
]

PROFILE_FIELDS = ("name", "preferred_name", "pronouns", "city", "timezone", "notes")
MAX_PROFILE_FIELD_CHARS = 200
MAX_PROFILE_NOTES_CHARS = 2_000
MAX_VALUE_CHARS = 2_000
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")

PROFILE_FORMAT = "labmem.user.profile/v1"
PREFERENCES_FORMAT = "labmem.user.preferences/v2"  # a snapshot of the revision log
LEGACY_PREFERENCES_FORMAT = "labmem.user.preferences/v1"  # the whole state, no log
#: The log is compacted once it holds more lines than this and than the snapshot has keys
#: (so reading both costs at most about twice the snapshot, and compaction is amortized).
COMPACT_MIN_LINES = 64
#: The durable steps of one preference write, in order; crash tests stop a child
#: process at each of them (the last two only when the write compacts).
WRITE_BOUNDARIES = ("revision_appended", "memory_md_written", "snapshot_written",
                    "log_removed")
_MEMORY_MD_AS_OF = re.compile(rb"; as_of: (\S+) -->")

CREATED, UPDATED, UNCHANGED, DELETED = "created", "updated", "unchanged", "deleted"
STALE = "stale"  # a decision only: a stale write is refused, so it is never a write's status


class UserMemoryError(LabmemError):
    """Base of every error the user memory layer raises."""


class UserMemoryValidationError(UserMemoryError, InvalidInputError):
    """A call was refused before anything was written."""


class UserScopeError(UserMemoryError, ScopeError):
    """A canonical file belongs to another user scope than this :class:`UserMemory`."""


class UserMemoryCorruptionError(UserMemoryError, CorruptionError):
    """A canonical snapshot or a line of the revision log cannot be decoded."""


class StalePreferenceUpdateError(UserMemoryError):
    """A changing write is not newer than the stored revision (or tombstone) of its key."""

    field = "updated_at"

    def __init__(self, key: str, attempted: datetime, stored: datetime, revision: int,
                 deleted: bool) -> None:
        self.key = key
        self.attempted = attempted
        self.stored = stored
        self.revision = revision
        what = "tombstone" if deleted else "value"
        super().__init__(
            f"updated_at: {format_timestamp(attempted)} is not later than the stored {what} "
            f"of {key!r} (revision {revision}, at {format_timestamp(stored)}); this write is "
            "out of order — re-read the preference and retry with a later updated_at, "
            "or drop it"
        )


_validated = partial(validated_as, UserMemoryValidationError)


def _reached(boundary: str) -> None:
    """Called after each durable step of a write (:data:`WRITE_BOUNDARIES`). A no-op:
    crash tests replace it in a child process with one that calls ``os._exit``."""


def _timestamp(value: Any, field: str) -> datetime:
    return _validated(parse_timestamp, value, field=field)


def _optional_ts(value: datetime | None) -> str | None:
    return None if value is None else _stamp(value)


def _stamp(value: datetime) -> str:
    """:func:`format_timestamp` of a time this layer has checked already (an aware UTC
    ``datetime``): the same text without checking it again."""
    if type(value) is not datetime or value.tzinfo is not UTC:
        return format_timestamp(value)
    return value.isoformat()[:-6] + "Z"  # "+00:00" is the only offset a UTC time has


def is_active(expires_at: datetime | None, as_of: datetime) -> bool:
    """Active while ``as_of < expires_at``; expired exactly *at* ``expires_at``."""
    return expires_at is None or as_of < expires_at


@dataclass(frozen=True)
class Preference:
    """One key's stored state. ``deleted_at`` is set only on a tombstone."""

    key: str
    value: str | None
    revision: int
    updated_at: datetime
    expires_at: datetime | None = None
    source_event_id: str | None = None
    deleted_at: datetime | None = None

    @property
    def deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def state(self) -> tuple[Any, ...]:
        """What decides ``unchanged``: value, expiry and source event (not updated_at)."""
        return (self.value, self.expires_at, self.source_event_id, self.deleted)

    def is_active(self, as_of: datetime) -> bool:
        return not self.deleted and is_active(self.expires_at, as_of)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": self.value,
            "revision": self.revision,
            "updated_at": _stamp(self.updated_at),
            "expires_at": _optional_ts(self.expires_at),
            "source_event_id": self.source_event_id,
            "deleted_at": _optional_ts(self.deleted_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Preference:
        def ts(name: str) -> datetime | None:
            raw = data.get(name)
            return None if raw is None else parse_stored_timestamp(raw, field=name)

        revision = data["revision"]
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
            raise ValueError(f"revision must be a positive integer, got {revision!r}")
        return cls(key=data["key"], value=data["value"], revision=revision,
                   updated_at=parse_stored_timestamp(data["updated_at"], field="updated_at"),
                   expires_at=ts("expires_at"), source_event_id=data.get("source_event_id"),
                   deleted_at=ts("deleted_at"))


def preference_write_status(stored: Preference | None, value: str | None,
                            expires_at: datetime | None, source_event_id: str | None,
                            updated_at: datetime) -> str:
    """What a write of one key does to its ``stored`` state: the revision rule, alone.

    ``value=None`` is a delete (it carries no expiry or source). The order of the two
    questions matters: *same state?* comes first, so a retried event is ``unchanged``
    whatever time it carries; only a write that changes something must be *later* than the
    stored revision (a tombstone included), or it is ``stale`` — an out-of-order event
    never overwrites a newer choice. Otherwise a set is ``created`` (no live value before)
    or ``updated``, and a delete is ``deleted``. :class:`UserMemory` acts on this answer.
    """
    if stored is not None:
        if value is None:
            same = stored.deleted
        else:
            same = stored.state == (value, expires_at, source_event_id, False)
        if same:
            return UNCHANGED
        if updated_at <= stored.updated_at:
            return STALE
    if value is None:
        return DELETED
    return CREATED if stored is None or stored.deleted else UPDATED


@dataclass(frozen=True)
class PreferenceWrite:
    """The outcome of one :meth:`UserMemory.set_preference` or ``delete_preference``."""

    status: str
    key: str
    previous_value: str | None
    current_value: str | None
    revision: int

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "key": self.key, "previous_value": self.previous_value,
                "current_value": self.current_value, "revision": self.revision}


@dataclass(frozen=True)
class UserProfile:
    """The user's profile: the known fields (``None`` = not set), its revision and time."""

    user_scope: str
    name: str | None = None
    preferred_name: str | None = None
    pronouns: str | None = None
    city: str | None = None
    timezone: str | None = None
    notes: str | None = None
    revision: int = 0
    updated_at: datetime | None = None

    def fields(self) -> dict[str, str]:
        """The fields that are set, in :data:`PROFILE_FIELDS` order."""
        return {f: getattr(self, f) for f in PROFILE_FIELDS if getattr(self, f) is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"user_scope": self.user_scope, "fields": self.fields(),
                "revision": self.revision, "updated_at": _optional_ts(self.updated_at)}


class UserMemory:
    """One user's profile and keyed preferences under a shared ``root``."""

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
        self.preferences_path = self.directory / "preferences.json"
        self.preference_log_path = self.directory / "preferences.jsonl"
        self.memory_md_path = self.directory / "MEMORY.md"
        self._lock_factory = lock_factory
        self._lock: Any = None
        self._prefs = _PreferenceCache()
        self._prefs_from: FileSignature | None = None  # the snapshot the cache was built on
        self._prefs_loaded = False
        self._log = self._new_log()
        self._profile = UserProfile(user_scope=self.user_scope)
        self._profile_from: FileSignature | None = None
        self._profile_loaded = False
        self._projected: tuple[Any, ...] | None = None  # the state MEMORY.md last showed

    def __repr__(self) -> str:
        return f"UserMemory(user_scope={self.user_scope!r})"

    def _locked(self):
        if self._lock is None:  # one lock object per instance: making one costs more than
            self._lock = self._lock_factory(self.directory / "user")  # taking it
        return self._lock

    # -- loading (cached; refreshed by file identity and size) ---------------------------

    def _check_document(self, doc: Any, path: Path, formats: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(doc, dict) or not isinstance(doc.get("user_scope"), str):
            raise UserMemoryCorruptionError(path.name, None, "not a user memory snapshot "
                                                             "(no user_scope)")
        if doc["user_scope"] != self.user_scope:
            raise UserScopeError(
                f"{path.name}: belongs to user scope {doc['user_scope']!r}, not "
                f"{self.user_scope!r}; a file copied from another user is refused — "
                "restore this user's own file or remove the copy"
            )
        if doc.get("format") not in formats:
            raise UserMemoryCorruptionError(
                path.name, None, f"format is {doc.get('format')!r}, expected {formats[0]!r}"
            )
        return doc

    def _new_log(self) -> JsonlLog[tuple[int, Preference]]:
        return JsonlLog(self.preference_log_path, decode=self._decode_revision,
                        corruption_error=UserMemoryCorruptionError,
                        lock_factory=lambda path: contextlib.nullcontext())  # user.lock

    def _decode_revision(self, line: int, record: dict[str, Any]) -> tuple[int, Preference]:
        name = self.preference_log_path.name
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

    def _load_preferences(self) -> dict[str, Preference]:
        """The current preferences by key (tombstones included); do not modify.

        Costs two ``stat`` calls when nothing changed, plus the log lines another process
        appended since; the snapshot is decoded again only when it was replaced.
        """
        for _ in range(10):
            reloaded = not self._prefs_loaded or \
                file_signature(self.preferences_path) != self._prefs_from
            if reloaded:
                self._reload_preferences()
            try:
                moved = self._follow_log()
            except UserMemoryCorruptionError:
                self._prefs_loaded = False  # never serve a state that skipped a bad line
                if reloaded and file_signature(self.preferences_path) == self._prefs_from:
                    raise
                continue  # perhaps read while a compaction replaced the files: again
            if moved is None:
                return self._prefs.state
            self._prefs_loaded = False
            if reloaded and file_signature(self.preferences_path) == self._prefs_from:
                raise UserMemoryCorruptionError(self.preference_log_path.name, None, moved)
            # a compaction replaced the snapshot and its log while this reader looked
        raise UserMemoryCorruptionError(self.preferences_path.name, None,
                                        "the snapshot and its log kept changing while read")

    def _reload_preferences(self) -> None:
        doc, signature = read_snapshot_signed(self.preferences_path,
                                              corruption_error=UserMemoryCorruptionError)
        cache = _PreferenceCache()
        if doc is not None:
            name = self.preferences_path.name
            self._check_document(doc, self.preferences_path,
                                 (PREFERENCES_FORMAT, LEGACY_PREFERENCES_FORMAT))
            if doc["format"] == PREFERENCES_FORMAT:
                log = doc.get("log")
                generation = log.get("generation") if isinstance(log, dict) else None
                lines = log.get("lines") if isinstance(log, dict) else None
                if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                           for v in (generation, lines)):
                    raise UserMemoryCorruptionError(name, None, "'log' is not "
                                                    "{generation, lines} (integers ≥ 0)")
                cache.generation, cache.covered = generation, lines
            items = doc.get("preferences")
            if not isinstance(items, dict):
                raise UserMemoryCorruptionError(name, None, "'preferences' is not an object")
            for key, data in items.items():
                try:
                    pref = Preference.from_dict(data)
                except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
                    problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                    raise UserMemoryCorruptionError(name, None,
                                                    f"preference {key!r}: {problem}") from None
                if pref.key != key:
                    raise UserMemoryCorruptionError(name, None,
                                                    f"preference {key!r} is stored as "
                                                    f"{pref.key!r}")
                cache.put(pref)
            cache.snapshot_keys = len(items)
        self._prefs, self._prefs_from, self._prefs_loaded = cache, signature, True
        self._log = self._new_log()

    def _follow_log(self) -> str | None:
        """Apply the log lines appended since the last look (a ``stat``, and a read only
        of what was appended).

        Returns ``None``, or what moved under this reader — which a compaction explains
        only if the snapshot was replaced too (the caller checks).
        """
        log, cache = self._log, self._prefs
        if cache.stale_log:  # on a log its snapshot covers: the compaction may remove it
            stat = file_signature(self.preference_log_path)
            if stat is None or (stat.device, stat.inode) != log.identity:
                self._log = log = self._new_log()
                cache.stale_log, cache.log_generation = False, None
        # (a log replaced or removed under a live reader makes refresh() raise: the
        # caller reads the snapshot again, which a compaction replaced first)
        name, first = self.preference_log_path.name, log.line_count + 1
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

    def _load_profile(self) -> UserProfile:
        signature = file_signature(self.profile_path)
        if self._profile_loaded and signature == self._profile_from:
            return self._profile
        doc, signature = read_snapshot_signed(self.profile_path,
                                              corruption_error=UserMemoryCorruptionError)
        if doc is None:
            profile = UserProfile(user_scope=self.user_scope)
        else:
            profile = self._decode_profile(self._check_document(doc, self.profile_path,
                                                                (PROFILE_FORMAT,)))
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
        cache = self._prefs
        if cache.stale_log:  # a compaction crashed before removing the log it covered
            self._remove_log()
        self._log.append({"user_scope": self.user_scope, "generation": cache.generation,
                          **pref.to_dict()})
        cache.log_generation = cache.generation
        cache.log_lines += 1
        cache.log_tombstones = cache.log_tombstones or pref.deleted
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
            self._prefs.put(pref)  # the state MEMORY.md will show
            text = self._prefs.render(self.user_scope, profile, now)
            write_bytes_atomic(self.memory_md_path, text,
                               alongside=lambda: self._append_revision(pref), durable=False)
        except BaseException:
            self._prefs_loaded = False  # the cache may hold a change that is not on disk
            raise
        self._projected = self._projection_key(now)
        _reached("memory_md_written")
        self._compact_if_due()

    def _compact_if_due(self) -> None:
        cache = self._prefs
        if self._prefs_from is None or cache.log_tombstones or \
                cache.log_lines > max(COMPACT_MIN_LINES, cache.snapshot_keys):
            self._save_preferences(cache.state)
        elif cache.stale_log:  # a compaction died after its snapshot: finish it
            self._remove_log()
            self._remove_crash_leftovers()

    def _save_preferences(self, prefs: Mapping[str, Preference]) -> None:
        """Compact: write ``prefs`` as the whole state in a snapshot of the next log
        generation, then remove the log it covers (a crash in between is harmless: lines
        of an older generation than the snapshot's are ignored, then removed)."""
        if not self._prefs_loaded:
            self._load_preferences()
        fresh = prefs is self._prefs.state and self._projection_is_current()
        generation = self._prefs.generation + 1
        sync_file(self.memory_md_path)  # made durable with the snapshot's directory sync
        write_snapshot(self.preferences_path, {
            "format": PREFERENCES_FORMAT,
            "user_scope": self.user_scope,
            "log": {"generation": generation, "lines": 0},
            "preferences": {key: prefs[key].to_dict() for key in sorted(prefs)},
        }, records=("preferences",))
        _reached("snapshot_written")
        cache = _PreferenceCache()
        cache.generation, cache.snapshot_keys = generation, len(prefs)
        for key in sorted(prefs):
            cache.put(prefs[key])
        self._prefs, self._prefs_from = cache, file_signature(self.preferences_path)
        self._remove_log()
        _reached("log_removed")
        self._remove_crash_leftovers()
        if fresh:  # the same state in other files: MEMORY.md still shows it
            self._projected = self._projection_key(self._projected[0])

    def _remove_log(self) -> None:
        try:
            os.unlink(self.preference_log_path)
        except FileNotFoundError:
            pass
        else:
            fsync_directory(self.directory)
        self._prefs.stale_log = False
        self._prefs.log_lines = 0
        self._prefs.log_tombstones = False
        self._prefs.log_generation = None
        self._log = self._new_log()

    def _remove_crash_leftovers(self) -> None:
        """Temp files of this directory's atomic writes that a killed writer left behind.

        Every such write happens under user.lock, which the caller holds: a temp file seen
        now belongs to no running write.
        """
        prefixes = tuple(f".{p.name}." for p in (self.profile_path, self.preferences_path,
                                                 self.memory_md_path))
        for entry in os.scandir(self.directory):
            if entry.name.startswith(prefixes) and entry.name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)

    def _save_profile(self, profile: UserProfile) -> None:
        write_snapshot(self.profile_path, {
            "format": PROFILE_FORMAT,
            "user_scope": self.user_scope,
            "fields": profile.fields(),
            "revision": profile.revision,
            "updated_at": format_timestamp(profile.updated_at),
        })
        self._profile, self._profile_from = profile, file_signature(self.profile_path)

    def _projection_key(self, as_of: datetime) -> tuple[Any, ...]:
        """What MEMORY.md shows: the state read from these files, at ``as_of``."""
        return (as_of, self._prefs_from, self._log.identity, self._log.line_count,
                self._profile_from)

    def _projection_is_current(self) -> bool:
        """Did this instance write MEMORY.md for the state it holds now?"""
        key = self._projected
        return key is not None and key == self._projection_key(key[0])

    def _project(self, profile: UserProfile, as_of: datetime) -> None:
        """Rewrite MEMORY.md (atomically) from the profile and the active preferences."""
        write_bytes_atomic(self.memory_md_path, self._prefs.render(self.user_scope, profile,
                                                                   as_of))
        self._projected = self._projection_key(as_of)

    def _repair_projection(self, profile: UserProfile, now: datetime) -> None:
        """For a write that changed nothing: finish what a crashed write left undone.

        The log is compacted if that is due, and MEMORY.md is rewritten if it does not show
        the current state (at the ``as_of`` in its own header) — as after a crash between
        the log line and the projection. A MEMORY.md this instance wrote is not re-read.
        """
        self._compact_if_due()
        if self._projection_is_current():
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
                    current == self._prefs.render(self.user_scope, profile, shown):
                self._projected = self._projection_key(shown)
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
        return _active(self._load_preferences(), self._as_of(as_of))

    def get_context_for_agent(self, as_of: datetime | str | None = None) -> str:
        """A ``<user_memory>`` prompt block: profile + active preferences, all escaped."""
        at = self._as_of(as_of)
        return render_user_context(self.user_scope, self._load_profile(),
                                   _active(self._load_preferences(), at), at)

    def refresh_memory_md(self, as_of: datetime | str | None = None) -> Path:
        """Re-project MEMORY.md for ``as_of`` (expiry passes without a write)."""
        at = self._as_of(as_of)
        with self._locked():
            profile = self._load_profile()
            self._load_preferences()
            self._project(profile, at)
        return self.memory_md_path


#: MEMORY.md lines of the live keys are kept encoded and joined in blocks of this many, so a
#: rewrite after a change of one line joins one block again, then the blocks.
_BLOCK_LINES = 32


class _PreferenceCache:
    """The decoded preferences and where they came from, kept between calls.

    ``generation``/``covered``: the log generation the snapshot was compacted at, and how
    many of its lines it already holds. ``log_*``: what the log file adds on top. The
    MEMORY.md lines of the live keys are kept rendered (UTF-8) in key order once a
    projection needed them, and joined in blocks of :data:`_BLOCK_LINES`: the next
    projection after one change formats one line and joins one block, not every key.
    """

    def __init__(self) -> None:
        self.state: dict[str, Preference] = {}
        self.generation = 0
        self.covered = 0
        self.snapshot_keys = 0
        self.log_generation: int | None = None
        self.log_lines = 0  # lines of the current generation beyond the snapshot
        self.log_tombstones = False  # a delete is in the log: compact, so its value goes
        self.stale_log = False  # the log holds an older generation than the snapshot
        self._keys: list[str] | None = None  # live keys, sorted (None: not built yet)
        self._lines: list[bytes] = []  # their MEMORY.md lines (with "\n"), in that order
        self._blocks: list[bytes] = []  # _lines joined by _BLOCK_LINES
        self._stale: set[int] = set()  # the blocks whose lines changed since
        self._expiring: set[str] = set()  # live keys with an expiry
        self._profile: tuple[UserProfile | None, bytes] = (None, b"")  # its rendered part

    def put(self, pref: Preference) -> None:
        key = pref.key
        old = self.state.get(key)
        self.state[key] = pref
        was_live, live = old is not None and not old.deleted, not pref.deleted
        if live and pref.expires_at is not None:
            self._expiring.add(key)
        else:
            self._expiring.discard(key)
        keys = self._keys
        if keys is None or not (was_live or live):
            return
        at = bisect.bisect_left(keys, key)
        if was_live and live:
            self._lines[at] = _encoded_line(pref)
            self._stale.add(at // _BLOCK_LINES)
            return
        if live:  # a key became live: its line goes in at its place
            keys.insert(at, key)
            self._lines.insert(at, _encoded_line(pref))
        else:  # it stopped being live
            del keys[at]
            del self._lines[at]
        first, count = at // _BLOCK_LINES, -(-len(keys) // _BLOCK_LINES)
        del self._blocks[count:]  # every block from ``first`` on moved
        self._blocks += [b""] * (count - len(self._blocks))
        self._stale.update(range(first, count))

    def render(self, user_scope: str, profile: UserProfile, as_of: datetime) -> bytes:
        """:func:`render_memory_md` of this state, UTF-8 encoded, from the kept lines."""
        if self._keys is None:
            state = self.state
            self._keys = sorted(k for k, p in state.items() if not p.deleted)
            self._lines = [_encoded_line(state[k]) for k in self._keys]
            self._blocks = [b""] * (-(-len(self._keys) // _BLOCK_LINES))
            self._stale = set(range(len(self._blocks)))
        lines, blocks = self._lines, self._blocks
        for number in self._stale:
            blocks[number] = b"".join(lines[number * _BLOCK_LINES:
                                            (number + 1) * _BLOCK_LINES])
        self._stale.clear()
        if self._profile[0] is not profile:
            self._profile = (profile, _memory_md_profile(profile).encode("utf-8"))
        head = _memory_md_head(user_scope, as_of).encode("utf-8") + self._profile[1]
        hidden = self._hidden_at(as_of)
        if not hidden:
            return head + (b"".join(blocks) if lines else b"- (none active)\n")
        shown = b"".join(line for i, line in enumerate(lines) if i not in hidden)
        return head + (shown or b"- (none active)\n")

    def _hidden_at(self, as_of: datetime) -> set[int]:
        """The places of the live keys that have expired at ``as_of``."""
        if not self._expiring:
            return set()
        state, keys = self.state, self._keys
        assert keys is not None
        return {bisect.bisect_left(keys, key) for key in self._expiring
                if not as_of < state[key].expires_at}


def _active(prefs: Mapping[str, Preference], as_of: datetime) -> tuple[Preference, ...]:
    return tuple(prefs[k] for k in sorted(prefs) if prefs[k].is_active(as_of))


def _attr(value: Any, field: str = "text") -> str:
    return XML.text(value, field)


def render_user_context(user_scope: str, profile: UserProfile,
                        active: tuple[Preference, ...], as_of: datetime) -> str:
    """The agent-facing block, printed through the core renderer (:mod:`labmem.core.render`).

    Every stored value is one escaped line, so a value can neither close an element nor
    start a line of its own; the block is checked to be one element per line.
    """
    head = xml_attributes([("user_scope", user_scope), ("as_of", format_timestamp(as_of))],
                          block="user_memory")
    lines = [f"<user_memory{head}>",
             f'  <profile revision="{count(profile.revision, "profile.revision")}">']
    for name, value in profile.fields().items():
        lines.append(f'    <field name="{name}">{_attr(value, f"profile.{name}")}</field>')
    lines.append("  </profile>")
    lines.append("  <preferences>")
    for pref in active:
        attributes = [("key", pref.key), ("revision", count(pref.revision, "revision"))]
        if pref.expires_at is not None:
            attributes.append(("expires_at", format_timestamp(pref.expires_at)))
        lines.append(f"    <preference{xml_attributes(attributes, block='preference')}>"
                     f"{_attr(pref.value, f'preferences.{pref.key}')}</preference>")
    lines.append("  </preferences>")
    lines.append("</user_memory>")
    return join_lines(lines, "user_memory")


def render_memory_md(user_scope: str, profile: UserProfile,
                     active: tuple[Preference, ...], as_of: datetime) -> str:
    """MEMORY.md: a human-readable projection, never read back as canonical state."""
    return _memory_md(user_scope, profile, [_memory_md_line(p) for p in active], as_of)


def _memory_md_line(pref: Preference) -> str:
    return (f"- {pref.key}: {_attr(pref.value)} (revision {pref.revision}"
            + ("" if pref.expires_at is None else f", until {_stamp(pref.expires_at)}")
            + ")")


def _encoded_line(pref: Preference) -> bytes:
    return (_memory_md_line(pref) + "\n").encode("utf-8")


def _memory_md_head(user_scope: str, as_of: datetime) -> str:
    """MEMORY.md up to its profile lines (the only part that names ``as_of``)."""
    return ("# User memory\n\n<!-- projection of profile.json + the preference log; "
            f"user_scope: {user_scope}; as_of: {_stamp(as_of)} -->\n\n"
            "## Profile\n\n")


def _memory_md_profile(profile: UserProfile) -> str:
    """MEMORY.md from its profile lines up to its preference lines."""
    fields = profile.fields()
    lines = [f"- {name}: {_attr(value)}" for name, value in fields.items()] or ["- (empty)"]
    return "\n".join(lines) + "\n\n## Preferences\n\n"


def _memory_md(user_scope: str, profile: UserProfile, preference_lines: list[str],
               as_of: datetime) -> str:
    return (_memory_md_head(user_scope, as_of) + _memory_md_profile(profile)
            + "\n".join(preference_lines or ["- (none active)"]) + "\n")
