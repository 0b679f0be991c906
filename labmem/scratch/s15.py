# Generated from notebooks/s15_connecting_memory_to_an_agent.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""s15 from scratch: the backend of a memory tool, the /memories tree a model edits.

A model sends six commands (view, create, str_replace, insert, delete, rename) with paths
it chose. The backend spells out one rule for every path (the containment rule), checks
each step on disk before using it (never through a symbolic link), edits only text that
occurs exactly once, writes every file atomically, and refuses a bad command before it
writes a byte. Every command walks the path again from the tree.
"""

import os
import shutil
import stat
import unicodedata
from pathlib import Path

ROOT = "/memories"
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
MAX_PATH_CHARS = 255    # the whole path, '/memories' included
MAX_NAME_CHARS = 100    # one name between slashes
MAX_NAME_BYTES = 255    # one name in UTF-8: what common file systems store
MAX_DEPTH = 6           # names below /memories
MAX_FILE_CHARS = 100_000
# control (C0 and C1), invisible format (bidi overrides, zero-width), line and paragraph
# separators, lone surrogates: a name holding one reads differently from what it is
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


class MemoryToolError(Exception):
    """A command refused; the message is what the model reads in its tool result."""


class MemoryPathError(MemoryToolError):
    """A path that is not a contained /memories path (by spelling or on disk)."""


def refuse_path(path: object, problem: str) -> MemoryPathError:
    return MemoryPathError(f"path: {path!r} {problem}; use a path under {ROOT}, such as "
                           f"'{ROOT}/notes.md'")


def name_problem(name: str) -> str | None:
    """Why one name between slashes cannot be a memory name, or None."""
    if name in ("", ".", ".."):
        return f"has a {name or 'empty'!r} segment; paths are never relative"
    if name.startswith("."):
        return f"has {name!r}, which starts with '.', which is reserved"
    if "\\" in name or any(unicodedata.category(c) in REFUSED_CATEGORIES for c in name):
        return f"has {name!r}, which holds a backslash or a control or format character"
    if len(name) > MAX_NAME_CHARS or len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"has a name longer than {MAX_NAME_CHARS} characters or {MAX_NAME_BYTES} bytes"
    return None


def split_memory_path(path: object) -> tuple[str, ...]:
    """The names below /memories in ``path`` ('/memories' itself: no names); a
    MemoryPathError for anything that is not a contained memory path."""
    if not isinstance(path, str):
        raise refuse_path(path, f"is a {type(path).__name__}, not a string")
    if len(path) > MAX_PATH_CHARS:
        raise refuse_path(path[:40] + "…", f"is longer than {MAX_PATH_CHARS} characters")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise refuse_path(path, f"is outside {ROOT}")
    names = path[len(ROOT):].split("/")[1:]
    if names and names[-1] == "":
        names.pop()  # one trailing '/' names the same directory
    for name in names:
        problem = name_problem(name)
        if problem is not None:
            raise refuse_path(path, problem)
    if len(names) > MAX_DEPTH:
        raise refuse_path(path, f"is deeper than {MAX_DEPTH} levels")
    return tuple(names)


def is_contained_memory_path(path: object) -> bool:
    """Whether ``path`` passes the containment rule (the spelling; links are found on disk)."""
    try:
        split_memory_path(path)
    except MemoryPathError:
        return False
    return True


def resolve_inside(tree: Path, names: tuple[str, ...]) -> Path:
    """The real path of ``names`` under ``tree``, checked one step at a time with lstat:
    a symbolic link anywhere on the way is refused, and so is a file in the middle. A
    missing step ends the check (nothing below it exists yet)."""
    path = tree
    for step, name in enumerate(names, start=1):
        path = path / name
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return tree.joinpath(*names)
        shown = "/".join((ROOT, *names[:step]))
        if stat.S_ISLNK(info.st_mode):
            raise refuse_path(shown, "is a symbolic link; memory paths never follow links")
        if step < len(names) and not stat.S_ISDIR(info.st_mode):
            raise refuse_path(shown, "is a file, so nothing can be below it")
    return path


def count_occurrences(text: str, part: str) -> int:
    """How often ``part`` occurs in ``text``, overlapping occurrences counted."""
    count, at = 0, text.find(part)
    while at != -1:
        count += 1
        at = text.find(part, at + 1)
    return count


def replace_once(text: str, old: str, new: str) -> str:
    """``text`` with its one occurrence of ``old`` replaced by ``new``; refused when
    ``old`` is empty, missing, or occurs more than once (which one would be a guess)."""
    if not old:
        raise MemoryToolError("old_str: must not be empty; give text that appears exactly "
                              "once")
    count = count_occurrences(text, old)
    if count != 1:
        where = "does not appear" if count == 0 else f"appears {count} times"
        raise MemoryToolError(f"old_str: {old!r} {where}; give text that appears exactly once")
    return text.replace(old, new, 1)


def insert_after(text: str, line: int, new: str) -> str:
    """``text`` with the lines of ``new`` put after line ``line`` (0: at the top)."""
    lines = text.split("\n")  # on '\n' only: U+2028 inside a line stays in it
    if lines and lines[-1] == "":
        lines.pop()
    if type(line) is not int or not 0 <= line <= len(lines):
        raise MemoryToolError(f"insert_line: must be a whole number from 0 to {len(lines)}")
    lines[line:line] = new.rstrip("\n").split("\n")
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old text or the new."""
    temp = path.with_name(f".tmp-{path.name}")  # hidden: no memory path can name it
    with open(temp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def text_argument(args: dict, name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise MemoryToolError(f"{name}: must be a string, got {type(value).__name__}")
    if len(value) > MAX_FILE_CHARS:
        raise MemoryToolError(f"{name}: has {len(value):,} characters, more than "
                              f"{MAX_FILE_CHARS:,}; keep memory files short")
    return value


class MemoryDirectory:
    """One /memories tree on disk; ``execute`` runs one command and returns the answer."""

    def __init__(self, root: Path) -> None:
        self.tree = Path(root) / "memories"
        self.tree.mkdir(parents=True, exist_ok=True)

    def locate(self, path: object) -> tuple[tuple[str, ...], Path]:
        names = split_memory_path(path)
        return names, resolve_inside(self.tree, names)

    def read(self, path: object) -> tuple[Path, str]:
        names, real = self.locate(path)
        return real, self.text_of(names, real, path)

    @staticmethod
    def text_of(names: tuple[str, ...], real: Path, path: object) -> str:
        if not names or not real.is_file():
            raise MemoryToolError(f"path: {path} is not a memory file; view {ROOT} to see "
                                  "what exists")
        return real.read_text(encoding="utf-8")

    def execute(self, command: dict) -> str:
        name = command.get("command") if isinstance(command, dict) else None
        if name not in COMMANDS:
            raise MemoryToolError(f"command: {name!r} is not one of {', '.join(COMMANDS)}")
        return getattr(self, name)(command)

    def view(self, args: dict) -> str:
        names, real = self.locate(args.get("path"))
        if real.is_dir():
            shown = "/".join((ROOT, *names))
            rows = [f"{p.stat().st_size if p.is_file() else '-'}\t{shown}/"
                    f"{p.relative_to(real).as_posix()}{'/' if p.is_dir() else ''}"
                    for p in sorted(real.rglob("*")) if not p.name.startswith(".")]
            return f"Directory {shown}:\n" + "\n".join(rows)
        text = self.text_of(names, real, args.get("path"))
        lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        numbered = [f"{n:>6}\t{line}" for n, line in enumerate(lines, start=1)]
        return f"{args['path']} with line numbers:\n" + "\n".join(numbered)

    def create(self, args: dict) -> str:
        names, real = self.locate(args.get("path"))
        text = text_argument(args, "file_text")
        if not names or args["path"].endswith("/") or os.path.lexists(real):
            raise MemoryToolError(f"path: {args['path']} exists or names a directory; use "
                                  "str_replace or insert to change a file")
        real.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(real, text)
        return f"Created {args['path']}"

    def str_replace(self, args: dict) -> str:
        real, text = self.read(args.get("path"))
        old, new = text_argument(args, "old_str"), text_argument(args, "new_str")
        edited = replace_once(text, old, new)
        if len(edited) > MAX_FILE_CHARS:
            raise MemoryToolError(f"new_str: the file would hold more than {MAX_FILE_CHARS:,} "
                                  "characters")
        write_atomically(real, edited)
        return f"Edited {args['path']}"

    def insert(self, args: dict) -> str:
        real, text = self.read(args.get("path"))
        edited = insert_after(text, args.get("insert_line"), text_argument(args, "insert_text"))
        if len(edited) > MAX_FILE_CHARS:
            raise MemoryToolError(f"insert_text: the file would hold more than "
                                  f"{MAX_FILE_CHARS:,} characters")
        write_atomically(real, edited)
        return f"Inserted into {args['path']} after line {args['insert_line']}"

    def delete(self, args: dict) -> str:
        names, real = self.locate(args.get("path"))
        if not names or not os.path.lexists(real):
            raise MemoryToolError(f"path: {args.get('path')} cannot be deleted: it is the "
                                  f"tree itself or does not exist")
        if real.is_dir():
            shutil.rmtree(real)  # never follows a link inside the folder
        else:
            real.unlink()
        return f"Deleted {args['path']}"

    def rename(self, args: dict) -> str:
        old_names, old = self.locate(args.get("old_path"))
        new_names, new = self.locate(args.get("new_path"))
        if not old_names or not new_names or not os.path.lexists(old):
            raise MemoryToolError("old_path: must name an existing file or folder below "
                                  f"{ROOT}")
        if os.path.lexists(new) or new_names[:len(old_names)] == old_names:
            raise MemoryToolError(f"new_path: {args['new_path']} exists or is inside "
                                  f"{args['old_path']}")
        moved = [p.relative_to(old).parts for p in old.rglob("*")] if old.is_dir() else []
        if any(len(new_names) + len(parts) > MAX_DEPTH for parts in moved):
            raise MemoryToolError(f"new_path: moving there puts a file deeper than "
                                  f"{MAX_DEPTH} levels")
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(old, new)
        return f"Renamed {args['old_path']} to {args['new_path']}"
