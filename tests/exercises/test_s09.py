"""The s09 exercise checkers: the predict exercises accept the right answer and reject wrong
ones; the helpers behind the layer build and the measured comparison do what they say."""

import pytest

from labmem.exercises import s09
from labmem.transcript import Transcript


@pytest.mark.parametrize("check", [s09.check_selectable, s09.check_window,
                                   s09.check_after_two_crashes])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replays_match_the_hand_computed_answers():
    assert s09.window_size() == 1
    assert s09.after_two_crashes() == (8, True, 9)


def test_s09_selectable():
    assert s09.check_selectable([1, 5, 6])
    assert s09.check_selectable({6, 5, 1})
    assert "reasoning" in s09.check_selectable([1, 2, 5, 6]).message
    assert not s09.check_selectable([1, 5])
    assert not s09.check_selectable(1)


def test_s09_window():
    assert s09.check_window(1)
    assert "first message" in s09.check_window(2).message
    assert not s09.check_window(0)


def test_s09_after_two_crashes():
    assert s09.check_after_two_crashes((8, True, 9))
    assert s09.check_after_two_crashes([8, True, 9])
    assert "complete lines" in s09.check_after_two_crashes((9, True, 10)).message  # kept a tail
    assert "complete lines" in s09.check_after_two_crashes((7, True, 8)).message
    assert "unterminated" in s09.check_after_two_crashes((8, False, 9)).message
    assert "one more" in s09.check_after_two_crashes((8, True, 10)).message
    assert not s09.check_after_two_crashes(9)


# -- the layer build (Exercise 4) and the measured comparison -------------------------------
# The learner's pieces are judged by the layer's contract suite; the wrong and the
# differently written pieces are in tests/contracts/test_s09.py.

def test_there_is_no_single_function_build_any_more():
    assert s09.BUILD == ()
    assert s09.PIECES == ("read_log", "append_line", "replay_window")


def test_the_session_helper_keeps_the_tool_protocol():
    events = s09.session(["result", "call", "call", "result", "user", "result", "result"])
    kinds = [(e["type"], e.get("call_id")) for e in events]
    assert kinds == [("function_call", "c1"), ("function_call", "c2"),
                     ("function_call_result", "c1"), ("message", None),
                     ("function_call_result", "c2")]


def test_measured_work_on_a_small_session(tmp_path):
    work = s09.measure_work(tmp_path, events=40, rounds=2, max_items=3)
    # from scratch: every append and every replay decodes every line again
    assert work["from scratch"]["lines parsed"] == (40 + 41) + (41 + 42)
    assert work["from scratch"]["events folded per replay"] == (41 + 42) // 2
    assert work["from scratch"]["bytes read"] > 0
    # the library: nothing re-read; a replay looks at the window only
    assert work["library"]["lines parsed"] == 0 and work["library"]["bytes read"] == 0
    assert 1 <= work["library"]["events folded per replay"] <= 4


def test_the_long_session_is_what_append_would_write(tmp_path):
    path = tmp_path / "long-1.jsonl"
    path.write_bytes(s09.long_session_lines(9))
    assert len(Transcript(path)) == 9


def test_validation_outcomes(tmp_path):
    rows = s09.validation_outcomes(tmp_path)
    assert [(r["from scratch"], r["library"]) for r in rows] == [
        ("UnicodeEncodeError", "TranscriptValidationError"),
        ("RecursionError", "TranscriptValidationError"),
        ("TranscriptValidationError", "stored")]
