# Generated from notebooks/s14_context_compaction.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""s14 from scratch: compaction shrinks a copy of the conversation, never the facts.

Four layers, cheapest and least lossy first, each run only while the view is still at or
above the threshold: cut oversized tool results, replace a file read that was read again
later, prune old turns (and, inside one long task, clear old tool results), summarize
older turns (and older tool rounds). No layer splits a tool_use from its tool_result. The
durable state never enters the summarizer: it is handed back untouched. Nothing here is
cached or traced: each call works on a fresh copy.
"""

import copy
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]
Summarizer = Callable[[str], str]
LAYERS = ("tool_result_truncation", "file_read_dedup", "turn_pruning", "conversation_summary")


class CompactionError(Exception):
    """Every error of this layer."""


class ToolProtocolError(CompactionError, ValueError):
    """The messages break the tool_use / tool_result pairing."""


class MessageViewLimitExceeded(CompactionError):
    """Every layer ran and the view is still at or above the hard limit."""


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


@dataclass(frozen=True)
class DurableFact:
    """A confirmed fact, owned by its source (a pointer), not by the conversation."""

    fact_id: str
    content: str
    source_pointer: str


@dataclass(frozen=True)
class PendingItem:
    """Work that stays open until its source says otherwise: a summary cannot close it."""

    item_id: str
    description: str
    source_pointer: str


@dataclass(frozen=True)
class DurableContextState:
    """Everything that must survive compaction; it never enters a layer."""

    facts: tuple[DurableFact, ...] = ()
    pending_items: tuple[PendingItem, ...] = ()


@dataclass(frozen=True)
class CompactionResult:
    """The compacted copy, the durable state as it was given, and the figures."""

    messages: tuple[Message, ...]
    durable_state: DurableContextState
    tokens_before: int
    tokens_after: int
    applied_layers: tuple[str, ...]


CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
RUNS = re.compile(f"[{CJK}]+|[^{CJK}]+")
ENVELOPE_TOKENS = 4  # what a message costs besides its text


def estimate_tokens(text: str) -> int:
    """Each CJK ideograph counts 1; every other run of characters counts ceil(len / 4)."""
    return sum(len(run) if re.match(f"[{CJK}]", run) else math.ceil(len(run) / 4)
               for run in RUNS.findall(text))


def blocks(message: Message) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a plain string is one text block)."""
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content)


def block_text(block: dict[str, Any]) -> str:
    """A block as the summarizer (and the estimate) sees it."""
    if block["type"] == "text":
        return block["text"]
    if block["type"] == "tool_use":
        return block["name"] + " " + json.dumps(block.get("input", {}), ensure_ascii=False)
    return result_text(block)


def estimate_messages_tokens(messages: Iterable[Message]) -> int:
    return sum(ENVELOPE_TOKENS + sum(estimate_tokens(block_text(b)) for b in blocks(m))
               for m in messages)


def validate_tool_protocol(messages: list[Message]) -> None:
    """Each tool_use is answered by exactly one later tool_result, and nothing else is."""
    open_calls: dict[str, int] = {}
    seen: set[str] = set()
    for i, message in enumerate(messages):
        for block in blocks(message):
            if block["type"] == "tool_use":
                if block["id"] in seen:
                    raise ToolProtocolError(f"messages[{i}]: tool_use {block['id']!r} "
                                            "is not a unique id")
                seen.add(block["id"])
                open_calls[block["id"]] = i
            elif block["type"] == "tool_result":
                if open_calls.pop(block["tool_use_id"], None) is None:
                    raise ToolProtocolError(f"messages[{i}]: tool_result for "
                                            f"{block['tool_use_id']!r} answers no earlier, "
                                            "open tool_use in this view")
    if open_calls:
        call, i = next(iter(open_calls.items()))
        raise ToolProtocolError(f"messages[{i}]: tool_use {call!r} has no tool_result; append "
                                "the result, or drop the unanswered call before compacting")


def prefix_within(text: str, tokens: int) -> int:
    """The longest prefix length whose estimate fits ``tokens`` (binary search)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= tokens:
            low = middle
        else:
            high = middle - 1
    return low


def truncate_tool_results(messages: list[Message], policy: CompactionPolicy,
                          summarizer: Summarizer) -> list[Message]:
    """Layer 1: a tool result over the cap keeps the prefix that fits, and says what it cut."""
    for message in messages:
        for block in blocks(message):
            if block["type"] != "tool_result":
                continue
            text = result_text(block)
            if estimate_tokens(text) <= policy.max_tool_result_tokens:
                continue
            keep = prefix_within(text, policy.max_tool_result_tokens)
            cut = (f"{text[:keep]}\n[tool_result_truncation: cut "
                   f"{len(text) - keep:,} of {len(text):,} characters]")
            if estimate_tokens(cut) < estimate_tokens(text):
                block["content"] = cut
    return messages


def dedup_file_reads(messages: list[Message], policy: CompactionPolicy,
                     summarizer: Summarizer) -> list[Message]:
    """Layer 2: a file read again later makes the earlier read's body a one-line marker."""
    path_of: dict[str, str] = {}  # the id of a file-read call -> the path it read
    for message in messages:
        for block in blocks(message):
            if block["type"] == "tool_use" and block["name"] in policy.file_read_tools:
                tool_input = block.get("input") or {}
                path = next((tool_input[k] for k in policy.file_path_keys
                             if isinstance(tool_input.get(k), str)), None)
                if path is not None:
                    path_of[block["id"]] = path
    latest = {path: call for call, path in path_of.items()}  # the last read of each path
    for message in messages:
        for block in blocks(message):
            call = block.get("tool_use_id")
            if block["type"] == "tool_result" and call in path_of \
                    and latest[path_of[call]] != call:
                marker = (f"[file_read_dedup: superseded — {path_of[call]} was read again "
                          f"later by {latest[path_of[call]]}]")
                if estimate_tokens(marker) < estimate_tokens(result_text(block)):
                    block["content"] = marker
    return messages


def turn_starts(messages: list[Message]) -> list[int]:
    """Where a turn begins: a user message that is not only tool results."""
    return [i for i, m in enumerate(messages) if m["role"] == "user"
            and any(b["type"] != "tool_result" for b in blocks(m))]


def round_starts(messages: list[Message]) -> list[int]:
    """Where a tool round begins: an assistant message that calls a tool."""
    return [i for i, m in enumerate(messages) if m["role"] == "assistant"
            and any(b["type"] == "tool_use" for b in blocks(m))]


def close_tool_pairs(messages: list[Message], keep: Iterable[int]) -> set[int]:
    """The smallest superset of ``keep`` that splits no tool pair: add the partner of
    every tool block in a kept message, and repeat until nothing changes."""
    use_at: dict[str, int] = {}
    result_at: dict[str, int] = {}
    for i, message in enumerate(messages):
        for block in blocks(message):
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
    return kept


def over(messages: list[Message], policy: CompactionPolicy) -> bool:
    return estimate_messages_tokens(messages) >= policy.token_threshold


def tool_label(use: dict[str, Any]) -> str:
    """A call in a few words: its tool and its first text argument, at most 28 characters."""
    values = [v for v in (use.get("input") or {}).values() if isinstance(v, str)]
    label = " ".join(f"{use['name']} {values[0] if values else ''}".split())
    return label if len(label) <= 28 else label[:27] + "…"


def clear_old_tool_results(messages: list[Message], policy: CompactionPolicy) -> list[Message]:
    """All but the ``keep_recent_tool_rounds`` most recent rounds lose their results to a
    placeholder naming the call; the call and the result block both stay."""
    rounds = round_starts(messages)
    if len(rounds) <= policy.keep_recent_tool_rounds:
        return messages
    calls: dict[str, dict[str, Any]] = {}
    for i in rounds[: len(rounds) - policy.keep_recent_tool_rounds]:
        calls.update({b["id"]: b for b in blocks(messages[i]) if b["type"] == "tool_use"})
    for message in messages[1:]:
        for block in blocks(message):
            use = calls.get(block.get("tool_use_id")) if block["type"] == "tool_result" else None
            if use is None:
                continue
            text = result_text(block)
            marker = f"[tool_result cleared: {tool_label(use)} — {len(text):,} characters]"
            if estimate_tokens(marker) < estimate_tokens(text):
                block["content"] = marker
    return messages


def prune_turns(messages: list[Message], policy: CompactionPolicy,
                summarizer: Summarizer) -> list[Message]:
    """Layer 3: keep the first message and the recent turns whole; if the view is still
    over, clear the results of old tool rounds."""
    starts = turn_starts(messages)
    if len(starts) > policy.keep_recent_turns:
        recent_from = starts[-policy.keep_recent_turns]
        keep = close_tool_pairs(messages, {0} | set(range(recent_from, len(messages))))
        messages = [m for i, m in enumerate(messages) if i in keep]
    if over(messages, policy):
        messages = clear_old_tool_results(messages, policy)
    return messages


SUMMARY_PREFIX = "[conversation_summary of "


def summary_note(older: list[Message], summarizer: Summarizer) -> Message | None:
    """The summarizer's text for ``older`` as one user message, or None if it failed."""
    text = "\n".join(f"{m['role']}: " + " | ".join(block_text(b) for b in blocks(m))
                     for m in older)
    try:
        summary = summarizer(text)
    except Exception:  # a failing summarizer must not cost us the conversation
        return None
    if not isinstance(summary, str) or not summary.strip():
        return None
    return {"role": "user",
            "content": f"{SUMMARY_PREFIX}{len(older)} earlier messages]\n{summary.strip()}"}


def is_summary(message: Message) -> bool:
    return isinstance(message["content"], str) and message["content"].startswith(SUMMARY_PREFIX)


def summarize_turns(messages: list[Message], policy: CompactionPolicy,
                    summarizer: Summarizer) -> list[Message]:
    """The turns before the ``summary_keep_recent_turns`` most recent become one summary."""
    starts = turn_starts(messages)
    if len(starts) <= policy.summary_keep_recent_turns:
        return messages
    recent = close_tool_pairs(messages, range(starts[-policy.summary_keep_recent_turns],
                                              len(messages)))
    older = [m for i, m in enumerate(messages) if i not in recent]
    note = summary_note(older, summarizer) if older else None
    if note is None:
        return messages
    return [note] + [m for i, m in enumerate(messages) if i in recent]


def summarize_rounds(messages: list[Message], policy: CompactionPolicy,
                     summarizer: Summarizer) -> list[Message]:
    """Inside one long task: the rounds before the ``summary_keep_recent_tool_rounds`` most
    recent become one summary after the first message; every instruction stays."""
    rounds = round_starts(messages)
    if len(rounds) <= policy.summary_keep_recent_tool_rounds:
        return messages
    recent_from = rounds[-policy.summary_keep_recent_tool_rounds]
    instructions = {i for i in turn_starts(messages) if not is_summary(messages[i])}
    wanted = {0, *instructions, *range(recent_from, len(messages))}
    if is_summary(messages[0]):
        wanted.discard(0)  # an earlier summary is folded into the new one
    keep = close_tool_pairs(messages, wanted)
    older = [m for i, m in enumerate(messages) if i not in keep]
    note = summary_note(older, summarizer) if older else None
    if note is None:
        return messages
    kept = [m for i, m in enumerate(messages) if i in keep]
    return [note] + kept if 0 not in keep else kept[:1] + [note] + kept[1:]


def summarize(messages: list[Message], policy: CompactionPolicy,
              summarizer: Summarizer) -> list[Message]:
    """Layer 4: summarize older turns; if the view is still over, older tool rounds too."""
    messages = summarize_turns(messages, policy, summarizer)
    if over(messages, policy):
        messages = summarize_rounds(messages, policy, summarizer)
    return messages


def compact_context(messages: list[Message], durable_state: DurableContextState, *,
                    summarizer: Summarizer,
                    policy: CompactionPolicy | None = None) -> CompactionResult:
    """Run the layers in order on a copy while the view is at or above the threshold; a
    layer's result is kept only if it is smaller. Too big after all of them: refuse."""
    policy = policy or CompactionPolicy()
    validate_tool_protocol(messages)
    layers = (truncate_tool_results, dedup_file_reads, prune_turns, summarize)
    before = estimate_messages_tokens(messages)
    view, tokens, applied = copy.deepcopy(list(messages)), before, []
    for name, layer in zip(LAYERS, layers, strict=True):
        if tokens < policy.token_threshold:
            break
        candidate = layer(copy.deepcopy(view), policy, summarizer)
        candidate_tokens = estimate_messages_tokens(candidate)
        if candidate != view and candidate_tokens < tokens:
            view, tokens = candidate, candidate_tokens
            applied.append(name)
    if tokens >= policy.hard_limit:
        raise MessageViewLimitExceeded(
            f"message view is {tokens:,} tokens after {applied} (from {before:,}); hard_limit "
            f"is {policy.hard_limit:,}. Nothing was changed: externalize large content (s13) "
            "or start a new session from the durable state")
    validate_tool_protocol(view)  # a layer that broke a pair is a bug: fail loudly
    return CompactionResult(tuple(view), durable_state, before, tokens, tuple(applied))
