"""s11 preference_write_status: the revision decision for one keyed write, without files.

Kept apart from tests/test_user.py (which also holds the multi-process runners).
"""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given

from labmem.core.clock import FixedClock
from labmem.exercises.s11 import WRITE_INPUTS
from labmem.user import (
    CREATED,
    DELETED,
    STALE,
    UNCHANGED,
    UPDATED,
    Preference,
    StalePreferenceUpdateError,
    UserMemory,
    preference_write_status,
)

T0 = datetime(2026, 8, 1, tzinfo=timezone.utc)


def at(hours):
    return T0 + timedelta(hours=hours)


def stored(value="dark", hours=2, *, expires=None, source=None, revision=1):
    return Preference("theme", value, revision, at(hours), expires_at=expires,
                      source_event_id=source)


def tombstone(hours=2, revision=2):
    return Preference("theme", None, revision, at(hours), deleted_at=at(hours))


@pytest.mark.parametrize("before, write, expected", [
    (None, ("dark", None, None, at(1)), CREATED),
    (stored(), ("dark", None, None, at(0)), UNCHANGED),     # a retry, whatever its time
    (stored(), ("light", None, None, at(3)), UPDATED),
    (stored(), ("light", None, None, at(2)), STALE),       # not later: same instant
    (stored(), ("light", None, None, at(1)), STALE),
    (stored(), ("dark", None, "evt-1", at(3)), UPDATED),   # the source is part of the state
    (stored(), ("dark", at(9), None, at(3)), UPDATED),     # so is the expiry
    (tombstone(), ("dark", None, None, at(3)), CREATED),   # re-created after a delete
    (tombstone(), ("dark", None, None, at(2)), STALE),     # the tombstone guards its time
    (None, (None, None, None, at(1)), DELETED),            # a delete of a key never set
    (stored(), (None, None, None, at(3)), DELETED),
    (stored(), (None, None, None, at(2)), STALE),
    (tombstone(), (None, None, None, at(0)), UNCHANGED),   # deleting twice
])
def test_the_revision_rule(before, write, expected):
    assert preference_write_status(before, *write) == expected


@given(WRITE_INPUTS)
def test_user_memory_acts_on_the_decision(tmp_path_factory, args):
    before, value, expires_at, source_event_id, updated_at = args
    memory = UserMemory(tmp_path_factory.mktemp("u"), user_id="u", clock=FixedClock(at(0)))
    if before is not None:
        _store(memory, before)
    expected = preference_write_status(before, value, expires_at, source_event_id, updated_at)
    try:
        if value is None:
            write = memory.delete_preference("theme", deleted_at=updated_at)
        else:
            write = memory.set_preference("theme", value, expires_at=expires_at,
                                          source_event_id=source_event_id,
                                          updated_at=updated_at)
    except StalePreferenceUpdateError:
        assert expected == STALE
        return
    assert write.status == expected
    revision = 0 if before is None else before.revision
    assert write.revision == (revision if expected == UNCHANGED else revision + 1)


def _store(memory, pref):
    """Put ``pref`` on disk exactly as given (revision included), through the snapshot."""
    memory._save_preferences({"theme": pref})
