"""A file of named numpy arrays and a JSON header, each part checksummed, written atomically.

The file shape of two caches that let a new process skip decoding a whole JSONL log: the
recall index's sidecar (:mod:`labmem.recall.sidecar`) and the memory service's fold
snapshot (:mod:`labmem.mmu.snapshot`). It knows nothing about records.

Layout: ``magic · header length · header CRC-32 · header JSON · arrays``, each array
64-byte aligned. The header holds the caller's ``meta``, where each array lies (offset,
dtype, length) and the CRC-32 and length of the whole body. :func:`read_arrays` checks
all of it before anything is used and maps the body read-only; a file that is missing,
torn, of another format or damaged is refused with the reason (:class:`ArrayFileRefused`),
never half-read. :func:`write_arrays` writes a temporary file in the same directory,
``fsync``-s it and renames it over the old one, so a reader sees the old file or the new
one; a writer killed mid-write leaves only its temporary file, which the next writer (or
:func:`remove_temporaries`) removes.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from labmem.core.storage import fsync_directory
from labmem.core.validation import parse_json

_FIXED = struct.Struct("<8sII")  # magic, header length, header CRC-32
_ALIGN = 64
#: Checksums read files this many bytes at a time into one reused buffer: a chunk that
#: stays in the CPU cache, and no fresh allocation (and page faults) for every chunk.
_CHUNK = 1 << 18
TEMP_SUFFIX = ".tmp"


class ArrayFileRefused(Exception):
    """Why an array file cannot be used; the caller rebuilds what it caches."""


def range_crc32(fd: int, start: int, end: int) -> int:
    """CRC-32 of bytes ``start`` to ``end`` of the file open as ``fd`` (its offset is not
    moved); ``EOFError`` if the file ends before ``end``. Reading 116 MiB from the page
    cache this way took 35 ms where a new 1 MiB ``bytes`` per chunk took 62–92 ms."""
    buffer = memoryview(bytearray(min(_CHUNK, max(end - start, 0))))
    crc, offset = 0, start
    while offset < end:
        got = os.preadv(fd, [buffer[: min(len(buffer), end - offset)]], offset)
        if not got:
            raise EOFError(f"the file ended {end - offset} bytes before {end}")
        crc = zlib.crc32(buffer[:got], crc)
        offset += got
    return crc


def prefix_crc32(fd: int, size: int) -> int:
    """CRC-32 of the first ``size`` bytes of the file open as ``fd``."""
    return range_crc32(fd, 0, size)


def _padded(array: np.ndarray) -> bytes:
    data = array.tobytes()
    return data + b"\0" * (-len(data) % _ALIGN)


def temporaries(target: Path) -> list[Path]:
    """Temporary files that writers of ``target`` left (killed mid-write)."""
    prefix = "." + target.name + "."
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    return [target.parent / n for n in names if n.startswith(prefix) and n.endswith(TEMP_SUFFIX)]


def remove_temporaries(target: Path) -> None:
    for path in temporaries(target):
        try:
            os.unlink(path)
        except OSError:
            pass


def write_arrays(target: str | os.PathLike[str], magic: bytes, meta: Mapping[str, Any],
                 arrays: Mapping[str, np.ndarray], *,
                 before_rename: Callable[[], bool] | None = None) -> bool:
    """Write ``meta`` (JSON) and ``arrays`` to ``target`` atomically; ``True`` once renamed.

    ``before_rename`` runs after the temporary file is durable; if it returns ``False`` the
    temporary file is removed and ``target`` is left as it was (``False`` is returned).
    """
    target = Path(target)
    parts = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    layout: dict[str, list[Any]] = {}
    offset = crc = 0
    for name, array in parts.items():
        layout[name] = [offset, array.dtype.str, int(array.size)]
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
        crc = zlib.crc32(_padded(array), crc)
    header = json.dumps({"meta": dict(meta), "arrays": layout, "body_bytes": offset,
                         "body_crc32": crc}, separators=(",", ":")).encode("utf-8")
    head_len = -(-(_FIXED.size + len(header)) // _ALIGN) * _ALIGN
    header = header.ljust(head_len - _FIXED.size, b" ")
    remove_temporaries(target)
    fd, temp = tempfile.mkstemp(prefix="." + target.name + ".", suffix=TEMP_SUFFIX,
                                dir=target.parent)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(_FIXED.pack(magic, len(header), zlib.crc32(header)))
            handle.write(header)
            for array in parts.values():
                handle.write(_padded(array))
            handle.flush()
            os.fsync(handle.fileno())
        if before_rename is not None and not before_rename():
            os.unlink(temp)
            return False
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    fsync_directory(target.parent)
    return True


class Header(NamedTuple):
    """What an array file's header says: the caller's ``meta``, where each array lies
    (``layout``: name -> (offset from ``start``, dtype string, count)), and the body."""

    meta: dict[str, Any]
    layout: dict[str, list[Any]]
    start: int  # where the body begins
    body_bytes: int
    body_crc32: int


def open_array_file(target: str | os.PathLike[str]):
    """``target`` open for reading (binary), or :class:`ArrayFileRefused` saying why not."""
    try:
        return open(target, "rb")
    except FileNotFoundError:
        raise ArrayFileRefused("missing") from None
    except OSError as exc:
        raise ArrayFileRefused(f"unreadable ({exc.strerror})") from None


def read_header(handle, magic: bytes) -> Header:
    """The header of the array file open as ``handle`` (at its start), checked: its magic,
    its own CRC-32, and that the file is exactly as long as it promises. The body is not
    read (:func:`check_body` does that)."""
    size = os.fstat(handle.fileno()).st_size
    fixed = handle.read(_FIXED.size)
    if len(fixed) < _FIXED.size:
        raise ArrayFileRefused("torn (shorter than its fixed header)")
    found, header_len, header_crc = _FIXED.unpack(fixed)
    if found != magic:
        raise ArrayFileRefused(f"not this format (wrong magic {found!r}, expected {magic!r})")
    header = handle.read(header_len)
    if len(header) != header_len or zlib.crc32(header) != header_crc:
        raise ArrayFileRefused("torn (its header is incomplete or damaged)")
    try:  # the one validating parser: a header nested 100,000 deep is refused, not a
        head = parse_json(header)  # RecursionError (its CRC-32 says only "as written")
        found = Header(head["meta"], head["arrays"], _FIXED.size + header_len,
                       int(head["body_bytes"]), int(head["body_crc32"]))
        _check_layout(found)
    except (ValueError, KeyError, TypeError, IndexError):
        raise ArrayFileRefused("damaged header") from None
    if size != found.start + found.body_bytes:
        raise ArrayFileRefused(f"torn ({size} bytes, its header promises "
                               f"{found.start + found.body_bytes})")
    return found


def _check_layout(header: Header) -> None:
    """Refuse a header whose shape is not what :func:`write_arrays` writes: ``meta`` an
    object, every array ``[offset, dtype, count]`` lying inside the body. A header that
    passes its CRC-32 was still written by *someone*; what it claims is checked before a
    reader indexes anything by it (``ValueError``, ``TypeError``: the caller refuses)."""
    if not isinstance(header.meta, dict) or not isinstance(header.layout, dict):
        raise TypeError("meta and arrays must be objects")
    if header.body_bytes < 0:
        raise ValueError("a negative body")
    for entry in header.layout.values():
        offset, dtype, count = entry
        if (type(offset) is not int or type(count) is not int or not isinstance(dtype, str)
                or offset < 0 or count < 0):
            raise TypeError(f"not an array's place: {entry!r}")
        kind = np.dtype(dtype)  # TypeError for a name numpy lacks
        if kind.hasobject:
            raise TypeError("an array of Python objects")
        size = kind.itemsize * count
        if offset + size > header.body_bytes:
            raise ValueError("an array lies outside the body")


def check_body(fd: int, header: Header) -> None:
    """Refuse a body whose CRC-32 is not the header's, reading it a chunk at a time (so the
    check costs no memory: a memory map's pages would count as the process's own)."""
    try:
        crc = range_crc32(fd, header.start, header.start + header.body_bytes)
    except EOFError:
        raise ArrayFileRefused("torn (the body ended early)") from None
    if crc != header.body_crc32:
        raise ArrayFileRefused("damaged (the body's checksum does not match)")


def read_arrays(target: str | os.PathLike[str], magic: bytes
                ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(meta, arrays)`` of a whole, undamaged file; else :class:`ArrayFileRefused`.

    The arrays are read-only views of a memory map of the file (it stays mapped while
    any of them is alive).
    """
    with open_array_file(target) as handle:
        header = read_header(handle, magic)
        check_body(handle.fileno(), header)
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    arrays = {name: np.frombuffer(mapped, dtype=np.dtype(dtype), count=count,
                                  offset=header.start + offset)
              for name, (offset, dtype, count) in header.layout.items()}
    return header.meta, arrays
