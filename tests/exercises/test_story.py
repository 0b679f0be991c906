"""The story exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import story


@pytest.mark.parametrize("check", [story.check_upsert_actions, story.check_folded_summaries,
                                   story.check_first_cut])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replays_match_the_hand_computed_answers():
    assert story.replay_exercise_1() == ["created", "superseded", "contradicted", "late",
                                         "superseded", "unchanged"]
    assert story.replay_exercise_2() == (3, 2)


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


def test_first_cut():
    assert story.check_first_cut("episodic_memory")
    assert not story.check_first_cut("semantic_window")
    assert not story.check_first_cut("warnings")
