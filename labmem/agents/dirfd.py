"""File operations relative to directory descriptors: a tree walked one name at a time.

Why not paths: a path that is checked (``lstat`` on each step, ``realpath``) and opened
later can change in between. Another process that swaps a directory for a symbolic link
in a loop wins that race within a few hundred tries, and ``O_NOFOLLOW`` guards only the
last name of a path. Here every step opens the next name *relative to the descriptor of
the directory before it*, with ``O_DIRECTORY | O_NOFOLLOW``; every later use (``open``,
``stat``, ``unlink``, ``rmdir``, ``rename``, ``mkdir``, ``scandir``) takes the
descriptor of the directory it acts in. A name swapped for a link is then refused at the
moment it is used, not at a moment before: there is no check-then-use gap.

Failures of a step are :class:`StepError` (what stood in the way, and at which step);
the memory tool turns them into its own refusals. Other ``OSError`` s pass through.

(This module lives beside the memory tool rather than in ``labmem.core``: the core's
module list is fixed by ``tests/test_import_rules.py``.)
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from labmem.core.storage import write_durably

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: opening a planted FIFO must not hang; the file's type is checked after
NODE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC

_temporaries = itertools.count()


class StepError(Exception):
    """One name of a walk could not be used as a directory.

    ``step`` counts names from 0; ``kind`` is what stands there: ``"missing"``,
    ``"link"``, ``"file"`` (anything that is not a directory) or ``"error"``.
    """

    def __init__(self, step: int, kind: str, detail: str = "") -> None:
        self.step = step
        self.kind = kind
        super().__init__(f"step {step}: {kind}{' (' + detail + ')' if detail else ''}")


@dataclass(frozen=True)
class Entry:
    """One directory entry as ``lstat`` saw it (never through a link)."""

    name: str
    kind: str  # "dir", "file", "link" or "other"
    size: int


def kind_of(mode: int) -> str:
    """The four kinds a walk distinguishes."""
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def kind_at(dir_fd: int, name: str) -> str | None:
    """What ``name`` is in the directory ``dir_fd`` (``None``: nothing), not following a
    link. Only for messages and for "does it exist": the answer may be stale at once."""
    try:
        return kind_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def open_dir(dir_fd: int, name: str, step: int = 0) -> int:
    """A descriptor of the directory ``name`` in ``dir_fd``; a link or a file there is a
    :class:`StepError` (the kernel refuses it in the same call that opens it)."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise StepError(step, "missing") from None
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            found = kind_at(dir_fd, name)
            raise StepError(step, "link" if found == "link" else
                            "missing" if found is None else "file") from None
        raise StepError(step, "error", os.strerror(exc.errno or 0)) from None


def walk_down(root_fd: int, names: tuple[str, ...], *, create: bool = False) -> int:
    """The descriptor of the directory ``root/names...``, opened one name at a time.

    With ``create`` a missing directory is made (``mkdir`` in its parent's descriptor)
    and then opened the same way. The caller closes the descriptor; ``root_fd`` itself
    is duplicated when ``names`` is empty, so the result is always the caller's to close.
    """
    current = os.dup(root_fd)
    try:
        for step, name in enumerate(names):
            try:
                following = open_dir(current, name, step)
            except StepError as exc:
                if not (create and exc.kind == "missing"):
                    raise
                try:
                    os.mkdir(name, 0o700, dir_fd=current)
                except FileExistsError:
                    pass  # made by another process meanwhile: open decides what it is
                following = open_dir(current, name, step)
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def open_node(dir_fd: int, name: str) -> tuple[int, os.stat_result]:
    """An open descriptor of ``name`` (a file or a directory, never a link) and its
    ``fstat``: the type checked is the type of what was opened."""
    fd = os.open(name, NODE_FLAGS, dir_fd=dir_fd)
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def read_fd(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes from ``fd`` (one more than allowed says "too big")."""
    chunks, left = [], limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def listing(dir_fd: int) -> list[Entry]:
    """The entries of the directory ``dir_fd``, sorted by name, as ``lstat`` sees them."""
    entries = []
    with os.scandir(dir_fd) as scan:
        for item in scan:
            try:
                info = item.stat(follow_symlinks=False)
            except FileNotFoundError:  # removed while listing
                continue
            entries.append(Entry(item.name, kind_of(info.st_mode), info.st_size))
    entries.sort(key=lambda e: e.name)
    return entries


def walk(dir_fd: int, *, max_depth: int | None = None, skip_hidden: bool = False
         ) -> Iterator[tuple[tuple[str, ...], Entry, int]]:
    """Every entry below ``dir_fd`` as ``(names from dir_fd, entry, descriptor of the
    directory holding it)``, depth first with names sorted (the order of sorting the
    paths), never through a link. The descriptor is valid until the next step.

    Iterative, with one open descriptor per level of the current branch: a deep tree
    costs descriptors, not Python stack. A directory swapped for a link while walking is
    skipped, not followed. ``skip_hidden`` leaves out names starting with '.' (and all
    below them): labmem's temporary files.
    """
    def entries_of(fd: int) -> Iterator[Entry]:
        return iter([e for e in listing(fd) if not (skip_hidden and e.name.startswith("."))])

    stack: list[tuple[tuple[str, ...], Iterator[Entry], int]] = [
        ((), entries_of(dir_fd), os.dup(dir_fd))]
    try:
        while stack:
            prefix, entries, fd = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                os.close(fd)
                continue
            names = (*prefix, entry.name)
            yield names, entry, fd
            if entry.kind == "dir" and (max_depth is None or len(names) < max_depth):
                try:
                    sub = open_dir(fd, entry.name)
                except StepError:
                    continue
                try:
                    stack.append((names, entries_of(sub), sub))
                except BaseException:
                    os.close(sub)
                    raise
    finally:
        for _, _, fd in stack:
            os.close(fd)


def write_file(dir_fd: int, name: str, data: bytes, *, replace: bool) -> None:
    """Put ``data`` at ``name`` in ``dir_fd`` atomically and durably.

    A temporary file is created with ``O_EXCL | O_NOFOLLOW`` in the same directory
    (a short hidden name, whatever the length of ``name``), written and ``fsync`` ed;
    then ``replace`` renames it over ``name`` (a link standing there is replaced, never
    followed), or, for a new file, it is hard-linked as ``name``, which fails with
    ``FileExistsError`` if anything took the name meanwhile. The directory is
    ``fsync`` ed last.
    """
    temp = f".tmp-{os.getpid()}-{next(_temporaries)}"
    fd = os.open(temp, TEMP_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        try:
            write_durably(fd, data)
        finally:
            os.close(fd)
        if replace:
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            os.unlink(temp, dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    fsync_fd(dir_fd)


def fsync_fd(fd: int) -> None:
    """``fsync`` a directory descriptor (a creation or rename in it becomes durable)."""
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a directory
        pass


def remove_tree(parent_fd: int, name: str) -> None:
    """Remove the directory ``name`` in ``parent_fd`` and everything in it, by
    descriptors: no path is ever built, so neither ``PATH_MAX`` nor a link swapped in
    on the way can send it elsewhere (a link is unlinked itself, never followed)."""
    stack = [(parent_fd, name, open_dir(parent_fd, name))]
    try:
        while stack:
            _, _, fd = stack[-1]
            deeper = None
            for entry in listing(fd):
                if entry.kind == "dir":
                    try:
                        deeper = (fd, entry.name, open_dir(fd, entry.name))
                    except StepError:  # swapped for a link or file meanwhile: unlink it
                        _unlink_quietly(fd, entry.name)
                        continue
                    break
                _unlink_quietly(fd, entry.name)
            if deeper is not None:
                stack.append(deeper)
                continue
            parent, own, fd = stack.pop()
            os.close(fd)
            os.rmdir(own, dir_fd=parent)
    finally:
        for _, _, fd in stack:
            os.close(fd)


def _unlink_quietly(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
