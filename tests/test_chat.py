"""`labmem chat`: the real SDK against a local Messages API server; clear start-up errors."""

import os
import subprocess
import sys

import pytest

from labmem.chat import AgentLoop, ChatConfigError, read_workspace_file, runtime_client, tool_log
from labmem.core.errors import LabmemError
from labmem.core.text import estimate_tokens
from labmem.recall.tool import default_runtime
from tests.fake_messages_api import FakeMessagesAPI


@pytest.fixture
def examples_home(tmp_path, monkeypatch):
    """A home whose store holds the chapter's example records, added by asking for them (the
    scripted model quotes the first hit, so its recall must find one)."""
    home = tmp_path / "home"
    monkeypatch.setenv("LABMEM_HOME", str(home))
    default_runtime(with_examples=True)
    return home


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("We chose WAL mode.", encoding="utf-8")
    return work


def test_loop_round_trips_tools_through_the_real_sdk(workdir, examples_home):
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
                               str(workdir), "--with-examples"], input="What did we decide?\n",
                              env=env,
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
    assert default_runtime().store.is_empty()  # no profile nobody wrote
    assert not (tmp_path / "home").exists()


# -- issue 20: the limit is the library's, the request is booked, long views are compacted --

@pytest.mark.parametrize("limit", [2.7, "3", True, 0, 11, None])
def test_a_bad_recall_limit_is_refused_exactly_like_the_library(workdir, tmp_path, monkeypatch,
                                                                limit):
    from labmem.recall import RecallQueryError, recall_history

    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    with pytest.raises(RecallQueryError) as library:
        default_runtime().engine.recall("SQLite persistence", limit=limit)
    with pytest.raises(RecallQueryError) as tool:
        recall_history("SQLite persistence", limit)
    assert str(tool.value) == str(library.value) and "limit" in str(tool.value)
    loop = AgentLoop(client=None, model="m", workdir=workdir)
    output, failed = loop._run_tool("recall_history", {"query": "SQLite persistence",
                                                       "limit": limit})
    assert failed and output == f"RecallQueryError: {library.value}"


def test_each_call_is_booked_and_compared_with_the_reported_usage(workdir, examples_home):
    with FakeMessagesAPI() as api:
        client, model = runtime_client({"ANTHROPIC_API_KEY": "k", "MODEL_ID": "m-test",
                                        "ANTHROPIC_BASE_URL": api.url})
        loop = AgentLoop(client, model, workdir=workdir, memory="<profile>likes tea</profile>")
        loop.ask("What did we decide about persistence?")
    assert len(loop.ledgers) == len(api.requests) == 3
    first, _, last = loop.ledgers
    assert first.memory == estimate_tokens("<profile>likes tea</profile>")
    assert last.memory > first.memory  # the recall result in the view is memory
    assert last.history > first.history
    assert all(ledger.actual_input is not None and ledger.estimate_error is not None
               for ledger in loop.ledgers)
    assert api.requests[0]["body"]["system"].endswith("<profile>likes tea</profile>")
    assert loop.compactions == []  # 200k tokens: nothing to compact


def test_a_long_single_task_is_compacted_before_the_call_that_would_crowd_memory(
        workdir, examples_home):
    from labmem.context import estimate_messages_tokens, validate_tool_protocol

    history = [{"role": "user", "content": "Port the module and keep the tests green."}]
    for r in range(30):
        history += [{"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{r}", "name": "read_file",
             "input": {"path": f"m{r}.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{r}",
                                          "content": f"file {r} " + "x" * 800}]}]
    with FakeMessagesAPI() as api:
        client, model = runtime_client({"ANTHROPIC_API_KEY": "k", "MODEL_ID": "m-test",
                                        "ANTHROPIC_BASE_URL": api.url})
        loop = AgentLoop(client, model, workdir=workdir, context_limit=6_000, max_tokens=300,
                         min_memory_tokens=1_000)
        loop.messages = list(history)
        before = loop.plan()
        assert before.needs_compaction(1_000)
        loop.ask("Now summarize what you found.")
    assert loop.compactions and estimate_messages_tokens(history) > 6_000
    booked = loop.ledgers[0]
    assert booked.fits and not booked.needs_compaction(1_000)
    sent = api.requests[0]["body"]["messages"]
    validate_tool_protocol(sent)
    assert sent[0]["content"] == history[0]["content"]
    assert sent[-1]["content"] == "Now summarize what you found."


def test_a_recall_is_cut_to_the_room_the_request_has_left(workdir):
    calls = []

    def recall(query, *, limit):
        calls.append(limit)
        return "{" + "h" * 800 * limit + "}"

    loop = AgentLoop(client=None, model="m", workdir=workdir, recall=recall,
                     context_limit=1_200, max_tokens=100, min_memory_tokens=0)
    room = loop.plan().free
    output, failed = loop._run_tool("recall_history", {"query": "q", "limit": 5})
    assert not failed and estimate_tokens(output) <= room and calls == [5, 4]
    tight = AgentLoop(client=None, model="m", workdir=workdir, recall=recall,
                      context_limit=500, max_tokens=100, min_memory_tokens=0)
    output, failed = tight._run_tool("recall_history", {"query": "q", "limit": 2})
    assert failed and output.startswith("NoMemoryRoomError: no room for recalled memory")


def test_a_window_too_small_for_the_fixed_parts_fails_at_start(workdir):
    with pytest.raises(ChatConfigError, match="context_limit 300 cannot hold"):
        AgentLoop(client=None, model="m", workdir=workdir, context_limit=300, max_tokens=100)
    with pytest.raises(LabmemError, match="output_reserve"):
        AgentLoop(client=None, model="m", workdir=workdir, context_limit=1_000, max_tokens=1_000)
