"""s09 transcript: session evidence is append-only; runtime state is derived.

A :class:`Transcript` is one JSONL file per session. Every event the agent sees or
does (a message, a tool call and its result, a file snapshot, a title) is appended
once, with an envelope that numbers it, and is never rewritten. What a model needs
next — the messages, the title, the latest file snapshots — is *folded* from the
events by :meth:`Transcript.replay_state` and never written back. The message fold itself
is the pure function :func:`replay_window`; a :class:`Transcript` keeps the same fold
*incrementally* as it appends and reads events (counts, title, snapshots, pending calls,
and one slot per replayable event), so a replay costs O(window) however long the session.

Memory does not copy the transcript: :meth:`Transcript.select_memory_candidate`
returns a small candidate that *points* at one event (its id becomes the source id)
with a summary and the reason it was selected.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError, validated_as
from labmem.core.provenance import SESSION_ID_PATTERN, MemorySource
from labmem.core.storage import JsonlLog, LockFactory, file_lock
from labmem.core.validation import (
    UnstorableJson,
    parse_json,
    require_int,
    require_json,
    require_text,
    too_deep,
)

__all__ = [
    "Transcript", "ReplayState", "ReplayWindow", "TranscriptMemoryCandidate", "TranscriptError",
    "TranscriptValidationError", "TranscriptCorruptionError", "MemorySelectionError",
    "EVENT_TYPES", "SCHEMA_VERSION", "replay_window",
]

SCHEMA_VERSION = 1
ENVELOPE_FIELDS = ("schema_version", "sequence", "session_id", "event_id", "recorded_at")
EVENT_TYPES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "message": ("role", "content"),
    "reasoning": ("content",),
    "function_call": ("call_id", "name", "arguments"),
    "function_call_result": ("call_id", "output"),
    "file-history-snapshot": ("path", "sha256"),
    "ai-title": ("title",),
})
MESSAGE_ROLES = ("user", "assistant")
SELECTABLE_TYPES = ("message", "file-history-snapshot")
MAX_SUMMARY_CHARS = 2_000
MAX_REASON_CHARS = 500
_SHA256 = re.compile(r"[0-9a-f]{64}")


class TranscriptError(LabmemError):
    """Base of every error the transcript raises."""


class TranscriptValidationError(TranscriptError, InvalidInputError):
    """An event was refused before anything was written."""


class TranscriptCorruptionError(TranscriptError, CorruptionError):
    """A complete line of the session file cannot be trusted (``line N``)."""


class MemorySelectionError(TranscriptError, InvalidInputError):
    """An event cannot become a memory candidate (unknown id, ineligible type, bad text)."""


@dataclass(frozen=True)
class ReplayState:
    """What a runtime needs, derived from the events; never stored.

    ``messages`` are in the Anthropic Messages shape: text, ``tool_use`` and
    ``tool_result`` blocks, consecutive events of one role merged into one message.
    Reasoning is counted but not replayed. ``max_items`` bounds only ``messages``.
    """

    session_id: str
    messages: tuple[dict[str, Any], ...]
    title: str | None
    file_snapshots: Mapping[str, str]
    counts: Mapping[str, int]
    next_sequence: int
    torn_tail_ignored: bool
    pending_tool_calls: tuple[str, ...]
    messages_outside_window: int


@dataclass(frozen=True)
class TranscriptMemoryCandidate:
    """A pointer from memory to one transcript event — never the event's content."""

    source: MemorySource
    summary: str
    reason: str
    event_type: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source.to_dict(), "summary": self.summary,
                "reason": self.reason, "event_type": self.event_type}


def _refuse(field: str, problem: str, fix: str = "") -> TranscriptValidationError:
    return TranscriptValidationError(field, problem, fix)


def _validate_payload(event: Any) -> dict[str, Any]:
    """A new, validated record body (type + payload); the caller's dict is not touched."""
    if not isinstance(event, Mapping):
        raise _refuse("event", f"must be a mapping, got {type(event).__name__}")
    envelope = sorted(set(event) & set(ENVELOPE_FIELDS))
    if envelope:
        raise _refuse(f"event.{envelope[0]}", "is an envelope field the transcript assigns",
                      "remove it from the payload")
    event_type = event.get("type")
    if event_type not in EVENT_TYPES:
        raise _refuse("event.type", f"{event_type!r} is not an event type",
                      f"use one of: {', '.join(EVENT_TYPES)}")
    fields = EVENT_TYPES[event_type]
    unknown = sorted(set(event) - set(fields) - {"type"})
    if unknown:
        raise _refuse(f"event.{unknown[0]}", f"is not a field of a {event_type!r} event",
                      f"{event_type!r} takes: {', '.join(fields)}")
    body: dict[str, Any] = {"type": event_type}
    for name in fields:
        if name not in event:
            raise _refuse(f"event.{name}", f"is required for a {event_type!r} event")
        body[name] = _validate_field(event_type, name, event[name])
    return body


def _validate_field(event_type: str, name: str, value: Any) -> Any:
    field = f"event.{name}"
    if name == "role":
        if value not in MESSAGE_ROLES:
            raise _refuse(field, f"{value!r} is not a message role", "use 'user' or 'assistant'")
        return value
    if name == "arguments":
        if isinstance(value, str):
            try:  # the one validating parser: bounded depth, no NaN, no lone surrogate
                value = parse_json(value)
            except UnstorableJson as exc:  # named where in the arguments it is
                raise _refuse(exc.at(field), exc.problem,
                              "flatten the arguments" if too_deep() in exc.problem else
                              "pass real text, without unpaired surrogates") from None
            except ValueError as exc:
                if too_deep() in str(exc):  # the decoder itself recursed too deep
                    raise _refuse(field, too_deep(), "flatten the arguments") from None
                raise _refuse(field, f"is not valid JSON ({exc})") from None
        if not isinstance(value, Mapping):
            raise _refuse(field, "must be a JSON object (a dict)")
        if isinstance(value, dict):  # bounded nesting, no lone surrogate: before the copy
            validated_as(TranscriptValidationError, require_json, value, field)
        try:  # a deep, JSON-only copy: the caller's object is never stored or mutated
            return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise _refuse(field, f"is not JSON-serializable ({exc})") from None
    if name == "sha256":
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            raise _refuse(field, "must be 64 lowercase hex characters")
        return value
    allow_blank = name in ("content", "output")
    try:
        return require_text(value, field, allow_blank=allow_blank)
    except InvalidInputError as exc:
        raise _refuse(exc.field, exc.problem, exc.fix) from None


class Transcript:
    """One session's append-only event log (``<session_id>.jsonl``)."""

    def __init__(self, path: str | os.PathLike[str], *, clock: Clock | None = None,
                 lock_factory: LockFactory = file_lock) -> None:
        self.path = Path(path)
        self.session_id = self.path.stem
        if self.path.suffix != ".jsonl" or not SESSION_ID_PATTERN.fullmatch(self.session_id):
            raise _refuse("path", f"{self.path.name!r} is not '<session_id>.jsonl'",
                          "session ids match [A-Za-z0-9][A-Za-z0-9._-]*")
        self.clock = resolve_clock(clock)
        self._log: JsonlLog[dict[str, Any]] = JsonlLog(
            self.path, decode=self._decode, corruption_error=TranscriptCorruptionError,
            lock_factory=lock_factory)
        self._records: list[dict[str, Any]] = []
        self._open_calls: set[str] = set()  # calls without a result yet
        self._answered_calls: set[str] = set()
        self._fold = _IncrementalFold()  # what replay_state returns, kept up to date

    def __repr__(self) -> str:
        return f"Transcript({self.path.name!r})"

    @property
    def bytes_read(self) -> int:
        return self._log.bytes_read

    # -- reading -----------------------------------------------------------------

    def _decode(self, line: int, obj: dict[str, Any]) -> dict[str, Any]:
        def corrupt(problem: str) -> TranscriptCorruptionError:
            return TranscriptCorruptionError(self.path.name, line, problem)

        if obj.get("sequence") != line:
            raise corrupt(f"sequence {obj.get('sequence')!r} where {line} was expected "
                          "(a gap or reordering)")
        if obj.get("session_id") != self.session_id:
            raise corrupt(f"session_id {obj.get('session_id')!r} is not {self.session_id!r}")
        if obj.get("event_id") != f"transcript:{self.session_id}:{line}":
            raise corrupt(f"event_id {obj.get('event_id')!r} does not match its sequence")
        if obj.get("schema_version") != SCHEMA_VERSION:
            raise corrupt(f"schema_version {obj.get('schema_version')!r} is not supported")
        try:
            parse_timestamp(obj.get("recorded_at"), field="recorded_at")
            _validate_payload({k: v for k, v in obj.items() if k not in ENVELOPE_FIELDS})
        except InvalidInputError as exc:
            raise corrupt(str(exc)) from None
        return obj

    def _catch_up(self) -> None:
        for record in self._log.refresh():
            self._remember(record)

    def _remember(self, record: dict[str, Any]) -> None:
        self._records.append(record)
        self._fold.add(record)
        if record["type"] == "function_call":
            self._open_calls.add(record["call_id"])
        elif record["type"] == "function_call_result":
            self._open_calls.discard(record["call_id"])
            self._answered_calls.add(record["call_id"])

    def __len__(self) -> int:
        self._catch_up()
        return len(self._records)

    def events(self) -> tuple[dict[str, Any], ...]:
        """Copies of every stored record, in sequence order."""
        self._catch_up()
        return tuple(copy.deepcopy(record) for record in self._records)

    def lookup(self, event_id: str) -> dict[str, Any] | None:
        """A copy of the record with ``event_id``, or ``None`` (for source resolvers)."""
        self._catch_up()
        prefix = f"transcript:{self.session_id}:"
        if not isinstance(event_id, str) or not event_id.startswith(prefix):
            return None
        number = event_id[len(prefix):]
        if not number.isdigit() or not 1 <= int(number) <= len(self._records):
            return None
        record = self._records[int(number) - 1]
        if record["event_id"] != event_id:  # "01" or "١" are digits too, but not its id
            return None
        return copy.deepcopy(record)

    # -- writing -----------------------------------------------------------------

    def append(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``event``, give it an envelope, store it durably, return the record."""
        body = _validate_payload(event)
        recorded_at = parse_timestamp(self.clock.now(), field="clock.now()")
        with self._log.locked():
            self._catch_up()
            self._check_tool_protocol(body)
            sequence = len(self._records) + 1
            record = {
                "schema_version": SCHEMA_VERSION,
                "sequence": sequence,
                "session_id": self.session_id,
                "event_id": f"transcript:{self.session_id}:{sequence}",
                "recorded_at": format_timestamp(recorded_at),
                **body,
            }
            try:
                self._log.append(record)
            except InvalidInputError as exc:
                raise _refuse("event", exc.problem) from None
        self._remember(record)
        return copy.deepcopy(record)

    def _check_tool_protocol(self, body: dict[str, Any]) -> None:
        call_id = body.get("call_id")
        if body["type"] == "function_call" and (
                call_id in self._open_calls or call_id in self._answered_calls):
            raise _refuse("event.call_id", f"{call_id!r} was already used by another call",
                          "give every function call a unique call_id")
        if body["type"] == "function_call_result" and call_id not in self._open_calls:
            state = "was already answered" if call_id in self._answered_calls else "is unknown"
            raise _refuse("event.call_id", f"{call_id!r} {state}",
                          "append the function_call first; each call gets one result")

    # -- deriving ----------------------------------------------------------------

    def replay_state(self, *, max_items: int = 1000) -> ReplayState:
        """The state a runtime needs; the last ``max_items`` messages.

        Equal to folding every event again (:func:`replay_window` for the messages), but
        read from the fold kept as events arrive: after the new lines are read, the cost
        is the window's, not the session's.
        """
        validated_as(TranscriptValidationError, require_int, max_items, "max_items", minimum=1)
        self._catch_up()
        fold = self._fold
        window = fold.window(max_items)
        return ReplayState(
            session_id=self.session_id,
            messages=window.messages,
            title=fold.title,
            file_snapshots=fold.file_snapshots(),
            counts=fold.counts(),
            next_sequence=len(self._records) + 1,
            torn_tail_ignored=self._log.torn_tail_bytes > 0,
            pending_tool_calls=fold.pending_tool_calls(),  # calls still running
            messages_outside_window=window.left_out,
        )

    # -- selecting ---------------------------------------------------------------

    def select_memory_candidate(self, event_id: str, *, summary: str,
                                reason: str) -> TranscriptMemoryCandidate:
        """Point memory at one event: its id becomes the source id; its content stays here."""
        record = self.lookup(event_id)
        if record is None:
            raise MemorySelectionError("event_id", f"{event_id!r} is not an event of "
                                       f"session {self.session_id!r}",
                                       "use an event_id returned by append() or lookup()")
        if record["type"] not in SELECTABLE_TYPES:
            raise MemorySelectionError(
                "event_id", f"{event_id!r} is a {record['type']!r} event",
                f"only {' and '.join(SELECTABLE_TYPES)} events can become memory candidates")
        for name, value, limit in (("summary", summary, MAX_SUMMARY_CHARS),
                                   ("reason", reason, MAX_REASON_CHARS)):
            try:
                require_text(value, name, max_chars=limit)
            except InvalidInputError as exc:
                raise MemorySelectionError(exc.field, exc.problem, exc.fix) from None
        label = record.get("role", record["type"])
        source = MemorySource(
            source_id=record["event_id"],
            source_type="transcript_event",
            title=f"{self.session_id} #{record['sequence']} ({label})",
            captured_at=record["recorded_at"],
        )
        return TranscriptMemoryCandidate(source, summary, reason, record["type"])


class ReplayWindow(NamedTuple):
    """The messages a model gets next, and how many folded messages fell before them.

    A named pair rather than a dataclass, so that a plain ``(messages, left_out)`` tuple
    compares equal to it.
    """

    messages: tuple[dict[str, Any], ...]
    left_out: int


def replay_window(events: Iterable[Mapping[str, Any]], max_items: int) -> ReplayWindow:
    """Fold events into Messages-shaped messages; keep the last ``max_items`` of them.

    This is the whole replay rule, kept pure so that it can be read and tested alone:

    * a ``message`` adds a text block under its role; a ``function_call`` adds an
      assistant ``tool_use`` block, but only once its result is among ``events`` (a call
      still running cannot be sent: the API wants every ``tool_use`` answered); a
      ``function_call_result`` adds a user ``tool_result`` block; other events add none;
    * consecutive blocks of one role merge into one message;
    * the window is the last ``max_items`` messages, and its first message loses its
      ``tool_result`` blocks — their ``tool_use`` is in the message before, outside the
      window — and is dropped if nothing is left of it;
    * a message whose only block is text carries it as a plain string.

    ``left_out`` counts the folded messages that are not in the window. ``events`` may be
    payloads or stored records (the envelope is ignored) and are never modified.
    """
    validated_as(TranscriptValidationError, require_int, max_items, "max_items", minimum=1)
    events = list(events)
    answered = {e["call_id"] for e in events if e["type"] == "function_call_result"}
    folded: list[dict[str, Any]] = []
    for event in events:
        replayed = _replayed_block(event, answered)
        if replayed is None:
            continue
        role, block = replayed
        if folded and folded[-1]["role"] == role:
            folded[-1]["content"].append(block)
        else:
            folded.append({"role": role, "content": [block]})
    window = folded[-max_items:]
    while window and _strip_tool_results(window[0]):
        window.pop(0)  # a window never starts with an orphaned tool result
    return ReplayWindow(tuple(_plain(message) for message in window),
                        len(folded) - len(window))


def _replayed_block(event: Mapping[str, Any],
                    answered: set[str]) -> tuple[str, dict[str, Any]] | None:
    """The (role, content block) one event adds to the replay, or ``None``."""
    kind = event["type"]
    if kind == "message":
        return event["role"], _content_block(event)
    if kind == "function_call" and event["call_id"] in answered:
        return "assistant", _content_block(event)
    if kind == "function_call_result":
        return "user", _content_block(event)
    return None  # reasoning, snapshots, titles and calls still running are not replayed


def _content_block(event: Mapping[str, Any]) -> dict[str, Any]:
    """The block of a message, a call (once answered) or a result; shared, not copied."""
    kind = event["type"]
    if kind == "message":
        return {"type": "text", "text": event["content"]}
    if kind == "function_call":
        return {"type": "tool_use", "id": event["call_id"], "name": event["name"],
                "input": event["arguments"]}
    return {"type": "tool_result", "tool_use_id": event["call_id"], "content": event["output"]}


class _IncrementalFold:
    """The fold of :meth:`Transcript.replay_state`, advanced one event at a time.

    Every event that can add a block to the replay (a message, a call, a result) gets a
    *slot*, in sequence order; a call's slot is *inactive* until a result for its call id
    has been read (before or after it, as :func:`replay_window` decides from the whole
    list). The messages are the runs of one role over the active slots, so the number of
    folded messages is kept as a count of role changes: appending a slot or activating an
    earlier call only looks at its active neighbours. A window is read backwards from the
    last slot until it holds ``max_items`` messages — its cost is the window's.
    """

    def __init__(self) -> None:
        self.title: str | None = None
        self._counts: Counter[str] = Counter()
        self._snapshots: dict[str, str] = {}
        self._slots: list[tuple[str, Mapping[str, Any]]] = []  # (role, event)
        self._inactive: dict[int, str] = {}  # slot → call id, calls without a result yet
        self._calls_by_id: dict[str, list[int]] = {}  # inactive call slots per call id
        self._answered: set[str] = set()
        self._messages = 0  # folded messages over every active slot
        self._last_role: str | None = None  # role of the last active slot
        self._views: dict[str, Mapping[str, Any]] = {}  # sorted read-only copies, cached

    def add(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
        self._counts[kind] += 1
        self._views.pop("counts", None)
        if kind == "message":
            self._append_slot(event["role"], event)
        elif kind == "function_call":
            call_id = event["call_id"]
            if call_id in self._answered:
                self._append_slot("assistant", event)
            else:
                self._inactive[len(self._slots)] = call_id
                self._calls_by_id.setdefault(call_id, []).append(len(self._slots))
                self._slots.append(("assistant", event))
        elif kind == "function_call_result":
            call_id = event["call_id"]
            self._answered.add(call_id)
            for slot in self._calls_by_id.pop(call_id, ()):
                self._activate(slot)
            self._append_slot("user", event)
        elif kind == "file-history-snapshot":
            self._snapshots[event["path"]] = event["sha256"]
            self._views.pop("snapshots", None)
        elif kind == "ai-title":
            self.title = event["title"]

    def _append_slot(self, role: str, event: Mapping[str, Any]) -> None:
        self._slots.append((role, event))
        if role != self._last_role:
            self._messages += 1
            self._last_role = role

    def _active_role(self, slot: int, step: int) -> str | None:
        """The role of the nearest active slot from ``slot`` in direction ``step``."""
        while 0 <= slot < len(self._slots):
            if slot not in self._inactive:
                return self._slots[slot][0]
            slot += step
        return None

    def _activate(self, slot: int) -> None:
        """A call's result arrived: its tool_use block joins the fold where the call was."""
        del self._inactive[slot]
        role = self._slots[slot][0]
        before, after = self._active_role(slot - 1, -1), self._active_role(slot + 1, 1)
        if after is None:  # it is now the last active slot
            self._last_role = role
        if before is None and after is None:
            self._messages += 1
        else:
            self._messages += ((before is not None and before != role)
                               + (after is not None and after != role)
                               - (before is not None and after is not None and before != after))

    def window(self, max_items: int) -> ReplayWindow:
        """The last ``max_items`` folded messages, with :func:`replay_window`'s rules."""
        window: list[dict[str, Any]] = []  # newest first, blocks newest first
        slot = len(self._slots) - 1
        while slot >= 0:
            if slot not in self._inactive:
                role, event = self._slots[slot]
                if not window or window[-1]["role"] != role:
                    if len(window) == max_items:
                        break
                    window.append({"role": role, "content": []})
                window[-1]["content"].append(_content_block(event))
            slot -= 1
        window.reverse()
        for message in window:
            message["content"].reverse()
        total = self._messages
        while window and _strip_tool_results(window[0]):
            window.pop(0)  # a window never starts with an orphaned tool result
        return ReplayWindow(tuple(_plain(message) for message in window), total - len(window))

    def pending_tool_calls(self) -> tuple[str, ...]:
        return tuple(self._inactive.values())  # slot order: dicts keep insertion order

    def counts(self) -> Mapping[str, int]:
        return self._view("counts", self._counts)

    def file_snapshots(self) -> Mapping[str, str]:
        return self._view("snapshots", self._snapshots)

    def _view(self, name: str, source: Mapping[str, Any]) -> Mapping[str, Any]:
        view = self._views.get(name)
        if view is None:
            view = self._views[name] = MappingProxyType(dict(sorted(source.items())))
        return view


def _strip_tool_results(message: dict[str, Any]) -> bool:
    """Drop tool_result blocks from a leading message; True if nothing is left of it."""
    message["content"] = [b for b in message["content"] if b["type"] != "tool_result"]
    return not message["content"]


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A lone text block becomes a plain string, as most chat APIs expect."""
    blocks = copy.deepcopy(message["content"])  # callers own what they get
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return {"role": message["role"], "content": blocks[0]["text"]}
    return {"role": message["role"], "content": blocks}
