"""The memory tool under a race: another process swaps a directory inside /memories for a
symlink to the outside, in a loop, while the tool runs thousands of commands through it.

Nothing outside the tree may ever be read, written or removed: every command resolves its
path one name at a time from a descriptor of the tree (``O_NOFOLLOW`` at each step), so
there is no moment between a check and a use for the swap to slip into. The old code
(``lstat`` walk + ``realpath``, then open by path) leaked within a few hundred tries.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from labmem.agents import MemoryDirectory, MemoryToolError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX descriptors")

COMMANDS_PER_TEST = 2_000  # tries of each command (a create/delete pair: 1,000 of each)
SECRET = "SECRET-OUTSIDE-TEXT"

# Swaps the names "d" (a real directory) and "lnk" (a link to the outside) with
# renameat2(RENAME_EXCHANGE), so "d" is always there, now a directory, now the link;
# where the C library lacks it, renames and a symlink do the same, less atomically.
SWAPPER = r"""
import ctypes, itertools, os, sys
tree, outside = sys.argv[1], sys.argv[2]
d, lnk, parked = os.path.join(tree, "d"), os.path.join(tree, "lnk"), os.path.join(tree, "p")
os.symlink(outside, lnk)
try:
    call = ctypes.CDLL(None, use_errno=True).renameat2
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    a, b = os.fsencode(d), os.fsencode(lnk)
    exchange = call(-100, a, -100, b, 2) == 0 and call(-100, a, -100, b, 2) == 0
except (OSError, AttributeError):
    exchange = False
print("ready", flush=True)
parent = os.getppid()
for n in itertools.count():  # until killed, or orphaned
    if n % 4096 == 0 and os.getppid() != parent:
        break  # the test process is gone: never spin on a shared machine
    if exchange:
        call(-100, a, -100, b, 2)
    else:
        try:
            os.rename(d, parked); os.symlink(outside, d); os.unlink(d); os.rename(parked, d)
        except OSError:
            pass
"""


@pytest.fixture
def arena(tmp_path, monkeypatch):
    """A tree with /memories/d/f.md, an outside directory that mirrors it (plus a secret),
    and a swapper process; fsync is skipped (durability is not what is tested here)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    memories = MemoryDirectory(tmp_path / "home", user_id="alice")
    memories.execute({"command": "create", "path": "/memories/d/f.md", "file_text": "note: A\n"})
    memories.execute({"command": "create", "path": "/memories/d/a.md", "file_text": "a\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, text in (("f.md", f"note: A\n{SECRET}\n"), ("a.md", f"a\n{SECRET}\n"),
                       ("gone.md", f"{SECRET}\n"), ("secret.md", f"{SECRET}\n")):
        (outside / name).write_text(text)
    snapshot = _state(outside)
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(memories.tree),
                                str(outside)], stdout=subprocess.PIPE, text=True)
    assert swapper.stdout.readline().strip() == "ready"

    def stop():
        """Stop the swapper and put the directory back under its name."""
        if swapper.poll() is None:
            swapper.kill()
            swapper.wait(timeout=30)
        d = memories.tree / "d"
        if d.is_symlink():  # stopped mid-swap
            d.unlink()
            os.rename(memories.tree / "lnk", d)

    try:
        yield memories, outside, snapshot, stop
    finally:
        stop()


def _state(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _hammer(arena, commands, check=None):
    """Run ``commands(i)`` until COMMANDS_PER_TEST commands ran; after each try, nothing
    outside has changed."""
    memories, outside, snapshot, stop = arena
    started, outcomes = time.monotonic(), {"ok": 0, "refused": 0}
    for i in range(COMMANDS_PER_TEST // len(commands(0))):
        for command in commands(i):
            try:
                answer = memories.execute(command)
            except MemoryToolError as exc:
                answer = str(exc)
                outcomes["refused"] += 1
            else:
                outcomes["ok"] += 1
            assert SECRET not in answer, f"try {i}: {command['command']} read outside text"
            if check is not None:
                check(answer)
        assert _state(outside) == snapshot, f"try {i}: {commands(i)} changed the outside"
    assert time.monotonic() - started < 600  # a hang, not a slow machine
    stop()
    assert memories.verify_log() == len(memories.history())  # the log kept up, too
    # what was read is what the log keeps (before-images) and what edits wrote back
    assert SECRET not in (memories.directory / "commands.jsonl").read_text()
    inside = [os.path.join(top, name) for top, _, names in os.walk(memories.tree)
              for name in names]  # os.walk never follows the swapped-in link
    assert not [p for p in inside if not os.path.islink(p) and SECRET in open(p).read()]
    return outcomes


def test_view_never_reads_outside(arena):
    outcomes = _hammer(arena, lambda i: [
        {"command": "view", "path": "/memories/d/f.md" if i % 2 else "/memories/d"}],
        check=lambda answer: (pytest.fail(f"listed the outside: {answer}")
                              if "secret.md" in answer or "gone.md" in answer else None))
    assert outcomes["ok"] and outcomes["refused"], outcomes  # the race really happened


def test_create_never_writes_outside(arena):

    def commands(i):
        return [{"command": "create", "path": f"/memories/d/new-{i}.md", "file_text": "x\n"},
                {"command": "delete", "path": f"/memories/d/new-{i}.md"}]

    outcomes = _hammer(arena, commands)
    assert outcomes["ok"], outcomes


def test_str_replace_never_edits_outside(arena):
    outcomes = _hammer(arena, lambda i: [
        {"command": "str_replace", "path": "/memories/d/f.md",
         "old_str": "note: A" if i % 2 == 0 else "note: B",
         "new_str": "note: B" if i % 2 == 0 else "note: A"}])
    assert outcomes["ok"], outcomes


def test_insert_never_edits_outside(arena):
    outcomes = _hammer(arena, lambda i: [
        {"command": "insert", "path": "/memories/d/f.md", "insert_line": 0,
         "insert_text": "x"}])
    assert outcomes["ok"], outcomes


def test_delete_never_removes_outside(arena):

    def commands(i):
        return [{"command": "create", "path": "/memories/d/gone.md", "file_text": "in\n"},
                {"command": "delete", "path": "/memories/d/gone.md"}]

    outcomes = _hammer(arena, commands)
    assert outcomes["ok"], outcomes


def test_rename_never_moves_outside(arena):
    names = ("/memories/d/a.md", "/memories/d/b.md")

    def commands(i):
        return [{"command": "rename", "old_path": names[i % 2], "new_path": names[1 - i % 2]},
                {"command": "rename", "old_path": names[1 - i % 2], "new_path": names[i % 2]}]

    outcomes = _hammer(arena, commands)
    assert outcomes["ok"], outcomes


def test_a_directory_delete_never_removes_outside(arena):

    def commands(i):
        return [{"command": "create", "path": "/memories/d/sub/gone.md", "file_text": "in\n"},
                {"command": "delete", "path": "/memories/d/sub"}]

    outcomes = _hammer(arena, commands)
    assert outcomes["ok"], outcomes
