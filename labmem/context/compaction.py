"""s14 compaction: shrink the message view; never let a summary own the facts.

Compaction rewrites a *copy* of the conversation in four layers, cheapest and
least lossy first, stopping as soon as the view is under the threshold:

1. ``tool_result_truncation`` — cut oversized tool results, saying how much was cut;
2. ``file_read_dedup``        — a file read again later makes the earlier read's body redundant;
3. ``turn_pruning``           — keep the first message and the most recent turns; if still
   over, clear the results of older tool rounds (a placeholder names the tool and what
   was cleared), keeping the most recent ``keep_recent_tool_rounds`` in full;
4. ``conversation_summary``   — replace older turns by a summarizer's text; if still over,
   older tool rounds too (the first message and every user instruction stay).

Both count *tool rounds* (an assistant message that calls tools, with its results) as well
as turns (a user-authored message to the next): an agent loop with one instruction and
forty tool rounds — the common shape of a coding agent — is one turn, and would otherwise
never be compacted.

The durable state (:mod:`labmem.context.durable`) never enters the summarizer: it passes
through unchanged and is rendered separately, beside the source resolver
(:func:`labmem.context.sources.render_durable_context`), so a summarizer that lies ("the
migration is done") can only change the summary, never the facts.

No layer splits a ``tool_use`` from its ``tool_result`` (the layers that drop messages
keep :func:`close_tool_pairs` of what they chose) or leaves an empty message, and
a layer whose result is not smaller than its input is discarded (a marker can be longer
than the short body it would replace). Looking at what each layer did is the business of
:mod:`labmem.context.trace`, not of this module.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labmem.context.durable import DurableContextState
from labmem.core.errors import InvalidInputError, LabmemError
from labmem.core.text import MESSAGE_ENVELOPE_TOKENS, estimate_tokens
from labmem.core.validation import require_int

__all__ = [
    "CompactionPolicy", "CompactionResult", "ToolProtocolError", "MessageViewLimitExceeded",
    "CompactionError", "close_tool_pairs", "compact_context", "estimate_messages_tokens",
    "validate_tool_protocol", "run_layer", "LAYERS", "LAYER_ACTIONS",
]

LAYERS = ("tool_result_truncation", "file_read_dedup", "turn_pruning", "conversation_summary")
#: what each layer does to a message it changes (rewrites or removes)
LAYER_ACTIONS = dict(zip(LAYERS, ("truncated", "deduplicated", "pruned", "summarized"),
                         strict=True))
Message = dict[str, Any]
Summarizer = Callable[[str], str]


class CompactionError(LabmemError):
    """Base of the errors compaction raises."""


class ToolProtocolError(CompactionError, InvalidInputError):
    """The messages break the tool_use / tool_result pairing (or the message shape)."""


class MessageViewLimitExceeded(CompactionError):
    """Even after every layer the view is at or above the hard limit (figures only)."""

    def __init__(self, tokens_before: int, tokens_after: int, hard_limit: int,
                 applied_layers: tuple[str, ...]) -> None:
        self.tokens_before = tokens_before
        self.tokens_after = tokens_after
        self.hard_limit = hard_limit
        self.applied_layers = applied_layers
        super().__init__(
            f"message view is {tokens_after:,} tokens after {list(applied_layers)} "
            f"(from {tokens_before:,}); hard_limit is {hard_limit:,}. Nothing was changed: "
            "externalize large content (s13) or start a new session from the durable state"
        )


# -- policy ---------------------------------------------------------------------------


def _positive_int(value: Any, field: str) -> int:
    return require_int(value, field, minimum=1)


@dataclass(frozen=True)
class CompactionPolicy:
    """When compaction starts, when it gives up, and how hard each layer cuts."""

    token_threshold: int = 80_000
    hard_limit: int = 120_000
    max_tool_result_tokens: int = 2_000
    keep_recent_turns: int = 6
    summary_keep_recent_turns: int = 2
    keep_recent_tool_rounds: int = 8
    summary_keep_recent_tool_rounds: int = 3
    file_read_tools: tuple[str, ...] = ("read_file", "Read", "view_file")
    file_path_keys: tuple[str, ...] = ("path", "file_path")

    def __post_init__(self) -> None:
        for name in ("token_threshold", "hard_limit", "max_tool_result_tokens",
                     "keep_recent_turns", "summary_keep_recent_turns",
                     "keep_recent_tool_rounds", "summary_keep_recent_tool_rounds"):
            _positive_int(getattr(self, name), f"policy.{name}")
        if self.hard_limit < self.token_threshold:
            raise InvalidInputError("policy.hard_limit",
                                    f"{self.hard_limit} is below token_threshold "
                                    f"{self.token_threshold}", "make hard_limit >= threshold")


@dataclass(frozen=True)
class CompactionResult:
    """The compacted copy of the messages, the untouched durable state, and the figures
    (``layer_tokens``: the view's tokens after each layer that ran, applied or not)."""

    messages: tuple[Message, ...]
    durable_state: DurableContextState
    tokens_before: int
    tokens_after: int
    applied_layers: tuple[str, ...]
    layer_tokens: tuple[tuple[str, int], ...] = field(default=())


# -- tokens and the tool protocol -----------------------------------------------------


def _blocks(message: Message) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


def _block_text(block: dict[str, Any]) -> str:
    kind = block["type"]
    if kind == "text":
        return block["text"]
    if kind == "tool_use":
        return block["name"] + " " + json.dumps(block.get("input", {}), ensure_ascii=False)
    return _result_text(block)


def estimate_messages_tokens(messages: Sequence[Message]) -> int:
    """The shared-core estimate of every block, plus the envelope of each message."""
    return sum(MESSAGE_ENVELOPE_TOKENS + sum(estimate_tokens(_block_text(b)) for b in _blocks(m))
               for m in messages)


def validate_tool_protocol(messages: Sequence[Message]) -> None:
    """Shape check, then: each tool_use has exactly one later tool_result, and each
    tool_result answers an earlier, still open tool_use."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise ToolProtocolError("messages", "must be a list of message dicts")
    open_calls: dict[str, int] = {}
    seen: set[str] = set()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise ToolProtocolError(where, "must be a dict with role 'user' or 'assistant'")
        content = message.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list) or not content:
            raise ToolProtocolError(f"{where}.content", "must be a string or a non-empty list")
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, Mapping) else None
            at = f"{where}.content[{j}]"
            if kind == "text" and isinstance(block.get("text"), str):
                continue
            if kind == "tool_use":
                call = block.get("id")
                if message["role"] != "assistant" or not isinstance(call, str) or call in seen:
                    raise ToolProtocolError(at, f"tool_use {call!r} must be a unique id in an "
                                                "assistant message")
                if not isinstance(block.get("name"), str):
                    raise ToolProtocolError(at, "tool_use needs a name")
                seen.add(call)
                open_calls[call] = i
            elif kind == "tool_result":
                call = block.get("tool_use_id")
                if message["role"] != "user" or call not in open_calls:
                    raise ToolProtocolError(at, f"tool_result for {call!r} answers no earlier, "
                                                "open tool_use in this view")
                del open_calls[call]
            else:
                raise ToolProtocolError(at, f"unknown block type {kind!r}")
    if open_calls:
        call, index = next(iter(open_calls.items()))
        raise ToolProtocolError(f"messages[{index}]", f"tool_use {call!r} has no tool_result",
                                "append the result, or drop the unanswered call before compacting")


# -- the layers -----------------------------------------------------------------------


def _truncate_tool_results(messages: list[Message], policy: CompactionPolicy,
                           summarizer: Summarizer) -> list[Message]:
    cap = policy.max_tool_result_tokens
    for message in messages:
        for block in _blocks(message):
            if block["type"] != "tool_result":
                continue
            text = _result_text(block)
            if estimate_tokens(text) <= cap:
                continue
            keep = _prefix_within(text, cap)
            cut = (f"{text[:keep]}\n[tool_result_truncation: cut "
                   f"{len(text) - keep:,} of {len(text):,} characters]")
            if estimate_tokens(cut) < estimate_tokens(text):
                block["content"] = cut
    return messages


def _prefix_within(text: str, tokens: int) -> int:
    """The longest prefix length whose estimate fits ``tokens`` (binary search)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= tokens:
            low = middle
        else:
            high = middle - 1
    return low


def _dedup_file_reads(messages: list[Message], policy: CompactionPolicy,
                      summarizer: Summarizer) -> list[Message]:
    path_of: dict[str, str] = {}  # tool_use id -> file path, for file-read tools
    for message in messages:
        for block in _blocks(message):
            if block["type"] == "tool_use" and block["name"] in policy.file_read_tools:
                tool_input = block.get("input") or {}
                path = next((tool_input[k] for k in policy.file_path_keys
                             if isinstance(tool_input.get(k), str)), None)
                if path is not None:
                    path_of[block["id"]] = path
    latest: dict[str, str] = {}
    for call, path in path_of.items():  # dicts keep order: the last read wins
        latest[path] = call
    for message in messages:
        for block in _blocks(message):
            call = block.get("tool_use_id")
            if block["type"] == "tool_result" and call in path_of \
                    and latest[path_of[call]] != call:
                marker = (f"[file_read_dedup: superseded — {path_of[call]} was read again "
                          f"later by {latest[path_of[call]]}]")
                if estimate_tokens(marker) < estimate_tokens(_result_text(block)):
                    block["content"] = marker
    return messages


def _turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indexes where a turn begins: a user message that is not only tool results."""
    return [i for i, m in enumerate(messages) if m["role"] == "user"
            and any(b["type"] != "tool_result" for b in _blocks(m))]


def close_tool_pairs(messages: Sequence[Message], keep: Iterable[int]) -> frozenset[int]:
    """The smallest superset of ``keep`` that splits no tool pair.

    A provider rejects a ``tool_result`` whose ``tool_use`` is gone, and a call left
    without its result. So when a layer keeps some messages, the partner of every
    tool block in them must stay too — and a partner's message may hold further tool
    blocks, so the rule repeats until nothing changes (a fixed point). ``keep`` is
    not changed; indexes are positions in ``messages``.
    """
    use_at: dict[str, int] = {}
    result_at: dict[str, int] = {}
    for i, message in enumerate(messages):
        for block in _blocks(message):
            if block["type"] == "tool_use":
                use_at[block["id"]] = i
            elif block["type"] == "tool_result":
                result_at[block["tool_use_id"]] = i
    kept = set(keep)
    changed = True
    while changed:
        changed = False
        for call, i in use_at.items():
            j = result_at[call]
            if (i in kept) != (j in kept):
                kept |= {i, j}
                changed = True
    return frozenset(kept)


def _round_starts(messages: Sequence[Message]) -> list[int]:
    """Indexes where a tool round begins: an assistant message that calls a tool."""
    return [i for i, m in enumerate(messages) if m["role"] == "assistant"
            and any(b["type"] == "tool_use" for b in _blocks(m))]


def _over(messages: Sequence[Message], policy: CompactionPolicy) -> bool:
    return estimate_messages_tokens(messages) >= policy.token_threshold


CLEARED_PREFIX = "[tool_result cleared: "
_LABEL_CHARS = 28


def short_text(text: str, limit: int = _LABEL_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_label(use: dict[str, Any]) -> str:
    """A tool call in a few words: its tool and its first text argument."""
    values = [v for v in (use.get("input") or {}).values() if isinstance(v, str)]
    return short_text(f"{use['name']} {values[0] if values else ''}".strip())


def _clear_old_tool_results(messages: list[Message], policy: CompactionPolicy) -> list[Message]:
    """Replace the results of all but the most recent ``keep_recent_tool_rounds`` rounds by
    a placeholder naming the tool, its first argument and how much was cleared. The pair
    stays (the result block is kept, only its content changes); the first message too."""
    rounds = _round_starts(messages)
    if len(rounds) <= policy.keep_recent_tool_rounds:
        return messages
    calls: dict[str, dict[str, Any]] = {}
    for i in rounds[: len(rounds) - policy.keep_recent_tool_rounds]:
        calls.update({b["id"]: b for b in _blocks(messages[i]) if b["type"] == "tool_use"})
    for message in messages[1:]:
        for block in _blocks(message):
            use = calls.get(block.get("tool_use_id")) if block["type"] == "tool_result" else None
            if use is None:
                continue
            text = _result_text(block)
            what = call_label(use)
            marker = f"{CLEARED_PREFIX}{what} — {len(text):,} characters]"
            if estimate_tokens(marker) < estimate_tokens(text):
                block["content"] = marker
    return messages


def _prune_turns(messages: list[Message], policy: CompactionPolicy,
                 summarizer: Summarizer) -> list[Message]:
    starts = _turn_starts(messages)
    if len(starts) > policy.keep_recent_turns:
        recent_from = starts[-policy.keep_recent_turns]
        keep = close_tool_pairs(messages, {0} | set(range(recent_from, len(messages))))
        messages = [m for i, m in enumerate(messages) if i in keep]
    if _over(messages, policy):
        messages = _clear_old_tool_results(messages, policy)
    return messages


SUMMARY_PREFIX = "[conversation_summary of "


def _is_summary(message: Message) -> bool:
    return isinstance(message["content"], str) and message["content"].startswith(SUMMARY_PREFIX)


def _summary_note(older: Sequence[Message], summarizer: Summarizer) -> Message | None:
    """The summarizer's text for ``older`` as one message, or None if it failed."""
    transcript = "\n".join(f"{m['role']}: " + " | ".join(_block_text(b) for b in _blocks(m))
                           for m in older)
    try:
        summary = summarizer(transcript)
    except Exception:  # a failing summarizer must not cost us the conversation
        return None
    if not isinstance(summary, str) or not summary.strip():
        return None
    return {"role": "user", "content": f"{SUMMARY_PREFIX}{len(older)} earlier "
                                       f"messages]\n{summary.strip()}"}


def _summarize_turns(messages: list[Message], policy: CompactionPolicy,
                     summarizer: Summarizer) -> list[Message]:
    starts = _turn_starts(messages)
    if len(starts) <= policy.summary_keep_recent_turns:
        return messages
    recent_from = starts[-policy.summary_keep_recent_turns]
    recent = close_tool_pairs(messages, range(recent_from, len(messages)))
    older = [m for i, m in enumerate(messages) if i not in recent]
    note = _summary_note(older, summarizer) if older else None
    if note is None:
        return messages
    return [note] + [m for i, m in enumerate(messages) if i in recent]


def _summarize_rounds(messages: list[Message], policy: CompactionPolicy,
                      summarizer: Summarizer) -> list[Message]:
    """Inside one long task: summarize the tool rounds before the most recent
    ``summary_keep_recent_tool_rounds``; the first message and every user instruction
    stay, pairs stay whole, and the summary follows the first message."""
    rounds = _round_starts(messages)
    if len(rounds) <= policy.summary_keep_recent_tool_rounds:
        return messages
    recent_from = rounds[-policy.summary_keep_recent_tool_rounds]
    # an earlier summary is folded into the new one (one summary, not a stack of them)
    instructions = {i for i in _turn_starts(messages) if not _is_summary(messages[i])}
    keep = close_tool_pairs(messages, {0, *instructions, *range(recent_from, len(messages))}
                            - {i for i in (0,) if _is_summary(messages[0])})
    older = [m for i, m in enumerate(messages) if i not in keep]
    note = _summary_note(older, summarizer) if older else None
    if note is None:
        return messages
    kept = [m for i, m in enumerate(messages) if i in keep]
    if 0 not in keep:
        return [note] + kept
    return kept[:1] + [note] + kept[1:]


def _summarize(messages: list[Message], policy: CompactionPolicy,
               summarizer: Summarizer) -> list[Message]:
    messages = _summarize_turns(messages, policy, summarizer)
    if _over(messages, policy):
        messages = _summarize_rounds(messages, policy, summarizer)
    return messages


_LAYER_FUNCTIONS = dict(zip(LAYERS, (_truncate_tool_results, _dedup_file_reads, _prune_turns,
                                     _summarize), strict=True))


def run_layer(name: str, messages: Sequence[Message], *, policy: CompactionPolicy,
              summarizer: Summarizer) -> tuple[Message, ...]:
    """One layer alone, on a copy — to look at what each layer does by itself."""
    if name not in _LAYER_FUNCTIONS:
        raise InvalidInputError("name", f"{name!r} is not a layer", f"use one of {LAYERS}")
    validate_tool_protocol(messages)
    return tuple(_LAYER_FUNCTIONS[name](copy.deepcopy(list(messages)), policy, summarizer))


def _check_arguments(policy: Any, summarizer: Any) -> CompactionPolicy:
    policy = CompactionPolicy() if policy is None else policy
    if not isinstance(policy, CompactionPolicy):
        raise InvalidInputError("policy", "must be a CompactionPolicy or None")
    if not callable(summarizer):
        raise InvalidInputError("summarizer", "must be a callable text -> text")
    return policy


def _layer_outcome(name: str, view: list[Message], tokens: int, policy: CompactionPolicy,
                   summarizer: Summarizer, work: list[Message] | None = None
                   ) -> tuple[str, list[Message], int]:
    """Run one layer on a copy of ``view`` (or on ``work``, a copy the caller made):
    ``("applied", its result, its tokens)`` when the result differs and is smaller, else
    ``("unchanged" | "not smaller", view, tokens)``."""
    candidate = _LAYER_FUNCTIONS[name](copy.deepcopy(view) if work is None else work, policy,
                                       summarizer)
    candidate_tokens = estimate_messages_tokens(candidate)
    if candidate == view:
        return "unchanged", view, tokens
    if candidate_tokens >= tokens:
        return "not smaller", view, tokens
    return "applied", candidate, candidate_tokens


def compact_context(messages: Sequence[Message], durable_state: DurableContextState, *,
                    summarizer: Summarizer,
                    policy: CompactionPolicy | None = None) -> CompactionResult:
    """Compact a copy of ``messages``; ``durable_state`` passes through untouched.

    The layers run in order, each on the view the previous one left, as long as the view
    is at or above ``policy.token_threshold``; a layer's result replaces the view only if
    it differs and is smaller. At or above ``policy.hard_limit`` after that:
    :class:`MessageViewLimitExceeded`, and nothing is returned.
    """
    policy = _check_arguments(policy, summarizer)
    if not isinstance(durable_state, DurableContextState):
        raise InvalidInputError("durable_state", "must be a DurableContextState")
    validate_tool_protocol(messages)
    before = estimate_messages_tokens(messages)
    view, tokens = copy.deepcopy(list(messages)), before
    applied: list[str] = []
    layer_tokens: list[tuple[str, int]] = []
    for name in LAYERS:
        if tokens < policy.token_threshold:
            break
        outcome, view, tokens = _layer_outcome(name, view, tokens, policy, summarizer)
        layer_tokens.append((name, tokens))
        if outcome == "applied":
            applied.append(name)
    if tokens >= policy.hard_limit:
        raise MessageViewLimitExceeded(before, tokens, policy.hard_limit, tuple(applied))
    validate_tool_protocol(view)  # a layer that broke a pair is a bug: fail loudly
    return CompactionResult(tuple(view), durable_state, before, tokens, tuple(applied),
                            tuple(layer_tokens))
