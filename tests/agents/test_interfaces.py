"""The chapter's comparison table says what the code does."""

from labmem.agents import (
    COMMANDS,
    INTERFACE_ROWS,
    MAX_FILE_CHARS,
    MAX_FILES,
    ROOT,
    TOOL_NAMES,
    TOOL_SPECS,
    MemoryDirectory,
    interface_table,
)
from labmem.agents.mcp_server import SERVER_NAME, host_config


def row(aspect):
    (found,) = [r for r in INTERFACE_ROWS if r[0] == aspect]
    return found[1:]


def test_what_the_agent_sees_is_the_real_tools_and_commands():
    mcp, tool = row("what the agent sees")
    assert mcp.startswith(f"{len(TOOL_SPECS)} typed tools")
    assert all(name in mcp for name in TOOL_NAMES)
    assert tool.startswith(f"one tool, 'memory', with {len(COMMANDS)} commands")
    assert all(command in tool for command in COMMANDS)


def test_bounds_and_schemas_are_the_libraries():
    _, tool = row("bounds")
    assert f"{MAX_FILE_CHARS:,} characters per file" in tool and f"{MAX_FILES} files" in tool
    assert all(spec.input_schema["additionalProperties"] is False for spec in TOOL_SPECS)


def test_where_the_files_live_and_the_undo(tmp_path):
    _, kept = row("what is kept")
    memories = MemoryDirectory(tmp_path, user_id="alice")
    memories.execute({"command": "create", "path": f"{ROOT}/a.md", "file_text": "x\n"},
                     tool_use_id="toolu_1")
    assert "commands.jsonl" in kept and (memories.directory / "commands.jsonl").is_file()
    assert memories.history()[0].tool_use_id == "toolu_1"
    assert "undo(seq)" in row("undo")[1]
    assert memories.undo(1).startswith("Undid command 1")
    assert not (memories.tree / "a.md").exists()


def test_the_table_has_one_row_per_aspect():
    table = interface_table()
    assert [r["aspect"] for r in table] == [r[0] for r in INTERFACE_ROWS]
    assert host_config("h")["mcpServers"][SERVER_NAME]["args"][:3] == ["mcp", "--home", "h"]
