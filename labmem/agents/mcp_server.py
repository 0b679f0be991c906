"""``labmem mcp``: the memory tools served over the Model Context Protocol (stdio).

An agent host starts ``labmem mcp --home DIR`` as a child process and speaks MCP over
its stdin and stdout. The server lists the toolbox's tools (all the
:data:`~labmem.agents.toolbox.TOOL_SPECS`, or only the remote-memory ones when it serves a
database without a home) and runs each call through one
:class:`~labmem.agents.toolbox.MemoryToolbox`. Two hosts given one database URL
(``--database-url`` or ``$LABMEM_DATABASE_URL``) share one user's records. A refused
call comes back as a tool error (``isError: true``) whose text is labmem's one-line
message, so the model can read it and correct itself; the server keeps running.

The low-level ``mcp.server.lowlevel.Server`` is used on purpose: the schemas are
labmem's own, written once, not inferred from Python signatures.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from labmem.agents.toolbox import MemoryToolbox
from labmem.core.errors import LabmemError

SERVER_NAME = "labmem"


class McpConfigError(LabmemError):
    """``labmem mcp`` cannot start: the ``mcp`` extra is missing."""


def require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpConfigError("labmem mcp needs the MCP SDK: install the mcp extra with "
                             "pip install -e '.[mcp]'") from None


def result_text(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False, sort_keys=True)


def build_server(toolbox: MemoryToolbox) -> Any:
    """An MCP server (not yet running) whose tools are ``toolbox``'s."""
    require_mcp()
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=s.name, description=s.description, input_schema=s.input_schema)
             for s in toolbox.tool_specs]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            result = toolbox.call(params.name, params.arguments or {})
        except LabmemError as exc:
            message = " ".join(str(exc).splitlines())
            return types.CallToolResult(content=[types.TextContent(text=message)],
                                        is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=result_text(result))],
                                    structured_content=result)

    return Server(SERVER_NAME, version="1", instructions=(
        "labmem memory for one user and one workspace. Recalled hits are candidates with "
        "sources, not facts; refused calls explain what to change."),
        on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(toolbox: MemoryToolbox) -> None:
    """Serve ``toolbox`` over this process's stdin and stdout until the host hangs up."""
    from mcp.server.stdio import stdio_server

    server = build_server(toolbox)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_mcp_server(toolbox: MemoryToolbox) -> int:
    import anyio

    require_mcp()
    anyio.run(serve_stdio, toolbox)
    return 0


def host_config(home: str | None, *, user_id: str | None = None,
                workspace_id: str | None = None, command: str = "labmem",
                env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``mcpServers`` entry an agent host needs to start ``labmem mcp``; ``env`` is
    what the host adds to the server's environment (``LABMEM_DATABASE_URL``: a database
    instead of, or beside, the home)."""
    args = ["mcp"] + (["--home", home] if home is not None else [])
    if user_id is not None:
        args += ["--user", user_id]
    if workspace_id is not None:
        args += ["--workspace", workspace_id]
    entry: dict[str, Any] = {"command": command, "args": args}
    if env:
        entry["env"] = dict(env)
    return {"mcpServers": {SERVER_NAME: entry}}
