"""The ``/memories`` tree of the Messages API memory tool, with labmem's guarantees.

The model asks for six commands (``view``, ``create``, ``str_replace``, ``insert``,
``delete``, ``rename``) on paths under ``/memories``; the client runs them. Here a
:class:`MemoryDirectory` runs them under a labmem home, one tree per user scope::

    <home>/memory-tool/<user scope>/memories/...     the files the model sees
    <home>/memory-tool/<user scope>/commands.jsonl   every command, refused ones too

Why each rule:

* every path is resolved and contained — only ``/memories`` and names below it, no
  ``.``/``..`` segment, no absolute host path, no backslash or control character, no
  hidden name (``.`` is reserved for labmem's temp files), and no symlink anywhere on
  the way: the model cannot read or write outside its tree;
* a file is replaced atomically (temp file, ``fsync``, rename): a crash leaves the old
  text or the new, never half;
* the log line of a change (with the text it replaced) is durable before the change is
  made visible, so a learner can see what the model did and :meth:`undo` it;
* bounded sizes (per file, per tree, file count, path length, depth): a model cannot
  fill the disk through its memory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError, ScopeError
from labmem.core.provenance import scope_digest
from labmem.core.storage import JsonlLog, write_text_atomic
from labmem.core.validation import require_int, require_text

ROOT = "/memories"
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
MAX_FILE_CHARS = 100_000
MAX_TREE_BYTES = 1_000_000
MAX_FILES = 200
MAX_PATH_CHARS = 255
MAX_NAME_CHARS = 100
MAX_DEPTH = 6
LOG_NAME = "commands.jsonl"
LINE_NUMBER_WIDTH = 6


class MemoryToolError(LabmemError):
    """A memory command could not be carried out (missing file, no match, …)."""


class MemoryPathError(MemoryToolError, InvalidInputError):
    """A path the model gave is not a contained ``/memories`` path."""


class MemoryArgumentError(MemoryToolError, InvalidInputError):
    """A command's field has the wrong type or is out of range."""


class MemoryLimitError(MemoryToolError, InvalidInputError):
    """The command would make a file or the tree larger than its bound."""


class MemoryLogCorruptionError(MemoryToolError, CorruptionError):
    """A complete line of ``commands.jsonl`` cannot be trusted."""


class MemoryScopeError(MemoryToolError, ScopeError):
    """``commands.jsonl`` holds another user's command."""


def text_digest(text: str | None) -> str | None:
    """SHA-256 of a file's text; ``None`` for "no such file"."""
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class MemoryCommand:
    """One line of the command log: what was asked, when, by which tool call, and what
    it changed (``before``: the text each changed file had; ``after``: its new digest)."""

    seq: int
    at: datetime
    user_scope: str
    tool_use_id: str | None
    command: str
    arguments: dict[str, Any]
    outcome: str  # "ok" or "refused"
    message: str
    before: dict[str, str | None] = field(default_factory=dict)
    after: dict[str, str | None] = field(default_factory=dict)

    @property
    def changed(self) -> tuple[str, ...]:
        """The memory paths this command changed, sorted."""
        return tuple(sorted(self.after))

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": format_timestamp(self.at), "user_scope": self.user_scope,
                "tool_use_id": self.tool_use_id, "command": self.command,
                "arguments": self.arguments, "outcome": self.outcome, "message": self.message,
                "before": self.before, "after": self.after}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryCommand:
        return cls(seq=data["seq"], at=parse_timestamp(data["at"], field="at"),
                   user_scope=data["user_scope"], tool_use_id=data["tool_use_id"],
                   command=data["command"], arguments=dict(data["arguments"]),
                   outcome=data["outcome"], message=data["message"],
                   before=dict(data["before"]), after=dict(data["after"]))


@dataclass(frozen=True)
class _Change:
    """What a command will do: its answer, and each file's text before and after."""

    message: str
    before: dict[str, str | None] = field(default_factory=dict)
    after: dict[str, str | None] = field(default_factory=dict)


def _refuse_path(field_name: str, problem: str) -> MemoryPathError:
    return MemoryPathError(field_name, problem,
                           f"use a path under {ROOT}, such as '{ROOT}/notes.md'")


def is_contained_memory_path(path: object) -> bool:
    """Whether ``path`` names ``/memories`` or a name below it by the rules above (no
    ``.``/``..``/empty segment, no hidden, backslash or control-character name, bounded
    length and depth). Symlinks are checked on disk, by :class:`MemoryDirectory`."""
    try:
        split_memory_path(path)
    except MemoryPathError:
        return False
    return True


def split_memory_path(path: Any, field_name: str = "path") -> tuple[str, ...]:
    """The names below ``/memories`` in ``path``; a :class:`MemoryPathError` for anything
    that is not a contained memory path."""
    try:
        require_text(path, field_name, max_chars=MAX_PATH_CHARS)
    except InvalidInputError as exc:
        raise MemoryPathError(exc.field, exc.problem, exc.fix) from None
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise _refuse_path(field_name, f"{path!r} is outside {ROOT}")
    names = path[len(ROOT):].split("/")[1:]
    if names and names[-1] == "":
        names.pop()  # "/memories/notes/" names the directory notes
    for name in names:
        if name in ("", ".", ".."):
            raise _refuse_path(field_name, f"{path!r} has a {name or 'empty'!r} segment; "
                               "paths are never relative")
        if name.startswith("."):
            raise _refuse_path(field_name, f"{name!r} starts with '.', which is reserved")
        if "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise _refuse_path(field_name, f"{name!r} holds a backslash or control character")
        if len(name) > MAX_NAME_CHARS:
            raise _refuse_path(field_name, f"a name is longer than {MAX_NAME_CHARS} characters")
    if len(names) > MAX_DEPTH:
        raise _refuse_path(field_name, f"{path!r} is deeper than {MAX_DEPTH} levels")
    return tuple(names)


def _lines(text: str) -> list[str]:
    """A file's lines; a final newline does not start another line."""
    lines = text.split("\n")  # on "\n" only: U+2028 inside a line stays in it
    return lines[:-1] if lines and lines[-1] == "" else lines


class MemoryDirectory:
    """One user's ``/memories`` tree and command log under a labmem home."""

    def __init__(self, home: str | os.PathLike[str], *, user_id: str,
                 clock: Clock | None = None) -> None:
        self.user_scope = scope_digest(user_id, field="user_id")
        self.clock = resolve_clock(clock)
        self.directory = Path(home) / "memory-tool" / self.user_scope
        self.tree = self.directory / "memories"
        self.tree.mkdir(parents=True, exist_ok=True)
        if self.tree.is_symlink() or not self.tree.is_dir():
            raise MemoryPathError("home", f"{ROOT} must be a real directory",
                                  "remove the link or file that stands in its place")
        self._real_tree = os.path.realpath(self.tree)
        self._log: JsonlLog[MemoryCommand] = JsonlLog(
            self.directory / LOG_NAME, decode=self._decode,
            corruption_error=MemoryLogCorruptionError)
        self._history: list[MemoryCommand] = []
        self._catch_up()

    # -- the log ---------------------------------------------------------------------
    def _decode(self, line: int, obj: dict[str, Any]) -> MemoryCommand:
        try:
            record = MemoryCommand.from_dict(obj)
        except (KeyError, TypeError, ValueError, LabmemError) as exc:
            raise MemoryLogCorruptionError(LOG_NAME, line,
                                           f"not a memory command ({exc})") from None
        if record.user_scope != self.user_scope:
            raise MemoryScopeError(f"{LOG_NAME} line {line} belongs to scope "
                                   f"{record.user_scope!r}, not {self.user_scope!r}")
        return record

    def _catch_up(self) -> None:
        self._history.extend(self._log.refresh())

    def history(self) -> tuple[MemoryCommand, ...]:
        """Every command run so far (other processes' too), oldest first."""
        with self._log.locked():
            self._catch_up()
        return tuple(self._history)

    # -- paths -----------------------------------------------------------------------
    def _parts(self, path: Any, field_name: str) -> tuple[str, ...]:
        return split_memory_path(path, field_name)

    def _resolve(self, path: Any, field_name: str = "path") -> Path:
        """The host path of a memory path: contained, and no symlink on the way."""
        parts = self._parts(path, field_name)
        host = self.tree.joinpath(*parts)
        for depth in range(1, len(parts) + 1):
            try:
                mode = os.lstat(self.tree.joinpath(*parts[:depth])).st_mode
            except FileNotFoundError:
                break  # nothing further exists, so nothing further can be a link
            except NotADirectoryError:
                raise _refuse_path(field_name, f"{path!r} goes through a file") from None
            if stat.S_ISLNK(mode):
                raise _refuse_path(field_name, f"{path!r} goes through a symbolic link; "
                                   "memory paths never follow links")
        real = os.path.realpath(host)
        if real != self._real_tree and not real.startswith(self._real_tree + os.sep):
            raise _refuse_path(field_name, f"{path!r} resolves outside {ROOT}")
        return host

    def _memory_path(self, host: Path) -> str:
        rel = host.relative_to(self.tree).as_posix()
        return ROOT if rel == "." else f"{ROOT}/{rel}"

    def _read(self, host: Path, path: str) -> str:
        fd = os.open(host, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise MemoryToolError(f"{path} is not UTF-8 text; only text files are "
                                  "memory files") from None

    def _file(self, path: Any, field_name: str = "path") -> tuple[Path, str]:
        host = self._resolve(path, field_name)
        if not host.exists():
            raise MemoryToolError(f"{field_name}: {path} does not exist; view {ROOT} to see "
                                  "what is there")
        if not host.is_file():
            raise MemoryToolError(f"{field_name}: {path} is not a file")
        return host, self._read(host, path)

    def _files_under(self, host: Path) -> list[Path]:
        if host.is_file():
            return [host]
        return sorted(p for p in host.rglob("*") if p.is_file() and not p.is_symlink()
                      and not p.name.startswith("."))

    # -- limits ----------------------------------------------------------------------
    def _check_limits(self, texts: Mapping[str, str | None]) -> None:
        """Refuse a change that would break a size bound (before anything is written)."""
        sizes = {self._memory_path(p): p.stat().st_size for p in self._files_under(self.tree)}
        for path, text in texts.items():
            if text is not None and len(text) > MAX_FILE_CHARS:
                raise MemoryLimitError("file_text", f"{path} would hold {len(text):,} "
                                       f"characters, more than {MAX_FILE_CHARS:,}",
                                       "keep memory files short; split or summarize")
            if text is None:
                sizes.pop(path, None)
            else:
                sizes[path] = len(text.encode("utf-8"))
        if len(sizes) > MAX_FILES:
            raise MemoryLimitError("path", f"{ROOT} would hold {len(sizes)} files, more than "
                                   f"{MAX_FILES}", "delete or merge files you no longer need")
        if sum(sizes.values()) > MAX_TREE_BYTES:
            raise MemoryLimitError("file_text", f"{ROOT} would hold {sum(sizes.values()):,} "
                                   f"bytes, more than {MAX_TREE_BYTES:,}",
                                   "delete or shorten files you no longer need")

    # -- the six commands (each returns a _Change; nothing is written here) -------------
    def _view(self, args: Mapping[str, Any]) -> _Change:
        host = self._resolve(args.get("path"))
        path = args["path"]
        if host.is_dir():
            rows = [f"-\t{self._memory_path(host)}/"]
            for item in sorted(host.rglob("*")):
                depth = len(item.relative_to(host).parts)
                if depth > 2 or any(n.startswith(".") for n in item.relative_to(host).parts) \
                        or item.is_symlink():
                    continue
                size = "-" if item.is_dir() else f"{item.stat().st_size}"
                rows.append(f"{size}\t{self._memory_path(item)}{'/' if item.is_dir() else ''}")
            return _Change(f"Directory {path} (bytes, up to 2 levels deep):\n" + "\n".join(rows))
        _, text = self._file(path)
        lines = _lines(text)
        first, last = 1, len(lines)
        view_range = args.get("view_range")
        if view_range is not None:
            if not isinstance(view_range, list) or len(view_range) != 2:
                raise MemoryToolError("view_range: must be [first, last] (last -1: to the end)")
            first = require_int(view_range[0], "view_range[0]", minimum=1)
            last = require_int(view_range[1], "view_range[1]", minimum=-1)
            last = len(lines) if last == -1 else min(last, len(lines))
            if last < first and not (last == len(lines) and first == last + 1):
                raise MemoryToolError(f"view_range: {view_range} is empty or backwards")
        shown = [f"{n:>{LINE_NUMBER_WIDTH}}\t{lines[n - 1]}" for n in range(first, last + 1)]
        return _Change(f"{path} with line numbers:\n" + "\n".join(shown))

    def _create(self, args: Mapping[str, Any]) -> _Change:
        path = args.get("path")
        host = self._resolve(path)
        text = require_text(args.get("file_text"), "file_text", allow_blank=True)
        if not self._parts(path, "path"):
            raise MemoryToolError(f"path: {ROOT} itself is a directory; name a file in it")
        if os.path.lexists(host):
            raise MemoryToolError(f"path: {path} already exists; use str_replace or insert "
                                  "to change it")
        return _Change(f"Created {path}", {path: None}, {path: text})

    def _str_replace(self, args: Mapping[str, Any]) -> _Change:
        path = args.get("path")
        _, text = self._file(path)
        old = require_text(args.get("old_str"), "old_str")
        new = require_text(args.get("new_str"), "new_str", allow_blank=True)
        count = text.count(old)
        if count != 1:
            where = "does not appear" if count == 0 else f"appears {count} times"
            raise MemoryToolError(f"old_str: {old!r} {where} in {path}; give text that "
                                  "appears exactly once")
        return _Change(f"Edited {path}", {path: text}, {path: text.replace(old, new, 1)})

    def _insert(self, args: Mapping[str, Any]) -> _Change:
        path = args.get("path")
        _, text = self._file(path)
        lines = _lines(text)
        at = require_int(args.get("insert_line"), "insert_line", minimum=0,
                         maximum=len(lines))
        new = require_text(args.get("insert_text"), "insert_text", allow_blank=True)
        lines[at:at] = new.rstrip("\n").split("\n")
        return _Change(f"Inserted {len(new.rstrip(chr(10)).split(chr(10)))} line(s) into "
                       f"{path} after line {at}", {path: text}, {path: "\n".join(lines) + "\n"})

    def _delete(self, args: Mapping[str, Any]) -> _Change:
        path = args.get("path")
        host = self._resolve(path)
        if not self._parts(path, "path"):
            raise MemoryToolError(f"path: {ROOT} itself cannot be deleted")
        if not host.exists():
            raise MemoryToolError(f"path: {path} does not exist")
        before = {self._memory_path(p): self._read(p, path) for p in self._files_under(host)}
        return _Change(f"Deleted {path}", before, dict.fromkeys(before))

    def _rename(self, args: Mapping[str, Any]) -> _Change:
        old, new = args.get("old_path"), args.get("new_path")
        old_host = self._resolve(old, "old_path")
        new_host = self._resolve(new, "new_path")
        if not self._parts(old, "old_path") or not self._parts(new, "new_path"):
            raise MemoryToolError(f"old_path: {ROOT} itself cannot be renamed or replaced")
        if not old_host.exists():
            raise MemoryToolError(f"old_path: {old} does not exist")
        if os.path.lexists(new_host):
            raise MemoryToolError(f"new_path: {new} already exists")
        if new_host.is_relative_to(old_host):
            raise MemoryToolError(f"new_path: {new} is inside {old}")
        before: dict[str, str | None] = {}
        after: dict[str, str | None] = {}
        for p in self._files_under(old_host):
            moved = self._memory_path(new_host / p.relative_to(old_host)) \
                if old_host.is_dir() else new
            before[self._memory_path(p)], before[moved] = self._read(p, old), None
            after[self._memory_path(p)], after[moved] = None, before[self._memory_path(p)]
        return _Change(f"Renamed {old} to {new}", before, after)

    # -- running a command -----------------------------------------------------------
    def execute(self, command: Mapping[str, Any], *, tool_use_id: str | None = None) -> str:
        """Run one memory command; return the answer for the model.

        A refused command raises a :class:`MemoryToolError` (its message is what the
        model sees) and is logged as ``refused``; the tree is untouched.
        """
        name = command.get("command") if isinstance(command, Mapping) else None
        args = dict(command) if isinstance(command, Mapping) else {}
        args.pop("command", None)
        handlers = {"view": self._view, "create": self._create,
                    "str_replace": self._str_replace, "insert": self._insert,
                    "delete": self._delete, "rename": self._rename}
        with self._log.locked():
            self._catch_up()
            try:
                if name not in handlers:
                    raise MemoryToolError(f"command: {name!r} is not a memory command; use one "
                                          f"of {', '.join(COMMANDS)}")
                change = handlers[name](args)
                if change.after:
                    self._check_limits(change.after)
            except (LabmemError, OSError) as exc:
                message = " ".join(str(exc).splitlines())
                self._append(name, args, tool_use_id, "refused", message, _Change(message))
                if isinstance(exc, MemoryToolError):
                    raise
                if isinstance(exc, InvalidInputError):  # a core check: the same words
                    raise MemoryArgumentError(exc.field, exc.problem, exc.fix) from None
                raise MemoryToolError(message) from None
            self._apply(name, args, tool_use_id, change)
        return change.message

    def undo(self, seq: int) -> str:
        """Put back the files command ``seq`` changed, if nothing has changed them since.

        The undo is itself a logged command (``undo``, tool-use id ``None``).
        """
        with self._log.locked():
            self._catch_up()
            require_int(seq, "seq", minimum=1, maximum=len(self._history))
            done = self._history[seq - 1]
            if done.outcome != "ok" or not done.after:
                raise MemoryToolError(f"seq: command {seq} ({done.command}, {done.outcome}) "
                                      "changed nothing; there is nothing to undo")
            for path in done.changed:
                host = self._resolve(path)
                now = self._read(host, path) if host.is_file() else None
                if text_digest(now) != done.after[path]:
                    raise MemoryToolError(f"seq: {path} has changed since command {seq}; "
                                          "undo the later commands first (newest first)")
            restored = {p: done.before.get(p) for p in done.changed}
            change = _Change(f"Undid command {seq} ({done.command})",
                             {p: (self._read(self._resolve(p), p) if done.after[p] else None)
                              for p in done.changed}, restored)
            self._apply("undo", {"seq": seq}, None, change)
        return change.message

    def _append(self, name: Any, args: Mapping[str, Any], tool_use_id: str | None,
                outcome: str, message: str, change: _Change) -> MemoryCommand:
        record = MemoryCommand(
            seq=self._log.line_count + 1, at=self.clock.now(), user_scope=self.user_scope,
            tool_use_id=tool_use_id, command=name if isinstance(name, str) else repr(name),
            arguments=_loggable(args), outcome=outcome, message=message,
            before=dict(change.before), after={p: text_digest(t) for p, t in change.after.items()})
        self._log.append(record.to_dict())  # the log's reader moves past its own line
        self._history.append(record)
        return record

    def _apply(self, name: str, args: Mapping[str, Any], tool_use_id: str | None,
               change: _Change) -> None:
        """Log the change, then make it: files written atomically, removed ones unlinked."""
        self._append(name, args, tool_use_id, "ok", change.message, change)
        if name == "view":
            return
        if name == "rename":  # one atomic rename, a directory with everything in it
            old, new = self._resolve(args["old_path"]), self._resolve(args["new_path"])
            new.parent.mkdir(parents=True, exist_ok=True)
            os.rename(old, new)
            self._prune(old.parent)
            return
        for path, text in sorted(change.after.items(), key=lambda kv: kv[1] is not None):
            host = self._resolve(path)
            if text is None:
                host.unlink(missing_ok=True)
                self._prune(host.parent)
            else:
                write_text_atomic(host, text)
        if name == "delete":  # what is left of a deleted directory is empty directories
            target = self._resolve(args["path"])
            if target.is_dir():
                shutil.rmtree(target)
            self._prune(target.parent)

    def _prune(self, directory: Path) -> None:
        """Remove empty directories from ``directory`` up to (not including) the tree."""
        while directory != self.tree and directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
            directory = directory.parent


def _loggable(args: Mapping[str, Any]) -> dict[str, Any]:
    """The command's arguments as the log keeps them: texts by size, not by content
    (the content that matters for undo is in ``before``)."""
    out: dict[str, Any] = {}
    for key, value in sorted(args.items()):
        if key in ("file_text", "old_str", "new_str", "insert_text") and isinstance(value, str):
            out[key] = f"<{len(value)} characters>"
        elif isinstance(value, (str, int, float, bool)) or value is None:
            out[key] = value if not isinstance(value, str) else value[:MAX_PATH_CHARS + 20]
        elif isinstance(value, list) and all(isinstance(v, int) for v in value[:4]):
            out[key] = value[:4]
        else:
            out[key] = f"<{type(value).__name__}>"
    return out
