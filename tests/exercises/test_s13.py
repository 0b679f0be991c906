"""The s13 exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.artifacts.leases import LeasePhase
from labmem.exercises import s13

EXTERNALIZED = {"grep, 20,000 Chinese characters", "bash, 40,000 ASCII characters",
                "read_file, 13,000 emoji"}
PHASES = {"published": "committed", "absent": "aborted", "unknown": "prepared"}


@pytest.mark.parametrize("check", [s13.check_externalized, s13.check_deleted,
                                   s13.check_reconciled])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replays_match_the_hand_computed_answers():
    assert s13.externalized_names() == EXTERNALIZED
    assert s13.deleted_files() == {"B", "E"}
    assert s13.reconciled_phases() == PHASES


def test_s13_externalized():
    assert s13.check_externalized(EXTERNALIZED)
    assert s13.check_externalized(sorted(EXTERNALIZED))
    wrong_chars = EXTERNALIZED | {"bash, 20,000 Chinese characters"}  # bash counts characters
    assert "characters" in s13.check_externalized(wrong_chars).message
    assert not s13.check_externalized(wrong_chars)
    assert not s13.check_externalized(EXTERNALIZED - {"read_file, 13,000 emoji"})
    assert not s13.check_externalized("grep")


def test_s13_deleted():
    assert s13.check_deleted({"B", "E"})
    assert not s13.check_deleted({"B", "E", "D"})  # a pending lease protects
    assert "pending" in s13.check_deleted({"B", "D", "E"}).message
    assert "evidence" in s13.check_deleted({"B", "E", "F"}).message
    assert "released" in s13.check_deleted({"B"}).message
    assert not s13.check_deleted({"B", "C", "E"})  # two hours is recent
    assert not s13.check_deleted("BE")


def test_s13_reconciled():
    assert s13.check_reconciled(PHASES)
    assert s13.check_reconciled({k: LeasePhase(v) for k, v in PHASES.items()})
    released = {**PHASES, "unknown": "aborted"}
    assert not s13.check_reconciled(released)
    assert "unknown" in s13.check_reconciled(released).message
    assert not s13.check_reconciled({**PHASES, "absent": "released"})
    assert not s13.check_reconciled(["committed"])
