"""Checkers for the s11 exercises (user memory: revisions, staleness, expiry).

Three predict exercises (the statuses of a run of writes, the final revision, which keys
are active at an expiry boundary) and one build exercise: the learner rebuilds three pieces
of the chapter's from-scratch user memory (:mod:`labmem.scratch.s11`) — the revision
decision ``write_status``, the ``fold`` of the revision log into the state, and the locked
read-modify-write ``UserMemory.write`` — and :func:`check_layer` runs the layer's contract
suite (:mod:`labmem.exercises.suites.s11`) on the layer assembled from them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from labmem.core.clock import FixedClock, parse_timestamp
from labmem.core.i18n import _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.contracts import ContractReport, assemble
from labmem.user import (
    Preference,
    StalePreferenceUpdateError,
    UserMemory,
    is_active,
)

T0 = parse_timestamp("2026-08-01T00:00:00Z", field="T0")

#: Exercise 1 and 2: (operation, value, updated_at in hours after T0), run in this order.
EXERCISE_1_WRITES: tuple[tuple[str, str | None, int], ...] = (
    ("set", "dark", 1),
    ("set", "dark", 4),
    ("set", "light", 3),
    ("set", "sepia", 3),
    ("delete", None, 6),
    ("set", "dark", 5),
    ("set", "dark", 7),
)

#: Exercise 3: key → expires_at (None = never); which are active at EXERCISE_3_AS_OF?
EXERCISE_3_EXPIRIES: dict[str, str | None] = {
    "reply.language": None,
    "mood.today": "2026-08-01T18:00:00Z",
    "trip.city": "2026-08-03T00:00:00Z",
    "sale.reminder": "2026-08-02T00:00:00Z",
}
EXERCISE_3_AS_OF = "2026-08-02T00:00:00Z"


def replay_exercise_1() -> list[tuple[str, int]]:
    """Run :data:`EXERCISE_1_WRITES` against a real, throw-away UserMemory.

    Each step gives ``(status, revision)``; a refused write gives ``("stale", revision
    so far)``. The checkers compare learners' answers with this, not with a hand copy.
    """
    with tempfile.TemporaryDirectory(prefix="labmem-s11-ex-") as root:
        memory = UserMemory(root, user_id="exercise", clock=FixedClock(T0))
        outcomes: list[tuple[str, int]] = []
        revision = 0
        for op, value, hours in EXERCISE_1_WRITES:
            when = T0 + timedelta(hours=hours)
            try:
                if op == "set":
                    write = memory.set_preference("theme", value, updated_at=when)
                else:
                    write = memory.delete_preference("theme", deleted_at=when)
            except StalePreferenceUpdateError:
                outcomes.append(("stale", revision))
                continue
            revision = write.revision
            outcomes.append((write.status, write.revision))
        return outcomes


def check_statuses(answer: Sequence[str] | None) -> Feedback:
    """Exercise 1: the status of each write in :data:`EXERCISE_1_WRITES` ('stale' if refused)."""
    name = _("exercise 1 (statuses)")
    if answer is None:
        return not_answered(name)
    expected = [status for status, _ in replay_exercise_1()]
    if isinstance(answer, str):
        return Feedback(name, False, _("answer with a list of statuses, one per write"))
    got = list(answer)
    if got == expected:
        return Feedback(name, True, _("same state → unchanged, older change → stale, "
                                      "delete → tombstone, newer write → created again"))
    if len(got) != len(expected):
        return Feedback(name, False, _("there are {count} writes; you gave {count2} statuses")
                                     .format(count=len(expected), count2=len(got)))
    first = next(i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e)
    return Feedback(name, False, _("write {first} is wrong — compare the state (value, "
                                   "expires_at, source_event_id) first, then updated_at")
                                 .format(first=first + 1))


def check_final_revision(answer: int | None) -> Feedback:
    """Exercise 2: the revision of 'theme' after all of :data:`EXERCISE_1_WRITES`."""
    name = _("exercise 2 (final revision)")
    if answer is None:
        return not_answered(name)
    expected = replay_exercise_1()[-1][1]
    if isinstance(answer, bool) or not isinstance(answer, int):
        return Feedback(name, False, _("expected an integer, got {kind}")
                                     .format(kind=type(answer).__name__))
    if answer == expected:
        return Feedback(name, True, _("unchanged and stale writes add no revision; the "
                                      "tombstone and the re-creation each do"))
    if answer == len(EXERCISE_1_WRITES):
        return Feedback(name, False, _("not every write makes a revision"))
    return Feedback(name, False, _("count only the writes that changed the stored state"))


def active_keys(as_of: datetime | str = EXERCISE_3_AS_OF) -> tuple[str, ...]:
    """The exercise-3 keys that are active at ``as_of``, sorted."""
    at = parse_timestamp(as_of, field="as_of")
    return tuple(sorted(
        key for key, expiry in EXERCISE_3_EXPIRIES.items()
        if is_active(None if expiry is None else parse_timestamp(expiry, field="expiry"), at)
    ))


def check_active_keys(answer: Sequence[str] | None) -> Feedback:
    """Exercise 3: the sorted keys of :data:`EXERCISE_3_EXPIRIES` active at the given time."""
    name = _("exercise 3 (active at the boundary)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, _("answer with a list of keys"))
    expected = active_keys()
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, _("active while as_of < expires_at — expired exactly at it"))
    if sorted(set(got)) == list(expected):
        return Feedback(name, False, _("right keys; give them sorted, each once"))
    if "sale.reminder" in got:
        return Feedback(name, False, _("sale.reminder expires exactly at as_of: it is already "
                                       "expired"))
    return Feedback(name, False, _("a key without expires_at never expires; compare each "
                                   "expires_at with as_of"))


# -- generated writes: the from-scratch decision is held equal to the library's on these --

_TIMES = st.integers(min_value=0, max_value=4).map(lambda h: T0 + timedelta(hours=h))
_VALUES = st.sampled_from(("dark", "light"))
_EXPIRIES = st.sampled_from((None, T0 + timedelta(hours=8), T0 + timedelta(hours=9)))
_SOURCES = st.sampled_from((None, "evt-1", "evt-2"))
_REVISIONS = st.integers(min_value=1, max_value=3)

_LIVE = st.builds(Preference, key=st.just("theme"), value=_VALUES, revision=_REVISIONS,
                  updated_at=_TIMES, expires_at=_EXPIRIES, source_event_id=_SOURCES)
_TOMBSTONE = st.builds(lambda revision, at: Preference("theme", None, revision, at,
                                                      deleted_at=at), _REVISIONS, _TIMES)
_SET = st.tuples(_VALUES, _EXPIRIES, _SOURCES, _TIMES)
_DELETE = st.tuples(st.none(), st.none(), st.none(), _TIMES)

#: (stored, value, expires_at, source_event_id, updated_at); expiries are always later
#: than every time, as ``set_preference`` requires.
WRITE_INPUTS = st.tuples(st.one_of(st.none(), _LIVE, _TOMBSTONE),
                         st.one_of(_SET, _DELETE)).map(lambda pair: (pair[0], *pair[1]))


def _clock(at: datetime | None) -> str:
    return "-" if at is None else f"{int((at - T0).total_seconds() // 3600):02d}:00"


def _extras(expires_at: datetime | None, source_event_id: str | None) -> str:
    parts = ([] if source_event_id is None else [f"source {source_event_id}"]) + (
        [] if expires_at is None else [f"expires {_clock(expires_at)}"])
    return f" ({', '.join(parts)})" if parts else ""


def describe_write(args: tuple) -> str:
    """A counterexample in one line; times are hours of 2026-08-01 (UTC)."""
    stored, value, expires_at, source_event_id, updated_at = args
    if stored is None:
        before = "nothing stored"
    elif stored.deleted:
        before = f"stored tombstone rev {stored.revision} at {_clock(stored.updated_at)}"
    else:
        at, extras = _clock(stored.updated_at), _extras(stored.expires_at, stored.source_event_id)
        before = f"stored {stored.value!r} rev {stored.revision} at {at}{extras}"
    write = (f"delete at {_clock(updated_at)}" if value is None else
             f"set {value!r} at {_clock(updated_at)}{_extras(expires_at, source_event_id)}")
    return f"{before}, then {write}"



# -- the build exercise: the learner's own layer, judged by the contract suite -----------

#: The pieces of :mod:`labmem.scratch.s11` the learner writes, by the name they replace.
PIECES = ("write_status", "fold", "UserMemory.write")


def check_layer(*, write_status: Callable[..., str] | None = None,
                fold: Callable[..., dict] | None = None,
                write: Callable[..., Any] | None = None) -> ContractReport:
    """Put the learner's pieces into a fresh copy of the from-scratch module and run the
    user memory contract suite on it; the report names each broken contract's smallest
    case (or says a piece is not written yet). A piece left out (``None``) stays the
    chapter's own."""
    from labmem.exercises.suites.s11 import SUITE, layer_of
    from labmem.scratch import s11

    pieces = {"write_status": write_status, "fold": fold, "UserMemory.write": write}
    yours = assemble(s11, {name: f for name, f in pieces.items() if f is not None})
    return SUITE.run(layer_of(yours, name="yours"))


#: Every chapter's build exercises are listed here; s11's is :func:`check_layer` (a contract
#: suite, not a single-function checker), so this chapter adds none.
BUILD: tuple = ()
