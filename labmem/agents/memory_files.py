"""The ``/memories`` tree of the Messages API memory tool, with labmem's guarantees.

The model asks for six commands (``view``, ``create``, ``str_replace``, ``insert``,
``delete``, ``rename``) on paths under ``/memories``; the client runs them. Here a
:class:`MemoryDirectory` runs them under a labmem home, one tree per user scope::

    <home>/memory-tool/<user scope>/memories/...          the files the model sees
    <home>/memory-tool/<user scope>/commands.jsonl        every command, refused ones too
    <home>/memory-tool/<user scope>/commands.head.json    the log's last seq and hash

Why each rule:

* every path is contained — only ``/memories`` and names below it, no ``.``/``..``
  segment, no absolute host path, no backslash, control or invisible format character,
  no hidden name (``.`` is reserved for labmem's temp files) — and is *used* one name at
  a time from a descriptor of the user's tree (:mod:`labmem.agents.dirfd`), never
  following a link: a link swapped in by another process is refused in the very call
  that would have followed it, so the model cannot read, write or remove outside its tree;
* a file is replaced atomically (temp file, ``fsync``, rename, directory ``fsync``): a
  crash leaves the old text or the new, never half;
* every limit (size per file and per tree, file count, name bytes, path length, depth —
  after a rename too) is checked before anything is written, and a command is logged
  ``ok`` only after its effect: the log says what happened;
* the log is evidence: each line carries a dense ``seq`` and the hash of the line before,
  and ``commands.head.json`` records the last seq and hash, so a removed, changed,
  inserted or appended line is detected, and :meth:`MemoryDirectory.undo` refuses to
  act on a log that does not verify. (Without a secret key this catches edits that leave
  the head alone; someone who rewrites both the log and its head consistently is not
  caught. A crash between a change and its log line leaves that change unlogged: the
  line is written after the effect, so the log never claims what did not happen.)
* bounded sizes and a bounded listing: a model cannot fill the disk (or its context)
  through its memory.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import stat
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from labmem.agents.dirfd import (
    DIR_FLAGS,
    StepError,
    fsync_fd,
    kind_at,
    open_node,
    read_fd,
    remove_tree,
    walk,
    walk_down,
    write_file,
)
from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import (
    CorruptionError,
    InvalidInputError,
    LabmemError,
    ScopeError,
    validated_as,
)
from labmem.core.provenance import scope_digest
from labmem.core.storage import JsonlLog, encode_json_line, read_snapshot, write_snapshot
from labmem.core.validation import require_int, require_text

ROOT = "/memories"
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
MAX_FILE_CHARS = 100_000
MAX_FILE_BYTES = 4 * MAX_FILE_CHARS  # what a file of MAX_FILE_CHARS can take in UTF-8
MAX_TREE_BYTES = 1_000_000
MAX_FILES = 200
MAX_PATH_CHARS = 255
MAX_NAME_CHARS = 100
MAX_NAME_BYTES = 255  # NAME_MAX of common filesystems, in UTF-8 bytes
MAX_DEPTH = 6
MAX_VIEW_ENTRIES = 500  # a directory listing stops here, and says so
MAX_VIEW_CHARS = 50_000
MAX_TOOL_USE_ID_CHARS = 200
LOG_NAME = "commands.jsonl"
HEAD_NAME = "commands.head.json"
HEAD_FORMAT = "labmem-memory-tool-head/1"
GENESIS = "0" * 64  # the "hash before the first line"
LINE_NUMBER_WIDTH = 6
# control (C0 and C1), invisible format (bidi overrides, zero-width), line and paragraph
# separators: a name holding one reads differently from what it is
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_trash = itertools.count()


class MemoryToolError(LabmemError):
    """A memory command could not be carried out (missing file, no match, …)."""


class MemoryPathError(MemoryToolError, InvalidInputError):
    """A path the model gave is not a contained ``/memories`` path."""


class MemoryArgumentError(MemoryToolError, InvalidInputError):
    """A command's field has the wrong type or is out of range."""


class MemoryLimitError(MemoryToolError, InvalidInputError):
    """The command would make a file or the tree larger (or deeper) than its bound."""


class MemoryLogCorruptionError(MemoryToolError, CorruptionError):
    """A complete line of ``commands.jsonl`` cannot be trusted."""


class MemoryLogIntegrityError(MemoryLogCorruptionError):
    """``commands.jsonl`` does not verify against its hash chain and its head: a line
    was removed, changed, inserted or appended by something other than labmem."""

    def __init__(self, line: int | None, problem: str) -> None:
        super().__init__(LOG_NAME, line, problem)
        where = f"{LOG_NAME} line {line}" if line is not None else LOG_NAME
        self.args = (
            f"{where}: {problem}; the log is evidence, so undo and new commands are refused "
            f"until it verifies — restore {LOG_NAME} and {HEAD_NAME} from a backup, or move "
            f"both aside to start a new log (the files in {ROOT} are kept)",)


class MemoryScopeError(MemoryToolError, ScopeError):
    """``commands.jsonl`` holds another user's command."""


def text_digest(text: str | None) -> str | None:
    """SHA-256 of a file's text; ``None`` for "no such file"."""
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def line_hash(record: Mapping[str, Any]) -> str:
    """SHA-256 of a log line as labmem writes it (the canonical compact encoding): the
    link the next line's ``prev`` must carry."""
    return hashlib.sha256(encode_json_line(dict(record))).hexdigest()


@dataclass(frozen=True)
class MemoryCommand:
    """One line of the command log: what was asked, when, by which tool call, and what
    it changed (``before``: the text each changed file had; ``after``: its new digest).

    ``prev`` is the hash of the line before (:data:`GENESIS` for the first); ``digest``
    is this line's own hash, computed on reading, never stored.
    """

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
    prev: str = GENESIS
    digest: str = field(default="", compare=False, repr=False)

    @property
    def changed(self) -> tuple[str, ...]:
        """The memory paths this command changed, sorted."""
        return tuple(sorted(self.after))

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": format_timestamp(self.at), "user_scope": self.user_scope,
                "tool_use_id": self.tool_use_id, "command": self.command,
                "arguments": self.arguments, "outcome": self.outcome, "message": self.message,
                "before": self.before, "after": self.after, "prev": self.prev}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryCommand:
        if "prev" not in data:
            raise ValueError("no 'prev' hash: written by an older labmem, before the log "
                             "was chained")
        for name in ("before", "after"):
            texts = data[name]
            if not isinstance(texts, dict) or not all(
                    isinstance(k, str) and (v is None or isinstance(v, str))
                    for k, v in texts.items()):
                raise ValueError(f"{name!r} must map paths to text or null")
        if isinstance(data["seq"], bool) or not isinstance(data["seq"], int):
            raise ValueError("'seq' must be an integer")
        if not isinstance(data["prev"], str):
            raise ValueError("'prev' must be a hash")
        return cls(seq=data["seq"], at=parse_timestamp(data["at"], field="at"),
                   user_scope=data["user_scope"], tool_use_id=data["tool_use_id"],
                   command=data["command"], arguments=dict(data["arguments"]),
                   outcome=data["outcome"], message=data["message"],
                   before=dict(data["before"]), after=dict(data["after"]), prev=data["prev"])


@dataclass(frozen=True)
class _Change:
    """What a command did: its answer, and each file's text before and after."""

    message: str
    before: dict[str, str | None] = field(default_factory=dict)
    after: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class _Target:
    """A checked memory path: its names below ``/memories`` and whether it ended in '/'
    (which names a directory)."""

    path: str
    names: tuple[str, ...]
    as_dir: bool
    field: str

    @property
    def dirs(self) -> tuple[str, ...]:
        return self.names[:-1]

    @property
    def name(self) -> str:
        return self.names[-1]

    @property
    def memory_path(self) -> str:
        return memory_path(self.names)


@dataclass(frozen=True)
class _Head:
    """``commands.head.json``: the last committed line (seq, hash) and the line being
    appended (``pending``), so a crash between the append and the head is told apart
    from a line added by someone else."""

    seq: int
    digest: str
    pending: tuple[int, str] | None


def memory_path(names: tuple[str, ...]) -> str:
    """``/memories`` joined with ``names``."""
    return "/".join((ROOT, *names))


def _refuse_path(field_name: str, problem: str) -> MemoryPathError:
    return MemoryPathError(field_name, problem,
                           f"use a path under {ROOT}, such as '{ROOT}/notes.md'")


def is_contained_memory_path(path: object) -> bool:
    """Whether ``path`` names ``/memories`` or a name below it by the rules above (no
    ``.``/``..``/empty segment, no hidden, backslash, control or format-character name,
    bounded length and depth). Links are refused on disk, by :class:`MemoryDirectory`."""
    try:
        split_memory_path(path)
    except MemoryPathError:
        return False
    return True


def _name_problem(name: str) -> str | None:
    """Why one segment cannot be a memory name, or ``None``."""
    if name in ("", ".", ".."):
        return f"has a {name or 'empty'!r} segment; paths are never relative"
    if name.startswith("."):
        return f"has {name!r}, which starts with '.', which is reserved"
    if "\\" in name or any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in name):
        return (f"has {name!r}, which holds a backslash or a control, format or separator "
                "character")
    if len(name) > MAX_NAME_CHARS:
        return f"has a name longer than {MAX_NAME_CHARS} characters"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"has a name longer than {MAX_NAME_BYTES} bytes in UTF-8"
    return None


def _parse(path: Any, field_name: str) -> _Target:
    """The checked :class:`_Target` of ``path``; a :class:`MemoryPathError` otherwise."""
    try:
        require_text(path, field_name, max_chars=MAX_PATH_CHARS)
    except InvalidInputError as exc:
        raise MemoryPathError(exc.field, exc.problem, exc.fix) from None
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise _refuse_path(field_name, f"{path!r} is outside {ROOT}")
    names = path[len(ROOT):].split("/")[1:]
    as_dir = bool(names) and names[-1] == ""
    if as_dir:
        names.pop()  # "/memories/notes/" names the directory notes
    for name in names:
        problem = _name_problem(name)
        if problem is not None:
            raise _refuse_path(field_name, f"{path!r} {problem}")
    if len(names) > MAX_DEPTH:
        raise _refuse_path(field_name, f"{path!r} is deeper than {MAX_DEPTH} levels")
    return _Target(path, tuple(names), as_dir or not names, field_name)


def split_memory_path(path: Any, field_name: str = "path") -> tuple[str, ...]:
    """The names below ``/memories`` in ``path``; a :class:`MemoryPathError` for anything
    that is not a contained memory path."""
    return _parse(path, field_name).names


def _lines(text: str) -> list[str]:
    """A file's lines; a final newline does not start another line."""
    lines = text.split("\n")  # on "\n" only: U+2028 inside a line stays in it
    return lines[:-1] if lines and lines[-1] == "" else lines


def count_occurrences(text: str, part: str) -> int:
    """How often ``part`` occurs in ``text``, overlapping occurrences counted ("aa" is in
    "aaa" twice: replacing "the" one would be a guess)."""
    count, at = 0, text.find(part)
    while at != -1:
        count += 1
        at = text.find(part, at + 1)
    return count


def _loggable_text(value: str, limit: int) -> str:
    """A string the log can always store: cut, and any lone surrogate escaped."""
    return value[:limit].encode("utf-8", "backslashreplace").decode("utf-8")


def _step_refusal(exc: StepError, target: _Target) -> MemoryToolError:
    """A :class:`StepError` on the way to ``target`` in labmem's words."""
    if exc.kind == "link":
        return _refuse_path(target.field, f"{target.path!r} goes through a symbolic link; "
                            "memory paths never follow links")
    if exc.kind == "file":
        return _refuse_path(target.field, f"{target.path!r} goes through a file")
    if exc.kind == "missing":
        return MemoryToolError(f"{target.field}: {target.path} does not exist; view {ROOT} "
                               "to see what does")
    return MemoryToolError(f"{target.field}: {target.path} cannot be opened ({exc})")


class MemoryDirectory:
    """One user's ``/memories`` tree and command log under a labmem home."""

    def __init__(self, home: str | os.PathLike[str], *, user_id: str,
                 clock: Clock | None = None) -> None:
        validated_as(MemoryArgumentError, require_text, user_id, "user_id")
        self.user_scope = validated_as(MemoryArgumentError, scope_digest, user_id,
                                       field="user_id")
        self.clock = resolve_clock(clock)
        self.directory = Path(home) / "memory-tool" / self.user_scope
        self.tree = self.directory / "memories"
        self.tree.mkdir(parents=True, exist_ok=True)
        os.close(self._open_tree())
        self._head_path = self.directory / HEAD_NAME
        self._log: JsonlLog[MemoryCommand] = JsonlLog(
            self.directory / LOG_NAME, decode=self._decode,
            corruption_error=MemoryLogCorruptionError)
        self._history: list[MemoryCommand] = []
        self._broken: MemoryLogIntegrityError | None = None
        with self._log.locked():
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
        if record.seq != line:
            raise MemoryLogIntegrityError(line, f"carries seq {record.seq} on line {line}: "
                                          "seqs are dense, so a line was removed or inserted")
        return replace(record, digest=line_hash(obj))

    def _catch_up(self) -> None:
        """Read what was appended since, verify the chain link by link, then the head."""
        if self._broken is not None:
            raise self._broken
        for record in self._log.refresh():
            expected = self._history[-1].digest if self._history else GENESIS
            if record.prev != expected:
                self._broken = MemoryLogIntegrityError(
                    record.seq, f"its 'prev' hash does not match line {record.seq - 1}: the "
                    "line before it was changed, removed or inserted")
                raise self._broken
            self._history.append(record)
        self._check_head()

    def _read_head(self) -> _Head | None:
        document = read_snapshot(self._head_path, corruption_error=MemoryLogCorruptionError)
        if document is None:
            return None
        try:
            pending = document["pending"]
            head = _Head(document["seq"], document["hash"],
                         None if pending is None else (pending["seq"], pending["hash"]))
            if document["format"] != HEAD_FORMAT or not isinstance(head.seq, int) \
                    or not isinstance(head.digest, str):
                raise ValueError("unexpected format")
        except (KeyError, TypeError, ValueError):
            raise MemoryLogIntegrityError(None, f"{HEAD_NAME} is not a log head") from None
        return head

    def _check_head(self) -> None:
        """The log must end where the head says (or one line later, at the line the head
        announced as pending: a crash between the append and the head's update)."""
        last = len(self._history)
        digest = self._history[-1].digest if self._history else GENESIS
        head = self._read_head()
        if head is None:
            if last:
                raise MemoryLogIntegrityError(None, f"{HEAD_NAME} is missing while the log "
                                              f"holds {last} lines (removed, or the log was "
                                              "written by an older labmem)")
            return
        if (head.seq, head.digest) == (last, digest):
            return
        if head.pending == (last, digest) and last == head.seq + 1:
            return
        if last < head.seq:
            raise MemoryLogIntegrityError(None, f"the log ends at seq {last} but {HEAD_NAME} "
                                          f"records seq {head.seq}: lines were removed from "
                                          "its end")
        if last == head.seq:
            raise MemoryLogIntegrityError(last, f"the last line is not the one {HEAD_NAME} "
                                          "records: it was changed")
        raise MemoryLogIntegrityError(head.seq + 1, f"lines after seq {head.seq}, the last "
                                      f"one {HEAD_NAME} records, were added by something "
                                      "other than labmem")

    def _write_head(self, seq: int, digest: str, pending: tuple[int, str] | None) -> None:
        write_snapshot(self._head_path, {
            "format": HEAD_FORMAT, "seq": seq, "hash": digest,
            "pending": None if pending is None else {"seq": pending[0], "hash": pending[1]}})

    def verify_log(self) -> int:
        """Check the whole log (chain and head); return how many lines verify, or raise
        :class:`MemoryLogIntegrityError` naming the first problem."""
        with self._log.locked():
            self._catch_up()
        return len(self._history)

    def history(self) -> tuple[MemoryCommand, ...]:
        """Every command run so far (other processes' too), oldest first, verified."""
        with self._log.locked():
            self._catch_up()
        return tuple(self._history)

    def _append(self, name: Any, args: Mapping[str, Any], tool_use_id: str | None,
                outcome: str, message: str, change: _Change) -> MemoryCommand:
        """Append one chained line: the head announces it, the line is appended, the head
        records it."""
        last = self._history[-1].digest if self._history else GENESIS
        record = MemoryCommand(
            seq=len(self._history) + 1, at=self.clock.now(), user_scope=self.user_scope,
            tool_use_id=tool_use_id,
            command=_loggable_text(name, 100) if isinstance(name, str) else repr(name)[:100],
            arguments=_loggable(args), outcome=outcome,
            message=_loggable_text(message, 2_000), before=dict(change.before),
            after={p: text_digest(t) for p, t in change.after.items()}, prev=last)
        data = record.to_dict()
        record = replace(record, digest=line_hash(data))
        try:
            self._write_head(record.seq - 1, last, (record.seq, record.digest))
            self._log.append(data)  # the log's reader moves past its own line
            self._history.append(record)
            self._write_head(record.seq, record.digest, None)
        except OSError as exc:
            done = "the change was made but " if outcome == "ok" and change.after else ""
            raise MemoryToolError(
                f"{LOG_NAME}: {done}command {record.seq} could not be logged "
                f"({os.strerror(exc.errno or 0)}); free space or fix the permissions of "
                f"{self.directory}, then check the log with verify_log()") from None
        return record

    # -- the tree, by descriptors ----------------------------------------------------
    def _open_tree(self) -> int:
        try:
            return os.open(self.tree, DIR_FLAGS)
        except OSError:
            raise MemoryPathError("home", f"{ROOT} must be a real directory",
                                  "remove the link or file that stands in its place") from None

    @contextmanager
    def _root(self) -> Iterator[int]:
        """A descriptor of the tree, for one command."""
        fd = self._open_tree()
        try:
            yield fd
        finally:
            os.close(fd)

    def _dir(self, root: int, target: _Target, fds: ExitStack, *,
             create: bool = False) -> int:
        """The descriptor of ``target``'s parent directory (closed with ``fds``)."""
        try:
            fd = walk_down(root, target.dirs, create=create)
        except StepError as exc:
            raise _step_refusal(exc, target) from None
        fds.callback(os.close, fd)
        return fd

    def _open(self, parent: int, target: _Target, fds: ExitStack) -> tuple[int, os.stat_result]:
        """An open descriptor of an existing file or directory, never through a link."""
        try:
            fd, info = open_node(parent, target.name)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise _step_refusal(StepError(0, "missing"), target) from None
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise _step_refusal(StepError(0, "link"), target) from None
            raise MemoryToolError(f"{target.field}: {target.path} cannot be opened "
                                  f"({os.strerror(exc.errno or 0)})") from None
        fds.callback(os.close, fd)
        if target.as_dir and not stat.S_ISDIR(info.st_mode):
            raise _refuse_path(target.field, f"{target.path!r} ends in '/', which names a "
                               "directory, but it is a file")
        return fd, info

    def _existing(self, root: int, target: _Target, fds: ExitStack
                  ) -> tuple[int, int, os.stat_result]:
        """(parent descriptor, node descriptor, its fstat) of an existing path."""
        if not target.names:
            fd = os.dup(root)
            fds.callback(os.close, fd)
            return fd, fd, os.fstat(fd)
        parent = self._dir(root, target, fds)
        fd, info = self._open(parent, target, fds)
        return parent, fd, info

    def _text(self, fd: int, info: os.stat_result, target: _Target) -> str:
        """The text of an open memory file: a regular file, not hard-linked elsewhere,
        bounded, UTF-8."""
        if stat.S_ISDIR(info.st_mode):
            raise MemoryToolError(f"{target.field}: {target.path} is a directory; name a "
                                  "file in it")
        if not stat.S_ISREG(info.st_mode):
            raise MemoryToolError(f"{target.field}: {target.path} is not a regular file")
        if info.st_nlink > 1:
            raise _refuse_path(target.field, f"{target.path!r} has another hard link; memory "
                               "files are never shared with files elsewhere")
        data = read_fd(fd, MAX_FILE_BYTES)
        if len(data) > MAX_FILE_BYTES:
            raise MemoryLimitError(target.field, f"{target.path} is larger than "
                                   f"{MAX_FILE_BYTES:,} bytes", "delete it; memory files "
                                   "are short")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise MemoryToolError(f"{target.path} is not UTF-8 text; only text files are "
                                  "memory files") from None

    def _file(self, root: int, target: _Target, fds: ExitStack) -> tuple[int, str]:
        """(parent descriptor, text) of an existing memory file."""
        parent, fd, info = self._existing(root, target, fds)
        return parent, self._text(fd, info, target)

    def _file_target(self, path: Any, field_name: str = "path") -> _Target:
        """A path that must name a file: not ``/memories``, no trailing '/'."""
        target = _parse(path, field_name)
        if not target.names:
            raise MemoryToolError(f"{field_name}: {ROOT} itself is a directory; name a file "
                                  "in it")
        if target.as_dir:
            raise _refuse_path(field_name, f"{path!r} ends in '/', which names a directory; "
                               "name a file without the trailing '/'")
        return target

    def _files_under(self, fd: int, names: tuple[str, ...], target: _Target
                     ) -> dict[str, str]:
        """The text of every memory file in the directory ``fd`` (which is ``names``)."""
        texts = {}
        for below, entry, holder in walk(fd, skip_hidden=True):
            if entry.kind == "file":
                path = memory_path((*names, *below))
                # opened in the descriptor of the directory that holds it, by its own name
                inner = _Target(path, (entry.name,), False, target.field)
                with ExitStack() as fds:
                    node, info = self._open(holder, inner, fds)
                    texts[path] = self._text(node, info, inner)
        return texts

    def _prune(self, root: int, dirs: tuple[str, ...]) -> None:
        """Remove now-empty directories from ``dirs`` up to (not including) the tree."""
        for depth in range(len(dirs), 0, -1):
            try:
                parent = walk_down(root, dirs[:depth - 1])
            except StepError:
                return
            try:
                os.rmdir(dirs[depth - 1], dir_fd=parent)
            except OSError:
                return
            finally:
                os.close(parent)

    def _current(self, root: int, path: str) -> str | None:
        """The text at a logged memory path now (``None``: nothing there); anything that
        is not a plain memory file reads as a text no digest matches."""
        target = _parse(path, "seq")
        with ExitStack() as fds:
            try:
                parent, fd, info = self._existing(root, target, fds)
            except MemoryPathError:
                raise
            except MemoryToolError:  # nothing there (any other refusal is a path error)
                return None
            if not stat.S_ISREG(info.st_mode):
                return "\0not a file"
            return self._text(fd, info, target)

    def _put(self, root: int, path: str, text: str | None) -> None:
        """Make ``path`` hold ``text`` (``None``: remove it), by descriptors."""
        target = _parse(path, "seq")
        with ExitStack() as fds:
            parent = self._dir(root, target, fds, create=text is not None)
            if text is None:
                try:
                    os.unlink(target.name, dir_fd=parent)
                except FileNotFoundError:
                    pass
            else:
                write_file(parent, target.name, text.encode("utf-8"), replace=True)
        if text is None:
            self._prune(root, target.dirs)

    # -- limits ----------------------------------------------------------------------
    def _check_limits(self, root: int, texts: Mapping[str, str | None]) -> None:
        """Refuse a change that would break a size bound (before anything is written)."""
        sizes = {memory_path(names): entry.size
                 for names, entry, _ in walk(root, skip_hidden=True) if entry.kind == "file"}
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

    # -- the six commands (each checks everything, then makes its change) ---------------
    def _view(self, args: Mapping[str, Any]) -> _Change:
        target = _parse(args.get("path"), "path")
        with self._root() as root, ExitStack() as fds:
            _, fd, info = self._existing(root, target, fds)
            if stat.S_ISDIR(info.st_mode):
                return _Change(self._listing(fd, target))
            text = self._text(fd, info, target)
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
        return _Change(f"{target.path} with line numbers:\n" + "\n".join(shown))

    def _listing(self, fd: int, target: _Target) -> str:
        """Up to two levels below a directory, bounded in entries and characters."""
        base = target.memory_path
        rows = [f"-\t{base}/"]
        used = 0
        for names, entry, _ in walk(fd, max_depth=2, skip_hidden=True):
            if entry.kind == "link":
                continue
            is_dir = entry.kind == "dir"
            row = f"{'-' if is_dir else entry.size}\t{base}/{'/'.join(names)}" + \
                ("/" if is_dir else "")
            if len(rows) > MAX_VIEW_ENTRIES or used + len(row) > MAX_VIEW_CHARS:
                rows.append(f"(listing cut: it shows at most {MAX_VIEW_ENTRIES} entries or "
                            f"{MAX_VIEW_CHARS:,} characters; view a subdirectory to see "
                            "the rest)")
                break
            rows.append(row)
            used += len(row) + 1
        return f"Directory {target.path} (bytes, up to 2 levels deep):\n" + "\n".join(rows)

    def _create(self, args: Mapping[str, Any]) -> _Change:
        target = self._file_target(args.get("path"))
        text = require_text(args.get("file_text"), "file_text", allow_blank=True)
        with self._root() as root:
            with ExitStack() as fds:
                try:
                    parent = walk_down(root, target.dirs)
                except StepError as exc:
                    if exc.kind != "missing":
                        raise _step_refusal(exc, target) from None
                else:
                    fds.callback(os.close, parent)
                    if kind_at(parent, target.name) is not None:
                        raise self._exists(target)
            self._check_limits(root, {target.memory_path: text})
            with ExitStack() as fds:
                try:
                    parent = self._dir(root, target, fds, create=True)
                    write_file(parent, target.name, text.encode("utf-8"), replace=False)
                except BaseException as exc:
                    self._prune(root, target.dirs)
                    if isinstance(exc, FileExistsError):
                        raise self._exists(target) from None
                    raise
        return _Change(f"Created {target.path}", {target.memory_path: None},
                       {target.memory_path: text})

    @staticmethod
    def _exists(target: _Target) -> MemoryToolError:
        return MemoryToolError(f"{target.field}: {target.path} already exists; use "
                               "str_replace or insert to change it")

    def _str_replace(self, args: Mapping[str, Any]) -> _Change:
        target = self._file_target(args.get("path"))
        with self._root() as root, ExitStack() as fds:
            parent, text = self._file(root, target, fds)
            old = require_text(args.get("old_str"), "old_str")
            new = require_text(args.get("new_str"), "new_str", allow_blank=True)
            count = count_occurrences(text, old)
            if count != 1:
                where = "does not appear" if count == 0 else \
                    f"appears {count} times (overlapping occurrences count)"
                raise MemoryToolError(f"old_str: {old!r} {where} in {target.path}; give text "
                                      "that appears exactly once")
            edited = text.replace(old, new, 1)
            self._rewrite(root, parent, target, text, edited)
        return _Change(f"Edited {target.path}", {target.memory_path: text},
                       {target.memory_path: edited})

    def _rewrite(self, root: int, parent: int, target: _Target, text: str, new: str) -> None:
        """Check the limits with ``new`` in place, then replace the file atomically."""
        self._check_limits(root, {target.memory_path: new})
        write_file(parent, target.name, new.encode("utf-8"), replace=True)

    def _insert(self, args: Mapping[str, Any]) -> _Change:
        target = self._file_target(args.get("path"))
        with self._root() as root, ExitStack() as fds:
            parent, text = self._file(root, target, fds)
            lines = _lines(text)
            at = require_int(args.get("insert_line"), "insert_line", minimum=0,
                             maximum=len(lines))
            new = require_text(args.get("insert_text"), "insert_text", allow_blank=True)
            added = new.rstrip("\n").split("\n")
            lines[at:at] = added
            edited = "\n".join(lines) + "\n"
            self._rewrite(root, parent, target, text, edited)
        return _Change(f"Inserted {len(added)} line(s) into {target.path} after line {at}",
                       {target.memory_path: text}, {target.memory_path: edited})

    def _delete(self, args: Mapping[str, Any]) -> _Change:
        target = _parse(args.get("path"), "path")
        if not target.names:
            raise MemoryToolError(f"path: {ROOT} itself cannot be deleted")
        with self._root() as root:
            with ExitStack() as fds:
                parent, fd, info = self._existing(root, target, fds)
                if stat.S_ISDIR(info.st_mode):
                    before = self._files_under(fd, target.names, target)
                    trash = f".trash-{os.getpid()}-{next(_trash)}"
                    # one atomic rename takes the whole directory out of the model's view;
                    # it is then removed by descriptors, whatever its depth
                    os.rename(target.name, trash, src_dir_fd=parent, dst_dir_fd=parent)
                    fsync_fd(parent)
                    try:
                        remove_tree(parent, trash)
                    except (OSError, StepError):
                        pass  # a hidden leftover: out of the model's view and its limits
                else:
                    before = {target.memory_path: self._text(fd, info, target)}
                    os.unlink(target.name, dir_fd=parent)
                    fsync_fd(parent)
            self._prune(root, target.dirs)
        return _Change(f"Deleted {target.path}", before, dict.fromkeys(before))

    def _rename(self, args: Mapping[str, Any]) -> _Change:
        old = _parse(args.get("old_path"), "old_path")
        new = _parse(args.get("new_path"), "new_path")
        if not old.names or not new.names:
            raise MemoryToolError(f"old_path: {ROOT} itself cannot be renamed or replaced")
        with self._root() as root:
            with ExitStack() as fds:
                old_parent, fd, info = self._existing(root, old, fds)
                is_dir = stat.S_ISDIR(info.st_mode)
                if new.as_dir and not is_dir:
                    raise _refuse_path("new_path", f"{new.path!r} ends in '/', which names a "
                                       f"directory, but {old.path} is a file")
                self._refuse_existing(root, new)
                if new.names[:len(old.names)] == old.names:
                    raise MemoryToolError(f"new_path: {new.path} is inside {old.path}")
                if is_dir:
                    self._check_moved(fd, new)
                    moved = self._files_under(fd, old.names, old)
                else:
                    moved = {old.memory_path: self._text(fd, info, old)}
                before: dict[str, str | None] = {}
                after: dict[str, str | None] = {}
                for path, text in moved.items():
                    to = memory_path((*new.names, *split_memory_path(path)[len(old.names):]))
                    before[path], before[to] = text, None
                    after[path], after[to] = None, text
                new_parent = self._dir(root, new, fds, create=True)
                os.rename(old.name, new.name, src_dir_fd=old_parent, dst_dir_fd=new_parent)
                fsync_fd(new_parent)
                fsync_fd(old_parent)
            self._prune(root, old.dirs)
        return _Change(f"Renamed {old.path} to {new.path}", before, after)

    def _refuse_existing(self, root: int, new: _Target) -> None:
        """Refuse a destination that exists, or whose way goes through a link or file."""
        with ExitStack() as fds:
            try:
                parent = walk_down(root, new.dirs)
            except StepError as exc:
                if exc.kind == "missing":
                    return
                raise _step_refusal(exc, new) from None
            fds.callback(os.close, parent)
            if kind_at(parent, new.name) is not None:
                raise MemoryToolError(f"new_path: {new.path} already exists")

    def _check_moved(self, fd: int, new: _Target) -> None:
        """Every path under a renamed directory must still be a memory path at its new
        place (depth, length): a rename must not push the tree past its own rules."""
        for below, entry, _ in walk(fd, max_depth=MAX_DEPTH + 1):
            if entry.name.startswith("."):
                continue
            moved = memory_path((*new.names, *below)) + ("/" if entry.kind == "dir" else "")
            if len(new.names) + len(below) > MAX_DEPTH or len(moved) > MAX_PATH_CHARS:
                raise MemoryLimitError("new_path", f"moving there would put {moved[:120]!r} "
                                       f"deeper than {MAX_DEPTH} levels or past "
                                       f"{MAX_PATH_CHARS} characters",
                                       "rename to a shallower place or use shorter names")

    # -- running a command -----------------------------------------------------------
    def execute(self, command: Mapping[str, Any], *, tool_use_id: str | None = None) -> str:
        """Run one memory command; return the answer for the model.

        Every check comes before the change, and the command is logged after it: ``ok``
        only for what happened. A refused command raises a :class:`MemoryToolError` (its
        message is what the model sees), is logged as ``refused`` and leaves the tree
        untouched. A log that does not verify refuses every command, unlogged.
        """
        if tool_use_id is not None:
            validated_as(MemoryArgumentError, require_text, tool_use_id, "tool_use_id",
                         max_chars=MAX_TOOL_USE_ID_CHARS)
        name = command.get("command") if isinstance(command, Mapping) else None
        args = {k: v for k, v in command.items() if k != "command"} \
            if isinstance(command, Mapping) else {}
        handlers = {"view": self._view, "create": self._create,
                    "str_replace": self._str_replace, "insert": self._insert,
                    "delete": self._delete, "rename": self._rename}
        with self._log.locked():
            self._catch_up()
            try:
                if not isinstance(name, str) or name not in handlers:
                    raise MemoryToolError(f"command: {name!r:.100} is not a memory command; use "
                                          f"one of {', '.join(COMMANDS)}")
                change = handlers[name](args)
            except (LabmemError, OSError) as exc:
                message = " ".join(str(exc).splitlines())
                self._append(name, args, tool_use_id, "refused", message, _Change(message))
                if isinstance(exc, MemoryToolError):
                    raise
                if isinstance(exc, InvalidInputError):  # a core check: the same words
                    raise MemoryArgumentError(exc.field, exc.problem, exc.fix) from None
                raise MemoryToolError(_loggable_text(message, 2_000)) from None
            self._append(name, args, tool_use_id, "ok", change.message, change)
        return change.message

    def undo(self, seq: int) -> str:
        """Put back the files command ``seq`` changed, if nothing has changed them since.

        The command is found by the seq on its line, in a log that verifies (chain and
        head); the restored tree must fit the limits. The undo is itself a logged command
        (``undo``, tool-use id ``None``).
        """
        with self._log.locked():
            self._catch_up()
            validated_as(MemoryArgumentError, require_int, seq, "seq", minimum=1)
            done = next((c for c in self._history if c.seq == seq), None)
            if done is None:
                raise MemoryToolError(f"seq: no command has seq {seq}; history() lists them")
            if done.outcome != "ok" or not done.after:
                raise MemoryToolError(f"seq: command {seq} ({done.command}, {done.outcome}) "
                                      "changed nothing; there is nothing to undo")
            restored = {p: done.before.get(p) for p in done.changed}
            with self._root() as root:
                now = {p: self._current(root, p) for p in done.changed}
                for path in done.changed:
                    if text_digest(now[path]) != done.after[path]:
                        raise MemoryToolError(f"seq: {path} has changed since command {seq}; "
                                              "undo the later commands first (newest first)")
                self._check_limits(root, restored)
                for path, text in sorted(restored.items(), key=lambda kv: kv[1] is not None):
                    self._put(root, path, text)
            change = _Change(f"Undid command {seq} ({done.command})", now, restored)
            self._append("undo", {"seq": seq}, None, "ok", change.message, change)
        return change.message


def _loggable(args: Mapping[str, Any]) -> dict[str, Any]:
    """The command's arguments as the log keeps them: texts by size, not by content
    (the content that matters for undo is in ``before``), anything else cut to size and
    made storable (a lone surrogate escaped, an odd key or value named by its type)."""
    out: dict[str, Any] = {}
    for key, value in sorted(args.items(), key=lambda kv: repr(kv[0])):
        key = _loggable_text(key, 100) if isinstance(key, str) else repr(key)[:100]
        if key in ("file_text", "old_str", "new_str", "insert_text") and isinstance(value, str):
            out[key] = f"<{len(value)} characters>"
        elif isinstance(value, str):
            out[key] = _loggable_text(value, MAX_PATH_CHARS + 20)
        elif isinstance(value, (int, bool)) or value is None:
            out[key] = value
        elif isinstance(value, float):
            out[key] = value if value == value and abs(value) != float("inf") else repr(value)
        elif isinstance(value, list) and all(isinstance(v, int) for v in value[:4]):
            out[key] = value[:4]
        else:
            out[key] = f"<{type(value).__name__}>"
    return out
