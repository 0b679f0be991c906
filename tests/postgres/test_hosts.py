"""Two agent hosts, one memory: `labmem mcp` servers sharing one PostgreSQL database.

Each host is a real ``labmem mcp`` child process driven by the MCP SDK's own client over
stdio, as an agent host drives it. The servers stay up side by side, so "at once" means
what it says: a record host 1 remembers is recalled through host 2, whose server was
already running, by its next call; a server for another user on the same database sees
nothing of it (row-level security on the server, not the client's good manners).
"""

import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("psycopg")

from labmem.agents import TOOL_NAMES, host_config, server_command  # noqa: E402
from labmem.agents.toolbox import DATABASE_TOOLS  # noqa: E402

AT = "2026-08-01T12:00:00Z"
SOURCE = {"source_id": "transcript-h1", "source_type": "conversation_transcript",
          "title": "storage decision", "captured_at": "2026-07-10T14:30:00Z"}
RECORD = {"kind": "conversation", "memory_id": "host1-wal",
          "content": "Host one decided: keep the lighthouse index in SQLite WAL mode.",
          "summary": "lighthouse index in SQLite WAL", "source": SOURCE}
QUERY = {"query": "lighthouse index SQLite", "limit": 3}


async def _drive(hosts: dict[str, list[str] | tuple[list[str], dict[str, str]]],
                 steps: list[tuple[str, str, dict]]) -> tuple[dict, dict, list]:
    """Start every host's server and keep them all up; each first recalls ``QUERY`` (all
    at once: starting is the slow part); then run ``steps`` (host, tool, arguments) in
    order. Returns each host's listed tool names, its first recall, and the replies."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    listed: dict[str, list[str]] = {}
    first: dict[str, object] = {}

    async def call(session, tool, arguments):
        result = await session.call_tool(tool, arguments)
        text = "".join(b.text for b in result.content if b.type == "text")
        return bool(result.is_error), text if result.is_error else json.loads(text)

    async def start(name, session):
        await session.initialize()
        listed[name] = [t.name for t in (await session.list_tools()).tools]
        first[name] = await call(session, "recall_history", QUERY)

    with open(os.devnull, "w") as quiet:
        async with AsyncExitStack() as stack:
            sessions = {}
            for name, spec in hosts.items():
                command, env = spec if isinstance(spec, tuple) else (spec, None)
                params = StdioServerParameters(command=command[0], args=command[1:], env=env)
                read, write = await stack.enter_async_context(stdio_client(params,
                                                                           errlog=quiet))
                sessions[name] = await stack.enter_async_context(ClientSession(read, write))
            async with anyio.create_task_group() as group:
                for name, session in sessions.items():
                    group.start_soon(start, name, session)
            replies = [await call(sessions[host], tool, arguments)
                       for host, tool, arguments in steps]
    return listed, first, replies


def drive(hosts, steps):
    """Run the servers' event loop in a thread of its own, as labmem's MCP client does: a
    test run before this one in the same process (a browser test) may have left this
    thread's event loop running."""
    import anyio

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, _drive, hosts, steps).result()


def recalled(reply) -> list[str]:
    failed, data = reply
    assert not failed, data
    return [hit["memory_id"] for hit in data["hits"]]


def readme_shared_config() -> dict:
    """The README's MCP configuration for hosts that share one memory (the block with an
    ``env``), checked to be what :func:`host_config` writes."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r'```json\n(\{\n  "mcpServers".*?)```',
                                                readme, re.S)]
    shared = [b for b in blocks if "env" in b["mcpServers"]["labmem"]]
    assert len(shared) == 1
    url = shared[0]["mcpServers"]["labmem"]["env"]["LABMEM_DATABASE_URL"]
    assert url.startswith("postgresql://labmem_app:")
    assert shared[0] == host_config(None, user_id="alice", env={"LABMEM_DATABASE_URL": url})
    return shared[0]["mcpServers"]["labmem"]


def test_two_hosts_share_one_users_memory_and_nobody_elses(pg_url, tmp_path):
    entry = readme_shared_config()
    labmem = str(Path(sys.executable).with_name(entry["command"]))
    hosts = {
        # host 1 keeps its own files (preferences, facts) in its home, records on the server
        "host1": server_command(tmp_path / "host1-home", user_id="alice", at=AT,
                                database_url=pg_url),
        # host 2 is started as the README's configuration says, the URL in its
        # environment, and has no home: it serves only what the server holds
        "host2": ([labmem, *entry["args"]], {"LABMEM_DATABASE_URL": pg_url}),
        "host2-bob": server_command(None, user_id="bob", at=AT, database_url=pg_url),
    }
    steps = [  # every server is up and has recalled nothing (it is empty) before these
        ("host1", "remember_record", RECORD),          # 1: host 1 remembers
        ("host2", "recall_history", QUERY),            # 2: host 2 sees it at once
        ("host2-bob", "recall_history", QUERY),        # 3: bob, same database: nothing
        ("host2", "remember_record", RECORD),          # 4: the same id again: refused
        ("host2", "remember_record", {**RECORD, "memory_id": "host2-note",
                                      "content": "Host two adds: the lighthouse index "
                                                 "is rebuilt nightly."}),
        ("host1", "recall_history", QUERY),            # 6: and host 1 sees host 2's
        ("host2", "set_preference", {"key": "answer.style", "value": "short"}),  # 7
        ("host1", "set_preference", {"key": "answer.style", "value": "short"}),  # 8
    ]
    listed, first, replies = drive(hosts, steps)
    assert listed["host1"] == list(TOOL_NAMES)
    assert listed["host2"] == listed["host2-bob"] == list(DATABASE_TOOLS)
    assert {host: recalled(reply) for host, reply in first.items()} == {
        "host1": [], "host2": [], "host2-bob": []}
    replies = [None, *replies]  # numbered as the steps are, from 1
    stored = replies[1][1]
    assert stored["memory_id"] == "host1-wal" and stored["source"] == SOURCE
    assert recalled(replies[2]) == ["host1-wal"]
    assert replies[2][1]["hits"][0]["provenance"] == SOURCE
    assert recalled(replies[3]) == [] and replies[3][1]["searched_records"] == 0
    failed, text = replies[4]
    assert failed and "'host1-wal' is already stored in labmem_tests" in text
    assert sorted(recalled(replies[6])) == ["host1-wal", "host2-note"]
    failed, text = replies[7]  # a home-less server keeps no files: it says so
    assert failed and "not a tool of this server" in text
    assert "start the server with a home too" in text
    assert not replies[8][0]
    # the records are on the server, not in host 1's home; its preferences are its own
    home = tmp_path / "host1-home"
    assert not (home / "remote-memory").exists()
    assert list((home / "users").iterdir())


def test_a_server_that_cannot_reach_its_database_says_so(tmp_path, capsys, monkeypatch):
    from labmem.cli import main

    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    url = f"postgresql://labmem_app:hunter2@/labmem?host={tmp_path}&port=1"
    assert main(["mcp", "--user", "alice", "--database-url", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("labmem: error: --database-url 'postgresql://labmem_app:***@/")
    assert "cannot connect" in err and "hunter2" not in err
    assert not (tmp_path / "home").exists()
