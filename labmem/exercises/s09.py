"""Checkers for the s09 exercises (transcript evidence).

Three predict exercises (which events can be selected, how many messages a window holds,
what a reader sees after two crashes) and one build exercise: the learner writes three
pieces of the chapter's from-scratch transcript (:mod:`labmem.scratch.s09`): reading the
log, the durable append, the replay fold; :func:`check_layer` puts them into the module
and runs the layer's contract suite (:mod:`labmem.exercises.suites.s09`) on it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from labmem.core.clock import SteppingClock
from labmem.core.i18n import _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.contracts import ContractReport, assemble
from labmem.exercises.suites.s09 import SUITE
from labmem.scratch import s09 as scratch
from labmem.transcript import SELECTABLE_TYPES, Transcript

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
    name = _("exercise 1 (selectable events)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, (str, int)):
        return Feedback(name, False, _("answer with a set of sequence numbers, e.g. {1, 2}"))
    expected = {i for i, kind in enumerate(EXERCISE_1_TYPES, start=1) if kind in SELECTABLE_TYPES}
    got = set(answer)
    if got == expected:
        return Feedback(name, True, _("messages and file snapshots are evidence worth pointing at"))
    if got & {2}:
        return Feedback(name, False, _("reasoning is scratch work: it is not even replayed"))
    return Feedback(name, False, _("only {types} events are eligible")
                                 .format(types=_(" and ").join(SELECTABLE_TYPES)))


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
    name = _("exercise 2 (replay window)")
    if answer is None:
        return not_answered(name)
    if answer == window_size():
        return Feedback(name, True, _("the leading tool_result lost its tool_use, so it was "
                                      "dropped"))
    if answer == EXERCISE_2_MAX_ITEMS:
        return Feedback(name, False, _("look at what the first message of that window would be"))
    return Feedback(name, False, _("fold the four events into messages, take the last two, "
                                   "then apply the orphan rule"))


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
    name = _("exercise 3 (after two crashes)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, (str, int)) or len(answer) != 3:
        return Feedback(name, False, _("answer with three values: (events, torn_tail_ignored, "
                                       "next_sequence)"))
    events, torn, next_sequence = answer
    expected = after_two_crashes()
    if (events, torn, next_sequence) == expected:
        return Feedback(name, True, _("the first torn tail was cut off before the restart's "
                                      "appends; the second is ignored until the next append"))
    if events != expected[0]:
        return Feedback(name, False, _("count only complete lines: a torn tail is never an "
                                       "event, and the first one was cut off, not kept"))
    if torn is not expected[1]:
        return Feedback(name, False, _("is there an unterminated line at the end of the file "
                                       "when the fresh reader opens it?"))
    return Feedback(name, False, _("next_sequence is one more than the number of events"))


# -- building the layer ------------------------------------------------------------------

#: The pieces of the chapter's module the learner writes in Exercise 4, in order.
PIECES = ("read_log", "append_line", "replay_window")


def check_layer(**pieces: Any) -> ContractReport:
    """Exercise 4: the chapter's from-scratch transcript with the learner's own pieces
    (``read_log=...``, ``append_line=...``, ``replay_window=...``) put in place of the
    module's, judged by the whole layer's contract suite. A piece left as ``None`` keeps
    the module's own version."""
    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        raise TypeError(f"check_layer() takes {', '.join(PIECES)}; not {unknown[0]!r}")
    given = {name: piece for name, piece in pieces.items() if piece is not None}
    return SUITE.run(assemble(scratch, given), who="your")


def session(actions: Iterable[str]) -> list[dict[str, Any]]:
    """A valid session payload list from a list of action names (``user``, ``assistant``,
    ``call``, ``result``, ``reasoning``, ``title``, ``snapshot``).

    ``call`` opens a new tool call; ``result`` answers the oldest open one (and is skipped
    when none is open), so the tool protocol the transcript enforces always holds. Texts
    carry the event's 1-based position, so a failing case says which event is which.
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


#: Single-function build exercises: none. The replay fold is one of the three pieces of
#: Exercise 4, judged with the rest of the layer by its contract suite.
BUILD: tuple = ()


# -- from scratch vs the library, measured -------------------------------------------------

def long_session_lines(events: int, session_id: str = "long-1") -> bytes:
    """``events`` stored lines of a working session (user, call, result, assistant, …),
    exactly as an append would write them, for measuring without ``events`` fsyncs."""
    pattern = ("user", "call", "result", "assistant")
    payloads = session(pattern[n % 4] for n in range(events))
    lines = []
    for sequence, payload in enumerate(payloads, start=1):
        second = f"2026-08-01T{sequence // 3600 % 24:02d}:{sequence // 60 % 60:02d}:" \
                 f"{sequence % 60:02d}Z"
        record = scratch.Event(sequence, session_id, second, payload)
        lines.append(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
    return "".join(lines).encode("utf-8")


class _CountingTranscript(Transcript):
    """The library's transcript, counting the stored lines it decodes."""

    lines_decoded = 0

    def _decode(self, line: int, obj: dict[str, Any]) -> dict[str, Any]:
        type(self).lines_decoded += 1
        return super()._decode(line, obj)


def measure_work(directory: Path, *, events: int = 10_000, rounds: int = 3,
                 max_items: int = 50) -> dict[str, dict[str, int]]:
    """Open a session of ``events`` events, replay it once, then ``rounds`` times append
    one message and replay the last ``max_items`` messages: the work each implementation
    does in those rounds, counted (``scratch`` and ``library`` each get their own copy).

    * ``lines parsed``: stored lines decoded in the rounds;
    * ``bytes read``: bytes read from the file in the rounds;
    * ``events folded per replay``: events the replay looked at, per ``replay_state``
      (the module hands every event to ``replay_window``; the library reads its fold back
      from the last slot until the window is full).
    """
    data = long_session_lines(events)
    counts = {"lines": 0, "folded": 0, "bytes": 0}

    def counting_decode(path: Path, number: int, obj: Any, session_id: str) -> Any:
        counts["lines"] += 1
        return scratch.decode_line(path, number, obj, session_id)

    def counting_window(payloads: list[dict[str, Any]], n: int) -> Any:
        counts["folded"] += len(payloads)
        return scratch.replay_window(payloads, n)

    original_read = Path.read_bytes

    def counting_read(path: Path) -> bytes:
        chunk = original_read(path)
        counts["bytes"] += len(chunk)
        return chunk

    module = assemble(scratch, {"decode_line": counting_decode,
                                "replay_window": counting_window})
    results: dict[str, dict[str, int]] = {}
    path = Path(directory) / "scratch" / "long-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    t = module.Transcript(path, clock=SteppingClock("2026-08-02T00:00:00Z"))
    t.replay_state(max_items=max_items)
    counts.update(lines=0, folded=0, bytes=0)
    Path.read_bytes = counting_read  # type: ignore[method-assign]
    try:
        for n in range(rounds):
            t.append({"type": "message", "role": "user", "content": f"one more {n}"})
            t.replay_state(max_items=max_items)
    finally:
        Path.read_bytes = original_read  # type: ignore[method-assign]
    results["from scratch"] = {"lines parsed": counts["lines"], "bytes read": counts["bytes"],
                               "events folded per replay": counts["folded"] // rounds}

    path = Path(directory) / "library" / "long-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    library = _CountingTranscript(path, clock=SteppingClock("2026-08-02T00:00:00Z"))
    library.replay_state(max_items=max_items)
    _CountingTranscript.lines_decoded = 0
    read_before = library.bytes_read
    looked_at = 0
    for n in range(rounds):
        library.append({"type": "message", "role": "user", "content": f"one more {n}"})
        looked_at += _blocks_built(library, max_items)
    results["library"] = {"lines parsed": _CountingTranscript.lines_decoded,
                          "bytes read": library.bytes_read - read_before,
                          "events folded per replay": looked_at // rounds}
    return results


def _blocks_built(transcript: Transcript, max_items: int) -> int:
    """One ``replay_state`` of the library, counting the content blocks its window builds
    (one per event the replay looks at)."""
    before = transcript.fold.blocks_built  # the default IncrementalFold counts them
    transcript.replay_state(max_items=max_items)
    return transcript.fold.blocks_built - before


#: payloads the module's validation lets through and the library refuses
HARD_PAYLOADS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("a lone surrogate in the content",
     {"type": "message", "role": "user", "content": "half \ud800 a character"}),
    ("arguments nested 2,000 deep", {"type": "function_call", "call_id": "c1", "name": "ls",
                                     "arguments": {}}),
    ("arguments given as a JSON string",
     {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": '{"dir": "."}'}),
)


def _deep(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _level in range(levels):
        node["a"] = {}
        node = node["a"]
    return root


def validation_outcomes(directory: Path) -> list[dict[str, str]]:
    """What each implementation does with :data:`HARD_PAYLOADS`: the error it raises (by
    class name) or ``stored``."""
    rows = []
    for n, (what, payload) in enumerate(HARD_PAYLOADS):
        if what.startswith("arguments nested"):
            payload = {**payload, "arguments": _deep(2_000)}
        row = {"payload": what}
        for label, make in (("from scratch", scratch.Transcript), ("library", Transcript)):
            path = Path(directory) / "hard" / label.replace(" ", "-") / f"h-{n}.jsonl"
            t = make(path, clock=SteppingClock("2026-08-01T00:00:00Z"))
            try:
                t.append(payload)
                row[label] = "stored"
            except BaseException as exc:  # noqa: B036 — a RecursionError is the point
                row[label] = type(exc).__name__
        rows.append(row)
    return rows
