"""The story exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import story
from labmem.story import claim_action

BUILD = story.BUILD[0]
LIVE = ("active", "contradicted")


@pytest.mark.parametrize("check", [story.check_upsert_actions, story.check_folded_summaries,
                                   story.check_cut_tiers])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replays_match_the_hand_computed_answers():
    assert story.replay_exercise_1() == ["created", "superseded", "contradicted", "late",
                                         "superseded", "unchanged"]
    assert story.replay_exercise_2() == (3, 2)
    assert story.replay_exercise_3() == ("episodic_memory", "recent_changes", "semantic_window")


def test_upsert_actions():
    right = ["created", "superseded", "contradicted", "late", "superseded", "unchanged"]
    assert story.check_upsert_actions(right)
    assert not story.check_upsert_actions([*right[:3], "superseded", *right[4:]])  # arrival order
    assert not story.check_upsert_actions(["created", "superseded", "superseded", *right[3:]])
    assert not story.check_upsert_actions(right[:-1])
    assert not story.check_upsert_actions("created")


def test_folded_summaries():
    assert story.check_folded_summaries(3)
    assert not story.check_folded_summaries(2)  # the original's bug: the lone events dropped
    assert not story.check_folded_summaries("3")


def test_cut_tiers():
    assert story.check_cut_tiers({"episodic_memory", "recent_changes", "semantic_window"})
    assert story.check_cut_tiers(["semantic_window", "episodic_memory", "recent_changes"])
    too_few = story.check_cut_tiers({"episodic_memory", "recent_changes"})
    assert not too_few and "too few" in too_few.message
    # read off the budget-220 table instead of recomputing for 400
    too_many = story.check_cut_tiers({"episodic_memory", "recent_changes", "semantic_window",
                                      "recent_summaries", "semantic_mentioned"})
    assert not too_many and "too many" in too_many.message
    assert "not tiers" in story.check_cut_tiers({"warnings"}).message
    assert not story.check_cut_tiers("episodic_memory")


# -- the build exercise ---------------------------------------------------------------------

def _restates(item, claim, *, mind_the_mark=True):
    payloads = (claim.payload, {**claim.payload, "late_arrival": True}) if mind_the_mark \
        else (claim.payload,)
    return (item.source_chapter == claim.source_chapter and item.value == claim.value
            and item.payload in payloads)


def test_the_reference_passes():
    feedback = BUILD.check(claim_action)
    assert feedback.ok and "300 generated inputs" in feedback.message
    assert BUILD.chapter == "case study"


def test_a_constant_fails_with_a_counterexample():
    feedback = BUILD.check(lambda stored, claim: "created")
    assert not feedback
    assert feedback.message.startswith("on stored [mem-0001 ch1 'who rings it?' active] and "
                                       "the claim ch1 'who rings it?' yours returned 'created'")
    assert "Hint:" in feedback.message


def test_arrival_order_fails_on_a_late_claim():
    """The original design's bug: the newest *arrival* wins."""
    def arrival_order(stored, claim):
        if any(_restates(item, claim) for item in stored):
            return "unchanged"
        live = [item for item in stored if item.status in LIVE]
        if not live:
            return "created"
        if any(item.source_chapter == claim.source_chapter for item in live):
            return "contradicted"
        return "superseded"

    feedback = BUILD.check(arrival_order)
    assert not feedback
    assert "yours returned 'superseded', the library's returned 'late'" in feedback.message


def test_forgetting_the_late_mark_fails_on_a_retried_late_claim():
    def exact_payload(stored, claim):
        if any(_restates(item, claim, mind_the_mark=False) for item in stored):
            return "unchanged"
        live = [item for item in stored if item.status in LIVE]
        if not live:
            return "created"
        newest = max(item.source_chapter for item in live)
        if claim.source_chapter < newest:
            return "late"
        return "contradicted" if claim.source_chapter == newest else "superseded"

    feedback = BUILD.check(exact_payload)
    assert not feedback
    assert "{late_arrival} outdated" in feedback.message
    assert "the library's returned 'unchanged'" in feedback.message


def test_a_stub_is_not_written_yet():
    def decide(stored, claim):
        raise NotImplementedError

    feedback = BUILD.check(decide)
    assert not feedback and "not written yet" in feedback.message
