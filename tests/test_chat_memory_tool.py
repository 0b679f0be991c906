"""`labmem chat --memory-tool`: the memory tool beside recall_history, through the real SDK
against the local Messages API server, booked in the request ledger."""

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest

from labmem.agents import LocalMessagesAPI, MemoryDirectory, scripted
from labmem.chat import MEMORY_TOOL, MEMORY_TOOL_BETA, AgentLoop, runtime_client, tool_log
from labmem.core.clock import SteppingClock
from labmem.core.text import estimate_tokens
from labmem.recall.tool import default_runtime
from tests.fake_messages_api import FakeMessagesAPI

pytest.importorskip("anthropic")

NOTE = "# Decisions\n- storage: SQLite in WAL mode\n"


def use(n, name, **tool_input):
    return {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": tool_input}


TURNS = (
    [use(1, "memory", command="create", path="/memories/decisions.md", file_text=NOTE)],
    [use(2, "memory", command="view", path="/memories/../../etc/passwd"),
     use(3, "recall_history", query="SQLite persistence decision", limit=1)],
    [use(4, "memory", command="view", path="/memories/decisions.md")],
    [{"type": "text", "text": "We use SQLite in WAL mode."}],
)


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    return work


def memories_of(home):
    return MemoryDirectory(home, user_id="alice",
                           clock=SteppingClock("2026-08-01T12:00:00Z", timedelta(seconds=1)))


def in_order(turns):
    """Turn n for the n-th request (a compacted view has fewer turns than were played)."""
    played = []

    def reply(body):
        played.append(1)
        return scripted(turns)({"messages": [{"role": "assistant"}] * (len(played) - 1),
                                "model": body["model"]})
    return reply


def run(turns, workdir, memories, *, reply=scripted, **options):
    with LocalMessagesAPI(reply(turns)) as api:
        client, model = runtime_client({"ANTHROPIC_API_KEY": "test-key", "MODEL_ID": "m-test",
                                        "ANTHROPIC_BASE_URL": api.url})
        loop = AgentLoop(client, model, workdir=workdir, memories=memories, **options)
        answer = loop.ask("Remember our storage decision.")
    return loop, api, answer


def results_by_id(messages):
    return {b["tool_use_id"]: b for m in messages if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"}


def test_the_memory_tool_beside_recall_through_the_real_sdk(workdir, tmp_path, monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    default_runtime(with_examples=True)  # the recall below must find a hit
    memories = memories_of(tmp_path / "home")
    loop, api, answer = run(TURNS, workdir, memories)
    assert answer == "We use SQLite in WAL mode."
    assert [c["name"] for c in tool_log(loop)] == ["memory", "memory", "recall_history",
                                                    "memory"]
    # every request declared the memory tool, on the beta endpoint the memory tool needs
    assert len(api.requests) == 4
    for request in api.requests:
        assert MEMORY_TOOL in request["body"]["tools"]
        assert {t["name"] for t in request["body"]["tools"]} == {
            "recall_history", "read_file", "memory"}
        assert request["beta"] == MEMORY_TOOL_BETA
    # the file the model wrote, under the home, and the log naming each tool use
    assert (memories.tree / "decisions.md").read_text() == NOTE
    log = memories.history()
    assert [(c.tool_use_id, c.command, c.outcome) for c in log] == [
        ("toolu_1", "create", "ok"), ("toolu_2", "view", "refused"), ("toolu_4", "view", "ok")]
    assert not (tmp_path / "etc").exists()
    # the model read the refusal in labmem's words, and the recall beside it
    results = results_by_id(loop.messages)
    assert results["toolu_2"]["is_error"] and "'..' segment" in results["toolu_2"]["content"]
    assert "is_error" not in results["toolu_3"]
    assert json.loads(results["toolu_3"]["content"])["hits"]
    assert "SQLite in WAL mode" in results["toolu_4"]["content"]


def test_what_the_memory_tool_shows_is_booked_as_memory(workdir, tmp_path, monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    loop, _, _ = run(TURNS, workdir, memories_of(tmp_path / "home"))
    results = results_by_id(loop.messages)
    shown = sum(estimate_tokens(results[i]["content"])
                for i in ("toolu_1", "toolu_2", "toolu_3", "toolu_4"))
    ledger = loop.plan()
    assert ledger.memory == estimate_tokens(loop.memory) + shown
    # each call was booked before it was made, usage beside it
    assert [lg.actual_input for lg in loop.ledgers] == [10] * 4
    assert loop.ledgers[-1].memory == ledger.memory


def test_a_long_chat_with_the_memory_tool_is_compacted_with_pairs_whole(workdir, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    chatter = tuple([{"type": "text", "text": f"Step {n}: " + "checking the notes " * 60},
                     use(10 + n, "memory", command="view", path="/memories")]
                    for n in range(12))
    turns = (TURNS[0], *chatter, [{"type": "text", "text": "done"}])
    loop, api, answer = run(turns, workdir, memories_of(tmp_path / "home"),
                            reply=in_order, context_limit=4_000, max_tokens=200,
                            min_memory_tokens=2_500, max_tool_rounds=20)
    assert answer == "done"
    assert loop.compactions, "the history crowded memory out, so the loop compacted"
    for request in api.requests:
        messages = request["body"]["messages"]
        uses = {b["id"] for m in messages if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use"}
        assert set(results_by_id(messages)) <= uses, "a result never loses its call"
    assert all(lg.fits for lg in loop.ledgers)


def test_without_the_switch_the_model_has_no_memory_tool(workdir, tmp_path, monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    loop, api, _ = run(TURNS, workdir, None)
    assert {t["name"] for t in api.requests[0]["body"]["tools"]} == {"recall_history",
                                                                      "read_file"}
    assert api.requests[0]["beta"] is None
    results = results_by_id(loop.messages)
    assert results["toolu_1"]["is_error"] and results["toolu_1"]["content"] == \
        "unknown tool 'memory'"
    assert not (tmp_path / "home" / "memory-tool").exists()


def test_chat_command_with_the_memory_tool_switch(workdir, tmp_path):
    home = tmp_path / "home"
    with FakeMessagesAPI() as api:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
        env.update(ANTHROPIC_API_KEY="test-key", MODEL_ID="m-test", ANTHROPIC_BASE_URL=api.url,
                   LABMEM_HOME=str(home), LABMEM_USER_ID="alice")
        done = subprocess.run([sys.executable, "-m", "labmem.cli", "chat", "--workdir",
                               str(workdir), "--memory-tool", "--with-examples"],
                              input="What did we decide?\n",
                              env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "tools recall_history, read_file, memory" in done.stdout
    assert MEMORY_TOOL in api.requests[0]["body"]["tools"]
    assert api.requests[0]["beta"] == MEMORY_TOOL_BETA
    # the tree is the user's, under the same home as recall_history's store
    assert (home / "memory-tool" / memories_of(home).user_scope / "memories").is_dir()
    assert memories_of(home).user_scope in {p.stem for p in (home / "remote-memory").iterdir()}
