"""The s09 exercise checkers accept the right answer and reject wrong ones; the build
exercise accepts the library's fold and names a counterexample for a wrong one."""

import pytest

from labmem.exercises import s09
from labmem.transcript import replay_window

BUILD = s09.BUILD[0]


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


# -- the build exercise -------------------------------------------------------------------

def _fold(events, *, answered_only=True):
    answered = {e["call_id"] for e in events if e["type"] == "function_call_result"}
    folded = []
    for e in events:
        if e["type"] == "message":
            role, block = e["role"], {"type": "text", "text": e["content"]}
        elif e["type"] == "function_call" and (e["call_id"] in answered or not answered_only):
            role, block = "assistant", {"type": "tool_use", "id": e["call_id"],
                                        "name": e["name"], "input": e["arguments"]}
        elif e["type"] == "function_call_result":
            role, block = "user", {"type": "tool_result", "tool_use_id": e["call_id"],
                                   "content": e["output"]}
        else:
            continue
        if folded and folded[-1]["role"] == role:
            folded[-1]["content"].append(block)
        else:
            folded.append({"role": role, "content": [block]})
    return folded


def _orphan_rule(window):
    while window:
        window[0]["content"] = [b for b in window[0]["content"] if b["type"] != "tool_result"]
        if window[0]["content"]:
            break
        window.pop(0)
    return window


def written_by_hand(events, max_items):
    folded = _fold(events)
    window = _orphan_rule(folded[-max_items:])
    return window, len(folded) - len(window)  # block lists throughout: accepted too


def forgets_the_orphan_rule(events, max_items):
    folded = _fold(events)
    window = folded[-max_items:]
    return window, len(folded) - len(window)


def replays_running_calls(events, max_items):
    folded = _fold(events, answered_only=False)
    window = _orphan_rule(folded[-max_items:])
    return window, len(folded) - len(window)


def counts_before_the_orphan_rule(events, max_items):
    folded = _fold(events)
    window = folded[-max_items:]
    left_out = len(folded) - len(window)
    return _orphan_rule(window), left_out


def stub(events, max_items):
    raise NotImplementedError


def test_build_accepts_the_library_and_a_hand_written_fold():
    assert BUILD.reference is replay_window
    assert BUILD.check(replay_window)
    feedback = BUILD.check(written_by_hand)
    assert feedback and "300 generated inputs" in feedback.message


def test_build_names_a_counterexample_for_a_constant():
    feedback = BUILD.check(lambda events, max_items: ([], 0))
    assert not feedback
    assert "on [user 'm1'] with max_items=1 yours returned ([], 0)" in feedback.message
    assert "Hint:" in feedback.message


@pytest.mark.parametrize("wrong, counterexample", [
    (forgets_the_orphan_rule, "on [call c1, result c1] with max_items=1"),
    (replays_running_calls, "on [call c1] with max_items=1"),
    (counts_before_the_orphan_rule, "on [call c1, result c1] with max_items=1"),
])
def test_build_rejects_near_misses_with_the_smallest_session(wrong, counterexample):
    feedback = BUILD.check(wrong)
    assert not feedback
    assert feedback.message.startswith(counterexample), feedback.message
    assert "the library's returned" in feedback.message


def test_build_stub_is_not_written_yet():
    feedback = BUILD.check(stub)
    assert not feedback and "not written yet" in feedback.message


def test_build_is_listed_for_the_series():
    assert BUILD.title == "s09 build: replay_window"
