"""The s13 exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.artifacts import LeasePhase
from labmem.exercises import s13

EXTERNALIZED = {"grep, 20,000 Chinese characters", "bash, 40,000 ASCII characters",
                "read_file, 13,000 emoji"}
PHASES = {"published": "committed", "published_other": "prepared", "absent": "aborted",
          "unknown": "prepared"}


@pytest.mark.parametrize("check", [s13.check_externalized, s13.check_deleted,
                                   s13.check_reconciled])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replays_match_the_hand_computed_answers():
    assert s13.externalized_names() == EXTERNALIZED
    assert s13.deleted_files() == {"B", "G"}
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
    assert s13.check_deleted({"B", "G"})
    assert s13.check_deleted(["G", "B"])
    assert "pending" in s13.check_deleted({"B", "D", "G"}).message
    assert "evidence" in s13.check_deleted({"B", "F", "G"}).message
    assert "old" in s13.check_deleted({"B", "E", "G"}).message  # released, but only 20 h
    assert "aborted" in s13.check_deleted({"B"}).message
    assert "younger" in s13.check_deleted({"G"}).message  # exactly one day is not younger
    assert not s13.check_deleted({"B", "C", "G"})  # 23 hours is recent
    assert "'Z'" in s13.check_deleted({"B", "G", "Z"}).message
    assert not s13.check_deleted("BG")


def test_s13_reconciled():
    assert s13.check_reconciled(PHASES)
    assert s13.check_reconciled({k: LeasePhase(v) for k, v in PHASES.items()})
    released = {**PHASES, "unknown": "aborted"}
    assert not s13.check_reconciled(released)
    assert "unknown" in s13.check_reconciled(released).message
    trusting = {**PHASES, "published_other": "committed"}
    assert "other" in s13.check_reconciled(trusting).message
    assert not s13.check_reconciled({**PHASES, "absent": "released"})
    assert "keys" in s13.check_reconciled({"published": "committed"}).message
    assert not s13.check_reconciled(["committed"])
