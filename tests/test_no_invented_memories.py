"""No entry point writes a record nobody asked for.

An agent host treats whatever a user's store holds as a fact about that user, so every way
into the default store (``labmem recall``, ``labmem chat``, ``labmem mcp``, the
``recall_history`` tool function, the in-process toolbox) must leave an empty home holding
exactly what the caller wrote: nothing after a recall, the one record after a remember. The
chapter's example records go in only when asked for by name (``labmem examples add``,
``--with-examples``, ``default_runtime(with_examples=True)``).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labmem.cli import main
from labmem.core.provenance import scope_digest
from labmem.recall import RemoteMemoryStore
from labmem.recall.tool import TEACHING_RECORDS, recall_history

SOURCE = {"source_id": "transcript-s1", "source_type": "conversation_transcript",
          "title": "db choice", "captured_at": "2026-07-10T14:30:00Z"}
RECORD = {"kind": "conversation", "content": "Chose SQLite WAL for the index.",
          "summary": "SQLite WAL", "source": SOURCE}
EXAMPLE_IDS = {r["memory_id"] for r in TEACHING_RECORDS}


def stored(home: Path, user: str = "learner") -> list[dict]:
    """What the user's default store holds, as written (no store object in between)."""
    path = home / "remote-memory" / f"{scope_digest(user)}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def files_with_bytes(home: Path) -> list[str]:
    """Every non-empty file under ``home`` (lock files are empty) but the workspace's
    identity card, ``workspace.json`` (its id and creation time: no memory)."""
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and p.stat().st_size and p.name != "workspace.json")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LABMEM_USER_ID", raising=False)
    return tmp_path / "home"


@pytest.mark.parametrize("args", [[], ["--json"], ["--scorer", "bm25"]])
def test_cli_recall_on_an_empty_home_creates_nothing_and_says_how(home, capsys, args):
    assert main(["recall", "SQLite persistence", *args]) == 0
    captured = capsys.readouterr()
    assert not home.exists()
    assert "no records yet" in captured.err and "labmem examples add" in captured.err
    if args == ["--json"]:
        data = json.loads(captured.out)  # stdout stays JSON
        assert data["hits"] == [] and data["searched_records"] == 0
    else:
        assert captured.out == ""


def test_the_tool_function_on_an_empty_home_creates_nothing(home):
    data = json.loads(recall_history("layered memory design"))
    assert data["hits"] == [] and data["searched_records"] == 0
    assert not home.exists()


def test_chat_on_an_empty_home_writes_nothing_and_injects_no_profile(home, tmp_path):
    from tests.fake_messages_api import FakeMessagesAPI

    pytest.importorskip("anthropic")
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("We chose WAL mode.", encoding="utf-8")
    with FakeMessagesAPI() as api:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
        env.update(ANTHROPIC_API_KEY="k", MODEL_ID="m-test", ANTHROPIC_BASE_URL=api.url)
        done = subprocess.run([sys.executable, "-m", "labmem.cli", "chat", "--workdir",
                               str(work)], input="What did we decide?\n", env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no hits in 0 records" in done.stdout  # the model's recall found nothing
    assert "remote_profile" not in api.requests[0]["body"]["system"]  # no invented profile
    assert not home.exists()


def test_chat_with_examples_adds_them_because_it_was_asked(home, tmp_path):
    from tests.fake_messages_api import FakeMessagesAPI

    pytest.importorskip("anthropic")
    with FakeMessagesAPI() as api:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
        env.update(ANTHROPIC_API_KEY="k", MODEL_ID="m-test", ANTHROPIC_BASE_URL=api.url)
        done = subprocess.run([sys.executable, "-m", "labmem.cli", "chat", "--workdir",
                               str(tmp_path), "--with-examples"], input="", env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert {r["memory_id"] for r in stored(home)} == EXAMPLE_IDS


def test_mcp_server_on_an_empty_home_keeps_exactly_what_the_host_wrote(tmp_path):
    pytest.importorskip("mcp")
    from labmem.agents import call_server, server_command

    home = tmp_path / "home"
    run = call_server(server_command(home, user_id="alice", workspace_id="w",
                                     at="2026-08-01T12:00:00Z"),
                      [("recall_history", {"query": "SQLite WAL", "limit": 3}),
                       ("remember_record", RECORD),
                       ("recall_history", {"query": "SQLite WAL", "limit": 3})])
    assert not any(r.is_error for r in run.replies)
    before, _, after = (r.data for r in run.replies)
    assert before["hits"] == [] and before["searched_records"] == 0
    assert [h["memory_id"] for h in after["hits"]] == [run.replies[1].data["memory_id"]]
    assert [(r["content"], r["source"]) for r in stored(home, "alice")] == [
        (RECORD["content"], SOURCE)]
    assert files_with_bytes(home) == [f"remote-memory/{scope_digest('alice')}.jsonl"]


def test_the_toolbox_in_process_keeps_exactly_what_was_written(tmp_path):
    pytest.importorskip("jsonschema")
    from labmem.agents import MemoryToolbox

    home = tmp_path / "home"
    box = MemoryToolbox(home, user_id="alice", workspace_id="w")
    assert box.call("recall_history", {"query": "profile answers"})["searched_records"] == 0
    assert box.remote.store.latest_profile() is None  # no profile nobody said
    box.call("remember_record", RECORD)
    assert [r["content"] for r in stored(home, "alice")] == [RECORD["content"]]
    assert files_with_bytes(home) == [f"remote-memory/{scope_digest('alice')}.jsonl"]


def test_examples_add_is_the_way_to_ask_and_keeps_what_was_there(home, capsys):
    store = RemoteMemoryStore(home / "remote-memory" / f"{scope_digest('learner')}.jsonl",
                              user_id="learner")
    store.append(**RECORD)
    assert main(["examples", "add"]) == 0
    assert "added 7 example records" in capsys.readouterr().out
    ids = [r["memory_id"] for r in stored(home)]
    assert len(ids) == 1 + len(EXAMPLE_IDS) and set(ids[1:]) == EXAMPLE_IDS
    assert stored(home)[0]["content"] == RECORD["content"]
