"""Checkers for the s09 exercises (transcript evidence)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

from labmem.core.clock import SteppingClock
from labmem.exercises import Feedback, not_answered
from labmem.transcript import SELECTABLE_TYPES, Transcript

EXERCISE_1_TYPES = ("message", "reasoning", "function_call", "function_call_result",
                    "message", "file-history-snapshot", "ai-title")


def check_selectable(answer: Iterable[int] | None) -> Feedback:
    """Exercise 1: the sequence numbers (1-based) of :data:`EXERCISE_1_TYPES` that can be
    memory candidates."""
    name = "exercise 1 (selectable events)"
    if answer is None:
        return not_answered(name)
    expected = {i for i, kind in enumerate(EXERCISE_1_TYPES, start=1) if kind in SELECTABLE_TYPES}
    got = set(answer)
    if got == expected:
        return Feedback(name, True, "messages and file snapshots are evidence worth pointing at")
    if got & {2}:
        return Feedback(name, False, "reasoning is scratch work: it is not even replayed")
    return Feedback(name, False, f"only {' and '.join(SELECTABLE_TYPES)} events are eligible")


def _window_size(max_items: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        t = Transcript(Path(tmp) / "exercise.jsonl", clock=SteppingClock("2026-08-01T00:00:00Z"))
        t.append({"type": "message", "role": "user", "content": "list the files"})
        t.append({"type": "function_call", "call_id": "c1", "name": "ls", "arguments": {}})
        t.append({"type": "function_call_result", "call_id": "c1", "output": "a.py"})
        t.append({"type": "message", "role": "assistant", "content": "There is one file."})
        return len(t.replay_state(max_items=max_items).messages)


def check_window(answer: int | None) -> Feedback:
    """Exercise 2: how many messages ``replay_state(max_items=2)`` returns for the
    user → tool_use → tool_result → assistant session."""
    name = "exercise 2 (replay window)"
    if answer is None:
        return not_answered(name)
    expected = _window_size(2)
    if answer == expected:
        return Feedback(name, True, "the leading tool_result lost its tool_use, so it was dropped")
    if answer == 2:
        return Feedback(name, False, "look at what the first message of that window would be")
    return Feedback(name, False, "fold the four events into messages, take the last two, "
                                 "then apply the orphan rule")


def check_sequence_after_crash(answer: int | None) -> Feedback:
    """Exercise 3: 7 complete events, then a torn tail; the next append's sequence."""
    name = "exercise 3 (after the crash)"
    if answer is None:
        return not_answered(name)
    if answer == 8:
        return Feedback(name, True, "the torn tail was never an event: it is cut off, not counted")
    if answer == 9:
        return Feedback(name, False, "an unterminated line is not a committed event")
    return Feedback(name, False, "count only the complete lines")
