"""Checkers for the s09 exercises (transcript evidence).

Three predict exercises (which events can be selected, how many messages a window holds,
what a reader sees after two crashes) and one build exercise: the learner writes the
replay fold, :func:`labmem.transcript.replay_window`, and the checker compares it with the
library's on generated sessions.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.transcript import SELECTABLE_TYPES, Transcript, replay_window

EXERCISE_1_TYPES = ("message", "reasoning", "function_call", "function_call_result",
                    "message", "file-history-snapshot", "ai-title")

#: Exercise 2: the session whose window of two messages the learner predicts.
EXERCISE_2_EVENTS: tuple[dict[str, Any], ...] = (
    {"type": "message", "role": "user", "content": "list the files"},
    {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": {}},
    {"type": "function_call_result", "call_id": "c1", "output": "a.py"},
    {"type": "message", "role": "assistant", "content": "There is one file."},
)
EXERCISE_2_MAX_ITEMS = 2

#: Exercise 3: complete events before the first crash, events appended after it.
EXERCISE_3_BEFORE_CRASH = 5
EXERCISE_3_AFTER_CRASH = 3


def check_selectable(answer: Iterable[int] | None) -> Feedback:
    """Exercise 1: the sequence numbers (1-based) of :data:`EXERCISE_1_TYPES` that can be
    memory candidates."""
    name = "exercise 1 (selectable events)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, (str, int)):
        return Feedback(name, False, "answer with a set of sequence numbers, e.g. {1, 2}")
    expected = {i for i, kind in enumerate(EXERCISE_1_TYPES, start=1) if kind in SELECTABLE_TYPES}
    got = set(answer)
    if got == expected:
        return Feedback(name, True, "messages and file snapshots are evidence worth pointing at")
    if got & {2}:
        return Feedback(name, False, "reasoning is scratch work: it is not even replayed")
    return Feedback(name, False, f"only {' and '.join(SELECTABLE_TYPES)} events are eligible")


def _with_transcript(run) -> Any:
    """Run ``run(transcript)`` on a fresh transcript in a throw-away directory."""
    with tempfile.TemporaryDirectory(prefix="labmem-s09-ex-") as tmp:
        clock = SteppingClock("2026-08-01T00:00:00Z")
        return run(Transcript(Path(tmp) / "exercise.jsonl", clock=clock))


def window_size() -> int:
    """How many messages a real transcript replays for exercise 2."""
    def run(t: Transcript) -> int:
        for event in EXERCISE_2_EVENTS:
            t.append(event)
        return len(t.replay_state(max_items=EXERCISE_2_MAX_ITEMS).messages)

    return _with_transcript(run)


def check_window(answer: int | None) -> Feedback:
    """Exercise 2: how many messages ``replay_state(max_items=2)`` returns for the
    user → function_call → function_call_result → assistant session."""
    name = "exercise 2 (replay window)"
    if answer is None:
        return not_answered(name)
    if answer == window_size():
        return Feedback(name, True, "the leading tool_result lost its tool_use, so it was dropped")
    if answer == EXERCISE_2_MAX_ITEMS:
        return Feedback(name, False, "look at what the first message of that window would be")
    return Feedback(name, False, "fold the four events into messages, take the last two, "
                                 "then apply the orphan rule")


def after_two_crashes() -> tuple[int, bool, int]:
    """Exercise 3 on a real file: ``(events, torn_tail_ignored, next_sequence)``."""
    def message(n: int) -> dict[str, str]:
        return {"type": "message", "role": "user", "content": f"note {n}"}

    def run(t: Transcript) -> tuple[int, bool, int]:
        for n in range(EXERCISE_3_BEFORE_CRASH):
            t.append(message(n))
        with open(t.path, "ab") as f:
            f.write(b'{"schema_version":1,"seq')  # the first writer died mid-line
        restarted = Transcript(t.path, clock=t.clock)
        for n in range(EXERCISE_3_AFTER_CRASH):
            restarted.append(message(n))
        with open(t.path, "ab") as f:
            f.write(b'{"schema_version":1,"sequence":')  # and the second one too
        fresh = Transcript(t.path)
        state = fresh.replay_state()
        return len(fresh), state.torn_tail_ignored, state.next_sequence

    return _with_transcript(run)


def check_after_two_crashes(answer: Sequence[Any] | None) -> Feedback:
    """Exercise 3: ``(events, torn_tail_ignored, next_sequence)`` a fresh reader reports
    after the crash, restart, appends and second crash of :data:`EXERCISE_3_BEFORE_CRASH`
    and :data:`EXERCISE_3_AFTER_CRASH`."""
    name = "exercise 3 (after two crashes)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, (str, int)) or len(answer) != 3:
        return Feedback(name, False, "answer with three values: (events, torn_tail_ignored, "
                                     "next_sequence)")
    events, torn, next_sequence = answer
    expected = after_two_crashes()
    if (events, torn, next_sequence) == expected:
        return Feedback(name, True, "the first torn tail was cut off before the restart's "
                                    "appends; the second is ignored until the next append")
    if events != expected[0]:
        return Feedback(name, False, "count only complete lines: a torn tail is never an "
                                     "event, and the first one was cut off, not kept")
    if torn is not expected[1]:
        return Feedback(name, False, "is there an unterminated line at the end of the file "
                                     "when the fresh reader opens it?")
    return Feedback(name, False, "next_sequence is one more than the number of events")


# -- the build exercise -------------------------------------------------------------------

_ACTIONS = ("user", "assistant", "call", "result", "user", "assistant", "call", "result",
            "reasoning", "title", "snapshot")


def session(actions: Iterable[str]) -> list[dict[str, Any]]:
    """A valid session payload list from a list of action names.

    ``call`` opens a new tool call; ``result`` answers the oldest open one (and is skipped
    when none is open), so the tool protocol the transcript enforces always holds. Texts
    carry the event's 1-based position, so a feedback line says which event is which.
    """
    events: list[dict[str, Any]] = []
    open_calls: list[str] = []
    calls = 0
    for action in actions:
        n = len(events) + 1
        if action in ("user", "assistant"):
            events.append({"type": "message", "role": action, "content": f"m{n}"})
        elif action == "call":
            calls += 1
            open_calls.append(f"c{calls}")
            events.append({"type": "function_call", "call_id": f"c{calls}", "name": "ls",
                           "arguments": {"dir": f"d{n}"}})
        elif action == "result" and open_calls:
            events.append({"type": "function_call_result", "call_id": open_calls.pop(0),
                           "output": f"out{n}"})
        elif action == "reasoning":
            events.append({"type": "reasoning", "content": f"thought {n}"})
        elif action == "title":
            events.append({"type": "ai-title", "title": f"title {n}"})
        elif action == "snapshot":
            events.append({"type": "file-history-snapshot", "path": "a.py", "sha256": "0" * 64})
    return events


def _shorthand(event: dict[str, Any]) -> str:
    kind = event["type"]
    if kind == "message":
        return f"{event['role']} {event['content']!r}"
    if kind == "function_call":
        return f"call {event['call_id']}"
    if kind == "function_call_result":
        return f"result {event['call_id']}"
    return {"ai-title": "title", "file-history-snapshot": "snapshot"}.get(kind, kind)


def describe_session(args: tuple) -> str:
    """A counterexample in one line: the events in shorthand, then ``max_items``."""
    events, max_items = args
    return f"[{', '.join(_shorthand(e) for e in events)}] with max_items={max_items}"


def _block_form(message: Any) -> Any:
    """A message with its content as a block list, so that a lone text may be given either
    as a plain string or as one text block."""
    if isinstance(message, dict) and isinstance(message.get("content"), str):
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


def _plain_form(message: Any) -> Any:
    message = _block_form(message)
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict) \
            and content[0].get("type") == "text" and set(content[0]) == {"type", "text"}:
        return {**message, "content": content[0]["text"]}
    return message


def compare_window(value: Any) -> tuple[list[Any], Any]:
    """What is compared: the messages (a lone text as a plain string) and ``left_out``."""
    messages, left_out = value
    return [_plain_form(m) for m in messages], left_out


BUILD = (
    BuildExercise(
        chapter="s09",
        name="replay_window",
        reference=replay_window,
        inputs=st.tuples(st.lists(st.sampled_from(_ACTIONS), max_size=9).map(session),
                         st.integers(min_value=1, max_value=5)),
        hint="re-read which events become blocks, when blocks of one role merge, and what "
             "the orphan rule does to the window's first message",
        project=compare_window,
        describe=describe_session,
    ),
)
