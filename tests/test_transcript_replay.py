"""s09 replay_window: the pure fold from events to the replayed window of messages.

Kept apart from tests/test_transcript.py (which also holds the multi-process runners), so
the rule can be read and tested without a file.
"""

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.exercises.s09 import session
from labmem.transcript import (
    ReplayWindow,
    Transcript,
    TranscriptValidationError,
    replay_window,
)


def user(text):
    return {"type": "message", "role": "user", "content": text}


def assistant(text):
    return {"type": "message", "role": "assistant", "content": text}


def call(call_id):
    return {"type": "function_call", "call_id": call_id, "name": "ls", "arguments": {"d": "."}}


def result(call_id, output="a.py"):
    return {"type": "function_call_result", "call_id": call_id, "output": output}


TOOL_USE = {"type": "tool_use", "id": "c1", "name": "ls", "input": {"d": "."}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "c1", "content": "a.py"}


def test_fold_pairs_tool_blocks_and_plain_texts():
    events = [user("list"), {"type": "reasoning", "content": "think"}, call("c1"),
              result("c1"), assistant("one file"), {"type": "ai-title", "title": "t"}]
    assert replay_window(events, 10) == (
        ({"role": "user", "content": "list"},
         {"role": "assistant", "content": [TOOL_USE]},
         {"role": "user", "content": [TOOL_RESULT]},
         {"role": "assistant", "content": "one file"}),
        0)


def test_consecutive_blocks_of_one_role_merge():
    window = replay_window([user("a"), user("b"), call("c1"), assistant("c"), result("c1")], 10)
    assert window.messages == (
        {"role": "user", "content": [{"type": "text", "text": "a"},
                                     {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [TOOL_USE, {"type": "text", "text": "c"}]},
        {"role": "user", "content": [TOOL_RESULT]},
    )


def test_a_call_without_its_result_is_not_replayed():
    assert replay_window([user("go"), call("c1")], 10) == (({"role": "user", "content": "go"},), 0)


def test_a_leading_orphaned_result_is_dropped_and_counted_as_left_out():
    events = [user("list"), call("c1"), result("c1"), assistant("done")]
    assert replay_window(events, 2) == (({"role": "assistant", "content": "done"},), 3)
    assert replay_window(events, 3).messages[0]["content"] == [TOOL_USE]


def test_a_leading_message_keeps_its_text_but_loses_its_tool_results():
    events = [call("c1"), result("c1"), user("and now?")]
    assert replay_window(events, 1) == (({"role": "user", "content": "and now?"},), 1)


def test_events_are_not_modified_and_messages_are_owned_by_the_caller():
    events = [call("c1"), result("c1")]
    before = copy.deepcopy(events)
    window = replay_window(events, 5)
    window.messages[0]["content"][0]["input"]["d"] = "changed"
    assert events == before
    assert isinstance(window, ReplayWindow) and window.left_out == 0


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_max_items_is_validated(bad):
    with pytest.raises(TranscriptValidationError, match="max_items"):
        replay_window([user("hi")], bad)


@given(st.lists(st.sampled_from(["user", "assistant", "call", "result", "reasoning"]),
                max_size=12).map(session),
       st.integers(min_value=1, max_value=6))
def test_replay_state_uses_the_fold(tmp_path_factory, events, max_items):
    t = Transcript(tmp_path_factory.mktemp("s") / "s-1.jsonl",
                   clock=SteppingClock("2026-08-01T00:00:00Z"))
    for event in events:
        t.append(event)
    state = t.replay_state(max_items=max_items)
    window = replay_window(events, max_items)
    assert (state.messages, state.messages_outside_window) == window
    assert len(window.messages) <= max_items
    first = window.messages[0]["content"] if window.messages else ""
    assert isinstance(first, str) or all(b["type"] != "tool_result" for b in first)
