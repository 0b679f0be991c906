"""One trick: fold events as they are appended, so a replay costs the window.

:func:`~labmem.transcript.replay.replay_window` refolds every event of the session on each
call; a long session would pay for its whole history on every turn. An
:class:`IncrementalFold` is a :class:`~labmem.transcript.replay.ReplayFold` that does the
same fold one event at a time as the transcript reads or appends it, and reads a window
backwards from the newest event. It is an optimization only: ``tests/contracts/test_s09.py``
(and ``tests/test_transcript_replay.py``) hold a transcript folding through it equal to the
plain ``replay_window`` fold, and :class:`~labmem.transcript.replay.PlainFold` can stand in
for it.
"""

from collections.abc import Mapping
from typing import Any

from labmem.transcript.replay import ReplayWindow, _content_block, _plain, _strip_tool_results


class IncrementalFold:
    """The message fold of :func:`replay_window`, advanced one event at a time.

    Every event that can add a block to the replay (a message, a call, a result) gets a
    *slot*, in sequence order; a call's slot is *inactive* until a result for its call id
    has been read (before or after it, as :func:`replay_window` decides from the whole
    list). The messages are the runs of one role over the active slots, so the number of
    folded messages is kept as a count of role changes: appending a slot or activating an
    earlier call only looks at its active neighbours. A window is read backwards from the
    last slot until it holds ``max_items`` messages — its cost is the window's.
    """

    def __init__(self) -> None:
        self._slots: list[tuple[str, Mapping[str, Any]]] = []  # (role, event)
        self._inactive: dict[int, str] = {}  # slot → call id, calls without a result yet
        self._calls_by_id: dict[str, list[int]] = {}  # inactive call slots per call id
        self._answered: set[str] = set()
        self._messages = 0  # folded messages over every active slot
        self._last_role: str | None = None  # role of the last active slot
        self.blocks_built = 0  # content blocks built by window(): the work replays did

    def add(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
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
                self.blocks_built += 1
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
