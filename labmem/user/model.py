"""s11 records: the vocabulary of user memory — preferences, the profile, the write rule.

Everything here is plain data and pure functions: the :class:`Preference` a key holds,
the :class:`UserProfile`, the outcome of a write (:class:`PreferenceWrite`), the errors,
and :func:`preference_write_status`, the revision rule alone. :mod:`labmem.user.memory`
acts on them; nothing here touches a file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from labmem.core.clock import UTC, format_timestamp, parse_stored_timestamp, parse_timestamp
from labmem.core.errors import (
    CorruptionError,
    InvalidInputError,
    LabmemError,
    ScopeError,
    validated_as,
)

PROFILE_FIELDS = ("name", "preferred_name", "pronouns", "city", "timezone", "notes")
MAX_PROFILE_FIELD_CHARS = 200
MAX_PROFILE_NOTES_CHARS = 2_000
MAX_VALUE_CHARS = 2_000
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")

PROFILE_FORMAT = "labmem.user.profile/v1"
PREFERENCES_FORMAT = "labmem.user.preferences/v2"  # a snapshot of the revision log
LEGACY_PREFERENCES_FORMAT = "labmem.user.preferences/v1"  # the whole state, no log

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


def check_document(doc: Any, path: Path, user_scope: str,
                   formats: tuple[str, ...]) -> dict[str, Any]:
    """A canonical snapshot of ``user_scope`` in one of ``formats``, or a refusal."""
    if not isinstance(doc, dict) or not isinstance(doc.get("user_scope"), str):
        raise UserMemoryCorruptionError(path.name, None, "not a user memory snapshot "
                                                         "(no user_scope)")
    if doc["user_scope"] != user_scope:
        raise UserScopeError(
            f"{path.name}: belongs to user scope {doc['user_scope']!r}, not "
            f"{user_scope!r}; a file copied from another user is refused — "
            "restore this user's own file or remove the copy"
        )
    if doc.get("format") not in formats:
        raise UserMemoryCorruptionError(
            path.name, None, f"format is {doc.get('format')!r}, expected {formats[0]!r}"
        )
    return doc
