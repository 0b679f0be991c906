"""The s11 exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import s11
from labmem.user import preference_write_status

STATUSES = ["created", "unchanged", "updated", "stale", "deleted", "stale", "created"]


@pytest.mark.parametrize("check", [s11.check_statuses, s11.check_final_revision,
                                   s11.check_active_keys])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replay_matches_the_hand_computed_ledger():
    assert s11.replay_exercise_1() == [("created", 1), ("unchanged", 1), ("updated", 2),
                                       ("stale", 2), ("deleted", 3), ("stale", 3),
                                       ("created", 4)]


def test_s11_statuses():
    assert s11.check_statuses(STATUSES)
    assert s11.check_statuses(tuple(STATUSES))
    wrong_retry = ["created", "updated", *STATUSES[2:]]  # a retry is not an update
    assert not s11.check_statuses(wrong_retry)
    wrong_stale = [*STATUSES[:3], "updated", *STATUSES[4:]]  # same updated_at is stale
    assert not s11.check_statuses(wrong_stale)
    wrong_retry_time = [*STATUSES[:2], "stale", *STATUSES[3:]]  # a retry keeps updated_at
    assert not s11.check_statuses(wrong_retry_time)
    assert not s11.check_statuses(STATUSES[:-1])
    assert not s11.check_statuses("created")


def test_s11_final_revision():
    assert s11.check_final_revision(4)
    assert not s11.check_final_revision(7)  # one per write
    assert not s11.check_final_revision(3)  # a tombstone is a revision too
    assert not s11.check_final_revision("4")
    assert not s11.check_final_revision(True)


def test_s11_active_keys():
    assert s11.check_active_keys(["reply.language", "trip.city"])
    assert not s11.check_active_keys(["reply.language", "sale.reminder", "trip.city"])
    assert not s11.check_active_keys(["trip.city", "reply.language"])  # unsorted
    assert not s11.check_active_keys(["trip.city"])
    assert not s11.check_active_keys("reply.language")


# -- the build exercise -------------------------------------------------------------------

BUILD = s11.BUILD[0]


def written_by_hand(stored, value, expires_at, source_event_id, updated_at, *,
                    later=lambda new, old: new > old):
    if stored is not None:
        if value is None:
            same = stored.deleted_at is not None
        else:
            same = (stored.deleted_at is None and stored.value == value
                    and stored.expires_at == expires_at
                    and stored.source_event_id == source_event_id)
        if same:
            return "unchanged"
        if not later(updated_at, stored.updated_at):
            return "stale"
    if value is None:
        return "deleted"
    return "created" if stored is None or stored.deleted_at is not None else "updated"


def checks_time_first(stored, value, expires_at, source_event_id, updated_at):
    if stored is not None and updated_at <= stored.updated_at:
        return "stale"
    return written_by_hand(stored, value, expires_at, source_event_id, updated_at)


def allows_the_same_instant(stored, value, expires_at, source_event_id, updated_at):
    return written_by_hand(stored, value, expires_at, source_event_id, updated_at,
                           later=lambda new, old: new >= old)


def updates_a_tombstone(stored, value, expires_at, source_event_id, updated_at):
    status = written_by_hand(stored, value, expires_at, source_event_id, updated_at)
    return "updated" if status == "created" and stored is not None else status


def compares_the_value_only(stored, value, expires_at, source_event_id, updated_at):
    return written_by_hand(stored, value, None if stored is None else stored.expires_at,
                           None if stored is None else stored.source_event_id, updated_at)


def stub(stored, value, expires_at, source_event_id, updated_at):
    raise NotImplementedError


def test_build_accepts_the_library_and_a_hand_written_rule():
    assert BUILD.reference is preference_write_status
    assert BUILD.check(preference_write_status)
    feedback = BUILD.check(written_by_hand)
    assert feedback and "300 generated inputs" in feedback.message


def test_build_names_a_counterexample_for_a_constant():
    feedback = BUILD.check(lambda *args: "updated")
    assert not feedback
    assert feedback.message.startswith("on nothing stored, then delete at 00:00 yours returned "
                                       "'updated', the library's returned 'deleted'")
    assert "Hint:" in feedback.message


@pytest.mark.parametrize("wrong, counterexample", [
    (checks_time_first, "on stored tombstone rev 1 at 00:00, then delete at 00:00 yours "
                        "returned 'stale', the library's returned 'unchanged'"),
    (allows_the_same_instant, "on stored 'dark' rev 1 at 00:00, then delete at 00:00 yours "
                              "returned 'deleted', the library's returned 'stale'"),
    (updates_a_tombstone, "on stored tombstone rev 1 at 00:00, then set 'dark' at 01:00 yours "
                          "returned 'updated', the library's returned 'created'"),
    (compares_the_value_only, "at 00:00 (source evt-1) yours returned 'unchanged', the "
                              "library's returned 'stale'"),
])
def test_build_rejects_near_misses_with_the_smallest_write(wrong, counterexample):
    feedback = BUILD.check(wrong)
    assert not feedback
    assert feedback.message.startswith("on stored "), feedback.message
    assert counterexample in feedback.message, feedback.message


def test_build_stub_is_not_written_yet():
    feedback = BUILD.check(stub)
    assert not feedback and "not written yet" in feedback.message
