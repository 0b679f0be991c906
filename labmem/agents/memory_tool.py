"""The SDK's memory tool, backed by a :class:`~labmem.agents.memory_files.MemoryDirectory`.

``anthropic.lib.tools.BetaAbstractMemoryTool`` is the official base class for a client-side
memory backend: the SDK's tool runner calls it for every ``memory`` tool use. The
subclass here hands each command to labmem, so the model's ``/memories`` gets labmem's
containment, atomic writes, per-user scope, size limits and command log.

The runner calls a tool with the input only. To log *which* tool use asked for a
command, drive the runner with :func:`run_tools_with_memory`: it shows the tool each
reply before the runner executes that reply's calls (the runner yields a reply first,
then runs its tools), and the tool takes the ids in order.

This module imports the SDK; ``labmem.agents`` loads it only when asked for it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError

from labmem.agents.memory_files import MemoryDirectory
from labmem.core.errors import LabmemError

TOOL_NAME = "memory"


class LabmemMemoryTool(BetaAbstractMemoryTool):
    """A concrete memory-tool backend whose files live under a labmem home."""

    def __init__(self, memories: MemoryDirectory, **options: Any) -> None:
        super().__init__(**options)
        self.memories = memories
        self._pending_ids: deque[str] = deque()

    def expect(self, message: Any) -> None:
        """Note the ids of ``message``'s memory tool uses, in the order they will run."""
        self._pending_ids.clear()
        for block in getattr(message, "content", None) or ():
            if getattr(block, "type", None) == "tool_use" and block.name == TOOL_NAME:
                self._pending_ids.append(block.id)

    def call(self, input: object) -> str:
        """Run one command from the raw tool input; a refusal becomes a tool error.

        The base class would build the command model without validating it; labmem
        validates every field itself, so the raw input goes straight to the backend.
        """
        tool_use_id = self._pending_ids.popleft() if self._pending_ids else None
        command = input if isinstance(input, dict) else {"command": None}
        try:
            return self.memories.execute(command, tool_use_id=tool_use_id)
        except LabmemError as exc:
            raise ToolError(" ".join(str(exc).splitlines())) from None

    def _run(self, command: Any) -> str:
        return self.call(command.model_dump(exclude_none=True))

    # the six commands of the abstract base class, for callers that build command models
    def view(self, command: Any) -> str:
        return self._run(command)

    def create(self, command: Any) -> str:
        return self._run(command)

    def str_replace(self, command: Any) -> str:
        return self._run(command)

    def insert(self, command: Any) -> str:
        return self._run(command)

    def delete(self, command: Any) -> str:
        return self._run(command)

    def rename(self, command: Any) -> str:
        return self._run(command)


def run_tools_with_memory(runner: Iterable[Any], memory_tool: LabmemMemoryTool) -> Any:
    """Drive the SDK's tool runner to the end; return the last reply.

    Each reply is shown to ``memory_tool`` before the runner executes its tool calls,
    so every logged command carries the id of the tool use that asked for it.
    """
    last = None
    for message in runner:
        memory_tool.expect(message)
        last = message
    return last
