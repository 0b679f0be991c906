"""s10, a performance trick: a distill with nothing new costs three ``stat`` calls.

A distill with nothing new (same policy and cutoff, no daily log grown, no new
resolution, MEMORY.md intact) reads the first lines of curated.json and ``stat`` s three
paths — ``daily/``, ``resolutions.jsonl``, ``MEMORY.md`` — and nothing else: its cost is
flat in the history. What tells it that no log grew is a *marker*, the mtime of the
``daily/`` directory (:class:`ChangeMarker`):

* every ``append_fact`` bumps it (``os.utime``) under the workspace lock, *before* the
  line is written — a process killed between the two costs one full check, never a missed
  fact — and creating a daily file bumps it anyway;
* the distill that writes the cursors (:mod:`labmem.workspace.distill_cursors`) reads it
  before listing the logs and records it in the same atomic write (only such a distill: a
  resolution that rewrites curated.json with the cursors it found drops the marker, and
  the next distill checks every file);
* a distill with nothing new trusts the logs when the marker is the recorded one *and* was
  already older than curated.json when that was written (curated.json's own mtime). This
  is the "racy git" rule: timestamps are coarse (a tick of a few ms, or a second on some
  filesystems), so an append in the same tick as the recorded marker can leave it
  unchanged; such a marker is not trusted, and each daily file's size is compared with its
  cursor, as before (one ``stat`` each). An append after curated.json was written bumps
  the marker to at least curated.json's time, so it always differs from a marker older
  than that.

What the marker does not cover: bytes written into a daily file behind the library's back
(a hand edit, a restore that keeps the directory's mtime), and a wall clock set back so
far that a bump lands exactly on the recorded value. The cursors never trusted such files
either (a same-size edit was never seen). The bump is not ``fsync``ed on its own; on
filesystems that do not journal metadata in order, a power cut could keep a fact's line
but lose its bump: that fact then waits for the next append, or the next distill with
other arguments, which read every log grown since its cursor.

MEMORY.md is vouched for the same way: each distill dates it 1 ns before curated.json
(:func:`stamp_memory_md`), a date no later write of it can carry, and records its size; a
distill with nothing new that finds both trusts it, and hashes it otherwise (a hand edit,
or a filesystem that rounds the nanosecond away). A hand edit in the microseconds between
the library's write of MEMORY.md and its stamp would be taken as intact.

The seam: ``WorkspaceMemory.nothing_new_check`` is a :class:`NothingNewCheck`;
:func:`nothing_new` is this one, and ``None`` turns the shortcut off (every distill runs
the fold, which finds nothing to change and writes nothing).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from labmem.core.clock import parse_timestamp
from labmem.core.errors import InvalidInputError
from labmem.core.validation import parse_json
from labmem.workspace.curation import DistillPolicy, DistillReport
from labmem.workspace.facts import day_of_file

if TYPE_CHECKING:
    from labmem.workspace.memory import WorkspaceMemory

__all__ = ["ChangeMarker", "CuratedHead", "NothingNewCheck", "digest", "memory_md_intact",
           "nothing_new", "stamp_memory_md"]


class NothingNewCheck(Protocol):
    """The report of a distill that would change nothing, found without running it, or
    ``None`` (then the distill runs the fold). It must never return a report the fold
    would not."""

    def __call__(self, memory: WorkspaceMemory, policy: DistillPolicy,
                 as_of: datetime) -> DistillReport | None: ...


def digest(text: str | bytes) -> str:
    """What MEMORY.md's header entry holds: the SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


class ChangeMarker:
    """The change marker of the daily logs: the ``daily/`` directory's mtime (ns)."""

    def __init__(self, daily_dir: Path) -> None:
        self.daily_dir = daily_dir

    def read(self) -> int | None:
        try:
            return os.stat(self.daily_dir).st_mtime_ns
        except FileNotFoundError:
            return None

    def bump(self) -> None:
        """Bump the marker, *before* a fact is appended (a crash between the two costs
        one per-file check, never a missed fact). Creating a file bumps it too."""
        try:
            os.utime(self.daily_dir)
        except FileNotFoundError:
            pass  # the append creates the directory: a marker no cursor recorded

    def logs_unchanged(self, files: Mapping[str, list[int]], open_file: list[Any] | None,
                       last_day: date) -> bool:
        """Is every daily file up to ``last_day`` exactly as long as the cursors say?

        One ``stat`` per file, relative to the open directory (no path objects: this is
        the whole cost of a distill with nothing new when the marker cannot vouch).
        """
        try:
            directory = os.open(self.daily_dir, os.O_RDONLY)
        except FileNotFoundError:
            return not files and open_file is None
        except OSError:
            return False  # (a platform that cannot open a directory: read everything)
        try:
            seen, open_seen = 0, open_file is None
            for name in os.listdir(directory):
                cursor = files.get(name)
                if cursor is not None:
                    if os.stat(name, dir_fd=directory).st_size != cursor[0]:
                        return False
                    seen += 1
                elif open_file is not None and name == open_file[0]:
                    if os.stat(name, dir_fd=directory).st_size != open_file[1]:
                        return False
                    open_seen = True
                else:
                    day = day_of_file(Path(name))
                    if day is not None and day <= last_day:
                        return False  # a daily file no cursor knows
            return seen == len(files) and open_seen
        finally:
            os.close(directory)


class CuratedHead:
    """The first lines of curated.json (``encode_snapshot``'s layout: ``{``, then one
    ``"name":value,`` line per header member), read only as far as they are asked for."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._buffer = b""
        self._chunk = 4096  # the distill member fits; the per-file cursors come next

    def member(self, index: int, name: str) -> Any:
        """The value of header line ``index`` (1-based after ``{``) if it is ``name``,
        else the ``KeyError`` that sends the caller to the full read."""
        while self._buffer.count(b"\n") <= index:
            chunk = self._handle.read(self._chunk)
            if not chunk:
                raise KeyError(name)
            self._buffer += chunk
            self._chunk *= 4
        lines = self._buffer.split(b"\n", index + 1)
        if lines[0] != b"{":
            raise KeyError(name)
        try:
            # the one validating parser: a header line nested 100,000 levels deep is a
            # ValueError here (then the full read reports it), never a RecursionError
            member = parse_json(b"{" + lines[index].rstrip(b",") + b"}")
        except ValueError:  # UnicodeDecodeError, JSONDecodeError and too deep included
            raise KeyError(name) from None
        if not isinstance(member, dict) or list(member) != [name]:
            raise KeyError(name)
        return member[name]


def memory_md_intact(memory_md_path: Path, header: Mapping[str, Any], written: int) -> bool:
    """Is MEMORY.md the projection the header describes? Its stamp and size say so
    (see :func:`stamp_memory_md`), else its digest decides."""
    try:
        shown = os.stat(memory_md_path)
    except FileNotFoundError:
        return False
    if shown.st_mtime_ns == written - 1 and shown.st_size == header["memory_md_bytes"]:
        return True
    try:
        with open(memory_md_path, "rb") as handle:
            return digest(handle.read()) == header["memory_md"]
    except FileNotFoundError:
        return False


def stamp_memory_md(curated_path: Path, memory_md_path: Path) -> None:
    """Date MEMORY.md (just written, or just read and found equal to the projection)
    1 ns before curated.json. Any later write of it — a hand edit, another library
    call — carries a later time, so a distill with nothing new that finds this exact
    time (and the recorded size) knows MEMORY.md is intact without hashing it; any
    other time sends it to the digest. (A filesystem that cannot store the nanosecond
    rounds it away: then every such distill hashes.)"""
    try:
        written = os.stat(curated_path).st_mtime_ns
        os.utime(memory_md_path, ns=(written - 1, written - 1))
    except OSError:
        pass  # (best effort: the digest still decides)


def nothing_new(memory: WorkspaceMemory, policy: DistillPolicy,
                as_of: datetime) -> DistillReport | None:
    """The :class:`NothingNewCheck` of the marker: the report read from the cursors alone
    (the header lines of curated.json and three ``stat`` calls); else ``None``.

    The logs are unchanged when the ``daily/`` marker is the one recorded and was
    already older than curated.json when that was written (see the module notes);
    otherwise each daily file's size is checked against its cursor.
    """
    try:
        handle = open(memory.curated_path, "rb")
    except FileNotFoundError:
        return None
    with handle:
        written = os.fstat(handle.fileno()).st_mtime_ns
        head = CuratedHead(handle)
        try:
            memory._check_header(head.member(1, "format"), head.member(2, "workspace_scope"))
            header = head.member(3, "distill")
            if header is None or header["report"] is None or \
                    header["policy"] != policy.to_dict():
                return None
            cutoff = policy.cutoff(as_of)
            if parse_timestamp(header["cutoff"], field="cutoff") != cutoff:
                return None
            try:
                audited = os.stat(memory.resolutions_path).st_size
            except FileNotFoundError:
                audited = 0
            if audited != header["resolutions"]:
                return None
            marker = header["marker"]
            change_marker = ChangeMarker(memory.daily_dir)
            if type(marker) is not int or marker >= written or \
                    marker != change_marker.read():
                if not change_marker.logs_unchanged(head.member(4, "files"),
                                                    header["open_file"], cutoff.date()):
                    return None
            if not memory_md_intact(memory.memory_md_path, header, written):
                return None
            return DistillReport(**header["report"])
        except (KeyError, TypeError, ValueError, AttributeError, InvalidInputError):
            return None  # an unexpected header: the fold reads and checks everything
