"""The s09 event schema: what an event may hold, checked before anything is written.

The event types and their fields, the envelope the transcript assigns, the errors the
transcript raises, and the validation every appended payload (and every stored line)
goes through.
"""

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError, validated_as
from labmem.core.validation import UnstorableJson, parse_json, require_json, require_text, too_deep

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
