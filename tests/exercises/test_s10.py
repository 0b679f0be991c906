"""The s10 exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import s10

PROMOTED = ["Pin Python 3.12", "Run ruff before commit"]


@pytest.mark.parametrize("check", [s10.check_promoted, s10.check_active_and_stale,
                                   s10.check_after_crash])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replays_match_the_hand_computed_answers():
    contents, report = s10.replay_exercise_1()
    assert list(contents) == PROMOTED
    assert (report.scanned, report.eligible, report.created, report.skipped) == (6, 5, 2, 2)
    assert s10.replay_exercise_2() == ("PostgreSQL", 2)


def test_s10_promoted():
    assert s10.check_promoted(PROMOTED)
    assert s10.check_promoted(tuple(PROMOTED))
    assert not s10.check_promoted([*PROMOTED, "The CI cache is flaky"])  # same evidence twice
    assert not s10.check_promoted(["Deploy took 3 minutes", *PROMOTED])  # outcome
    assert not s10.check_promoted([*PROMOTED, "Vendor the fonts"])  # too young
    assert not s10.check_promoted(PROMOTED[::-1])  # unsorted
    assert not s10.check_promoted(["Pin Python 3.12"])  # the repeat merges and counts
    assert not s10.check_promoted("Pin Python 3.12")


def test_s10_active_and_stale():
    assert s10.check_active_and_stale(("PostgreSQL", 2))
    assert s10.check_active_and_stale(["PostgreSQL", 2])
    assert not s10.check_active_and_stale(("SQLite", 0))  # t:11 twice is one piece
    assert not s10.check_active_and_stale(("PostgreSQL", 0))
    assert not s10.check_active_and_stale(("PostgreSQL", 3))
    assert not s10.check_active_and_stale("PostgreSQL")


def test_s10_after_crash():
    assert s10.check_after_crash("resolved")
    assert not s10.check_after_crash("open")
    assert not s10.check_after_crash("gone")
