"""The s09 transcript log: one session's append-only events, and what is derived from them.

A :class:`Transcript` is one JSONL file per session. Every event is appended once, with
an envelope that numbers it, and is never rewritten; :meth:`Transcript.replay_state`
derives what a runtime needs and never writes it back; memory gets a
:class:`TranscriptMemoryCandidate` that points at one event.
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import InvalidInputError, validated_as
from labmem.core.provenance import SESSION_ID_PATTERN, MemorySource
from labmem.core.storage import JsonlLog, LockFactory, file_lock
from labmem.core.validation import require_int, require_text
from labmem.transcript.events import (
    ENVELOPE_FIELDS,
    MAX_REASON_CHARS,
    MAX_SUMMARY_CHARS,
    SCHEMA_VERSION,
    SELECTABLE_TYPES,
    MemorySelectionError,
    TranscriptCorruptionError,
    TranscriptValidationError,
    _refuse,
    _validate_payload,
)
from labmem.transcript.incremental import IncrementalFold
from labmem.transcript.replay import ReplayFold


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


class Transcript:
    """One session's append-only event log (``<session_id>.jsonl``).

    Messages are folded through :attr:`fold`, a :class:`ReplayFold` made by
    :attr:`fold_factory` and fed every record once, in sequence order, as it is read or
    appended. The default,
    :class:`IncrementalFold`, makes a replay cost the window; a subclass may set
    ``fold_factory = PlainFold`` to refold every event on each replay instead.
    """

    #: makes the message fold this transcript feeds (the seam for the replay optimization)
    fold_factory: ClassVar[Callable[[], ReplayFold]] = IncrementalFold

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
        self._tally = _Tally()  # counts, title and snapshots, kept up to date
        self.fold: ReplayFold = self.fold_factory()  # the messages, kept up to date

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
        self._tally.add(record)
        self.fold.add(record)
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
        read from the folds kept as events arrive: after the new lines are read, the cost
        is the window's (with the default :class:`IncrementalFold`), not the session's.
        """
        validated_as(TranscriptValidationError, require_int, max_items, "max_items", minimum=1)
        self._catch_up()
        window = self.fold.window(max_items)
        return ReplayState(
            session_id=self.session_id,
            messages=window.messages,
            title=self._tally.title,
            file_snapshots=self._tally.file_snapshots(),
            counts=self._tally.counts(),
            next_sequence=len(self._records) + 1,
            torn_tail_ignored=self._log.torn_tail_bytes > 0,
            pending_tool_calls=self.fold.pending_tool_calls(),  # calls still running
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


class _Tally:
    """Counts per event type, the latest title and the latest snapshot per path.

    Kept as records arrive; the read-only sorted views are rebuilt only after a change.
    """

    def __init__(self) -> None:
        self.title: str | None = None
        self._counts: Counter[str] = Counter()
        self._snapshots: dict[str, str] = {}
        self._views: dict[str, Mapping[str, Any]] = {}  # sorted read-only copies, cached

    def add(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
        self._counts[kind] += 1
        self._views.pop("counts", None)
        if kind == "file-history-snapshot":
            self._snapshots[event["path"]] = event["sha256"]
            self._views.pop("snapshots", None)
        elif kind == "ai-title":
            self.title = event["title"]

    def counts(self) -> Mapping[str, int]:
        return self._view("counts", self._counts)

    def file_snapshots(self) -> Mapping[str, str]:
        return self._view("snapshots", self._snapshots)

    def _view(self, name: str, source: Mapping[str, Any]) -> Mapping[str, Any]:
        view = self._views.get(name)
        if view is None:
            view = self._views[name] = MappingProxyType(dict(sorted(source.items())))
        return view
