"""The s11 exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import s11

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


# -- the build exercise: the layer, judged by its contract suite ------------------------
# (the wrong-but-plausible pieces and a correct alternative of each: tests/contracts/test_s11.py)

def test_s11_builds_a_layer_not_a_single_function():
    assert s11.BUILD == ()
    assert s11.PIECES == ("write_status", "fold", "UserMemory.write")


def test_check_layer_keeps_the_chapters_own_pieces_when_none_are_given():
    assert repr(s11.check_layer()) == "✓ your user memory passes all 14 contracts"
