"""s14 looking at compaction: what each layer did, message by message.

Display helpers, kept apart from the layers themselves (:mod:`labmem.context.compaction`):

* :func:`compaction_steps` runs the same loop as :func:`~labmem.context.compact_context`,
  and records one :class:`LayerStep` per layer: its outcome, the view it left, where each
  message came from and which messages it truncated, deduplicated, pruned or summarized;
* :func:`outline_messages` says, per message, its role, turn, tokens and a short note (for
  tables and message-view plots).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from labmem.context.compaction import (
    CLEARED_PREFIX,
    LAYER_ACTIONS,
    LAYERS,
    SUMMARY_PREFIX,
    CompactionPolicy,
    Message,
    Summarizer,
    _block_text,
    _blocks,
    _check_arguments,
    _layer_outcome,
    _result_text,
    _turn_starts,
    call_label,
    estimate_messages_tokens,
    short_text,
    validate_tool_protocol,
)

__all__ = ["LayerStep", "compaction_steps", "MessageOutline", "outline_messages"]


@dataclass(frozen=True)
class LayerStep:
    """One layer's turn in :func:`compaction_steps`: the view it left and what it changed.

    ``outcome`` is ``"applied"`` (its result became the view), ``"unchanged"`` (it found
    nothing to do — a summarizer that raised or returned no text lands here) or
    ``"not smaller"`` (its result was discarded). Only an applied step changes the view:
    otherwise ``messages`` is the view the layer was given. ``origin[i]`` is the index, in
    the view the layer was given, of ``messages[i]``; ``None`` marks a message the layer
    wrote (the summary). ``changes`` lists ``(index given, action, index now)`` for every
    message the layer rewrote or removed, ``index now`` ``None`` when it was removed; the
    action is :data:`LAYER_ACTIONS` of the layer.
    """

    name: str
    outcome: str
    tokens_before: int
    tokens_after: int
    messages: tuple[Message, ...]
    origin: tuple[int | None, ...]
    changes: tuple[tuple[int, str, int | None], ...]

    @property
    def applied(self) -> bool:
        return self.outcome == "applied"


def compaction_steps(messages: Sequence[Message], *, summarizer: Summarizer,
                     policy: CompactionPolicy | None = None) -> tuple[LayerStep, ...]:
    """The layers in order, each on the view the previous one left, as long as the view
    is at or above ``policy.token_threshold`` — the loop :func:`compact_context` runs.

    A layer's result replaces the view only if it differs and is smaller. Works on
    copies; ``messages`` is never touched. Empty when the input is under the threshold.
    """
    policy = _check_arguments(policy, summarizer)
    validate_tool_protocol(messages)
    view = copy.deepcopy(list(messages))
    tokens = estimate_messages_tokens(view)
    steps: list[LayerStep] = []
    for name in LAYERS:
        if tokens < policy.token_threshold:
            break
        work = copy.deepcopy(view)
        position = {id(message): i for i, message in enumerate(work)}
        # the layers rewrite messages in place and drop or prepend whole messages, so a
        # message's identity says where it came from
        outcome, candidate, candidate_tokens = _layer_outcome(name, view, tokens, policy,
                                                              summarizer, work)
        if outcome != "applied":
            steps.append(LayerStep(name, outcome, tokens, tokens, tuple(view),
                                   tuple(range(len(view))), ()))
            continue
        origin = tuple(position.get(id(message)) for message in candidate)
        now = {given: i for i, given in enumerate(origin) if given is not None}
        changes = tuple((i, LAYER_ACTIONS[name], now.get(i)) for i, message in enumerate(view)
                        if i not in now or candidate[now[i]] != message)
        steps.append(LayerStep(name, outcome, tokens, candidate_tokens, tuple(candidate),
                               origin, changes))
        view, tokens = candidate, candidate_tokens
    return tuple(steps)


@dataclass(frozen=True)
class MessageOutline:
    """One message as a reader looks at it: where it is, who speaks, what it costs.

    ``role`` is ``"tool"`` for a user message that holds only tool results; ``turn`` counts
    the turn starts (user messages that are not only tool results) up to this message, 0
    before the first; ``tokens`` include the message envelope, so a view's outlines sum to
    :func:`estimate_messages_tokens`; ``note`` is a short label (the compaction markers are
    named: ``cut``, ``superseded``, ``summary of N messages``); ``text`` is every block's
    text, as the summarizer would see it.
    """

    index: int
    turn: int
    role: str
    tokens: int
    note: str
    text: str


def _block_note(block: dict[str, Any]) -> str:
    kind = block["type"]
    if kind == "tool_use":
        return call_label(block)
    if kind == "tool_result":
        text = _result_text(block)
        mark = (", cut" if "[tool_result_truncation: cut" in text
                else ", superseded" if text.startswith("[file_read_dedup: superseded")
                else ", cleared" if text.startswith(CLEARED_PREFIX)
                else "")
        return f"result of {block['tool_use_id']}{mark}"
    text = block["text"]
    if text.startswith(SUMMARY_PREFIX):
        return "summary of " + text[len(SUMMARY_PREFIX):].split(" ", 1)[0] + \
            " messages"
    return short_text(repr(text))


def outline_messages(messages: Sequence[Message]) -> tuple[MessageOutline, ...]:
    """A :class:`MessageOutline` per message, in order (for tables and message-view plots)."""
    validate_tool_protocol(messages)
    starts = set(_turn_starts(messages))
    outlines, turn = [], 0
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        turn += i in starts
        role = ("tool" if message["role"] == "user"
                and all(b["type"] == "tool_result" for b in blocks) else message["role"])
        outlines.append(MessageOutline(
            i, turn, role, estimate_messages_tokens([message]),
            "; ".join(_block_note(b) for b in blocks),
            " | ".join(_block_text(b) for b in blocks)))
    return tuple(outlines)
