"""The story exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import story


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
    assert not story.check_folded_summaries(2)  # the lone events dropped
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


# -- the build exercise is the whole layer; the measured comparison ----------------------

def test_the_build_is_the_layer():
    assert story.BUILD == ()
    assert story.PIECES == ("claim_action", "Scratchpad.upsert")


def test_both_implementations_agree_on_the_sample_serial(tmp_path):
    counts, agreed = story.measure_work(tmp_path)
    assert agreed == {"same action for every claim": True,
                      "same items after the last chapter": True}
    mine, library = counts["from scratch"], counts["library"]
    for row in ("claims upserted", "late claims filed as history", "contradictions raised",
                "compactions run", "items after the last chapter"):
        assert mine[row] == library[row], row
    assert (mine["files in the project"], mine["keys a rebuild restores"]) == (1, 0)
    assert library["files in the project"] > 1 and library["keys a rebuild restores"] > 0


def test_the_library_refuses_what_the_module_stores(tmp_path):
    rows = story.validation_outcomes(tmp_path)
    assert [row["library"] for row in rows] == ["StoryValidationError"] * len(rows)
    assert [row["from scratch"] for row in rows] == ["stored", "stored", "UnicodeEncodeError"]
