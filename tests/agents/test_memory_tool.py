"""The SDK's tool runner drives the labmem memory tool against a local server."""

from datetime import timedelta

import pytest

from labmem.agents import (
    MEMORY_TOOL_TURNS,
    LocalMessagesAPI,
    MemoryDirectory,
    scripted,
)
from labmem.core.clock import SteppingClock

anthropic = pytest.importorskip("anthropic")
from anthropic.lib.tools import BetaAbstractMemoryTool  # noqa: E402

from labmem.agents import LabmemMemoryTool, run_tools_with_memory  # noqa: E402


def run_script(home, turns):
    memories = MemoryDirectory(home, user_id="alice", clock=SteppingClock(
        "2026-08-01T12:00:00Z", timedelta(seconds=1)))
    tool = LabmemMemoryTool(memories)
    with LocalMessagesAPI(scripted(turns)) as api:
        client = anthropic.Anthropic(api_key="test-key", base_url=api.url, max_retries=0)
        runner = client.beta.messages.tool_runner(
            model="m-test", max_tokens=256, tools=[tool],
            messages=[{"role": "user", "content": "Keep our decisions in memory."}])
        final = run_tools_with_memory(runner, tool)
    return memories, api, final


def test_the_scripted_conversation_through_the_tool_runner(tmp_path):
    memories, api, final = run_script(tmp_path, MEMORY_TOOL_TURNS)
    assert isinstance(LabmemMemoryTool(memories), BetaAbstractMemoryTool)
    assert final.content[0].text.startswith("Noted: SQLite in WAL mode")
    assert api.requests[0]["body"]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert all(r["api_key"] == "test-key" for r in api.requests)
    assert len(api.requests) == len(MEMORY_TOOL_TURNS)
    # the files the model left behind
    decisions = memories.tree / "project" / "decisions.md"
    assert decisions.read_text() == ("# Decisions\n- storage: SQLite in WAL mode\n"
                                     "- tests: real subprocesses for concurrency\n")
    assert sorted(p.name for p in memories.tree.rglob("*")) == ["decisions.md", "project"]
    # every command is logged with its tool-use id; the two escapes were refused
    log = memories.history()
    assert [c.tool_use_id for c in log] == [f"toolu_{n:02d}" for n in range(1, 11)]
    assert [c.command for c in log if c.outcome == "refused"] == ["view", "create"]
    assert not (tmp_path.parent / "etc").exists()
    # the model saw the refusals as tool errors, in labmem's words
    results = [b for m in api.conversations[-1] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    errors = {b["tool_use_id"]: b["content"] for b in results if b.get("is_error")}
    assert sorted(errors) == ["toolu_06", "toolu_07"]
    assert "'..' segment" in errors["toolu_06"] and "outside /memories" in errors["toolu_07"]


def test_malformed_input_from_the_model_is_a_tool_error(tmp_path):
    turns = ([{"type": "tool_use", "id": "toolu_01", "name": "memory",
               "input": {"command": "create", "path": "/memories/x.md"}}],
             [{"type": "tool_use", "id": "toolu_02", "name": "memory",
               "input": {"command": "insert", "path": "/memories/x.md", "insert_line": "one",
                         "insert_text": "y"}}],
             [{"type": "text", "text": "done"}])
    memories, api, final = run_script(tmp_path, turns)
    assert final.content[0].text == "done"
    assert [c.outcome for c in memories.history()] == ["refused", "refused"]
    assert list(memories.tree.iterdir()) == []
