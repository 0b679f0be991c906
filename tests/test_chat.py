"""`labmem chat`: the real SDK against a local Messages API server; clear start-up errors."""

import os
import subprocess
import sys

import pytest

from labmem.chat import AgentLoop, ChatConfigError, read_workspace_file, runtime_client, tool_log
from labmem.recall.tool import default_runtime
from tests.fake_messages_api import FakeMessagesAPI


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("We chose WAL mode.", encoding="utf-8")
    return work


def test_loop_round_trips_tools_through_the_real_sdk(workdir, tmp_path, monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    with FakeMessagesAPI() as api:
        client, model = runtime_client({"ANTHROPIC_API_KEY": "test-key", "MODEL_ID": "m-test",
                                        "ANTHROPIC_BASE_URL": api.url})
        loop = AgentLoop(client, model, workdir=workdir)
        answer = loop.ask("What did we decide about persistence?")
    assert answer == "Answer based on conversation-002 and We chose WAL mode."
    assert [c["name"] for c in tool_log(loop)] == ["recall_history", "read_file"]
    assert len(api.requests) == 3
    assert all(r["path"] == "/v1/messages" and r["api_key"] == "test-key" for r in api.requests)
    first = api.requests[0]["body"]
    assert first["model"] == "m-test"
    assert {t["name"] for t in first["tools"]} == {"recall_history", "read_file"}
    last = api.requests[-1]["body"]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]


def test_chat_command_end_to_end(workdir, tmp_path):
    with FakeMessagesAPI() as api:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
        env.update(ANTHROPIC_API_KEY="test-key", MODEL_ID="m-test", ANTHROPIC_BASE_URL=api.url,
                   LABMEM_HOME=str(tmp_path / "home"))
        done = subprocess.run([sys.executable, "-m", "labmem.cli", "chat", "--workdir",
                               str(workdir)], input="What did we decide?\n", env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "assistant> Answer based on conversation-002 and We chose WAL mode." in done.stdout
    system = api.requests[0]["body"]["system"]
    assert '<remote_profile memory_id="profile-001"' in system


@pytest.mark.parametrize("env, says", [
    ({"MODEL_ID": "m"}, "set ANTHROPIC_API_KEY"),
    ({"ANTHROPIC_API_KEY": "k"}, "set MODEL_ID"),
    ({"ANTHROPIC_API_KEY": "k", "MODEL_ID": "  "}, "set MODEL_ID"),
])
def test_missing_configuration_is_one_clear_sentence(env, says):
    with pytest.raises(ChatConfigError, match=says):
        runtime_client(env)


def test_missing_sdk_fails_at_start_and_labmem_still_imports(tmp_path):
    code = ("import sys; sys.modules['anthropic'] = None\n"
            "import labmem, labmem.chat\n"
            "from labmem.cli import main\n"
            "sys.exit(main(['chat']))\n")
    env = {**os.environ, "ANTHROPIC_API_KEY": "k", "MODEL_ID": "m", "LABMEM_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == ("labmem: error: labmem chat needs the anthropic SDK: install "
                                   "the online extra with pip install -e '.[online]'")


def test_read_file_is_confined(workdir, tmp_path):
    (tmp_path / "outside.txt").write_text("secret")
    (workdir / "link.txt").symlink_to(tmp_path / "outside.txt")
    inner = workdir / "sub"
    inner.mkdir()
    assert read_workspace_file("notes.txt", workdir) == "We chose WAL mode."
    for path in ("../outside.txt", str(tmp_path / "outside.txt")):
        with pytest.raises(PermissionError):
            read_workspace_file(path, inner)
    with pytest.raises(PermissionError):
        read_workspace_file("link.txt", workdir)


def test_tool_errors_go_back_to_the_model(workdir, tmp_path, monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    loop = AgentLoop(client=None, model="m", workdir=workdir)
    output, failed = loop._run_tool("read_file", {"path": "../../etc/passwd"})
    assert failed and output.startswith("PermissionError")
    output, failed = loop._run_tool("recall_history", {"query": "   "})
    assert failed and "must not be empty" in output
    assert default_runtime().store.latest_profile() is not None
