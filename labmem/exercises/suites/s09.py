"""The s09 contract suite: what a session transcript promises, contract by contract.

``SUITE`` runs on any implementation that offers the operations the chapter builds:

* ``Transcript(path, clock=...)`` with ``append(payload)``, ``events()``, ``len()``,
  ``lookup(event_id)``, ``replay_state(max_items=...)`` and
  ``select_memory_candidate(event_id, summary=..., reason=...)``;
* ``replay_window(payloads, max_items)`` → ``(messages, left_out)``;
* the errors ``TranscriptValidationError``, ``TranscriptCorruptionError`` and
  ``MemorySelectionError``.

``SCRATCH`` is the chapter's from-scratch module (:mod:`labmem.scratch.s09`) itself;
``PRODUCTION`` is :mod:`labmem.transcript` behind :class:`_Production`, which only says
where the library keeps the same operations (its records are dicts where the module's are
``Event`` dataclasses; :func:`_flat` reads both). Every check tries its cases smallest
first and names the first one that breaks.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from labmem import transcript as production
from labmem.core.clock import SteppingClock, format_timestamp
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, expect, is_a
from labmem.scratch import s09 as scratch_module

START = "2026-08-01T09:00:00Z"
SECONDS = tuple(f"2026-08-01T09:00:0{n}Z" for n in range(10))


class _Production:
    """The library's transcript under the names the contracts use."""

    Transcript = production.Transcript
    replay_window = staticmethod(production.replay_window)
    TranscriptValidationError = production.TranscriptValidationError
    TranscriptCorruptionError = production.TranscriptCorruptionError
    MemorySelectionError = production.MemorySelectionError

    def __repr__(self) -> str:
        return "labmem.transcript"


SCRATCH = scratch_module
PRODUCTION = _Production()


# -- helpers ------------------------------------------------------------------------------

def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": text}


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "ls", "arguments": {}}


def result(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_result", "call_id": call_id, "output": f"out {call_id}"}


REASONING = {"type": "reasoning", "content": "think"}
TITLE = {"type": "ai-title", "title": "a title"}
SNAPSHOT = {"type": "file-history-snapshot", "path": "a.py", "sha256": "0" * 64}


def short(event: dict[str, Any]) -> str:
    """An event in shorthand: ``user 'm1'``, ``call c1``, ``result c1``, ``reasoning``."""
    kind = event["type"]
    if kind == "message":
        return f"{event['role']} {event['content']!r}"
    if kind in ("function_call", "function_call_result"):
        return f"{'call' if kind == 'function_call' else 'result'} {event['call_id']}"
    return {"ai-title": "title", "file-history-snapshot": "snapshot"}.get(kind, kind)


def shorts(events: list[dict[str, Any]]) -> str:
    return "[" + ", ".join(short(e) for e in events) + "]"


def _flat(record: Any) -> dict[str, Any] | None:
    """A stored record as one flat dict, whether the implementation returns a dict or an
    ``Event`` (``to_dict()``)."""
    if record is None:
        return None
    return record.to_dict() if hasattr(record, "to_dict") else dict(record)


def _block_list(message: dict[str, Any]) -> dict[str, Any]:
    """A message with a lone text given as a plain string, as a one-block list: both
    forms are the same message."""
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return {"role": message["role"], "content": list(content)}


def _window(value: Any) -> tuple[list[dict[str, Any]], Any]:
    messages, left_out = value
    return [_block_list(m) for m in messages], left_out


@contextmanager
def _session(impl: Any, name: str = "s-1") -> Iterator[Any]:
    """A fresh transcript in a throw-away directory, with a clock stepping by a second."""
    root = Path(tempfile.mkdtemp(prefix="labmem-s09-contract-"))
    try:
        yield impl.Transcript(root / f"{name}.jsonl", clock=SteppingClock(START))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fresh(impl: Any, t: Any) -> Any:
    """Another reader of the same file (a restarted process)."""
    return impl.Transcript(t.path, clock=SteppingClock("2026-08-02T00:00:00Z"))


def _iso(value: Any) -> Any:
    """A time as the ISO text with ``Z`` that the file stores: the library's
    ``MemorySource`` keeps an aware ``datetime`` in memory, the module keeps the text."""
    return format_timestamp(value) if isinstance(value, datetime) else value


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def _refused(impl: Any, error: type, action: Callable[[], Any], case: str) -> BaseException:
    try:
        got = action()
    except Exception as exc:
        if is_a(exc, error):
            return exc
        if isinstance(exc, NotImplementedError):
            raise  # a stub: reported as not written yet
        # the wrong error is a broken contract, named
        raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, got "
                             f"{type(exc).__name__}: {exc}") from None
    raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, but it was "
                         f"accepted ({_short_value(got)})")


def _short_value(value: Any) -> str:
    value = _flat(value) if hasattr(value, "to_dict") else value
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _expect(case: str, got: Any, want: Any) -> None:
    expect(case, got, want, show=_short_value)


# -- appending ----------------------------------------------------------------------------

def each_append_gets_its_envelope(impl: Any) -> None:
    for count in (1, 2, 3):
        case = f"{count} append(s) to a new session 's-1'"
        with _session(impl) as t:
            payloads = [user(f"m{n}") for n in range(1, count + 1)]
            records = []
            for payload in payloads:
                before = dict(payload)
                records.append(_flat(t.append(payload)))
                _expect(f"{case}: the caller's dict after append", payload, before)
            want = [{"schema_version": 1, "sequence": n, "session_id": "s-1",
                     "event_id": f"transcript:s-1:{n}", "recorded_at": SECONDS[n - 1],
                     **payloads[n - 1]} for n in range(1, count + 1)]
            _expect(f"{case}: the returned records", records, want)


def envelope_fields_are_refused(impl: Any) -> None:
    for name, value in (("sequence", 1), ("event_id", "transcript:s-1:1"),
                        ("session_id", "s-1"), ("recorded_at", START),
                        ("schema_version", 1)):
        payload = {**user("hi"), name: value}
        case = f"append({payload})"
        with _session(impl) as t:
            before = _bytes(t.path)
            _refused(impl, impl.TranscriptValidationError, lambda p=payload: t.append(p), case)
            _expect(f"{case}: the file after the refusal", _bytes(t.path), before)


BAD_PAYLOADS: tuple[Any, ...] = (
    "hello",
    {"type": "note", "content": "x"},
    {"type": "message", "role": "user"},
    {"type": "message", "role": "user", "content": "x", "mood": "calm"},
    {"type": "message", "role": "system", "content": "x"},
    {"type": "message", "role": "user", "content": 7},
    {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": [1]},
    {"type": "function_call", "call_id": "", "name": "ls", "arguments": {}},
    {"type": "file-history-snapshot", "path": "a.py", "sha256": "abc"},
    {"type": "ai-title", "title": None},
)


def bad_payloads_are_refused(impl: Any) -> None:
    for payload in BAD_PAYLOADS:
        case = f"append({payload!r}) to a session of one message"
        with _session(impl) as t:
            t.append(user("m1"))
            before = _bytes(t.path)
            _refused(impl, impl.TranscriptValidationError, lambda p=payload: t.append(p), case)
            _expect(f"{case}: the file after the refusal", _bytes(t.path), before)


def a_call_gets_one_result(impl: Any) -> None:
    cases = (([], result("c1"), "a result for a call never made"),
             ([call("c1"), result("c1")], result("c1"), "a second result for one call"),
             ([call("c1")], call("c1"), "a call id used twice"),
             ([call("c1"), result("c1")], call("c1"), "a call id reused after its result"))
    for before_events, payload, what in cases:
        case = f"{what}: {shorts(before_events)} then {short(payload)}"
        with _session(impl) as t:
            for event in before_events:
                t.append(event)
            _refused(impl, impl.TranscriptValidationError, lambda p=payload: t.append(p), case)
            _expect(f"{case}: events stored", len(_fresh(impl, t)), len(before_events))
    with _session(impl) as t:  # and the right order is accepted
        for event in (call("c1"), user("m2"), result("c1")):
            t.append(event)
        _expect("[call c1, user 'm2', result c1]: events stored", len(_fresh(impl, t)), 3)


# -- reading back -------------------------------------------------------------------------

def appended_events_read_back(impl: Any) -> None:
    sessions = ([user("m1")],
                [user("one\u2028two\u2029three\x85four")],
                [user("m1"), call("c1"), result("c1"), REASONING, SNAPSHOT, TITLE,
                 assistant("é ✓ 中文")])
    for payloads in sessions:
        case = f"{shorts(payloads)} read by a fresh reader"
        with _session(impl) as t:
            stored = [_flat(t.append(p)) for p in payloads]
            _expect(case, [_flat(r) for r in _fresh(impl, t).events()], stored)


TORN = b'{"schema_version":1,"sequence":9,"type":"message","content":"lost in a cra'


def torn_tail_is_ignored(impl: Any) -> None:
    for complete in (0, 1, 2):
        case = f"{complete} complete event(s), then a torn line"
        with _session(impl) as t:
            for n in range(1, complete + 1):
                t.append(user(f"m{n}"))
            t.path.parent.mkdir(parents=True, exist_ok=True)
            with open(t.path, "ab") as f:
                f.write(TORN)
            reader = _fresh(impl, t)
            _expect(f"{case}: events a fresh reader sees", len(reader), complete)
            state = reader.replay_state()
            _expect(f"{case}: (torn_tail_ignored, next_sequence)",
                    (state.torn_tail_ignored, state.next_sequence), (True, complete + 1))


def torn_tail_is_repaired(impl: Any) -> None:
    for complete in (0, 1, 2):
        case = f"{complete} complete event(s), a torn line, then append(user 'after')"
        with _session(impl) as t:
            for n in range(1, complete + 1):
                t.append(user(f"m{n}"))
            t.path.parent.mkdir(parents=True, exist_ok=True)
            with open(t.path, "ab") as f:
                f.write(TORN)
            record = _flat(_fresh(impl, t).append(user("after")))
            _expect(f"{case}: the new event's sequence", record["sequence"], complete + 1)
            data = t.path.read_bytes()
            _expect(f"{case}: the torn bytes still in the file", b"lost in a cra" in data, False)
            _expect(f"{case}: complete lines in the file", data.count(b"\n"), complete + 1)
            reader = _fresh(impl, t)
            events = [_flat(r) for r in reader.events()]
            _expect(f"{case}: the events a fresh reader sees",
                    [e["content"] for e in events],
                    [f"m{n}" for n in range(1, complete + 1)] + ["after"])
            _expect(f"{case}: torn_tail_ignored afterwards",
                    reader.replay_state().torn_tail_ignored, False)


def _corruption(impl: Any, t: Any, case: str, line: int) -> None:
    before = t.path.read_bytes()
    for what, action in (("len()", lambda: len(_fresh(impl, t))),
                         ("replay_state()", lambda: _fresh(impl, t).replay_state()),
                         ("append()", lambda: _fresh(impl, t).append(user("more")))):
        exc = _refused(impl, impl.TranscriptCorruptionError, action, f"{case}, {what}")
        if f"line {line}" not in str(exc):
            raise ContractBroken(f"smallest case: {case}, {what} — expected the message to "
                                 f"name 'line {line}', got {str(exc)!r}")
    _expect(f"{case}: the file after the refusals", t.path.read_bytes(), before)


def unparsable_line_is_corruption(impl: Any) -> None:
    for complete, bad in ((1, b"\n"), (1, b'{"schema_version":1,"seq\n'), (2, b"[1, 2]\n"),
                          (1, b"\xff\xfe\n")):
        case = f"{complete} event(s), then the complete line {bad!r}"
        with _session(impl) as t:
            for n in range(1, complete + 1):
                t.append(user(f"m{n}"))
            with open(t.path, "ab") as f:
                f.write(bad)
            _corruption(impl, t, case, complete + 1)


def misplaced_line_is_corruption(impl: Any) -> None:
    with _session(impl) as t:
        for n in (1, 2, 3):
            t.append(user(f"m{n}"))
        lines = t.path.read_bytes().split(b"\n")
        t.path.write_bytes(b"\n".join(lines[:1] + lines[2:]))
        _corruption(impl, t, "three events with line 2 deleted", 2)
    with _session(impl) as t:
        t.append(user("m1"))
        lines = t.path.read_bytes()
        t.path.write_bytes(lines + lines)
        _corruption(impl, t, "one event's line written twice", 2)
    with _session(impl) as t:
        t.append(user("m1"))
        copy = t.path.with_name("s-2.jsonl")
        shutil.copy(t.path, copy)
        _corruption(impl, impl.Transcript(copy, clock=SteppingClock(START)),
                    "s-1.jsonl of one event copied to s-2.jsonl", 1)


# -- replay -------------------------------------------------------------------------------

def text(role: str, *texts: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": t} for t in texts]}


def tool_use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "ls", "input": {}}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": f"out {call_id}"}


#: (events, max_items, the expected window as block lists, left_out), smallest first
FOLDS: tuple[tuple[list[dict[str, Any]], int, list[dict[str, Any]], int], ...] = (
    ([], 1, [], 0),
    ([user("m1")], 1, [text("user", "m1")], 0),
    ([REASONING], 1, [], 0),
    ([call("c1")], 1, [], 0),
    ([user("m1"), user("m2")], 1, [text("user", "m1", "m2")], 0),
    ([user("m1"), call("c1")], 2, [text("user", "m1")], 0),
    ([call("c1"), result("c1")], 2,
     [{"role": "assistant", "content": [tool_use("c1")]},
      {"role": "user", "content": [tool_result("c1")]}], 0),
    ([user("m1"), TITLE, SNAPSHOT, assistant("m4")], 2,
     [text("user", "m1"), text("assistant", "m4")], 0),
    ([call("c1"), call("c2"), result("c2")], 2,
     [{"role": "assistant", "content": [tool_use("c2")]},
      {"role": "user", "content": [tool_result("c2")]}], 0),
    ([call("c1"), result("c1"), user("m3")], 2,
     [{"role": "assistant", "content": [tool_use("c1")]},
      {"role": "user", "content": [tool_result("c1"), {"type": "text", "text": "m3"}]}], 0),
)

WINDOWS: tuple[tuple[list[dict[str, Any]], int, list[dict[str, Any]], int], ...] = (
    ([user("m1"), assistant("m2")], 1, [text("assistant", "m2")], 1),
    ([user("m1"), assistant("m2"), user("m3")], 2,
     [text("assistant", "m2"), text("user", "m3")], 1),
    ([call("c1"), result("c1")], 1, [], 2),
    ([call("c1"), result("c1"), user("m3")], 1, [text("user", "m3")], 1),
    ([user("m1"), call("c2"), result("c2"), assistant("m4")], 2,
     [text("assistant", "m4")], 3),
    ([user("m1"), assistant("m2")], 5, [text("user", "m1"), text("assistant", "m2")], 0),
)


def _check_folds(impl: Any, table: tuple) -> None:
    for events, max_items, messages, left_out in table:
        given = [dict(e) for e in events]
        case = f"replay_window({shorts(events)}, max_items={max_items})"
        _expect(case, _window(impl.replay_window(given, max_items)), (messages, left_out))
        _expect(f"{case}: the events afterwards", given, events)


def replay_folds_events_into_messages(impl: Any) -> None:
    _check_folds(impl, FOLDS)


def window_never_starts_with_an_orphan(impl: Any) -> None:
    _check_folds(impl, WINDOWS)
    for max_items in (0, -1):
        _refused(impl, impl.TranscriptValidationError,
                 lambda n=max_items: impl.replay_window([user("m1")], n),
                 f"replay_window([user 'm1'], max_items={max_items})")


#: sessions whose stored replay must equal replay_window over all of their events
REPLAYED = ([user("m1")],
            [call("c1"), user("m2")],
            [user("m1"), call("c1"), result("c1"), assistant("m4")],
            [call("c1"), call("c2"), result("c2"), TITLE, SNAPSHOT, result("c1"), user("m7"),
             REASONING, call("c3")])


def replay_state_is_the_fold_of_every_event(impl: Any) -> None:
    for payloads in REPLAYED:
        for max_items in range(1, 4):
            case = f"{shorts(payloads)} stored, replay_state(max_items={max_items})"
            with _session(impl) as t:
                for p in payloads:
                    t.append(p)
                state = _fresh(impl, t).replay_state(max_items=max_items)
            answered = {p["call_id"] for p in payloads if p["type"] == "function_call_result"}
            counts: dict[str, int] = {}
            for p in payloads:
                counts[p["type"]] = counts.get(p["type"], 0) + 1
            got = (_window((state.messages, state.messages_outside_window)),
                   state.next_sequence, state.title, dict(state.file_snapshots),
                   dict(state.counts), tuple(state.pending_tool_calls))
            want = (_window(impl.replay_window([dict(p) for p in payloads], max_items)),
                    len(payloads) + 1, TITLE["title"] if TITLE in payloads else None,
                    {"a.py": "0" * 64} if SNAPSHOT in payloads else {}, counts,
                    tuple(p["call_id"] for p in payloads if p["type"] == "function_call"
                          and p["call_id"] not in answered))
            _expect(case + " (messages, left_out), next_sequence, title, snapshots, counts, "
                    "pending calls", got, want)


# -- lookup and selection -----------------------------------------------------------------

def lookup_finds_every_event_and_nothing_else(impl: Any) -> None:
    with _session(impl) as t:
        stored = [_flat(t.append(p)) for p in (user("m1"), REASONING, assistant("m3"))]
        reader = _fresh(impl, t)
        for record in stored:
            _expect(f"lookup({record['event_id']!r}) in a session of 3 events",
                    _flat(reader.lookup(record["event_id"])), record)
        for missing in ("transcript:s-1:0", "transcript:s-1:4", "transcript:s-2:1",
                        "transcript:s-1:01", "s-1:1", "", 1):
            _expect(f"lookup({missing!r}) in a session of 3 events",
                    reader.lookup(missing), None)


def candidate_points_at_its_event(impl: Any) -> None:
    for payload in (user("the request"), SNAPSHOT, assistant("the answer")):
        case = f"select_memory_candidate of event 2 ({short(payload)}) after [reasoning]"
        with _session(impl) as t:
            t.append(REASONING)
            record = _flat(t.append(payload))
            candidate = _fresh(impl, t).select_memory_candidate(
                "transcript:s-1:2", summary="what it says", reason="why it matters")
        source = candidate.source
        label = payload.get("role", payload["type"])
        _expect(f"{case}: (source_id, source_type, title, captured_at)",
                (source.source_id, source.source_type, source.title, _iso(source.captured_at)),
                ("transcript:s-1:2", "transcript_event", f"s-1 #2 ({label})",
                 record["recorded_at"]))
        _expect(f"{case}: (summary, reason, event_type)",
                (candidate.summary, candidate.reason, candidate.event_type),
                ("what it says", "why it matters", payload["type"]))
        content = payload.get("content")
        if content and content in repr(candidate):
            raise ContractBroken(f"smallest case: {case} — the candidate copies the event's "
                                 f"content {content!r}; it should only point at it")


def only_evidence_can_be_selected(impl: Any) -> None:
    events = (user("m1"), REASONING, call("c1"), result("c1"), TITLE)
    asks = (("transcript:s-1:9", "what", "why", "an id past the last event"),
            ("transcript:s-2:1", "what", "why", "another session's id"),
            ("transcript:s-1:2", "what", "why", "a reasoning event"),
            ("transcript:s-1:3", "what", "why", "a function_call"),
            ("transcript:s-1:4", "what", "why", "a function_call_result"),
            ("transcript:s-1:5", "what", "why", "an ai-title"),
            ("transcript:s-1:1", " ", "why", "a blank summary"),
            ("transcript:s-1:1", "what", "", "an empty reason"))
    with _session(impl) as t:
        for event in events:
            t.append(event)
        reader = _fresh(impl, t)
        for event_id, summary, reason, what in asks:
            _refused(impl, impl.MemorySelectionError,
                     lambda e=event_id, s=summary, r=reason: reader.select_memory_candidate(
                         e, summary=s, reason=r),
                     f"{what}: select_memory_candidate({event_id!r}, summary={summary!r}, "
                     f"reason={reason!r}) in [user 'm1', reasoning, call c1, result c1, "
                     "title]")


SUITE = ContractSuite(N_("transcript"), (
    Contract(N_("each append gets the next sequence, its event id, the session and the clock's "
                "time"), each_append_gets_its_envelope),
    Contract(N_("a payload that sets an envelope field is refused and nothing is written"),
             envelope_fields_are_refused),
    Contract(N_("an unknown type, a missing or extra field, or a wrong-typed field is refused "
                "before anything is written"), bad_payloads_are_refused),
    Contract(N_("a tool call gets exactly one result, and a call id is used once"),
             a_call_gets_one_result),
    Contract(N_("what was appended reads back equal from a fresh reader, line separators "
                "inside text included"), appended_events_read_back),
    Contract(N_("a torn last line is ignored on read and reported by replay"),
             torn_tail_is_ignored),
    Contract(N_("a torn last line is repaired before the next append"), torn_tail_is_repaired),
    Contract(N_("a complete line that does not parse is corruption naming its line"),
             unparsable_line_is_corruption),
    Contract(N_("a line out of sequence or of another session is corruption naming its line"),
             misplaced_line_is_corruption),
    Contract(N_("replay folds events into role messages, a call only once its result is there"),
             replay_folds_events_into_messages),
    Contract(N_("a window keeps the last max_items messages, never starts with an orphaned "
                "tool result, and counts what it leaves out"), window_never_starts_with_an_orphan),
    Contract(N_("replay_state is the fold of every stored event"),
             replay_state_is_the_fold_of_every_event),
    Contract(N_("lookup finds every event by its id, and nothing else"),
             lookup_finds_every_event_and_nothing_else),
    Contract(N_("a memory candidate points at a message or snapshot by its id, never copying it"),
             candidate_points_at_its_event),
    Contract(N_("reasoning, tool events, titles, unknown ids and blank text cannot become "
                "candidates"), only_evidence_can_be_selected),
))
