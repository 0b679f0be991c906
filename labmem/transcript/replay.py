"""The s09 replay fold: the pure rule that turns events into the messages a model gets.

:func:`replay_window` is the whole rule, read and tested alone. :class:`ReplayFold` is the
seam a :class:`~labmem.transcript.Transcript` folds through as it reads and appends
events; :class:`PlainFold` is the plain implementation (keep the events, fold them all on
every replay), and :mod:`labmem.transcript.incremental` the one that costs the window.
"""

import copy
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from labmem.core.errors import validated_as
from labmem.core.validation import require_int
from labmem.transcript.events import TranscriptValidationError


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


class ReplayFold(Protocol):
    """What a transcript needs from a fold it feeds one event at a time.

    ``add`` is called once per stored record, in sequence order; ``window`` must equal
    :func:`replay_window` over every record added so far, and ``pending_tool_calls``
    the call ids of the ``function_call`` events with no result among them, in order.
    """

    def add(self, event: Mapping[str, Any]) -> None: ...

    def window(self, max_items: int) -> ReplayWindow: ...

    def pending_tool_calls(self) -> tuple[str, ...]: ...


class PlainFold:
    """The plain :class:`ReplayFold`: keep the events, fold all of them on every replay."""

    def __init__(self) -> None:
        self._events: list[Mapping[str, Any]] = []

    def add(self, event: Mapping[str, Any]) -> None:
        self._events.append(event)

    def window(self, max_items: int) -> ReplayWindow:
        return replay_window(self._events, max_items)

    def pending_tool_calls(self) -> tuple[str, ...]:
        answered = {e["call_id"] for e in self._events if e["type"] == "function_call_result"}
        return tuple(e["call_id"] for e in self._events
                     if e["type"] == "function_call" and e["call_id"] not in answered)


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
