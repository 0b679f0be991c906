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

Durable state — confirmed facts, pending items, selected retrieval evidence, each with
a source pointer — never enters the summarizer. It passes through unchanged and is
rendered separately (:func:`render_durable_context`), so a summarizer that lies ("the
migration is done") can only change the summary, never the facts.

No layer splits a ``tool_use`` from its ``tool_result`` (the layers that drop messages
keep :func:`close_tool_pairs` of what they chose) or leaves an empty message, and
a layer whose result is not smaller than its input is discarded (a marker can be longer
than the short body it would replace).

:func:`compaction_steps` is the loop itself: one :class:`LayerStep` per layer that ran,
with the view it left and which messages it changed, so a reader can see what was
truncated, deduplicated, pruned and summarized (:func:`outline_messages` says, per
message, its role, turn, tokens and a short note).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.core.errors import InvalidInputError, LabmemError
from labmem.core.render import BlockFormat, fixed, join_lines, require_choice, require_sha256
from labmem.core.text import MESSAGE_ENVELOPE_TOKENS, estimate_tokens
from labmem.core.validation import require_int, require_text

__all__ = [
    "CompactionPolicy", "CompactionResult", "DurableContextState", "DurableFact", "PendingItem",
    "RetrievalEvidence", "ToolProtocolError", "MessageViewLimitExceeded", "CompactionError",
    "close_tool_pairs", "compact_context", "render_durable_context", "estimate_messages_tokens",
    "validate_tool_protocol", "run_layer", "LAYERS", "LAYER_ACTIONS", "LayerStep",
    "compaction_steps", "MessageOutline", "outline_messages", "DURABLE_FORMAT",
    "SOURCE_STATUSES",
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


# -- policy and durable state -------------------------------------------------------


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


def _aware(value: datetime | str, field: str) -> datetime:
    return parse_timestamp(value, field=field)


def _pointer(value: Any, field: str) -> str:
    require_text(value, field, max_chars=500)
    return value


@dataclass(frozen=True)
class DurableFact:
    """A confirmed fact: owned by its source, not by the conversation."""

    fact_id: str
    content: str
    source_pointer: str
    last_confirmed_at: datetime

    def __post_init__(self) -> None:
        require_text(self.fact_id, "fact.fact_id", max_chars=200)
        require_text(self.content, "fact.content", max_chars=4_000)
        _pointer(self.source_pointer, "fact.source_pointer")
        object.__setattr__(self, "last_confirmed_at",
                           _aware(self.last_confirmed_at, "fact.last_confirmed_at"))


@dataclass(frozen=True)
class PendingItem:
    """Work that is not done until its source says so — a summary cannot close it."""

    item_id: str
    description: str
    source_pointer: str
    last_confirmed_at: datetime

    def __post_init__(self) -> None:
        require_text(self.item_id, "pending.item_id", max_chars=200)
        require_text(self.description, "pending.description", max_chars=4_000)
        _pointer(self.source_pointer, "pending.source_pointer")
        object.__setattr__(self, "last_confirmed_at",
                           _aware(self.last_confirmed_at, "pending.last_confirmed_at"))


@dataclass(frozen=True)
class RetrievalEvidence:
    """A recall hit selected for this prompt, with its score and rank (s12)."""

    memory_id: str
    source_pointer: str
    score: float
    rank: int
    captured_at: datetime
    conflict_key: str | None = None

    def __post_init__(self) -> None:
        require_text(self.memory_id, "evidence.memory_id", max_chars=200)
        _pointer(self.source_pointer, "evidence.source_pointer")
        if (isinstance(self.score, bool) or not isinstance(self.score, (int, float))
                or not math.isfinite(self.score)):
            raise InvalidInputError("evidence.score",
                                    f"must be a finite number, got {self.score!r}")
        _positive_int(self.rank, "evidence.rank")
        object.__setattr__(self, "captured_at", _aware(self.captured_at, "evidence.captured_at"))
        if self.conflict_key is not None:
            require_text(self.conflict_key, "evidence.conflict_key", max_chars=200)


@dataclass(frozen=True)
class DurableContextState:
    """Everything that must survive compaction, each item with a source pointer."""

    facts: tuple[DurableFact, ...] = ()
    pending_items: tuple[PendingItem, ...] = ()
    retrieval_evidence: tuple[RetrievalEvidence, ...] = ()

    def __post_init__(self) -> None:
        for name, kind, id_of in (("facts", DurableFact, lambda x: x.fact_id),
                                  ("pending_items", PendingItem, lambda x: x.item_id),
                                  ("retrieval_evidence", RetrievalEvidence,
                                   lambda x: x.memory_id)):
            items = tuple(getattr(self, name))
            for item in items:
                if not isinstance(item, kind):
                    raise InvalidInputError(name, f"holds a {type(item).__name__}, "
                                                  f"not a {kind.__name__}")
            ids = [id_of(item) for item in items]
            duplicates = sorted({i for i in ids if ids.count(i) > 1})
            if duplicates:
                raise InvalidInputError(name, f"ids must be unique, {duplicates[0]!r} repeats")
            object.__setattr__(self, name, items)

    def pointers(self) -> tuple[str, ...]:
        """Every distinct source pointer, in render order."""
        seen: dict[str, None] = {}
        for item in (*self.facts, *self.pending_items, *self.retrieval_evidence):
            seen.setdefault(item.source_pointer, None)
        return tuple(seen)


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


@dataclass(frozen=True)
class CompactionResult:
    """The compacted copy of the messages, the untouched durable state, and the figures.

    ``steps`` are the :class:`LayerStep` of every layer that ran, in order; the last
    one's view is ``messages``.
    """

    messages: tuple[Message, ...]
    durable_state: DurableContextState
    tokens_before: int
    tokens_after: int
    applied_layers: tuple[str, ...]
    layer_tokens: tuple[tuple[str, int], ...] = field(default=())
    steps: tuple[LayerStep, ...] = field(default=())


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
            what = _block_note(use)
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
        candidate = _LAYER_FUNCTIONS[name](work, policy, summarizer)
        candidate_tokens = estimate_messages_tokens(candidate)
        if candidate == view:
            outcome = "unchanged"
        elif candidate_tokens >= tokens:
            outcome = "not smaller"
        else:
            outcome = "applied"
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


def compact_context(messages: Sequence[Message], durable_state: DurableContextState, *,
                    summarizer: Summarizer,
                    policy: CompactionPolicy | None = None) -> CompactionResult:
    """Compact a copy of ``messages``; ``durable_state`` passes through untouched."""
    policy = _check_arguments(policy, summarizer)
    if not isinstance(durable_state, DurableContextState):
        raise InvalidInputError("durable_state", "must be a DurableContextState")
    steps = compaction_steps(messages, policy=policy, summarizer=summarizer)
    before = estimate_messages_tokens(messages)
    view = list(steps[-1].messages) if steps else copy.deepcopy(list(messages))
    tokens = steps[-1].tokens_after if steps else before
    applied = tuple(step.name for step in steps if step.applied)
    if tokens >= policy.hard_limit:
        raise MessageViewLimitExceeded(before, tokens, policy.hard_limit, applied)
    validate_tool_protocol(view)  # a layer that broke a pair is a bug: fail loudly
    return CompactionResult(tuple(view), durable_state, before, tokens, applied,
                            tuple((step.name, step.tokens_after) for step in steps),
                            tuple(steps))


# -- looking at a view -------------------------------------------------------------------


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


_NOTE_CHARS = 28


def _short(text: str, limit: int = _NOTE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _block_note(block: dict[str, Any]) -> str:
    kind = block["type"]
    if kind == "tool_use":
        values = [v for v in (block.get("input") or {}).values() if isinstance(v, str)]
        return _short(f"{block['name']} {values[0] if values else ''}".strip())
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
    return _short(repr(text), _NOTE_CHARS)


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


# -- rendering the durable state -------------------------------------------------------


#: The durable context's line format, ``- [fact ID] text (source=…; …; source_status=…)``:
#: stored text never prints a raw ``[``, ``]`` or ``=`` (so it cannot close an item's head,
#: open another item, or forge an attribute or a status marker), markup is escaped, and
#: line breaks and control characters become ``\\uXXXX`` (:mod:`labmem.core.render`).
DURABLE_FORMAT = BlockFormat("durable_context", reserved="[]=", markup=True)
#: The five states of a source resolution (:class:`~labmem.context.sources.SourceResolution`).
SOURCE_STATUSES = ("available", "missing", "denied", "corrupt", "unsupported")


def _one_line(text: str, field: str = "text") -> str:
    """Stored text as one field of a durable-context line (see :data:`DURABLE_FORMAT`)."""
    return DURABLE_FORMAT.text(text, field)


def _status(pointer: str, resolutions: Mapping[str, Any] | None) -> str:
    if resolutions is None:
        return "source_status=unverified; evidence_unavailable=true"
    resolution = resolutions[pointer]
    if resolution.status == "available":
        return f"source_status=available; evidence_sha256={resolution.evidence_sha256}"
    return f"source_status={resolution.status}; evidence_unavailable=true"


def _check_resolution(index: int, resolution: Any) -> None:
    """A resolution prints a status and maybe a digest: both must be ones the format knows.

    The resolution type itself stays permissive (tests and callers build their own); what
    is printed is checked here: a status that is not one of the five, or a digest that is
    not a full SHA-256 (a newline in it would start a forged line), is refused.
    """
    where = f"source_resolutions[{index}]"
    status = require_choice(getattr(resolution, "status", None), f"{where}.status",
                            SOURCE_STATUSES)
    digest = getattr(resolution, "evidence_sha256", None)
    if status == "available" or digest is not None:
        require_sha256(digest, f"{where}.evidence_sha256")


def _index_resolutions(state: DurableContextState,
                       source_resolutions: Sequence[Any] | None) -> Mapping[str, Any] | None:
    if source_resolutions is None:
        return None
    by_pointer: dict[str, Any] = {}
    for index, resolution in enumerate(source_resolutions):
        _check_resolution(index, resolution)
        pointer = getattr(resolution, "pointer", None)
        if pointer in by_pointer:
            raise InvalidInputError("source_resolutions", f"{pointer!r} is resolved twice")
        by_pointer[pointer] = resolution
    wanted = set(state.pointers())
    if set(by_pointer) != wanted:
        missing = sorted(wanted - set(by_pointer))
        extra = sorted(set(by_pointer) - wanted)
        raise InvalidInputError("source_resolutions",
                                f"need exactly one per durable pointer; missing {missing}, "
                                f"unexpected {extra}",
                                "resolve state.pointers() afresh for this prompt")
    return by_pointer


def render_durable_context(state: DurableContextState,
                           source_resolutions: Sequence[Any] | None = None) -> str:
    """The durable state as a prompt block: one escaped line per item, with its source
    pointer and whether that source was verified for *this* assembly.

    Stored text is printed through :data:`DURABLE_FORMAT`, so no content, id or pointer can
    produce a line, an item head, an attribute or a status marker. Each resolution must
    have one of the five :data:`SOURCE_STATUSES` and, when it prints a digest, a full
    SHA-256; anything else raises :class:`~labmem.core.errors.InvalidInputError`.
    """
    if not isinstance(state, DurableContextState):
        raise InvalidInputError("state", "must be a DurableContextState")
    resolved = _index_resolutions(state, source_resolutions)
    lines = ["<durable_context>", "confirmed facts:"]
    for f in state.facts:
        lines.append(f"- [fact {_one_line(f.fact_id, 'fact.fact_id')}] "
                     f"{_one_line(f.content, 'fact.content')} "
                     f"(source={_one_line(f.source_pointer, 'fact.source_pointer')}; "
                     f"last_confirmed_at={format_timestamp(f.last_confirmed_at)}; "
                     f"{_status(f.source_pointer, resolved)})")
    lines.append("pending items (open until their source says otherwise):")
    for p in state.pending_items:
        lines.append(f"- [pending {_one_line(p.item_id, 'pending.item_id')}] "
                     f"{_one_line(p.description, 'pending.description')} "
                     f"(source={_one_line(p.source_pointer, 'pending.source_pointer')}; "
                     f"last_confirmed_at={format_timestamp(p.last_confirmed_at)}; "
                     f"{_status(p.source_pointer, resolved)})")
    lines.append("retrieval evidence:")
    for e in state.retrieval_evidence:
        conflict = ("" if e.conflict_key is None
                    else f"; conflict_key={_one_line(e.conflict_key, 'evidence.conflict_key')}")
        lines.append(f"- [memory {_one_line(e.memory_id, 'evidence.memory_id')}] "
                     f"rank={e.rank} score={fixed(e.score, 'evidence.score')} "
                     f"(source={_one_line(e.source_pointer, 'evidence.source_pointer')}; "
                     f"captured_at={format_timestamp(e.captured_at)}{conflict}; "
                     f"{_status(e.source_pointer, resolved)})")
    lines.append("</durable_context>")
    return join_lines(lines, "durable_context")
