"""s09 replay_window: the pure fold from events to the replayed window of messages.

Kept apart from tests/test_transcript.py (which also holds the multi-process runners), so
the rule can be read and tested without a file.
"""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.exercises.s09 import session
from labmem.transcript import (
    IncrementalFold,
    PlainFold,
    ReplayFold,
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


# -- the incremental fold of Transcript.replay_state equals the full fold -----------------

def full_fold(records, max_items):
    """The oracle: every field of ReplayState folded from every record, as replay_state did
    before it kept the fold incrementally (one pass over the whole history per call)."""
    title, snapshots, counts, calls, answered = None, {}, {}, [], set()
    for record in records:
        counts[record["type"]] = counts.get(record["type"], 0) + 1
        if record["type"] == "function_call":
            calls.append(record["call_id"])
        elif record["type"] == "function_call_result":
            answered.add(record["call_id"])
        elif record["type"] == "file-history-snapshot":
            snapshots[record["path"]] = record["sha256"]
        elif record["type"] == "ai-title":
            title = record["title"]
    window = replay_window(records, max_items)
    return {"messages": window.messages, "messages_outside_window": window.left_out,
            "title": title, "file_snapshots": dict(sorted(snapshots.items())),
            "counts": dict(sorted(counts.items())), "next_sequence": len(records) + 1,
            "pending_tool_calls": tuple(c for c in calls if c not in answered)}


def observed(state):
    return {"messages": state.messages, "messages_outside_window": state.messages_outside_window,
            "title": state.title, "file_snapshots": dict(state.file_snapshots),
            "counts": dict(state.counts), "next_sequence": state.next_sequence,
            "pending_tool_calls": state.pending_tool_calls}


# Raw streams: any order a file can hold once its lines decode, including what append()
# refuses (a result before its call or without one, a call id used twice, two results).
RAW_EVENT = st.one_of(
    st.tuples(st.just("message"), st.sampled_from(["user", "assistant"])),
    st.tuples(st.just("call"), st.integers(0, 3)),
    st.tuples(st.just("result"), st.integers(0, 3)),
    st.tuples(st.sampled_from(["reasoning", "title", "snapshot"]), st.integers(0, 2)),
)


def raw_payload(op, n):
    kind, arg = op
    if kind == "message":
        return {"type": "message", "role": arg, "content": f"m{n}"}
    if kind == "call":
        return {"type": "function_call", "call_id": f"c{arg}", "name": "ls",
                "arguments": {"n": n, "nested": {"d": [n]}}}
    if kind == "result":
        return {"type": "function_call_result", "call_id": f"c{arg}", "output": f"out{n}"}
    if kind == "reasoning":
        return {"type": "reasoning", "content": f"thought {n}"}
    if kind == "title":
        return {"type": "ai-title", "title": f"title {n}"}
    return {"type": "file-history-snapshot", "path": f"f{arg}.py", "sha256": f"{n:064x}"}


def raw_line(session_id, sequence, payload):
    from labmem.core.storage import encode_json_line

    return encode_json_line({"schema_version": 1, "sequence": sequence, "session_id": session_id,
                             "event_id": f"transcript:{session_id}:{sequence}",
                             "recorded_at": "2026-08-01T00:00:00Z", **payload})


@settings(max_examples=300, deadline=None)
@given(st.lists(RAW_EVENT, max_size=40), st.lists(st.integers(1, 40), max_size=4),
       st.integers(min_value=1, max_value=6), st.booleans())
def test_incremental_fold_equals_the_full_fold(tmp_path_factory, ops, cuts, max_items, torn):
    """A reader that follows the file as it grows (cut points: replay between appends)
    reports exactly the full fold of the complete lines so far, at every window size —
    windows starting at tool results included — and ignores a torn tail."""
    path = tmp_path_factory.mktemp("fold") / "s-1.jsonl"
    path.touch()
    payloads = [raw_payload(op, n) for n, op in enumerate(ops, start=1)]
    reader = Transcript(path)
    written = 0
    for cut in sorted(set(c for c in cuts if c < len(payloads))) + [len(payloads)]:
        with open(path, "ab") as handle:
            for sequence in range(written + 1, cut + 1):
                handle.write(raw_line("s-1", sequence, payloads[sequence - 1]))
        written = cut
        for n in {1, max_items, 1000}:
            assert observed(reader.replay_state(max_items=n)) == full_fold(payloads[:cut], n)
    if torn:
        with open(path, "ab") as handle:
            handle.write(raw_line("s-1", written + 1, payloads[0] if payloads else
                                  raw_payload(("message", "user"), 1))[:-5])
    for fresh in (reader, Transcript(path)):
        state = fresh.replay_state(max_items=max_items)
        assert observed(state) == full_fold(payloads, max_items)
        assert state.torn_tail_ignored is torn


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["user", "assistant", "call", "result", "reasoning", "title",
                                 "snapshot"]), max_size=30).map(session),
       st.integers(min_value=1, max_value=6))
def test_appends_and_a_second_reader_keep_the_fold(tmp_path_factory, events, max_items):
    """Through append() (the tool protocol holds), replaying after every event: the writer
    and a reader of the same file both agree with the full fold at each step."""
    path = tmp_path_factory.mktemp("append") / "s-1.jsonl"
    writer = Transcript(path, clock=SteppingClock("2026-08-01T00:00:00Z"))
    reader = Transcript(path)
    for i, event in enumerate(events, start=1):
        writer.append(event)
        expected = full_fold(events[:i], max_items)
        assert observed(writer.replay_state(max_items=max_items)) == expected
        assert observed(reader.replay_state(max_items=max_items)) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(RAW_EVENT, max_size=40), st.integers(min_value=1, max_value=6))
def test_the_incremental_fold_is_the_plain_fold(ops, max_items):
    """The ReplayFold seam: fed the same raw stream one event at a time, the incremental
    fold and the plain one (replay_window over everything) agree after every event."""
    folds: tuple[ReplayFold, ReplayFold] = (IncrementalFold(), PlainFold())
    for n, op in enumerate(ops, start=1):
        event = raw_payload(op, n)
        for fold in folds:
            fold.add(event)
        incremental, plain = folds
        for size in {1, max_items, 1000}:
            assert incremental.window(size) == plain.window(size)
        assert incremental.pending_tool_calls() == plain.pending_tool_calls()


def test_a_transcript_can_fold_plainly(tmp_path):
    """``fold_factory`` is the one switch: a transcript that refolds every event on each
    replay reports the same state as the default one."""

    class PlainTranscript(Transcript):
        fold_factory = PlainFold

    events = [user("a"), call("c1"), user("b"), assistant("x"), call("c2"), user("c"),
              result("c2"), {"type": "ai-title", "title": "t"}, result("c1")]
    default = Transcript(tmp_path / "s-1.jsonl", clock=SteppingClock("2026-08-01T00:00:00Z"))
    for event in events:
        default.append(event)
    plain = PlainTranscript(tmp_path / "s-1.jsonl")
    assert isinstance(default.fold, IncrementalFold) and isinstance(plain.fold, PlainFold)
    for n in (1, 2, 3, 10):
        assert plain.replay_state(max_items=n) == default.replay_state(max_items=n)


def test_a_late_result_puts_its_call_back_where_it_was():
    """A call answered after later messages: its tool_use joins the message it was part of
    (here it splits a user run in two), exactly as the full fold places it."""
    import tempfile
    from pathlib import Path

    events = [user("a"), call("c1"), user("b"), assistant("x"), call("c2"), user("c"),
              result("c2"), result("c1")]
    with tempfile.TemporaryDirectory() as tmp:
        t = Transcript(Path(tmp) / "s-1.jsonl", clock=SteppingClock("2026-08-01T00:00:00Z"))
        for i, event in enumerate(events, start=1):
            t.append(event)
            for n in (1, 2, 3, 10):
                assert observed(t.replay_state(max_items=n)) == full_fold(events[:i], n)


def _traced_lines(run):
    """How many Python lines ``run()`` executes (a cost measure that does not depend on
    the machine's speed or load)."""
    import sys

    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
    return count


def test_replay_after_open_costs_the_window_not_the_history(tmp_path):
    """The same window over 100 and over 5,000 events: replay_state executes the same
    work (the full fold executed ~50x more lines on the longer session)."""
    def opened(size):
        path = tmp_path / f"s-{size}.jsonl"
        with open(path, "wb") as handle:
            for n in range(1, size + 1):
                kind = ("message", "user") if n % 4 == 1 else (
                    ("call", n) if n % 4 == 2 else (("result", n - 1) if n % 4 == 3 else
                                                    ("message", "assistant")))
                payload = raw_payload(kind, n)
                if kind[0] in ("call", "result"):
                    payload["call_id"] = f"c{kind[1]}"
                handle.write(raw_line(path.stem, n, payload))
        transcript = Transcript(path)
        assert len(transcript) == size  # open: the history is read once, here
        return transcript

    small, large = opened(100), opened(5_000)
    cost = {n: _traced_lines(lambda t=t: t.replay_state(max_items=8))
            for n, t in ((100, small), (5_000, large))}
    assert small.replay_state(max_items=8).messages_outside_window == 92
    assert cost[5_000] <= cost[100] * 1.1, cost
