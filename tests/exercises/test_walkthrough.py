"""The walkthrough's exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.artifacts import OwnerStatus
from labmem.exercises import walkthrough
from labmem.walkthrough import DIGEST_MARK, reference_status

(STATUS,) = walkthrough.BUILD


def test_unanswered_is_not_correct():
    feedback = walkthrough.check_reconciliation(None)
    assert not feedback and "not answered" in feedback.message


def test_the_replay_matches_the_hand_computed_answer():
    assert walkthrough.replay_exercise_1() == ("commit", "abort", "pending")


def test_reconciliation():
    assert walkthrough.check_reconciliation(("commit", "abort", "pending"))
    assert walkthrough.check_reconciliation(["commit", "abort", "pending"])
    unknown_as_absent = walkthrough.check_reconciliation(("commit", "abort", "abort"))
    assert not unknown_as_absent and unknown_as_absent.message.startswith("tx-c")
    assert not walkthrough.check_reconciliation(("commit", "pending", "pending"))
    assert not walkthrough.check_reconciliation(("pending", "abort", "pending"))
    assert "three words" in walkthrough.check_reconciliation("commit").message
    assert "three words" in walkthrough.check_reconciliation(("commit", "abort")).message


# -- build it yourself ------------------------------------------------------------------

def stub(fact):
    raise NotImplementedError


def test_the_build_exercise_uses_the_library_rule():
    assert STATUS.reference is reference_status and STATUS.chapter == "walkthrough"
    assert STATUS.check(reference_status)
    feedback = STATUS.check(stub)
    assert not feedback and "not written yet" in feedback.message


def _status(fact, *, need_source=True, exactly_one=True, unreadable="unknown",
            source_from_fact=False):
    """A learner's reference_status, with one knob per plausible mistake."""
    if fact is None:
        return OwnerStatus("absent")
    marked = [e for e in fact.evidence if DIGEST_MARK in e]
    readable = (fact.source is not None or not need_source) and (
        len(marked) == 1 if exactly_one else bool(marked))
    if not readable:
        return OwnerStatus(unreadable)
    source_id, _, sha256 = marked[0].partition(DIGEST_MARK)
    return OwnerStatus("published", fact.source.source_id if source_from_fact else source_id,
                       sha256)


def test_a_careful_learner_passes():
    assert STATUS.check(_status)


@pytest.mark.parametrize("mistake", [
    {"unreadable": "absent"},  # "I cannot read it" taken for "it is not there"
    {"need_source": False},  # a digest alone, without the fact naming its source
    {"exactly_one": False},  # two digests: takes the first instead of refusing to guess
    {"source_from_fact": True},  # vouches for the fact's source, not the digest's artifact
], ids=["unknown-as-absent", "no-source-check", "first-of-two", "source-from-fact"])
def test_near_misses_fail_with_a_counterexample(mistake):
    feedback = STATUS.check(lambda fact: _status(fact, **mistake))
    assert not feedback and feedback.message.startswith("on a fact with source ")
    assert "the library's returned" in feedback.message and "Hint:" in feedback.message


def test_a_constant_fails_on_the_smallest_fact():
    feedback = STATUS.check(lambda fact: OwnerStatus("absent"))
    assert not feedback
    assert feedback.message.startswith("on a fact with source None and evidence [] yours "
                                       "returned 'absent', the library's returned 'unknown'")
