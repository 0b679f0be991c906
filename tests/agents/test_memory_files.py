"""The /memories backend: containment, atomic writes, limits, the command log, undo."""

import os
import subprocess
import sys
from datetime import timedelta

import pytest

from labmem.agents import (
    MAX_FILE_CHARS,
    MemoryDirectory,
    MemoryLimitError,
    MemoryPathError,
    MemoryScopeError,
    MemoryToolError,
)
from labmem.core.clock import SteppingClock


@pytest.fixture
def memories(tmp_path):
    return MemoryDirectory(tmp_path, user_id="alice",
                           clock=SteppingClock("2026-08-01T12:00:00Z", timedelta(seconds=1)))


def files(m):
    return {p.relative_to(m.tree).as_posix(): p.read_text() for p in sorted(m.tree.rglob("*"))
            if p.is_file()}


def test_the_six_commands(memories):
    run = memories.execute
    run({"command": "create", "path": "/memories/a/notes.md", "file_text": "one\ntwo\n"})
    run({"command": "str_replace", "path": "/memories/a/notes.md", "old_str": "two",
         "new_str": "2"})
    run({"command": "insert", "path": "/memories/a/notes.md", "insert_line": 0,
         "insert_text": "zero"})
    assert files(memories) == {"a/notes.md": "zero\none\n2\n"}
    assert run({"command": "view", "path": "/memories/a/notes.md", "view_range": [2, -1]}) == \
        "/memories/a/notes.md with line numbers:\n     2\tone\n     3\t2"
    run({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"})
    assert "11\t/memories/b/notes.md" in run({"command": "view", "path": "/memories"})
    run({"command": "delete", "path": "/memories/b"})
    assert files(memories) == {} and not (memories.tree / "b").exists()


@pytest.mark.parametrize("path", [
    "/memories/../secret", "/memories/a/../../x", "/etc/passwd", "memories/x", "/memoriesX/y",
    "/memories//x", "/memories/./x", "/memories/.hidden", "/memories/a\\..\\b", "",
    "/memories/a\x00b", 42, None, "/memories/" + "d/" * 7 + "f",
])
def test_paths_that_are_not_contained_are_refused(memories, path):
    with pytest.raises(MemoryPathError):
        memories.execute({"command": "create", "path": path, "file_text": "x"})
    assert files(memories) == {}
    assert memories.history()[-1].outcome == "refused"


def test_symlinks_are_never_followed(memories, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, memories.tree / "link")
    os.symlink(outside / "secret.txt", memories.tree / "file-link")
    for command in ({"command": "view", "path": "/memories/link/secret.txt"},
                    {"command": "view", "path": "/memories/file-link"},
                    {"command": "create", "path": "/memories/link/new.txt", "file_text": "x"},
                    {"command": "delete", "path": "/memories/link"}):
        with pytest.raises(MemoryPathError, match="symbolic link"):
            memories.execute(command)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert "secret" not in memories.execute({"command": "view", "path": "/memories"})


def test_limits_refuse_before_writing(memories, monkeypatch):
    with pytest.raises(MemoryLimitError):
        memories.execute({"command": "create", "path": "/memories/big.md",
                          "file_text": "x" * (MAX_FILE_CHARS + 1)})
    monkeypatch.setattr("labmem.agents.memory_files.MAX_FILES", 2)
    for i in range(2):
        memories.execute({"command": "create", "path": f"/memories/{i}.md", "file_text": "x"})
    with pytest.raises(MemoryLimitError, match="files"):
        memories.execute({"command": "create", "path": "/memories/2.md", "file_text": "x"})
    assert sorted(files(memories)) == ["0.md", "1.md"]


@pytest.mark.parametrize("command, says", [
    ({"command": "str_replace", "path": "/memories/n.md", "old_str": "a", "new_str": "b"},
     "appears 2 times"),
    ({"command": "str_replace", "path": "/memories/n.md", "old_str": "zz", "new_str": "b"},
     "does not appear"),
    ({"command": "insert", "path": "/memories/n.md", "insert_line": 9, "insert_text": "b"},
     "insert_line"),
    ({"command": "create", "path": "/memories/n.md", "file_text": "b"}, "already exists"),
    ({"command": "delete", "path": "/memories"}, "cannot be deleted"),
    ({"command": "view", "path": "/memories/missing.md"}, "does not exist"),
    ({"command": "format_disk"}, "not a memory command"),
    ({"command": "create", "path": "/memories/x.md", "file_text": 5}, "file_text"),
])
def test_refusals_leave_the_tree_alone(memories, command, says):
    memories.execute({"command": "create", "path": "/memories/n.md", "file_text": "a\na\n"})
    with pytest.raises(MemoryToolError, match=says):
        memories.execute(command, tool_use_id="toolu_x")
    assert files(memories) == {"n.md": "a\na\n"}
    last = memories.history()[-1]
    assert (last.outcome, last.tool_use_id, last.before, last.after) == \
        ("refused", "toolu_x", {}, {})


def test_the_log_records_every_command_and_undo_walks_back(memories):
    run = memories.execute
    run({"command": "create", "path": "/memories/n.md", "file_text": "v1\n"}, tool_use_id="t1")
    run({"command": "str_replace", "path": "/memories/n.md", "old_str": "v1", "new_str": "v2"},
        tool_use_id="t2")
    run({"command": "delete", "path": "/memories/n.md"}, tool_use_id="t3")
    log = MemoryDirectory(memories.directory.parents[1], user_id="alice").history()
    assert [(c.seq, c.tool_use_id, c.command) for c in log] == \
        [(1, "t1", "create"), (2, "t2", "str_replace"), (3, "t3", "delete")]
    assert log[2].before == {"/memories/n.md": "v2\n"} and log[0].arguments["file_text"] == \
        "<3 characters>"
    assert [c.at.isoformat() for c in log][:2] == ["2026-08-01T12:00:00+00:00",
                                                   "2026-08-01T12:00:01+00:00"]
    with pytest.raises(MemoryToolError, match="has changed since"):
        memories.undo(1)
    memories.undo(3)
    assert files(memories) == {"n.md": "v2\n"}
    memories.undo(2)
    assert files(memories) == {"n.md": "v1\n"}
    assert memories.history()[-1].command == "undo"


def test_one_tree_per_user(tmp_path):
    alice = MemoryDirectory(tmp_path, user_id="alice")
    bob = MemoryDirectory(tmp_path, user_id="bob")
    alice.execute({"command": "create", "path": "/memories/a.md", "file_text": "alice's"})
    assert "a.md" not in bob.execute({"command": "view", "path": "/memories"})
    (bob.directory / "commands.jsonl").write_bytes(
        (alice.directory / "commands.jsonl").read_bytes())
    with pytest.raises(MemoryScopeError):
        MemoryDirectory(tmp_path, user_id="bob")


WRITER = """
import sys
from labmem.agents import MemoryDirectory
m = MemoryDirectory(sys.argv[1], user_id="alice")
for i in range(15):
    m.execute({"command": "create", "path": f"/memories/{sys.argv[2]}-{i}.md",
               "file_text": "x"}, tool_use_id=f"{sys.argv[2]}-{i}")
"""


def test_two_processes_share_one_log_without_losing_a_line(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), who])
             for who in "ab"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    log = MemoryDirectory(tmp_path, user_id="alice").history()
    assert [c.seq for c in log] == list(range(1, 31))
    assert sorted(c.tool_use_id for c in log) == sorted(f"{w}-{i}" for w in "ab"
                                                        for i in range(15))
