"""The two interfaces side by side: what an agent gets from each, and who runs what.

The rows are data the chapter prints as a table; a test checks each claim against the
code (the tool names, the commands, where the files live).
"""

from __future__ import annotations

from labmem.agents.memory_files import COMMANDS, MAX_FILE_CHARS, MAX_FILES, ROOT
from labmem.agents.toolbox import TOOL_NAMES

INTERFACE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("who calls it", "any MCP host (an IDE, a desktop agent, a CLI agent)",
     "the Messages API model, through the client's tool runner"),
    ("transport", "JSON-RPC over the server's stdin/stdout (stdio)",
     "tool_use / tool_result blocks in the conversation"),
    ("what the agent sees", f"{len(TOOL_NAMES)} typed tools: {', '.join(TOOL_NAMES)}",
     f"one tool, 'memory', with {len(COMMANDS)} commands: {', '.join(COMMANDS)}"),
    ("shape of memory", "labmem's records: facts, preferences, recall hits with sources",
     f"plain text files under {ROOT}, organised by the model"),
    ("argument checks", "a strict JSON schema per tool, then the library's validation",
     "every path resolved and contained, every field validated"),
    ("a refusal", "a tool error (isError) with labmem's one-line message",
     "a tool_result with is_error and labmem's one-line message"),
    ("what is kept", "each layer's own log (JSONL) and snapshots, scoped per user",
     "the files, plus commands.jsonl: every command, its time and tool-use id"),
    ("bounds", "the schema's maxLength / maximum / maxItems",
     f"{MAX_FILE_CHARS:,} characters per file, {MAX_FILES} files per user"),
    ("undo", "the layers' own operations (forget, delete_preference, supersession)",
     "MemoryDirectory.undo(seq) from the log's before-images"),
)


def interface_table() -> list[dict[str, str]]:
    """The comparison as rows of a table (aspect, MCP server, memory tool)."""
    return [{"aspect": a, "MCP server (labmem mcp)": m, "memory tool (/memories)": t}
            for a, m, t in INTERFACE_ROWS]
