"""Talk to ``labmem mcp`` with the MCP SDK's own client, as an agent host does.

:func:`call_server` starts the server as a child process (stdio transport), lists its
tools, makes the calls one by one and hangs up. It runs the client on its own event loop
in a worker thread, so it works the same from a script, a test or a notebook cell
(where an event loop is already running).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from labmem.core.validation import parse_json


@dataclass(frozen=True)
class ToolReply:
    """What the server answered to one call: its text, and the parsed result if it
    succeeded (``None`` for a tool error)."""

    name: str
    is_error: bool
    text: str

    @property
    def data(self) -> Any:
        # the one validating parser: a reply nested past the core's bound is a ValueError
        return None if self.is_error else parse_json(self.text)


@dataclass(frozen=True)
class McpRun:
    tools: tuple[dict[str, Any], ...]  # as listed: name, description, inputSchema
    replies: tuple[ToolReply, ...]


def server_command(home: str | os.PathLike[str] | None, *, user_id: str | None = None,
                   workspace_id: str | None = None, at: str | None = None,
                   database_url: str | None = None) -> list[str]:
    """``python -m labmem.cli mcp …`` with this interpreter (a host would run ``labmem``)."""
    command = [sys.executable, "-m", "labmem.cli", "mcp"]
    if home is not None:
        command += ["--home", os.fspath(home)]
    for flag, value in (("--user", user_id), ("--workspace", workspace_id), ("--at", at),
                        ("--database-url", database_url)):
        if value is not None:
            command += [flag, value]
    return command


async def _session(command: Sequence[str], calls: Sequence[tuple[str, Mapping[str, Any]]],
                   env: Mapping[str, str] | None, errlog: Any) -> McpRun:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=list(command[1:]),
                                   env=dict(env) if env else None)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            tools = tuple({"name": t.name, "description": t.description,
                           "inputSchema": t.input_schema} for t in listed.tools)
            replies = []
            for name, arguments in calls:
                result = await session.call_tool(name, dict(arguments))
                text = "".join(block.text for block in result.content if block.type == "text")
                replies.append(ToolReply(name, bool(result.is_error), text))
    return McpRun(tools, tuple(replies))


def call_server(command: Sequence[str], calls: Sequence[tuple[str, Mapping[str, Any]]] = (),
                *, env: Mapping[str, str] | None = None, errlog: Any = None) -> McpRun:
    """Start the server, list its tools, make ``calls`` in order, and stop it."""
    import anyio

    def run() -> McpRun:
        if errlog is not None:
            return anyio.run(_session, command, calls, env, errlog)
        with open(os.devnull, "w") as quiet:
            return anyio.run(_session, command, calls, env, quiet)

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()
