"""The s15 contract suite: what a memory tool's backend promises, contract by contract.

``SUITE`` runs on any implementation that offers the operations the chapter builds:

* ``split_memory_path(path)`` → the names below ``/memories``, and
  ``is_contained_memory_path(path)`` → ``bool``;
* ``MemoryDirectory`` made by ``impl.directory(root)``, with ``tree`` (the real directory
  that ``/memories`` is) and ``execute(command)`` → the answer for the model;
* the errors ``MemoryToolError`` and its subclass ``MemoryPathError``.

``SCRATCH`` is the chapter's from-scratch module (:mod:`labmem.scratch.s15`) behind
:class:`_Scratch`; ``PRODUCTION`` is :mod:`labmem.agents` behind :class:`_Production`
(its ``MemoryDirectory`` takes a home and a user and logs every command). Every check
tries its cases smallest first and names the first one that breaks.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labmem import agents as production
from labmem.core.clock import SteppingClock
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, expect, is_a
from labmem.scratch import s15 as scratch_module


class _Scratch:
    """The chapter's module (or a learner's copy of it) under the names the contracts use."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.split_memory_path = module.split_memory_path
        self.is_contained_memory_path = module.is_contained_memory_path
        self.MemoryToolError = module.MemoryToolError
        self.MemoryPathError = module.MemoryPathError

    def directory(self, root: Path) -> Any:
        return self.module.MemoryDirectory(root)

    def __repr__(self) -> str:
        return self.module.__name__


class _Production:
    """The library's memory-tool backend under the names the contracts use."""

    split_memory_path = staticmethod(production.split_memory_path)
    is_contained_memory_path = staticmethod(production.is_contained_memory_path)
    MemoryToolError = production.MemoryToolError
    MemoryPathError = production.MemoryPathError

    def directory(self, root: Path) -> Any:
        return production.MemoryDirectory(root, user_id="contract",
                                          clock=SteppingClock("2026-08-01T12:00:00Z"))

    def __repr__(self) -> str:
        return "labmem.agents"


def implementation(module: types.ModuleType) -> _Scratch:
    """A from-scratch module (the chapter's, or one with a learner's pieces in it) as an
    implementation the suite can run on."""
    return _Scratch(module)


SCRATCH = implementation(scratch_module)
PRODUCTION = _Production()


# -- helpers ------------------------------------------------------------------------------


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 90 else text[:60] + "…" + text[-20:]


def _expect(case: str, got: Any, want: Any) -> None:
    expect(case, got, want, show=_short)


def _refused(error: type, action: Callable[[], Any], case: str) -> None:
    try:
        got = action()
    except NotImplementedError:
        raise
    except Exception as exc:
        if is_a(exc, error):
            return
        raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, got "
                             f"{type(exc).__name__}: {str(exc)[:120]}") from None
    raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, but it was "
                         f"accepted ({_short(got)})")


def _refused_path(impl: Any, path: Any) -> None:
    """``path`` is refused by ``split_memory_path`` and not contained."""
    case = f"split_memory_path({_short(path)})"
    _refused(impl.MemoryPathError, lambda: impl.split_memory_path(path), case)
    got = impl.is_contained_memory_path(path)
    _expect(f"is_contained_memory_path({_short(path)})", got, False)


@contextmanager
def _arena(impl: Any) -> Iterator[tuple[Any, Path]]:
    """A fresh memory directory and, beside it, an ``outside`` directory holding a secret."""
    root = Path(tempfile.mkdtemp(prefix="labmem-s15-contract-"))
    try:
        outside = root / "outside"
        outside.mkdir()
        (outside / "secret.md").write_text("SECRET\n", encoding="utf-8")
        yield impl.directory(root / "home"), outside
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _files(directory: Path) -> dict[str, str]:
    """Every visible file under ``directory`` with the SHA-256 of its bytes."""
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*"))
            if p.is_file() and not p.is_symlink() and not p.name.startswith(".")}


def _text(tree: Path, names: str) -> str | None:
    path = tree / names
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _create(d: Any, path: str, text: str) -> None:
    d.execute({"command": "create", "path": path, "file_text": text})


# -- the containment rule (spelling) ------------------------------------------------------

def contained_paths_split_into_names(impl: Any) -> None:
    for path, names in (("/memories", ()), ("/memories/", ()), ("/memories/a", ("a",)),
                        ("/memories/a/", ("a",)), ("/memories/a/b.md", ("a", "b.md")),
                        ("/memories/notes v2.md", ("notes v2.md",)),
                        ("/memories/日记.md", ("日记.md",)),
                        ("/memories/a/b/c/d/e/f.md", ("a", "b", "c", "d", "e", "f.md"))):
        _expect(f"split_memory_path({path!r})", tuple(impl.split_memory_path(path)), names)
        _expect(f"is_contained_memory_path({path!r})", impl.is_contained_memory_path(path),
                True)


def outside_paths_are_refused(impl: Any) -> None:
    for path in ("", "/", "/etc/passwd", "memories/a", "/memoriesX", "/memoriesX/a",
                 "/Memories/a", " /memories/a", "./memories/a", "/tmp/memories/a"):
        _refused_path(impl, path)


def relative_segments_are_refused(impl: Any) -> None:
    for path in ("/memories/..", "/memories/.", "/memories//a", "/memories/a//",
                 "/memories/a/..", "/memories/a/../b", "/memories/../../etc/passwd",
                 "/memories/a/./b"):
        _refused_path(impl, path)


def hidden_names_are_refused(impl: Any) -> None:
    for path in ("/memories/.a", "/memories/a/.b", "/memories/.tmp-notes.md",
                 "/memories/...", "/memories/a/.git/config"):
        _refused_path(impl, path)


def odd_characters_are_refused(impl: Any) -> None:
    for char in ("\\", "\x00", "\x01", "\n", "\t", "\x1f", "\x7f", "\x85", "\x9b",
                 "\u200b", "\u200e", "\u202e", "\u2028", "\u2029", "\ufeff", "\ud800"):
        _refused_path(impl, f"/memories/a{char}b")


def only_strings_are_paths(impl: Any) -> None:
    for path in (None, 7, 1.5, True, b"/memories/a", ["/memories", "a"], ("/memories",),
                 {"path": "/memories/a"}, Path("/memories/a")):
        _refused_path(impl, path)


def names_depth_and_length_are_bounded(impl: Any) -> None:
    long_name = "/memories/" + "n" * 100
    six_deep = "/memories/" + "/".join("abcdef")
    longest = "/memories/" + "/".join(["x" * 40] * 6)  # 10 + 6 × 40 + 5 = 255 characters
    wide = "/memories/" + "€" * 85  # 85 characters, 255 bytes in UTF-8
    for path in (long_name, six_deep, six_deep + "/", longest, wide):
        _expect(f"is_contained_memory_path({_short(path)}) ({len(path)} characters)",
                impl.is_contained_memory_path(path), True)
    for path in (long_name + "n", six_deep + "/g", six_deep + "/g/",
                 "/memories/" + "/".join(["x" * 40] * 5 + ["x" * 41]), wide + "€",
                 "/memories/" + "/".join(["x" * 50] * 5 + ["y" * 5])):
        case = f"{_short(path)} ({len(path)} characters)"
        _refused(impl.MemoryPathError, lambda p=path: impl.split_memory_path(p),
                 f"split_memory_path({case})")
        _expect(f"is_contained_memory_path({case})", impl.is_contained_memory_path(path),
                False)


# -- on disk ------------------------------------------------------------------------------

def links_are_never_followed(impl: Any) -> None:
    cases = (
        ("view", {"command": "view", "path": "/memories/shared/secret.md"}),
        ("create", {"command": "create", "path": "/memories/shared/evil.md",
                    "file_text": "escaped\n"}),
        ("create", {"command": "create", "path": "/memories/shared/deeper/evil.md",
                    "file_text": "escaped\n"}),
        ("str_replace", {"command": "str_replace", "path": "/memories/shared/secret.md",
                         "old_str": "SECRET", "new_str": "gone"}),
        ("insert", {"command": "insert", "path": "/memories/shared/secret.md",
                    "insert_line": 0, "insert_text": "escaped"}),
        ("delete", {"command": "delete", "path": "/memories/shared/secret.md"}),
        ("delete", {"command": "delete", "path": "/memories/shared"}),
        ("rename", {"command": "rename", "old_path": "/memories/mine.md",
                    "new_path": "/memories/shared/mine.md"}),
        ("rename", {"command": "rename", "old_path": "/memories/shared/secret.md",
                    "new_path": "/memories/stolen.md"}),
        ("view", {"command": "view", "path": "/memories/alias.md"}),
        ("str_replace", {"command": "str_replace", "path": "/memories/alias.md",
                         "old_str": "SECRET", "new_str": "gone"}),
    )
    for what, command in cases:
        case = f"/memories/shared → a folder outside, then {what} {_short(command)}"
        with _arena(impl) as (d, outside):
            _create(d, "/memories/mine.md", "mine\n")
            (d.tree / "shared").symlink_to(outside, target_is_directory=True)
            (d.tree / "alias.md").symlink_to(outside / "secret.md")
            before = _files(outside)
            answer = None
            try:
                answer = d.execute(command)
            except NotImplementedError:
                raise
            except Exception as exc:
                if not is_a(exc, impl.MemoryToolError):
                    raise ContractBroken(f"smallest case: {case} — expected MemoryToolError,"
                                         f" got {type(exc).__name__}: {exc}") from None
            _expect(f"{case}: the files outside", _files(outside), before)
            if answer is not None:
                _expect(f"{case}: what the model read", "SECRET" in answer, False)
                raise ContractBroken(f"smallest case: {case} — expected a refusal, but it "
                                     f"was carried out ({_short(answer)})")
            _expect(f"{case}: the link still in place", (d.tree / "shared").is_symlink(),
                    True)


def nothing_is_below_a_file(impl: Any) -> None:
    for command in ({"command": "view", "path": "/memories/a.md/b.md"},
                    {"command": "create", "path": "/memories/a.md/b.md", "file_text": "x"},
                    {"command": "delete", "path": "/memories/a.md/b.md"}):
        case = f"/memories/a.md is a file, then {_short(command)}"
        with _arena(impl) as (d, _):
            _create(d, "/memories/a.md", "a\n")
            _refused(impl.MemoryToolError, lambda c=command: d.execute(c), case)
            _expect(f"{case}: a.md", _text(d.tree, "a.md"), "a\n")


# -- the commands --------------------------------------------------------------------------

def create_never_overwrites(impl: Any) -> None:
    with _arena(impl) as (d, _):
        case = "create /memories/p/q/n.md in an empty tree"
        _create(d, "/memories/p/q/n.md", "first\nsecond\n")
        _expect(f"{case}: the file", _text(d.tree, "p/q/n.md"), "first\nsecond\n")
        answer = d.execute({"command": "view", "path": "/memories/p/q/n.md"})
        _expect(f"{case}, then view it: numbered lines", answer.splitlines()[1:],
                ["     1\tfirst", "     2\tsecond"])
        case = "create /memories/p/q/n.md a second time"
        _refused(impl.MemoryToolError, lambda: _create(d, "/memories/p/q/n.md", "other"),
                 case)
        _expect(f"{case}: the file", _text(d.tree, "p/q/n.md"), "first\nsecond\n")
        for path in ("/memories", "/memories/p", "/memories/p/"):
            _refused(impl.MemoryToolError, lambda p=path: _create(d, p, "x"),
                     f"create {path} (a directory)")


def replace_needs_exactly_one_match(impl: Any) -> None:
    cases = (("one two\n", "two", "2", "one 2\n"),
             ("a.b\n", ".", "-", "a-b\n"),
             ("x\n", "x\n", "", ""),
             ("ab ab\n", "ab", "c", None),
             ("aaa\n", "aa", "b", None),
             ("abc\n", "abd", "x", None),
             ("abc\n", "", "x", None),
             ("a\u2028b\n", "\u2028b", "|b", "a|b\n"))
    for text, old, new, want in cases:
        case = f"str_replace {old!r} → {new!r} in a file holding {text!r}"
        with _arena(impl) as (d, _):
            _create(d, "/memories/f.md", text)
            command = {"command": "str_replace", "path": "/memories/f.md", "old_str": old,
                       "new_str": new}
            if want is None:
                _refused(impl.MemoryToolError, lambda c=command: d.execute(c), case)
                _expect(f"{case}: the file after the refusal", _text(d.tree, "f.md"), text)
            else:
                d.execute(command)
                _expect(f"{case}: the file", _text(d.tree, "f.md"), want)


def insert_puts_lines_after_line_n(impl: Any) -> None:
    for text, line, new, want in (("a\nb\n", 0, "x", "x\na\nb\n"),
                                  ("a\nb\n", 1, "x\ny\n", "a\nx\ny\nb\n"),
                                  ("a\nb", 2, "z", "a\nb\nz\n"),
                                  ("a\n", 2, "z", None), ("a\n", -1, "z", None),
                                  ("a\n", True, "z", None), ("a\n", "1", "z", None)):
        case = f"insert {new!r} after line {line!r} of {text!r}"
        with _arena(impl) as (d, _):
            _create(d, "/memories/f.md", text)
            command = {"command": "insert", "path": "/memories/f.md", "insert_line": line,
                       "insert_text": new}
            if want is None:
                _refused(impl.MemoryToolError, lambda c=command: d.execute(c), case)
                _expect(f"{case}: the file after the refusal", _text(d.tree, "f.md"), text)
            else:
                d.execute(command)
                _expect(f"{case}: the file", _text(d.tree, "f.md"), want)


def delete_and_rename_stay_inside(impl: Any) -> None:
    with _arena(impl) as (d, outside):
        _create(d, "/memories/p/a.md", "a\n")
        _create(d, "/memories/p/q/b.md", "b\n")
        case = "rename /memories/p to /memories/r/p"
        d.execute({"command": "rename", "old_path": "/memories/p", "new_path": "/memories/r/p"})
        _expect(f"{case}: (p/a.md, r/p/a.md, r/p/q/b.md)",
                (_text(d.tree, "p/a.md"), _text(d.tree, "r/p/a.md"),
                 _text(d.tree, "r/p/q/b.md")), (None, "a\n", "b\n"))
        _create(d, "/memories/c.md", "c\n")
        for old, new in (("/memories/c.md", "/memories/r/p/a.md"),
                         ("/memories/r", "/memories/r/s"), ("/memories", "/memories/x"),
                         ("/memories/none.md", "/memories/y.md")):
            case = f"rename {old} to {new}"
            before = _files(d.tree)
            _refused(impl.MemoryToolError, lambda o=old, n=new: d.execute(
                {"command": "rename", "old_path": o, "new_path": n}), case)
            _expect(f"{case}: the tree after the refusal", _files(d.tree), before)
        case = "delete /memories/r (a folder of two files)"
        d.execute({"command": "delete", "path": "/memories/r"})
        _expect(f"{case}: files left", sorted(_files(d.tree)), ["c.md"])
        for path in ("/memories", "/memories/", "/memories/none.md"):
            _refused(impl.MemoryToolError, lambda p=path: d.execute(
                {"command": "delete", "path": p}), f"delete {path}")
        _expect("after every command: the files outside", sorted(_files(outside)),
                ["secret.md"])


def a_refused_command_changes_nothing(impl: Any) -> None:
    big = "x" * 100_001
    cases = (
        {"command": "format", "path": "/memories"},
        {"path": "/memories/a.md"},
        {"command": "create", "path": "/memories/new.md"},
        {"command": "create", "path": "/memories/new.md", "file_text": 7},
        {"command": "create", "path": "/memories/new.md", "file_text": big},
        {"command": "create", "path": "/memories/d/new.md", "file_text": big},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": big},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": None},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": big},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1},
        {"command": "view", "path": "/memories/none.md"},
        {"command": "create", "path": "/memories/x/../new.md", "file_text": "x"},
    )
    for command in cases:
        case = _short({k: (f"<{len(v):,} characters>" if isinstance(v, str) and len(v) > 99
                           else v) for k, v in command.items()})
        with _arena(impl) as (d, _):
            _create(d, "/memories/a.md", "a\n")
            before = _files(d.tree)
            _refused(impl.MemoryToolError, lambda c=command: d.execute(c), case)
            _expect(f"{case}: the tree after the refusal", _files(d.tree), before)
            _expect(f"{case}: folders in the tree",
                    sorted(p.name for p in d.tree.rglob("*") if p.is_dir()), [])


SUITE = ContractSuite(N_("memory tool backend"), (
    Contract(N_("/memories and the plain names below it are contained"),
             contained_paths_split_into_names),
    Contract(N_("a path outside /memories is refused"), outside_paths_are_refused),
    Contract(N_("an empty, '.' or '..' segment is refused"), relative_segments_are_refused),
    Contract(N_("a name starting with '.' is refused"), hidden_names_are_refused),
    Contract(N_("a backslash, control or format character in a name is refused"),
             odd_characters_are_refused),
    Contract(N_("a path that is not a string is refused"), only_strings_are_paths),
    Contract(N_("a name is at most 100 characters (255 bytes), a path 6 names and "
                "255 characters"), names_depth_and_length_are_bounded),
    Contract(N_("a symbolic link in the tree is never followed"), links_are_never_followed),
    Contract(N_("nothing can be below a file"), nothing_is_below_a_file),
    Contract(N_("create makes a new file with its folders and never overwrites"),
             create_never_overwrites),
    Contract(N_("str_replace edits text that occurs exactly once"),
             replace_needs_exactly_one_match),
    Contract(N_("insert puts lines after line N (0: at the top)"), insert_puts_lines_after_line_n),
    Contract(N_("rename and delete move whole files and folders, inside the tree"),
             delete_and_rename_stay_inside),
    Contract(N_("a refused command changes nothing"), a_refused_command_changes_nothing),
))
