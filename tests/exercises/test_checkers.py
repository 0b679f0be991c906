"""Every exercise checker accepts the right answer and rejects wrong ones."""

import pytest

from labmem.exercises import Feedback, s12


def test_feedback_shows_a_mark():
    assert repr(Feedback("e", True, "fine")) == "✓ e: fine"
    assert not Feedback("e", False, "no")


@pytest.mark.parametrize("check", [s12.check_terms, s12.check_score_by_hand,
                                   s12.check_tie_break])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_s12_terms():
    assert s12.check_terms(("agent", "memory", "分层", "层记", "记忆"))
    assert not s12.check_terms(["memory", "agent", "分层", "层记", "记忆"])  # unsorted
    assert not s12.check_terms(("agent", "memory", "分层记忆"))  # no bigrams
    assert not s12.check_terms(("Agent", "MEMORY", "分层", "层记", "记忆"))  # no casefold


def test_s12_score_by_hand():
    assert s12.check_score_by_hand(0.679167)
    assert not s12.check_score_by_hand(0.566667)  # lexical part only
    assert not s12.check_score_by_hand(0.6)
    assert not s12.check_score_by_hand("0.679167")


def test_s12_tie_break():
    assert s12.check_tie_break("memory-a17")
    assert not s12.check_tie_break("memory-b02")
    assert not s12.check_tie_break("rank 1")


def test_s09_checkers():
    from labmem.exercises import s09

    for check in (s09.check_selectable, s09.check_window, s09.check_sequence_after_crash):
        assert "not answered" in check(None).message
    assert s09.check_selectable([1, 5, 6])
    assert not s09.check_selectable([1, 2, 5, 6])
    assert not s09.check_selectable([1, 5])
    assert s09.check_window(1)
    assert not s09.check_window(2) and not s09.check_window(0)
    assert s09.check_sequence_after_crash(8)
    assert not s09.check_sequence_after_crash(9)


def test_s14_compaction_checkers():
    from labmem.exercises import s14_compaction as ex

    for check in (ex.check_first_layer, ex.check_status_after_cleanup,
                  ex.check_runs_at_threshold):
        assert "not answered" in check(None).message
    assert ex.check_first_layer("tool_result_truncation")
    assert not ex.check_first_layer("conversation_summary")
    assert not ex.check_first_layer("summary")
    assert ex.check_status_after_cleanup("missing")
    assert not ex.check_status_after_cleanup("available")
    assert not ex.check_status_after_cleanup("corrupt")
    assert ex.check_runs_at_threshold(True)
    assert not ex.check_runs_at_threshold(False)
