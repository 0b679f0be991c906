"""`labmem mcp` through the MCP SDK's own client over stdio, in real subprocesses."""

import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from labmem.agents import (
    TOOL_NAMES,
    TOOL_SPECS,
    MemoryToolbox,
    ToolArgumentError,
    call_server,
    host_config,
    server_command,
)
from labmem.core.provenance import scope_digest
from labmem.mmu import record_id_of
from labmem.mmu.records import MAX_TEXT_CHARS, MAX_TITLE_CHARS, OUTCOMES
from labmem.recall.pipeline import MAX_LIMIT
from labmem.recall.store import MAX_CONTENT_CHARS, MAX_SUMMARY_CHARS
from labmem.workspace.facts import FACT_ID_PATTERN, KEY_PATTERN
from labmem.workspace.facts import MAX_CONTENT_CHARS as FACT_MAX
from labmem.workspace.memory import MAX_RECENT_LIMIT

pytest.importorskip("mcp")

AT = "2026-08-01T12:00:00Z"
SOURCE = {"source_id": "transcript-s1", "source_type": "conversation_transcript",
          "title": "db choice", "captured_at": "2026-07-10T14:30:00Z"}
REMEMBER = {"memory_type": "semantic", "title": "storage engine", "text": "SQLite in WAL mode",
            "outcome": "succeeded", "evidence": ["test-run:1"], "source_kind": "tool_observed",
            "origin_key": "storage.engine"}
#: the memory service numbers ids within the caller's scope: alice's opaque user scope
ALICES_FIRST = record_id_of(scope_digest("alice", field="user_id"), 1)
CALLS = [
    ("remember_record", {"kind": "conversation", "content": "Chose SQLite WAL for the index.",
                         "summary": "SQLite WAL", "source": SOURCE}),
    ("recall_history", {"query": "SQLite persistence decision", "limit": 2}),
    ("set_preference", {"key": "answer.style", "value": "concise"}),
    ("get_preferences", {}),
    ("delete_preference", {"key": "answer.style"}),
    ("append_fact", {"content": "Use SQLite in WAL mode.", "kind": "decision",
                     "source": SOURCE, "evidence": ["transcript:s1:3"]}),
    ("workspace_context", {"recent_limit": 5}),
    ("memory_remember", REMEMBER),
    ("memory_recall", {"query": "SQLite storage", "k": 3}),
    ("memory_forget", {"record_id": ALICES_FIRST}),
]


def tree(home: Path) -> dict[str, bytes]:
    """Every file under ``home`` and its bytes (lock files excluded: they are empty)."""
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def test_schemas_are_strict_and_match_the_library_bounds():
    for spec in TOOL_SPECS:
        schema = spec.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for prop in schema["properties"].values():
            if prop.get("type") == "object":
                assert prop["additionalProperties"] is False
    props = {s.name: s.input_schema["properties"] for s in TOOL_SPECS}
    assert props["recall_history"]["limit"]["maximum"] == MAX_LIMIT
    assert props["remember_record"]["content"]["maxLength"] == MAX_CONTENT_CHARS
    assert props["remember_record"]["summary"]["maxLength"] == MAX_SUMMARY_CHARS
    assert props["append_fact"]["content"]["maxLength"] == FACT_MAX
    assert props["append_fact"]["memory_key"]["pattern"] == f"^{KEY_PATTERN.pattern}$"
    assert props["append_fact"]["fact_id"]["pattern"] == f"^{FACT_ID_PATTERN.pattern}$"
    assert props["workspace_context"]["recent_limit"]["maximum"] == MAX_RECENT_LIMIT
    assert props["memory_remember"]["title"]["maxLength"] == MAX_TITLE_CHARS
    assert props["memory_remember"]["text"]["maxLength"] == MAX_TEXT_CHARS
    assert props["memory_remember"]["outcome"]["enum"] == list(OUTCOMES)


@pytest.mark.parametrize("name, arguments, field", [
    ("set_preference", {"key": "a", "value": "b", "colour": "red"}, "arguments"),
    ("set_preference", {"key": "Bad Key", "value": "b"}, "key"),
    ("recall_history", {"query": "x", "limit": 11}, "limit"),
    ("recall_history", {"limit": 2}, "arguments"),
    ("append_fact", {"content": "x", "kind": "rumour"}, "kind"),
    ("remember_record", {"kind": "conversation", "content": "c", "summary": "",
                         "source": {**SOURCE, "extra": 1}}, "source"),
    ("memory_remember", {**REMEMBER, "importance": 2}, "importance"),
])
def test_schema_refusals_name_the_field(tmp_path, name, arguments, field):
    box = MemoryToolbox(tmp_path, user_id="alice", workspace_id="w")
    before = tree(tmp_path)
    with pytest.raises(ToolArgumentError) as caught:
        box.call(name, arguments)
    assert caught.value.field == field
    assert tree(tmp_path) == before


def test_every_tool_over_stdio_writes_its_layer(tmp_path):
    home = tmp_path / "home"
    run = call_server(server_command(home, user_id="alice", workspace_id="proj", at=AT), CALLS)
    assert tuple(t["name"] for t in run.tools) == TOOL_NAMES
    assert all(t["inputSchema"]["additionalProperties"] is False for t in run.tools)
    failed = [(r.name, r.text) for r in run.replies if r.is_error]
    assert failed == []
    replies = {r.name: r.data for r in run.replies}
    recalled = replies["recall_history"]
    assert recalled["searched_records"] == 1  # the one record this client wrote, nothing else
    hit = recalled["hits"][0]
    assert hit["memory_id"] == replies["remember_record"]["memory_id"]
    assert hit["provenance"] == SOURCE
    assert replies["remember_record"]["source"] == SOURCE
    assert replies["get_preferences"]["preferences"][0]["value"] == "concise"
    assert replies["delete_preference"]["status"] == "deleted"
    assert "Use SQLite in WAL mode." in replies["workspace_context"]["text"]
    assert replies["memory_recall"]["hits"][0]["record"]["record_id"] == ALICES_FIRST
    assert replies["memory_forget"]["status"] == "archived"
    # the files on disk are the layers' own
    files = tree(home)
    remote = [k for k in files if k.startswith("remote-memory/")]
    assert len(remote) == 1
    assert [json.loads(line)["content"] for line in files[remote[0]].decode().splitlines()] \
        == ["Chose SQLite WAL for the index."]
    prefs = [k for k in files if k.startswith("users/") and k.endswith("preferences.json")]
    assert prefs and b'"answer.style"' in files[prefs[0]]  # the tombstone
    assert not any(b"concise" in files[k] for k in files if k.startswith("users/"))
    facts = [k for k in files if k.startswith("workspaces/") and "/daily/" in k]
    assert len(facts) == 1 and b"Use SQLite in WAL mode." in files[facts[0]]
    service = [json.loads(line) for line in
               files["memory-service/records.jsonl"].decode().splitlines()]
    assert [r["status"] for r in service] == ["provisional", "archived"]


def test_a_refused_call_is_a_tool_error_and_writes_nothing(tmp_path):
    home = tmp_path / "home"
    call_server(server_command(home, user_id="alice", workspace_id="proj", at=AT))
    before = tree(home)
    refused = [
        ("set_preference", {"key": "answer.style", "value": "x", "unknown": True}),
        ("append_fact", {"content": "   ", "kind": "decision"}),  # blank: the library says no
        ("memory_remember", {**REMEMBER, "outcome": "planned"}),  # the write gate says no
        ("memory_forget", {"record_id": "m-999999"}),
        ("remember_record", {"kind": "conversation", "content": "c", "summary": "",
                             "source": {**SOURCE, "captured_at": "yesterday"}}),
        ("no_such_tool", {}),
    ]
    run = call_server(server_command(home, user_id="alice", workspace_id="proj", at=AT),
                      refused)
    assert [r.is_error for r in run.replies] == [True] * len(refused)
    for reply in run.replies:
        assert "\n" not in reply.text and re.match(r"^[\w.\[\]]+[: ]", reply.text)
    assert "a planned task is not a fact to keep" in run.replies[2].text
    assert tree(home) == before


def _remember_many(home: Path, who: str, n: int) -> list[str]:
    calls = [("memory_remember", {**REMEMBER, "origin_key": f"{who}.{i}", "text": f"{who} {i}"})
             for i in range(n)] + [("append_fact", {"content": f"{who} fact {i}",
                                                    "kind": "outcome"}) for i in range(n)]
    run = call_server(server_command(home, user_id="alice", workspace_id="proj"), calls)
    assert not any(r.is_error for r in run.replies), [r.text for r in run.replies]
    return [r.data.get("record_id") or r.data["fact_id"] for r in run.replies]


def test_two_clients_on_one_home_never_collide(tmp_path):
    home = tmp_path / "home"
    with ThreadPoolExecutor(max_workers=2) as pool:
        a, b = pool.map(lambda who: _remember_many(home, who, 12), ["a", "b"])
    ids = a + b
    assert len(ids) == len(set(ids)) == 48
    lines = (home / "memory-service" / "records.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["record_id"] for line in lines) == \
        [record_id_of(scope_digest("alice", field="user_id"), i) for i in range(1, 25)]
    run = call_server(server_command(home, user_id="alice", workspace_id="proj"),
                      [("workspace_context", {"recent_limit": 100})])
    assert run.replies[0].data["recent_facts"] == 24


def test_the_readme_host_configuration_starts_the_server(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r'```json\n(\{\n  "mcpServers".*?)```', readme, re.S).group(1)
    config = json.loads(block)
    assert config == host_config("/path/to/labmem-home", user_id="alice")
    entry = config["mcpServers"]["labmem"]
    args = [a if a != "/path/to/labmem-home" else str(tmp_path) for a in entry["args"]]
    labmem = Path(sys.executable).with_name(entry["command"])
    run = call_server([str(labmem), *args], [("get_preferences", {})],
                      env={"PATH": os.environ.get("PATH", "")})
    assert run.replies[0].data == {"preferences": []}


def test_missing_sdk_is_one_clear_line(tmp_path):
    import subprocess

    code = ("import sys; sys.modules['mcp'] = None\n"
            "from labmem.cli import main\n"
            f"sys.exit(main(['mcp', '--home', {str(tmp_path / 'h')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == ("labmem: error: labmem mcp needs the MCP SDK: install the "
                                   "mcp extra with pip install -e '.[mcp]'")
    assert not (tmp_path / "h").exists()
