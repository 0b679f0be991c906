"""The memory tool keeps its own rules: every limit is checked before anything is written,
every refusal is a labmem error naming the field and the fix, and the log says ``ok``
only for what happened."""

from __future__ import annotations

import errno
import os

import pytest

from labmem.agents import (
    MemoryArgumentError,
    MemoryDirectory,
    MemoryLimitError,
    MemoryPathError,
    MemoryToolError,
)
from labmem.core.errors import LabmemError


@pytest.fixture
def memories(tmp_path):
    return MemoryDirectory(tmp_path, user_id="alice")


def run(memories, **command):
    return memories.execute(command)


def on_disk(memories):
    return sorted(os.path.relpath(os.path.join(top, name), memories.tree)
                  for top, dirs, names in os.walk(memories.tree) for name in dirs + names)


def last(memories):
    return memories.history()[-1]


# -- names -----------------------------------------------------------------------------

def test_a_long_multibyte_name_is_created_not_a_raw_os_error(memories):
    name = "中" * 81 + ".md"  # 246 bytes: a legal name, but not with a temp-file prefix
    assert run(memories, command="create", path=f"/memories/{name}", file_text="x\n") == \
        f"Created /memories/{name}"
    assert on_disk(memories) == [name] and last(memories).outcome == "ok"


def test_a_name_past_the_byte_limit_is_refused_before_logging_ok(memories):
    path = "/memories/" + "中" * 86  # 86 characters, 258 bytes: past NAME_MAX
    with pytest.raises(MemoryPathError, match="bytes"):
        run(memories, command="create", path=path, file_text="x\n")
    assert on_disk(memories) == [] and last(memories).outcome == "refused"


@pytest.mark.parametrize("char", ["\x85", "\x80", "\x9f", "\u202e", "\u2028", "\u200b"])
def test_c1_controls_and_invisible_characters_are_refused_in_names(memories, char):
    with pytest.raises(MemoryPathError, match="control"):
        run(memories, command="create", path=f"/memories/a{char}b.md", file_text="x\n")
    assert on_disk(memories) == []


def test_create_with_a_trailing_slash_does_not_create_a_file(memories):
    with pytest.raises(MemoryPathError, match="names a directory"):
        run(memories, command="create", path="/memories/notes/", file_text="x\n")
    assert on_disk(memories) == [] and last(memories).outcome == "refused"


# -- inputs ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", [["view"], {"view": 1}, 7, None])
def test_a_command_that_is_not_a_string_is_a_refusal(memories, name):
    with pytest.raises(MemoryToolError, match="not a memory command"):
        memories.execute({"command": name, "path": "/memories"})
    assert last(memories).outcome == "refused"


def test_a_list_command_through_the_sdk_tool_is_a_tool_error(memories):
    pytest.importorskip("anthropic")
    from anthropic.lib.tools import ToolError

    from labmem.agents import LabmemMemoryTool

    with pytest.raises(ToolError, match="not a memory command"):
        LabmemMemoryTool(memories).call({"command": ["view"]})


def test_a_user_id_with_a_lone_surrogate_is_refused_by_name(tmp_path):
    with pytest.raises(MemoryArgumentError, match="user_id.*surrogate"):
        MemoryDirectory(tmp_path, user_id="al\ud800ice")
    assert not (tmp_path / "memory-tool").exists()


def test_odd_argument_keys_and_surrogates_are_logged_not_raised(memories):
    with pytest.raises(MemoryToolError):
        memories.execute({"command": "view", "path": "/memories/a\ud800", 3: object()})
    assert last(memories).outcome == "refused"


# -- str_replace -----------------------------------------------------------------------

def test_overlapping_matches_count_as_more_than_one(memories):
    run(memories, command="create", path="/memories/n.md", file_text="aaa\n")
    with pytest.raises(MemoryToolError, match="appears 2 times"):
        run(memories, command="str_replace", path="/memories/n.md", old_str="aa", new_str="b")
    assert (memories.tree / "n.md").read_text() == "aaa\n"


# -- renames keep depth and length ------------------------------------------------------

def test_a_rename_cannot_push_a_file_past_the_depth_limit(memories):
    run(memories, command="create", path="/memories/a/b/c/d/e/f.md", file_text="deep\n")
    run(memories, command="create", path="/memories/x/y/z.md", file_text="z\n")
    before = on_disk(memories)
    with pytest.raises(MemoryLimitError, match="deeper than 6"):
        run(memories, command="rename", old_path="/memories/a", new_path="/memories/x/y/a")
    assert on_disk(memories) == before and last(memories).outcome == "refused"


def test_a_rename_cannot_push_a_path_past_its_length_limit(memories):
    long = "n" * 95
    run(memories, command="create", path=f"/memories/{long}/{long}.md", file_text="x\n")
    run(memories, command="create", path=f"/memories/{long[:-1]}m/keep.md", file_text="x\n")
    before = on_disk(memories)
    with pytest.raises(MemoryLimitError, match="characters"):
        run(memories, command="rename", old_path=f"/memories/{long}",
            new_path=f"/memories/{long[:-1]}m/{long}")
    assert on_disk(memories) == before
    for path in before:  # every file still has a memory path the tool accepts
        if path.endswith(".md"):
            run(memories, command="view", path=f"/memories/{path}")


def test_renaming_a_file_onto_a_directory_path_is_refused(memories):
    run(memories, command="create", path="/memories/a.md", file_text="x\n")
    with pytest.raises(MemoryPathError, match="names a directory"):
        run(memories, command="rename", old_path="/memories/a.md", new_path="/memories/b/")
    assert on_disk(memories) == ["a.md"]


# -- delete ----------------------------------------------------------------------------

def plant_deep_tree(tree, depth=40, name="d" * 120):
    """``/memories/deep/`` over a directory chain whose host path is longer than
    PATH_MAX (made by descriptors, as another program could)."""
    os.mkdir(tree / "deep")
    fd = os.open(tree / "deep", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            deeper = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        os.close(os.open("leaf.md", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)


def test_deleting_a_tree_deeper_than_path_max_works_and_logs_ok_after(memories):
    plant_deep_tree(memories.tree)
    assert run(memories, command="delete", path="/memories/deep") == "Deleted /memories/deep"
    assert on_disk(memories) == [] and last(memories).outcome == "ok"


def test_a_failed_write_is_logged_as_refused_never_ok(memories, monkeypatch):
    import labmem.agents.memory_files as memory_files

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(memory_files, "write_file", full_disk)
    with pytest.raises(MemoryToolError, match="No space left"):
        run(memories, command="create", path="/memories/a/n.md", file_text="x\n")
    assert on_disk(memories) == []  # the directory made for it is gone again
    assert [c.outcome for c in memories.history()] == ["refused"]


# -- limits ----------------------------------------------------------------------------

def test_undoing_a_delete_cannot_take_the_tree_past_its_size_limit(memories, monkeypatch):
    monkeypatch.setattr("labmem.agents.memory_files.MAX_TREE_BYTES", 100)
    run(memories, command="create", path="/memories/a.md", file_text="a" * 60)
    run(memories, command="delete", path="/memories/a.md")
    run(memories, command="create", path="/memories/b.md", file_text="b" * 60)
    with pytest.raises(MemoryLimitError, match="bytes"):
        memories.undo(2)
    assert on_disk(memories) == ["b.md"]


def test_a_huge_directory_listing_is_bounded_and_says_so(memories):
    fd = os.open(memories.tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(30_000):  # planted by another program: the tool caps at 200 files
            os.close(os.open(f"f{i:06d}.md", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)
    answer = run(memories, command="view", path="/memories")
    assert len(answer) < 60_000 and "listing cut" in answer
    assert "/memories/f000000.md" in answer


def test_every_refusal_is_a_labmem_error(memories):
    for command in ({"command": "view", "path": ["x"]}, {"command": "view", "view_range": 3},
                    {"command": "insert", "path": "/memories/x", "insert_line": True},
                    {"command": "rename", "old_path": "/memories/", "new_path": None}):
        with pytest.raises(LabmemError):
            memories.execute(command)
