"""s11 user memory: a profile and keyed preferences — keyed, scoped, revisioned.

One :class:`UserMemory` owns one user's directory under a shared root::

    root/users/<scope_digest>/profile.json       canonical snapshot (has "user_scope")
    root/users/<scope_digest>/preferences.json   canonical snapshot (has "user_scope")
    root/users/<scope_digest>/MEMORY.md          projection: profile + active preferences
    root/users/<scope_digest>/user.lock          the cross-process lock for all three

Preferences are updated by key, never appended fuzzily. Each key carries a revision
that counts from 1; a write whose state ``(value, expires_at, source_event_id)`` equals
the stored one is ``unchanged`` (no write, no new revision), and a *changing* write
whose ``updated_at`` is not later than the stored one is refused as stale. A delete
leaves a tombstone stamped ``deleted_at``, so an older write cannot resurrect the key.
That decision is the pure function :func:`preference_write_status`.

Every read-modify-write reloads the snapshots from disk inside the lock, so two
instances (or two processes) writing to the same user never lose an update.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from html import escape
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import (
    CorruptionError,
    InvalidInputError,
    LabmemError,
    ScopeError,
    validated_as,
)
from labmem.core.provenance import scope_digest
from labmem.core.storage import (
    LockFactory,
    file_lock,
    read_snapshot,
    write_snapshot,
    write_text_atomic,
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
MAX_SOURCE_EVENT_ID_CHARS = 200
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")

PROFILE_FORMAT = "labmem.user.profile/v1"
PREFERENCES_FORMAT = "labmem.user.preferences/v1"

CREATED, UPDATED, UNCHANGED, DELETED = "created", "updated", "unchanged", "deleted"
STALE = "stale"  # a decision only: a stale write is refused, so it is never a write's status


class UserMemoryError(LabmemError):
    """Base of every error the user memory layer raises."""


class UserMemoryValidationError(UserMemoryError, InvalidInputError):
    """A call was refused before anything was written."""


class UserScopeError(UserMemoryError, ScopeError):
    """A canonical file belongs to another user scope than this :class:`UserMemory`."""


class UserMemoryCorruptionError(UserMemoryError, CorruptionError):
    """A canonical snapshot cannot be decoded."""


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


def _timestamp(value: Any, field: str) -> datetime:
    return _validated(parse_timestamp, value, field=field)


def _optional_ts(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


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
            "updated_at": format_timestamp(self.updated_at),
            "expires_at": _optional_ts(self.expires_at),
            "source_event_id": self.source_event_id,
            "deleted_at": _optional_ts(self.deleted_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Preference:
        def ts(name: str) -> datetime | None:
            raw = data.get(name)
            return None if raw is None else parse_timestamp(raw, field=name)

        revision = data["revision"]
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
            raise ValueError(f"revision must be a positive integer, got {revision!r}")
        return cls(key=data["key"], value=data["value"], revision=revision,
                   updated_at=parse_timestamp(data["updated_at"], field="updated_at"),
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
        self.memory_md_path = self.directory / "MEMORY.md"
        self._lock_factory = lock_factory

    def __repr__(self) -> str:
        return f"UserMemory(user_scope={self.user_scope!r})"

    def _locked(self):
        self.directory.mkdir(parents=True, exist_ok=True)
        return self._lock_factory(self.directory / "user")

    # -- loading (always from disk) -------------------------------------------------

    def _load(self, path: Path, expected_format: str) -> dict[str, Any] | None:
        doc = read_snapshot(path, corruption_error=UserMemoryCorruptionError)
        if doc is None:
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("user_scope"), str):
            raise UserMemoryCorruptionError(path.name, None, "not a user memory snapshot "
                                                             "(no user_scope)")
        if doc["user_scope"] != self.user_scope:
            raise UserScopeError(
                f"{path.name}: belongs to user scope {doc['user_scope']!r}, not "
                f"{self.user_scope!r}; a file copied from another user is refused — "
                "restore this user's own file or remove the copy"
            )
        if doc.get("format") != expected_format:
            raise UserMemoryCorruptionError(
                path.name, None, f"format is {doc.get('format')!r}, expected {expected_format!r}"
            )
        return doc

    def _load_preferences(self) -> dict[str, Preference]:
        doc = self._load(self.preferences_path, PREFERENCES_FORMAT)
        if doc is None:
            return {}
        items = doc.get("preferences")
        if not isinstance(items, dict):
            raise UserMemoryCorruptionError(self.preferences_path.name, None,
                                            "'preferences' is not an object")
        result: dict[str, Preference] = {}
        for key, data in items.items():
            try:
                pref = Preference.from_dict(data)
            except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
                problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                raise UserMemoryCorruptionError(self.preferences_path.name, None,
                                                f"preference {key!r}: {problem}") from None
            if pref.key != key:
                raise UserMemoryCorruptionError(self.preferences_path.name, None,
                                                f"preference {key!r} is stored as {pref.key!r}")
            result[key] = pref
        return result

    def _load_profile(self) -> UserProfile:
        doc = self._load(self.profile_path, PROFILE_FORMAT)
        if doc is None:
            return UserProfile(user_scope=self.user_scope)
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

    # -- writing ------------------------------------------------------------------

    def _save_preferences(self, prefs: dict[str, Preference]) -> None:
        write_snapshot(self.preferences_path, {
            "format": PREFERENCES_FORMAT,
            "user_scope": self.user_scope,
            "preferences": {key: prefs[key].to_dict() for key in sorted(prefs)},
        })

    def _save_profile(self, profile: UserProfile) -> None:
        write_snapshot(self.profile_path, {
            "format": PROFILE_FORMAT,
            "user_scope": self.user_scope,
            "fields": profile.fields(),
            "revision": profile.revision,
            "updated_at": format_timestamp(profile.updated_at),
        })

    def _project(self, profile: UserProfile, prefs: dict[str, Preference],
                 as_of: datetime) -> None:
        """Rewrite MEMORY.md (atomically) from the profile and the active preferences."""
        text = render_memory_md(self.user_scope, profile, _active(prefs, as_of), as_of)
        write_text_atomic(self.memory_md_path, text)

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
            prefs = self._load_preferences()  # checked before anything is written
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
            self._project(updated, prefs, now)
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
        if source_event_id is not None:
            _validated(require_text, source_event_id, "source_event_id",
                       max_chars=MAX_SOURCE_EVENT_ID_CHARS)
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
                return PreferenceWrite(UNCHANGED, key, old.value, old.value, old.revision)
            if status == STALE:
                raise StalePreferenceUpdateError(key, at, old.updated_at, old.revision,
                                                 old.deleted)
            revision = 1 if old is None else old.revision + 1
            prefs[key] = Preference(key=key, value=value, revision=revision, updated_at=at,
                                    expires_at=expires, source_event_id=source_event_id)
            self._save_preferences(prefs)
            self._project(profile, prefs, now)
        previous = None if old is None else old.value
        return PreferenceWrite(status, key, previous, value, revision)

    def delete_preference(self, key: str, *,
                          deleted_at: datetime | str | None = None) -> PreferenceWrite:
        """Replace the key's value by a tombstone stamped ``deleted_at`` (default: now).

        Deleting a key twice is ``unchanged``; deleting a key never set still leaves a
        tombstone, so a late, older write of it stays refused.
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
                return PreferenceWrite(UNCHANGED, key, None, None, old.revision)
            if status == STALE:
                raise StalePreferenceUpdateError(key, at, old.updated_at, old.revision, False)
            revision = 1 if old is None else old.revision + 1
            prefs[key] = Preference(key=key, value=None, revision=revision, updated_at=at,
                                    deleted_at=at)
            self._save_preferences(prefs)
            self._project(profile, prefs, now)
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
            self._project(self._load_profile(), self._load_preferences(), at)
        return self.memory_md_path


def _active(prefs: Mapping[str, Preference], as_of: datetime) -> tuple[Preference, ...]:
    return tuple(prefs[k] for k in sorted(prefs) if prefs[k].is_active(as_of))


def _attr(value: Any) -> str:
    return escape(str(value), quote=True)


def render_user_context(user_scope: str, profile: UserProfile,
                        active: tuple[Preference, ...], as_of: datetime) -> str:
    """The agent-facing block; stored text is escaped so it cannot close an element."""
    lines = [f'<user_memory user_scope="{_attr(user_scope)}" as_of="{format_timestamp(as_of)}">']
    lines.append(f'  <profile revision="{profile.revision}">')
    for name, value in profile.fields().items():
        lines.append(f'    <field name="{name}">{_attr(value)}</field>')
    lines.append("  </profile>")
    lines.append("  <preferences>")
    for pref in active:
        expiry = "" if pref.expires_at is None else (
            f' expires_at="{format_timestamp(pref.expires_at)}"')
        lines.append(f'    <preference key="{_attr(pref.key)}" revision="{pref.revision}"'
                     f'{expiry}>{_attr(pref.value)}</preference>')
    lines.append("  </preferences>")
    lines.append("</user_memory>")
    return "\n".join(lines)


def render_memory_md(user_scope: str, profile: UserProfile,
                     active: tuple[Preference, ...], as_of: datetime) -> str:
    """MEMORY.md: a human-readable projection, never read back as canonical state."""
    lines = [
        "# User memory",
        "",
        f"<!-- projection of profile.json + preferences.json; user_scope: {user_scope}; "
        f"as_of: {format_timestamp(as_of)} -->",
        "",
        "## Profile",
        "",
    ]
    fields = profile.fields()
    lines += [f"- {name}: {_attr(value)}" for name, value in fields.items()] or ["- (empty)"]
    lines += ["", "## Preferences", ""]
    lines += [
        f"- {pref.key}: {_attr(pref.value)} (revision {pref.revision}"
        + ("" if pref.expires_at is None else f", until {format_timestamp(pref.expires_at)}")
        + ")"
        for pref in active
    ] or ["- (none active)"]
    return "\n".join(lines) + "\n"
