"""s11 user memory: a profile and keyed preferences — keyed, scoped, revisioned.

Preferences are updated by key, never appended fuzzily. Each key carries a revision
that counts from 1; a write whose state ``(value, expires_at, source_event_id)`` equals
the stored one is ``unchanged`` (no write, no new revision), and a *changing* write
whose ``updated_at`` is not later than the stored one is refused as stale. A delete
leaves a tombstone stamped ``deleted_at``, so an older write cannot resurrect the key.
That decision is the pure function :func:`preference_write_status`.

The package, one module per job:

* :mod:`~labmem.user.model` — the records, the errors, the revision rule (pure);
* :mod:`~labmem.user.render` — the agent's ``<user_memory>`` block and MEMORY.md;
* :mod:`~labmem.user.memory` — :class:`UserMemory`, the teaching type: validate, lock,
  read-modify-write, append, project;

and beside it the speed-ups, one trick per module, each behind a small seam:

* :mod:`~labmem.user.follow` — the state kept between calls, following the log;
* :mod:`~labmem.user.compaction` — the compacted snapshot and when it is due;
* :mod:`~labmem.user.blocks` — MEMORY.md's lines kept rendered, in blocks;
* :mod:`~labmem.user.projection_memo` — which state MEMORY.md shows already.

The limits and formats, ``COMPACT_MIN_LINES``, ``WRITE_BOUNDARIES`` and the two renderers
are importable from here as well, and so are ``scope_digest`` and ``read_snapshot_signed``:
every canonical snapshot this layer reads goes through ``labmem.user.read_snapshot_signed``,
looked up at call time, so wrapping that one name counts the decodes.
"""

from labmem.core.provenance import scope_digest as scope_digest
from labmem.core.storage import read_snapshot_signed as read_snapshot_signed
from labmem.user.compaction import COMPACT_MIN_LINES as COMPACT_MIN_LINES
from labmem.user.memory import WRITE_BOUNDARIES as WRITE_BOUNDARIES
from labmem.user.memory import UserMemory
from labmem.user.model import (
    CREATED,
    DELETED,
    PROFILE_FIELDS,
    STALE,
    UNCHANGED,
    UPDATED,
    Preference,
    PreferenceWrite,
    StalePreferenceUpdateError,
    UserMemoryCorruptionError,
    UserMemoryError,
    UserMemoryValidationError,
    UserProfile,
    UserScopeError,
    is_active,
    preference_write_status,
)
from labmem.user.model import KEY_PATTERN as KEY_PATTERN
from labmem.user.model import LEGACY_PREFERENCES_FORMAT as LEGACY_PREFERENCES_FORMAT
from labmem.user.model import MAX_PROFILE_FIELD_CHARS as MAX_PROFILE_FIELD_CHARS
from labmem.user.model import MAX_PROFILE_NOTES_CHARS as MAX_PROFILE_NOTES_CHARS
from labmem.user.model import MAX_VALUE_CHARS as MAX_VALUE_CHARS
from labmem.user.model import PREFERENCES_FORMAT as PREFERENCES_FORMAT
from labmem.user.model import PROFILE_FORMAT as PROFILE_FORMAT
from labmem.user.render import render_memory_md as render_memory_md
from labmem.user.render import render_user_context as render_user_context

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
