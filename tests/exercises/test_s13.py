"""The s13 exercise checkers accept the right answer and reject wrong ones."""

from datetime import timedelta

import pytest

from labmem.artifacts import ArtifactFacts, LeasePhase, cleanup_reason
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


# -- build it yourself: cleanup_reason ------------------------------------------------------

EXERCISE = s13.BUILD[0]


def only_committed_protects(facts, orphan_ttl):
    """A near miss: forgets that a *prepared* lease protects too."""
    if facts.file_type == "symlink":
        return "symlink_denied"
    if facts.file_type != "file" or facts.recorded_sha256 is None:
        return "unknown_name"
    protecting = [d for phase, d in facts.leases if phase == "committed"]
    if facts.sha256 != facts.recorded_sha256 or any(d != facts.sha256 for d in protecting):
        return "corrupt"
    if protecting:
        return "referenced"
    return "recent" if facts.age < orphan_ttl else "orphan_expired"


def ttl_inclusive(facts, orphan_ttl):
    """A near miss: keeps a file that is exactly orphan_ttl old."""
    reason = cleanup_reason(facts, orphan_ttl)
    return "recent" if reason == "orphan_expired" and facts.age <= orphan_ttl else reason


def lease_before_digest(facts, orphan_ttl):
    """A near miss: lets a lease win over changed bytes."""
    if facts.file_type == "symlink":
        return "symlink_denied"
    if facts.file_type != "file" or facts.recorded_sha256 is None:
        return "unknown_name"
    if any(phase.protects for phase, _ in facts.leases):
        return "referenced"
    if facts.sha256 != facts.recorded_sha256:
        return "corrupt"
    return "recent" if facts.age < orphan_ttl else "orphan_expired"


def test_the_library_passes_its_own_exercise():
    feedback = EXERCISE.check(cleanup_reason)
    assert feedback.ok and "300 generated inputs" in feedback.message


def test_a_stub_is_not_written_yet():
    def stub(facts, orphan_ttl):
        raise NotImplementedError

    feedback = EXERCISE.check(stub)
    assert not feedback.ok and "not written yet" in feedback.message


@pytest.mark.parametrize("wrong,shows", [
    (lambda facts, ttl: "retain", "'retain'"),
    (only_committed_protects, "('prepared', 'sha-A')"),
    (ttl_inclusive, "age=0 h"),
    (lease_before_digest, "'corrupt'"),
])
def test_wrong_rules_get_a_counterexample_and_the_hint(wrong, shows):
    feedback = EXERCISE.check(wrong)
    assert not feedback.ok
    assert feedback.message.startswith("on ArtifactFacts(") and shows in feedback.message
    assert "the library's returned" in feedback.message and "Hint:" in feedback.message


def test_the_counterexample_is_shown_in_hours():
    facts = ArtifactFacts("file", "sha-A", "sha-A", timedelta(hours=24),
                          ((LeasePhase.RELEASED, "sha-B"),))
    assert s13.describe_facts((facts, timedelta(hours=24))) == (
        "ArtifactFacts(file_type='file', recorded_sha256='sha-A', sha256='sha-A', age=24 h, "
        "leases=(('released', 'sha-B'),)) with orphan_ttl=24 h")
