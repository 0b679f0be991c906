"""s09: one contract suite, run on the from-scratch transcript and on the library's.

Like CPython's one test suite for ``_pyio`` and ``io``: every contract of the layer is
parametrized over both implementations. Then the library's incremental replay fold is held
equal to the from-scratch fold on generated sessions, and the exercise's checker is shown
to reject plausible wrong pieces (naming the contract they break) and to accept a correct
piece written differently from the chapter's.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.exercises import s09 as exercises
from labmem.exercises.suites.s09 import PRODUCTION, SCRATCH, SUITE
from labmem.scratch import s09 as scratch
from labmem.transcript import Transcript

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}
NAMES = SUITE.names()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=str)
@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_contract_holds_on_every_implementation(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def test_the_suite_is_the_layer_in_teaching_order():
    assert 8 <= len(SUITE.contracts) <= 15
    assert len(set(NAMES)) == len(NAMES)
    assert repr(SUITE.run(SCRATCH, who="the from-scratch")) == (
        f"✓ the from-scratch transcript passes all {len(NAMES)} contracts")


# -- the library's incremental fold is the from-scratch fold ------------------------------

ACTIONS = ("user", "assistant", "call", "result", "reasoning", "title", "snapshot")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ACTIONS), max_size=14), st.integers(0, 14),
       st.integers(1, 6))
def test_incremental_replay_state_equals_the_full_fold(actions, split, max_items):
    """Appends in two rounds on one library instance (so its fold is advanced event by
    event, then read), each round compared with the from-scratch module re-reading the
    file and folding every event with ``replay_window``."""
    payloads = exercises.session(actions)
    root = Path(tempfile.mkdtemp(prefix="labmem-s09-fold-"))
    try:
        path = root / "s-1.jsonl"
        library = Transcript(path, clock=SteppingClock("2026-08-01T00:00:00Z"))
        for chunk in (payloads[:split], payloads[split:]):
            for payload in chunk:
                library.append(payload)
            fast = library.replay_state(max_items=max_items)
            reference = scratch.Transcript(path).replay_state(max_items=max_items)
            assert fast.messages == reference.messages
            assert fast.messages_outside_window == reference.messages_outside_window
            assert (fast.title, dict(fast.file_snapshots), dict(fast.counts),
                    fast.pending_tool_calls, fast.next_sequence, fast.torn_tail_ignored) == (
                reference.title, reference.file_snapshots, reference.counts,
                reference.pending_tool_calls, reference.next_sequence,
                reference.torn_tail_ignored)
            expected = scratch.replay_window([e.payload for e in scratch.read_log(
                path, "s-1").events], max_items)
            assert (list(fast.messages), fast.messages_outside_window) == expected
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the exercise: the learner's pieces in the module, judged by the suite ----------------

def stub(*args):
    raise NotImplementedError



def test_stubs_are_reported_as_not_written_yet():
    report = exercises.check_layer(read_log=stub, append_line=stub, replay_window=stub)
    assert report.passed == 1 and NAMES[1] not in report.failing_names
    text = repr(report)
    assert text.startswith(f"✗ your transcript passes 1 of {len(NAMES)} contracts; failing:")
    assert "not written yet (stub() raises NotImplementedError)" in text


def test_the_chapters_pieces_pass_and_unknown_pieces_are_refused():
    pieces = {name: getattr(scratch, name) for name in exercises.PIECES}
    assert repr(exercises.check_layer(**pieces)) == (
        f"✓ your transcript passes all {len(NAMES)} contracts")
    with pytest.raises(TypeError, match="'read_logs'"):
        exercises.check_layer(read_logs=stub)


# read_log: wrong, then right in another way ----------------------------------------------

def read_log_with_splitlines(path, session_id):
    """Decodes and splits with str.splitlines(), which also splits on U+2028 and U+0085."""
    data = path.read_bytes() if path.exists() else b""
    text = data.decode("utf-8")
    lines = text.splitlines()
    tail = "" if text.endswith("\n") or not lines else lines.pop()
    events = [scratch.decode_line(path, n, json.loads(line), session_id)
              for n, line in enumerate(lines, start=1)]
    return scratch.Log(tuple(events), len(data) - len(tail.encode("utf-8")), bool(tail))


def read_log_parsing_the_tail(path, session_id):
    """Treats the unterminated last line as one more line."""
    data = path.read_bytes() if path.exists() else b""
    lines = [line for line in data.split(b"\n") if line] if data else []
    events = []
    for number, line in enumerate(lines, start=1):
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise scratch.corrupt(path, number, f"not valid JSON ({exc})") from None
        events.append(scratch.decode_line(path, number, obj, session_id))
    return scratch.Log(tuple(events), len(data), False)


def read_log_skipping_bad_lines(path, session_id):
    """Skips a complete line that does not parse instead of raising."""
    data = path.read_bytes() if path.exists() else b""
    *lines, tail = data.split(b"\n")
    events = []
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        events.append(scratch.decode_line(path, len(events) + 1, obj, session_id))
    return scratch.Log(tuple(events), len(data) - len(tail), bool(tail))


def read_log_written_differently(path, session_id):
    """Finds the end of the last complete line first, then walks the lines with an index."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    end = data.rfind(b"\n") + 1
    events, start, number = [], 0, 0
    while start < end:
        stop = data.index(b"\n", start)
        number += 1
        try:
            obj = json.loads(data[start:stop].decode("utf-8"))
        except ValueError as exc:
            raise scratch.TranscriptCorruptionError(
                f"{path.name} line {number}: not JSON ({exc})") from None
        events.append(scratch.decode_line(path, number, obj, session_id))
        start = stop + 1
    return scratch.Log(tuple(events), end, end < len(data))


@pytest.mark.parametrize("wrong, broken", [
    (read_log_with_splitlines, NAMES[4]),   # line separators inside text
    (read_log_parsing_the_tail, NAMES[5]),  # a torn tail is not an event
    (read_log_skipping_bad_lines, NAMES[7]),  # corruption is never skipped
])
def test_wrong_read_log_is_rejected(wrong, broken):
    report = exercises.check_layer(read_log=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_read_log_written_differently_is_accepted():
    assert exercises.check_layer(read_log=read_log_written_differently).ok


# append_line ------------------------------------------------------------------------------

def append_line_keeping_the_tail(path, line, complete_bytes):
    """Appends after whatever is there, torn bytes included."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def append_line_cutting_one_too_many(path, line, complete_bytes):
    """Off by one: cuts the torn tail and the newline before it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        if f.tell() > complete_bytes:
            f.truncate(max(complete_bytes - 1, 0))
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def append_line_rewriting_the_file(path, line, complete_bytes):
    """Writes the new line as the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(line)


def append_line_written_differently(path, line, complete_bytes):
    """A buffered file in append mode: truncate to the complete lines, write, fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.truncate(complete_bytes)
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


@pytest.mark.parametrize("wrong, broken", [
    (append_line_keeping_the_tail, NAMES[6]),
    (append_line_cutting_one_too_many, NAMES[6]),
    (append_line_rewriting_the_file, NAMES[4]),
])
def test_wrong_append_line_is_rejected(wrong, broken):
    report = exercises.check_layer(append_line=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_append_line_written_differently_is_accepted():
    assert exercises.check_layer(append_line=append_line_written_differently).ok


# replay_window ----------------------------------------------------------------------------

def _blocks(events, *, answered_only=True):
    answered = {e["call_id"] for e in events if e["type"] == "function_call_result"}
    for e in events:
        if e["type"] == "message":
            yield e["role"], {"type": "text", "text": e["content"]}
        elif e["type"] == "function_call" and (e["call_id"] in answered or not answered_only):
            yield "assistant", {"type": "tool_use", "id": e["call_id"], "name": e["name"],
                                "input": e["arguments"]}
        elif e["type"] == "function_call_result":
            yield "user", {"type": "tool_result", "tool_use_id": e["call_id"],
                           "content": e["output"]}


def _grouped(events, **kw):
    return [{"role": role, "content": [block for _, block in run]}
            for role, run in itertools.groupby(_blocks(events, **kw), key=lambda rb: rb[0])]


def _orphan_rule(window):
    while window:
        window[0]["content"] = [b for b in window[0]["content"] if b["type"] != "tool_result"]
        if window[0]["content"]:
            break
        window.pop(0)
    return window


def replay_without_the_orphan_rule(events, max_items):
    folded = _grouped(events)
    window = folded[-max_items:]
    return window, len(folded) - len(window)


def replay_running_calls(events, max_items):
    folded = _grouped(events, answered_only=False)
    window = _orphan_rule(folded[-max_items:])
    return window, len(folded) - len(window)


def replay_counting_before_the_orphan_rule(events, max_items):
    folded = _grouped(events)
    window = folded[-max_items:]
    left_out = len(folded) - len(window)
    return _orphan_rule(window), left_out


def replay_without_checking_max_items(events, max_items):
    folded = _grouped(events)
    window = _orphan_rule(folded[-max_items:])  # max_items=0 slices the whole list
    return window, len(folded) - len(window)


def replay_written_differently(events, max_items):
    """groupby over (role, block) pairs; the window found by walking back from the end."""
    if type(max_items) is not int or max_items < 1:
        raise scratch.TranscriptValidationError(f"max_items: must be at least 1, got "
                                                f"{max_items!r}")
    folded = _grouped(events)
    start = max(len(folded) - max_items, 0)
    window = _orphan_rule(folded[start:])
    return window, len(folded) - len(window)


@pytest.mark.parametrize("wrong, broken", [
    (replay_without_the_orphan_rule, NAMES[10]),
    (replay_running_calls, NAMES[9]),
    (replay_counting_before_the_orphan_rule, NAMES[10]),
    (replay_without_checking_max_items, NAMES[10]),
])
def test_wrong_replay_window_is_rejected(wrong, broken):
    report = exercises.check_layer(replay_window=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_replay_window_written_differently_is_accepted():
    assert exercises.check_layer(replay_window=replay_written_differently).ok


def test_a_wrong_piece_names_its_smallest_case():
    report = exercises.check_layer(replay_window=replay_without_the_orphan_rule)
    (detail,) = [r.detail for r in report.failing if r.contract == NAMES[10]]
    assert detail.startswith("smallest case: replay_window([call c1, result c1], "
                             "max_items=1) — expected ([], 2), got ("), detail
