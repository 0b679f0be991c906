"""The chapter's scripted runs: what a model does with its memory, turn by turn.

:data:`MEMORY_TOOL_TURNS` is a conversation a model could have with the memory tool:
look, create a file, edit it, insert a line, read it back, try to escape ``/memories``
(refused), rename, delete, and answer. The local server plays it back; the SDK's tool
runner executes each command against a labmem backend.
"""

from __future__ import annotations

from typing import Any


def _use(n: int, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n:02d}", "name": "memory", "input": command}


MEMORY_TOOL_TURNS: tuple[list[dict[str, Any]], ...] = (
    [{"type": "text", "text": "I will check my memory first."},
     _use(1, command="view", path="/memories")],
    [_use(2, command="create", path="/memories/project/decisions.md",
          file_text="# Decisions\n- storage: JSON files\n")],
    [_use(3, command="str_replace", path="/memories/project/decisions.md",
          old_str="JSON files", new_str="SQLite in WAL mode")],
    [_use(4, command="insert", path="/memories/project/decisions.md", insert_line=2,
          insert_text="- tests: real subprocesses for concurrency\n")],
    [_use(5, command="view", path="/memories/project/decisions.md")],
    [_use(6, command="view", path="/memories/../../etc/passwd"),
     _use(7, command="create", path="/etc/cron.d/evil", file_text="* * * * * root true\n")],
    [_use(8, command="create", path="/memories/scratch.md", file_text="temporary\n")],
    [_use(9, command="rename", old_path="/memories/scratch.md",
          new_path="/memories/project/scratch.md")],
    [_use(10, command="delete", path="/memories/project/scratch.md")],
    [{"type": "text", "text": "Noted: SQLite in WAL mode; tests use real subprocesses."}],
)
