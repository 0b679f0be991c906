"""Chapter s15: labmem behind real agent clients.

* :mod:`labmem.agents.toolbox` — the memory tools an agent host calls (recall, records,
  preferences, workspace facts, the memory service), each with a strict JSON schema;
* :mod:`labmem.agents.mcp_server` — those tools served over MCP on stdio (``labmem mcp``);
  :mod:`labmem.agents.mcp_client` — the MCP SDK's client talking to it, as a host does;
* :mod:`labmem.agents.memory_files` — the Messages API memory tool's ``/memories`` tree
  with labmem's guarantees (containment, atomic writes, scope, limits, a command log,
  undo); :mod:`labmem.agents.memory_tool` — the SDK's ``BetaAbstractMemoryTool`` backed
  by it (loaded only when asked for: it imports the SDK);
* :mod:`labmem.agents.local_api` — a scripted Messages API server on 127.0.0.1;
* :mod:`labmem.agents.interfaces` — what each interface offers, side by side;
  :mod:`labmem.agents.demo` — the chapter's scripted memory-tool conversation.

Importing this package does no I/O and imports neither SDK.
"""

from typing import Any

from labmem.agents.demo import MEMORY_TOOL_TURNS
from labmem.agents.interfaces import INTERFACE_ROWS, interface_table
from labmem.agents.local_api import (
    LocalMessagesAPI,
    assistant_turns,
    message,
    scripted,
    tool_results,
)
from labmem.agents.mcp_client import McpRun, ToolReply, call_server, server_command
from labmem.agents.mcp_server import (
    SERVER_NAME,
    McpConfigError,
    build_server,
    host_config,
    require_mcp,
    run_mcp_server,
)
from labmem.agents.memory_files import (
    COMMANDS,
    MAX_FILE_CHARS,
    MAX_FILES,
    MAX_TREE_BYTES,
    ROOT,
    MemoryArgumentError,
    MemoryCommand,
    MemoryDirectory,
    MemoryLimitError,
    MemoryLogCorruptionError,
    MemoryLogIntegrityError,
    MemoryPathError,
    MemoryScopeError,
    MemoryToolError,
    is_contained_memory_path,
    split_memory_path,
    text_digest,
)
from labmem.agents.toolbox import (
    TOOL_NAMES,
    TOOL_SPECS,
    MemoryToolbox,
    ToolArgumentError,
    ToolSpec,
    check_arguments,
)

_SDK_NAMES = ("LabmemMemoryTool", "run_tools_with_memory")

__all__ = [
    "TOOL_NAMES", "TOOL_SPECS", "MemoryToolbox", "ToolArgumentError", "ToolSpec",
    "check_arguments", "SERVER_NAME", "McpConfigError", "build_server", "host_config",
    "require_mcp", "run_mcp_server", "McpRun", "ToolReply", "call_server", "server_command",
    "COMMANDS", "ROOT", "MAX_FILE_CHARS", "MAX_FILES", "MAX_TREE_BYTES", "MemoryCommand",
    "MemoryDirectory", "MemoryToolError", "MemoryArgumentError", "MemoryPathError",
    "MemoryLimitError",
    "MemoryLogCorruptionError", "MemoryLogIntegrityError", "MemoryScopeError", "text_digest",
    "is_contained_memory_path",
    "split_memory_path", "LocalMessagesAPI",
    "assistant_turns", "message", "scripted", "tool_results", "INTERFACE_ROWS",
    "interface_table", "MEMORY_TOOL_TURNS", *_SDK_NAMES,
]


def __getattr__(name: str) -> Any:
    """The SDK-backed names, imported on first use (they need the online extra)."""
    if name in _SDK_NAMES:
        from labmem.agents import memory_tool

        return getattr(memory_tool, name)
    raise AttributeError(f"module 'labmem.agents' has no attribute {name!r}")
