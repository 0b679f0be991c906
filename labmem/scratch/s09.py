# Generated from notebooks/s09_transcript.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""s09 from scratch: a session transcript, append-only evidence and the state folded from it.

One session is one JSONL file of fsync'd lines; a torn last line is ignored and repaired, a
bad complete line is corruption; replay folds the events into the next model call's
messages; a memory candidate points at an event. Every call reads the file again.
"""

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
ENVELOPE = ("schema_version", "sequence", "session_id", "event_id", "recorded_at")
EVENT_TYPES = {  # each event type and the fields its payload carries
    "message": ("role", "content"),
    "reasoning": ("content",),
    "function_call": ("call_id", "name", "arguments"),
    "function_call_result": ("call_id", "output"),
    "file-history-snapshot": ("path", "sha256"),
    "ai-title": ("title",),
}
ROLES = ("user", "assistant")
SELECTABLE_TYPES = ("message", "file-history-snapshot")
SHA256 = re.compile(r"[0-9a-f]{64}")


class TranscriptError(Exception):
    """Every error of this layer."""


class TranscriptValidationError(TranscriptError, ValueError):
    """An event was refused before anything was written."""


class TranscriptCorruptionError(TranscriptError):
    """A complete line of the file cannot be trusted; the message names it."""


class MemorySelectionError(TranscriptError, ValueError):
    """An event cannot become a memory candidate."""


def refuse(field_name: str, problem: str, fix: str = "") -> TranscriptValidationError:
    return TranscriptValidationError(f"{field_name}: {problem}" + (f"; {fix}" if fix else ""))


@dataclass(frozen=True)
class Event:
    """One stored line: the envelope the transcript assigns, then the caller's payload."""

    sequence: int
    session_id: str
    recorded_at: str
    payload: dict[str, Any]
    schema_version: int = SCHEMA_VERSION

    @property
    def event_id(self) -> str:
        return f"transcript:{self.session_id}:{self.sequence}"

    @property
    def type(self) -> str:
        return self.payload["type"]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version, "sequence": self.sequence,
                "session_id": self.session_id, "event_id": self.event_id,
                "recorded_at": self.recorded_at, **self.payload}


@dataclass(frozen=True)
class Source:
    """Where a memory came from: the one provenance shape every layer carries."""

    source_id: str
    source_type: str
    title: str
    captured_at: str


@dataclass(frozen=True)
class MemoryCandidate:
    """A pointer from memory to one event, with why it matters; never the event's content."""

    source: Source
    summary: str
    reason: str
    event_type: str


@dataclass(frozen=True)
class ReplayState:
    """What a runtime needs next, folded from the events; never written back."""

    session_id: str
    messages: tuple[dict[str, Any], ...]
    messages_outside_window: int
    title: str | None
    file_snapshots: dict[str, str]
    counts: dict[str, int]
    pending_tool_calls: tuple[str, ...]
    next_sequence: int
    torn_tail_ignored: bool


def validate_payload(event: Any) -> dict[str, Any]:
    """A checked copy of the caller's payload (its type and fields), or a refusal that
    names the field. The caller's dict is never stored or changed."""
    if not isinstance(event, dict):
        raise refuse("event", f"must be a dict, got {type(event).__name__}")
    envelope = sorted(set(event) & set(ENVELOPE))
    if envelope:
        raise refuse(f"event.{envelope[0]}", "is an envelope field the transcript assigns",
                     "remove it from the payload")
    kind = event.get("type")
    if kind not in EVENT_TYPES:
        raise refuse("event.type", f"{kind!r} is not an event type",
                     f"use one of: {', '.join(EVENT_TYPES)}")
    fields = EVENT_TYPES[kind]
    unknown = sorted(set(event) - set(fields) - {"type"})
    if unknown:
        raise refuse(f"event.{unknown[0]}", f"is not a field of a {kind!r} event")
    for name in fields:
        if name not in event:
            raise refuse(f"event.{name}", f"is required for a {kind!r} event")
        check_field(name, event[name])
    return json.loads(json.dumps(event, ensure_ascii=False))  # a deep copy, JSON only


def check_field(name: str, value: Any) -> None:
    if name == "role" and value not in ROLES:
        raise refuse("event.role", f"{value!r} is not a message role",
                     "use 'user' or 'assistant'")
    if name == "arguments":
        if not isinstance(value, dict):
            raise refuse("event.arguments", "must be a JSON object (a dict)")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise refuse("event.arguments", f"is not JSON ({exc})") from None
    elif name == "sha256":
        if not isinstance(value, str) or not SHA256.fullmatch(value):
            raise refuse("event.sha256", "must be 64 lowercase hex characters")
    elif not isinstance(value, str):
        raise refuse(f"event.{name}", f"must be text, got {type(value).__name__}")
    elif not value.strip() and name not in ("content", "output"):
        raise refuse(f"event.{name}", "must not be blank")


@dataclass(frozen=True)
class Log:
    """What a read found: the events of the complete lines, and a torn tail after them."""

    events: tuple[Event, ...]
    complete_bytes: int  # the length of the complete lines; a torn tail starts here
    torn_tail: bool


def read_log(path: Path, session_id: str) -> Log:
    """Every complete line as an event. An unterminated last line is a crashed write:
    ignored here, cut off by the next append. A complete line that fails any check is
    corruption, raised with its line number, never skipped."""
    data = path.read_bytes() if path.exists() else b""
    *lines, tail = data.split(b"\n")  # on "\n" only: U+2028 inside a string is data
    events = []
    for number, line in enumerate(lines, start=1):
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise corrupt(path, number, f"not valid JSON ({exc})") from None
        events.append(decode_line(path, number, obj, session_id))
    return Log(tuple(events), len(data) - len(tail), torn_tail=bool(tail))


def corrupt(path: Path, number: int, problem: str) -> TranscriptCorruptionError:
    return TranscriptCorruptionError(f"{path.name} line {number}: {problem}; the file "
                                     "was not changed")


def decode_line(path: Path, number: int, obj: Any, session_id: str) -> Event:
    """Line ``number`` as an event, if it is where it claims to be and its payload is valid."""
    if not isinstance(obj, dict):
        raise corrupt(path, number, f"expected a JSON object, got {type(obj).__name__}")
    expected = {"schema_version": SCHEMA_VERSION, "sequence": number,
                "session_id": session_id, "event_id": f"transcript:{session_id}:{number}"}
    for name, value in expected.items():
        if obj.get(name) != value:
            raise corrupt(path, number, f"{name} is {obj.get(name)!r}, expected {value!r}")
    if not isinstance(obj.get("recorded_at"), str):
        raise corrupt(path, number, "recorded_at is missing")
    try:
        payload = validate_payload({k: v for k, v in obj.items() if k not in ENVELOPE})
    except TranscriptValidationError as exc:
        raise corrupt(path, number, str(exc)) from None
    return Event(number, session_id, obj["recorded_at"], payload)


def append_line(path: Path, line: bytes, complete_bytes: int) -> None:
    """Cut a torn tail off (everything after ``complete_bytes``), then write ``line`` with
    one ``os.write`` on an O_APPEND descriptor and ``fsync`` it before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size > complete_bytes:
            os.ftruncate(fd, complete_bytes)  # the crashed writer's bytes go first
        os.write(fd, line)
        os.fsync(fd)  # durable before append() returns
    finally:
        os.close(fd)
    if created:  # a new file's name lives in its directory: make that durable too
        dir_fd = os.open(path.parent, os.O_RDONLY)
        os.fsync(dir_fd)
        os.close(dir_fd)


def timestamp(clock: Any) -> str:
    """The clock's time as ISO-8601 UTC text with a ``Z``; a time without a zone is refused."""
    now = clock.now() if clock is not None else datetime.now(timezone.utc)
    if now.tzinfo is None:
        raise refuse("clock.now()", "returned a naive datetime", "give it a timezone")
    return now.astimezone(timezone.utc).replace(tzinfo=None).isoformat() + "Z"


def check_tool_protocol(events: tuple[Event, ...], payload: dict[str, Any]) -> None:
    """A call id is used once; a result answers a call that is still open."""
    calls = {e.payload["call_id"] for e in events if e.type == "function_call"}
    answered = {e.payload["call_id"] for e in events if e.type == "function_call_result"}
    call_id = payload.get("call_id")
    if payload["type"] == "function_call" and call_id in calls:
        raise refuse("event.call_id", f"{call_id!r} was already used by another call",
                     "give every function call a unique call_id")
    if payload["type"] == "function_call_result" and call_id not in calls - answered:
        state = "was already answered" if call_id in answered else "is unknown"
        raise refuse("event.call_id", f"{call_id!r} {state}",
                     "append the function_call first; each call gets one result")


def replay_window(events: list[dict[str, Any]], max_items: int) -> tuple[list, int]:
    """Fold payloads into role messages; keep the last ``max_items``.

    A message adds a text block; a call adds a tool_use block once its result is among
    the events; a result adds a tool_result block; nothing else adds one. Consecutive
    blocks of one role form one message. The window's first message loses its
    tool_result blocks (their tool_use is outside) and goes if nothing is left. Returns
    the window and how many folded messages are not in it.
    """
    if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
        raise refuse("max_items", f"must be an integer of at least 1, got {max_items!r}")
    answered = {e["call_id"] for e in events if e["type"] == "function_call_result"}
    folded: list[dict[str, Any]] = []
    for event in events:
        kind = event["type"]
        if kind == "message":
            role, block = event["role"], {"type": "text", "text": event["content"]}
        elif kind == "function_call" and event["call_id"] in answered:
            role, block = "assistant", {"type": "tool_use", "id": event["call_id"],
                                        "name": event["name"], "input": event["arguments"]}
        elif kind == "function_call_result":
            role, block = "user", {"type": "tool_result", "tool_use_id": event["call_id"],
                                   "content": event["output"]}
        else:
            continue  # reasoning, snapshots, titles, calls still running
        if folded and folded[-1]["role"] == role:
            folded[-1]["content"].append(block)
        else:
            folded.append({"role": role, "content": [block]})
    window = folded[-max_items:]
    if window:
        kept = [b for b in window[0]["content"] if b["type"] != "tool_result"]
        window = [{"role": window[0]["role"], "content": kept}] + window[1:] if kept \
            else window[1:]
    return [plain(m) for m in window], len(folded) - len(window)


def plain(message: dict[str, Any]) -> dict[str, Any]:
    """A lone text block becomes a plain string, as most chat APIs expect."""
    blocks = message["content"]
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return {"role": message["role"], "content": blocks[0]["text"]}
    return message


def fold_state(session_id: str, log: Log, max_items: int) -> ReplayState:
    """Fold every event of the log again: the window of messages, the title, the latest
    snapshot of each file, the count of each type, the calls still running."""
    payloads = [e.payload for e in log.events]
    messages, left_out = replay_window(payloads, max_items)
    of = {kind: [p for p in payloads if p["type"] == kind] for kind in EVENT_TYPES}
    answered = {p["call_id"] for p in of["function_call_result"]}
    title = of["ai-title"][-1]["title"] if of["ai-title"] else None
    snapshots = {p["path"]: p["sha256"] for p in of["file-history-snapshot"]}  # latest wins
    counts = {kind: len(events) for kind, events in sorted(of.items()) if events}
    pending = tuple(p["call_id"] for p in of["function_call"] if p["call_id"] not in answered)
    return ReplayState(session_id, tuple(messages), left_out, title, dict(sorted(
        snapshots.items())), counts, pending, len(log.events) + 1, log.torn_tail)


def candidate_for(event: Event | None, event_id: str, summary: str,
                  reason: str) -> MemoryCandidate:
    """A pointer to ``event``: its id becomes the source id, its content stays put."""
    if event is None:
        raise MemorySelectionError(f"event_id: {event_id!r} is not an event of this session")
    if event.type not in SELECTABLE_TYPES:
        raise MemorySelectionError(f"event_id: {event_id!r} is a {event.type!r} event; only "
                                   f"{' and '.join(SELECTABLE_TYPES)} events can be selected")
    for name, text in (("summary", summary), ("reason", reason)):
        if not isinstance(text, str) or not text.strip():
            raise MemorySelectionError(f"{name}: must be non-blank text")
    label = event.payload.get("role", event.type)
    source = Source(event.event_id, "transcript_event",
                    f"{event.session_id} #{event.sequence} ({label})", event.recorded_at)
    return MemoryCandidate(source, summary, reason, event.type)


class Transcript:
    """One session's append-only event log, ``<session_id>.jsonl``. Every method reads
    the file again, so two instances on one file (or a fresh one) agree."""

    def __init__(self, path: "str | os.PathLike[str]", *, clock: Any = None) -> None:
        self.path = Path(path)
        self.session_id = self.path.stem
        self.clock = clock

    def append(self, event: dict[str, Any]) -> Event:
        """Validate, number, write durably; return the stored event."""
        payload = validate_payload(event)
        log = read_log(self.path, self.session_id)
        check_tool_protocol(log.events, payload)
        record = Event(len(log.events) + 1, self.session_id, timestamp(self.clock), payload)
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        append_line(self.path, line.encode("utf-8"), log.complete_bytes)
        return record

    def events(self) -> tuple[Event, ...]:
        return read_log(self.path, self.session_id).events

    def __len__(self) -> int:
        return len(self.events())

    def lookup(self, event_id: str) -> Event | None:
        return next((e for e in self.events() if e.event_id == event_id), None)

    def replay_state(self, *, max_items: int = 1000) -> ReplayState:
        return fold_state(self.session_id, read_log(self.path, self.session_id), max_items)

    def select_memory_candidate(self, event_id: str, *, summary: str,
                                reason: str) -> MemoryCandidate:
        return candidate_for(self.lookup(event_id), event_id, summary, reason)
