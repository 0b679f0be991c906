"""The request ledger: one model call's whole context window, and what memory may have.

The Context MMU budgets memory pages; a model call holds more than memory. Before each
call the window is split, in this order::

    system prompt │ tool definitions │ history (after compaction) │ memory │ … │ output reserve
    └──────────────── fixed by the caller ─────────────────────┘           └─ kept free ─┘

Memory gets what is left (:attr:`RequestLedger.memory_allowance`); a history that leaves
memory less than the caller's minimum is the signal to compact it
(:meth:`RequestLedger.history_allowance` says down to what). Where the API reports the
tokens a call really used, :meth:`RequestLedger.with_actual` keeps both, so the estimate
can be compared with the truth (:attr:`RequestLedger.estimate_error`).

All figures use the project's one estimator (:func:`labmem.core.text.estimate_tokens`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from labmem.core.errors import validated_as
from labmem.core.text import estimate_tokens
from labmem.core.validation import require_int
from labmem.mmu.errors import MmuValidationError

#: The parts of a request, in window order (the stacked bar draws them in this order).
PARTS = ("system", "tools", "history", "memory", "free", "output_reserve")


def _count(value: Any, field: str, minimum: int = 0) -> int:
    return validated_as(MmuValidationError, require_int, value, field, minimum=minimum)


@dataclass(frozen=True)
class RequestLedger:
    """The token book of one model call against ``context_limit``."""

    context_limit: int
    system: int
    tools: int
    history: int
    memory: int
    output_reserve: int
    actual_input: int | None = None  # input tokens the API reported for this call

    def __post_init__(self) -> None:
        _count(self.context_limit, "context_limit", 1)
        for name in ("system", "tools", "history", "memory", "output_reserve"):
            _count(getattr(self, name), name)
        if self.output_reserve >= self.context_limit:
            raise MmuValidationError("output_reserve", f"{self.output_reserve} leaves no room "
                                     f"for input in a {self.context_limit}-token window",
                                     "reserve fewer output tokens than the context limit")
        if self.actual_input is not None:
            _count(self.actual_input, "actual_input")

    @property
    def fixed(self) -> int:
        """What the caller has already committed: everything but memory."""
        return self.system + self.tools + self.history + self.output_reserve

    @property
    def memory_allowance(self) -> int:
        """What is left for memory (0 when the fixed parts already fill the window)."""
        return max(0, self.context_limit - self.fixed)

    @property
    def estimated_input(self) -> int:
        return self.system + self.tools + self.history + self.memory

    @property
    def free(self) -> int:
        """Unused room; negative when the request does not fit."""
        return self.context_limit - self.estimated_input - self.output_reserve

    @property
    def fits(self) -> bool:
        return self.free >= 0

    @property
    def estimate_error(self) -> int | None:
        """Estimated minus reported input tokens (``None`` until the API reported usage)."""
        return None if self.actual_input is None else self.estimated_input - self.actual_input

    def history_allowance(self, min_memory: int) -> int:
        """The most history may hold and still leave ``min_memory`` tokens for memory."""
        _count(min_memory, "min_memory")
        return max(0, self.context_limit - self.system - self.tools - self.output_reserve
                   - min_memory)

    def needs_compaction(self, min_memory: int) -> bool:
        """History crowds memory below ``min_memory``: compact it before this call."""
        return self.history > self.history_allowance(min_memory)

    def with_memory(self, tokens: int) -> RequestLedger:
        return replace(self, memory=_count(tokens, "memory"))

    def with_history(self, tokens: int) -> RequestLedger:
        return replace(self, history=_count(tokens, "history"))

    def with_actual(self, input_tokens: int) -> RequestLedger:
        return replace(self, actual_input=_count(input_tokens, "actual_input"))

    def segments(self) -> dict[str, int]:
        """Tokens per part in window order (:data:`PARTS`); ``free`` is never negative."""
        return {"system": self.system, "tools": self.tools, "history": self.history,
                "memory": self.memory, "free": max(0, self.free),
                "output_reserve": self.output_reserve}

    def rows(self) -> list[dict[str, Any]]:
        """One row per part with its share of the window, then the total."""
        rows = [{"part": part, "tokens": tokens,
                 "share": round(tokens / self.context_limit, 4)}
                for part, tokens in self.segments().items()]
        total = sum(row["tokens"] for row in rows)
        rows.append({"part": "total", "tokens": total,
                     "share": round(total / self.context_limit, 4)})
        return rows


def tool_tokens(tools: Sequence[Mapping[str, Any]]) -> int:
    """Estimated tokens of the tool definitions as they are sent (their JSON)."""
    return sum(estimate_tokens(json.dumps(tool, ensure_ascii=False, sort_keys=True))
               for tool in tools)


def plan_request(context_limit: int, *, system: str, tools: Sequence[Mapping[str, Any]] = (),
                 history_tokens: int = 0, memory_tokens: int = 0,
                 output_reserve: int = 1_024) -> RequestLedger:
    """The ledger of a call with this system prompt, these tools and this much history.

    ``history_tokens`` is the estimate of the messages after compaction (the caller
    counts them: ``labmem.context.estimate_messages_tokens``).
    """
    if not isinstance(system, str):
        raise MmuValidationError("system", f"must be the system prompt text, got "
                                           f"{type(system).__name__}")
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence) or not all(
            isinstance(tool, Mapping) for tool in tools):
        raise MmuValidationError("tools", "must be a list of tool definitions (dicts)")
    return RequestLedger(context_limit=context_limit, system=estimate_tokens(system),
                         tools=tool_tokens(tools), history=history_tokens,
                         memory=memory_tokens, output_reserve=output_reserve)
