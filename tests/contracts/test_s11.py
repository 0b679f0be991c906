"""s11 user memory: one contract suite on the from-scratch module and on the production layer,
the learner's build pieces judged by it, and properties holding production equal to scratch."""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.exercises import s11 as exercises
from labmem.exercises.suites.s11 import PRODUCTION, SCRATCH, SUITE, hour
from labmem.scratch import s11
from labmem.user import StalePreferenceUpdateError, UserMemory, preference_write_status

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}
NAMES = SUITE.names()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize("contract", SUITE.contracts, ids=range(1, len(NAMES) + 1))
def test_every_contract_holds(contract, impl):
    contract.check(impl)


def test_the_suite_is_small_and_named_in_sentences():
    assert 8 <= len(NAMES) <= 15 and len(set(NAMES)) == len(NAMES)


# -- the learner's three pieces ---------------------------------------------------------

def check(**changed):
    """The suite's report on the from-scratch layer with ``changed`` pieces put in."""
    return exercises.check_layer(**changed)


def failing(report) -> set[int]:
    """The 1-based numbers of the contracts a report says are broken."""
    broken = {r.contract for r in report.failing}
    return {n for n, name in enumerate(NAMES, start=1) if name in broken}


def test_the_solution_passes_and_stubs_are_not_written_yet():
    assert repr(check()) == "✓ your user memory passes all 14 contracts"

    def stub(*args, **kwargs):
        raise NotImplementedError

    report = check(write_status=stub, fold=stub, write=stub)
    assert report.passed == 1 and failing(report) == set(range(2, 15))
    assert repr(report).startswith("✗ your user memory passes 1 of 14 contracts; failing:\n"
                                   "  · the first set of a key is created at revision 1, "
                                   "and a fresh reader sees it — not written yet (")


# write_status: three plausible wrong versions and a correct one written differently

def status_allows_the_same_instant(stored, value, expires_at, source_event_id, updated_at):
    """Off by one: "not earlier" instead of "later"."""
    if stored is not None and updated_at == stored.updated_at:
        updated_at = updated_at + (hour(1) - hour(0))
    return s11.write_status(stored, value, expires_at, source_event_id, updated_at)


def status_checks_time_first(stored, value, expires_at, source_event_id, updated_at):
    """Wrong order: a retry with an older time is refused instead of unchanged."""
    if stored is not None and updated_at <= stored.updated_at:
        return s11.STALE
    return s11.write_status(stored, value, expires_at, source_event_id, updated_at)


def status_compares_the_value_only(stored, value, expires_at, source_event_id, updated_at):
    """Skipped edge case: a change of expiry or source alone is taken for a repeat."""
    if stored is not None and not stored.deleted and value == stored.value:
        return s11.UNCHANGED
    return s11.write_status(stored, value, expires_at, source_event_id, updated_at)


def status_updates_a_tombstone(stored, value, expires_at, source_event_id, updated_at):
    """Skipped edge case: a set after a delete counts as an update of the old value."""
    status = s11.write_status(stored, value, expires_at, source_event_id, updated_at)
    return s11.UPDATED if status == s11.CREATED and stored is not None else status


def status_as_a_table(stored, value, expires_at, source_event_id, updated_at):
    """Correct, written differently: compare whole states, then look the answer up."""
    deleting = value is None
    if stored is None:
        return s11.DELETED if deleting else s11.CREATED
    now = None if deleting else (value, expires_at, source_event_id)
    was = None if stored.deleted else (stored.value, stored.expires_at, stored.source_event_id)
    if now == was:
        return s11.UNCHANGED
    if not updated_at > stored.updated_at:
        return s11.STALE
    return {(True, True): s11.DELETED, (True, False): s11.DELETED,
            (False, True): s11.CREATED, (False, False): s11.UPDATED}[(deleting, stored.deleted)]


@pytest.mark.parametrize("wrong, contract", [
    (status_allows_the_same_instant, 5),
    (status_checks_time_first, 3),
    (status_compares_the_value_only, 4),
    (status_updates_a_tombstone, 7),
])
def test_wrong_write_status_is_rejected(wrong, contract):
    report = check(write_status=wrong)
    assert contract in failing(report), repr(report)


def test_a_table_written_write_status_is_accepted():
    assert check(write_status=status_as_a_table).ok


# fold: three plausible wrong versions and a correct one written differently

def fold_last_line_wins(revisions):
    """Skipped check: a doubled or skipped revision is folded as if nothing were wrong."""
    return {pref.key: pref for pref in revisions}


def fold_counts_lines_from_zero(revisions):
    """Off by one: the error names the line before the bad one."""
    state = {}
    for number, pref in enumerate(revisions):
        expected = state[pref.key].revision + 1 if pref.key in state else 1
        if pref.revision != expected:
            raise s11.CorruptLogError(f"line {number}: revision {pref.revision} of "
                                      f"{pref.key!r} where {expected} was expected")
        state[pref.key] = pref
    return state


def fold_forgets_tombstones(revisions):
    """Skipped edge case: a delete removes the key, so an older write comes back."""
    state = s11.fold(revisions)
    return {key: pref for key, pref in state.items() if not pref.deleted}


def fold_keeps_the_first(revisions):
    """Wrong tie-break: the first revision of a key wins instead of the last."""
    state = {}
    for pref in revisions:
        state.setdefault(pref.key, pref)
    return state


def fold_by_key(revisions):
    """Correct, written differently: group the lines by key, check each key's count."""
    lines_of: dict[str, list[tuple[int, s11.Preference]]] = {}
    for number, pref in enumerate(revisions, start=1):
        lines_of.setdefault(pref.key, []).append((number, pref))
    for key, lines in lines_of.items():
        for expected, (number, pref) in enumerate(lines, start=1):
            if pref.revision != expected:
                raise s11.CorruptLogError(f"line {number}: revision {pref.revision} of "
                                          f"{key!r} where {expected} was expected")
    return {key: lines[-1][1] for key, lines in lines_of.items()}


@pytest.mark.parametrize("wrong, contract", [
    (fold_last_line_wins, 14),
    (fold_counts_lines_from_zero, 14),
    (fold_forgets_tombstones, 6),
    (fold_keeps_the_first, 4),
])
def test_wrong_fold_is_rejected(wrong, contract):
    report = check(fold=wrong)
    assert contract in failing(report), repr(report)


def test_a_grouping_fold_is_accepted():
    assert check(fold=fold_by_key).ok


# UserMemory.write: three plausible wrong versions and a correct one written differently

def write_without_the_lock(self, key, value, expires_at, source_event_id, at):
    """Skipped lock: the read-modify-write runs while another process holds user.lock."""
    self.locked = contextlib.nullcontext
    return s11.UserMemory.write(self, key, value, expires_at, source_event_id, at)


def write_reading_before_the_lock(self, key, value, expires_at, source_event_id, at):
    """The lock taken too late: the decision is made on a state read outside it."""
    state = self.preferences()
    old = state.get(key)
    status = s11.write_status(old, value, expires_at, source_event_id, at)
    with self.locked():
        if status == s11.STALE:
            raise s11.StaleWriteError(key)
        previous = None if old is None else old.value
        if status == s11.UNCHANGED:
            return s11.PreferenceWrite(status, key, previous, previous, old.revision)
        new = s11.Preference(key, value, 1 if old is None else old.revision + 1, at,
                             expires_at, source_event_id, at if value is None else None)
        s11.append_revision(self.log_path, s11.encode_revision(new, self.user_scope))
        state[key] = new
        s11.write_atomically(self.memory_md_path,
                             s11.render_memory_md(self.user_scope, state, self.clock.now()))
    return s11.PreferenceWrite(status, key, previous, value, new.revision)


def write_appends_every_repeat(self, key, value, expires_at, source_event_id, at):
    """Skipped edge case: an unchanged write still appends its line."""
    with self.locked():
        old = self.preferences().get(key)
        status = s11.write_status(old, value, expires_at, source_event_id, at)
        if status == s11.UNCHANGED:
            s11.append_revision(self.log_path, s11.encode_revision(old, self.user_scope)[:-1])
    return s11.UserMemory.write(self, key, value, expires_at, source_event_id, at)


def write_without_memory_md(self, key, value, expires_at, source_event_id, at):
    """Skipped projection: MEMORY.md is only written by refresh_memory_md."""
    with self.locked():
        old = self.preferences().get(key)
        status = s11.write_status(old, value, expires_at, source_event_id, at)
        if status == s11.STALE:
            raise s11.StaleWriteError(key)
        previous = None if old is None else old.value
        if status == s11.UNCHANGED:
            return s11.PreferenceWrite(status, key, previous, previous, old.revision)
        new = s11.Preference(key, value, 1 if old is None else old.revision + 1, at,
                             expires_at, source_event_id, at if value is None else None)
        s11.append_revision(self.log_path, s11.encode_revision(new, self.user_scope))
    return s11.PreferenceWrite(status, key, previous, value, new.revision)


def write_in_steps(self, key, value, expires_at, source_event_id, at):
    """Correct, written differently: early returns, and the new revision by replace()."""
    with self.locked():
        state = self.preferences()
        old = state.get(key)
        status = s11.write_status(old, value, expires_at, source_event_id, at)
        if status == s11.STALE:
            raise s11.StaleWriteError(f"{key!r}: {at} is not later than {old.updated_at}")
        if status == s11.UNCHANGED:
            return s11.PreferenceWrite(status, key, old.value, old.value, old.revision)
        template = old or s11.Preference(key, None, 0, at)
        new = dataclasses.replace(template, value=value, revision=template.revision + 1,
                                  updated_at=at, expires_at=expires_at,
                                  source_event_id=source_event_id,
                                  deleted_at=at if value is None else None)
        s11.append_revision(self.log_path, s11.encode_revision(new, self.user_scope))
        state = {**state, key: new}
        text = s11.render_memory_md(self.user_scope, state, self.clock.now())
        s11.write_atomically(self.memory_md_path, text)
        return s11.PreferenceWrite(status, key, old and old.value, value, new.revision)


@pytest.mark.parametrize("wrong, contract", [
    (write_without_the_lock, 11),
    (write_reading_before_the_lock, 11),
    (write_appends_every_repeat, 3),
    (write_without_memory_md, 9),
])
def test_wrong_write_is_rejected(wrong, contract):
    report = check(write=wrong)
    assert contract in failing(report), repr(report)


def test_a_stepwise_write_is_accepted():
    assert check(write=write_in_steps).ok


# -- production held equal to the from-scratch fold --------------------------------------

@settings(max_examples=300, deadline=None)
@given(exercises.WRITE_INPUTS)
def test_the_decisions_agree(args):
    assert s11.write_status(*args) == preference_write_status(*args)


KEYS = st.sampled_from(("a", "b", "c"))
OPERATIONS = st.lists(st.tuples(st.sampled_from(("set", "set", "delete")), KEYS,
                                st.sampled_from(("x", "y")), st.integers(0, 6)),
                      max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPERATIONS)
def test_production_cache_and_compaction_equal_the_scratch_fold(operations):
    """Production keeps a cached state, a snapshot and a compacted log; the from-scratch
    module folds its whole log on every read. Same operations, same statuses and state."""
    with tempfile.TemporaryDirectory() as root_a, tempfile.TemporaryDirectory() as root_b:
        clock = FixedClock(hour(0))
        fast = UserMemory(root_a, user_id="u", clock=clock)
        plain = s11.UserMemory(root_b, user_id="u", clock=clock)
        for op, key, value, at in operations:
            outcomes = []
            for memory, stale in ((fast, StalePreferenceUpdateError),
                                  (plain, s11.StaleWriteError)):
                try:
                    if op == "set":
                        write = memory.set_preference(key, value, updated_at=hour(at))
                    else:
                        write = memory.delete_preference(key, deleted_at=hour(at))
                    outcomes.append((write.status, write.previous_value, write.current_value,
                                     write.revision))
                except stale:
                    outcomes.append("stale")
            assert outcomes[0] == outcomes[1], (op, key, value, at)
        state = {k: (p.value, p.revision, p.updated_at, p.deleted)
                 for k, p in plain.preferences().items()}
        reread = UserMemory(root_a, user_id="u")
        assert {k: (p.value, p.revision, p.updated_at, p.deleted)
                for k in "abc" if (p := reread.get_preference(k)) is not None} == state
        assert [p.key for p in reread.list_preferences()] == \
               [p.key for p in plain.list_preferences()]
