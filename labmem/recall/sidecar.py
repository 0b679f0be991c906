"""s12 recall at scale: the persistent index beside a JSONL records file (the *sidecar*).

Building the in-memory index means decoding, validating and tokenizing every record —
seconds at 100,000 records, in every new process. The sidecar keeps the result: named
numpy arrays (postings, lengths, times, byte offsets, the record context) and a little
JSON metadata, in one file written atomically next to ``records.jsonl``
(``records.jsonl.recall-index``).

It is a cache, never a source of truth. Before anything in it is used, :func:`load_sidecar`
checks that it is whole (its length and a CRC-32 of its header and of its body), that it
was made for this user scope, and that the records file is the one it describes: the same
file (device and inode), at least as long as the prefix it covers, and that prefix
byte-for-byte unchanged (a CRC-32 of the covered bytes, read in 1 MiB chunks so the check
costs no memory). Anything else — missing, torn, from another file, older than a rewrite,
newer than the records, half-written by a crashed process — is refused with the reason,
and the caller rebuilds from the records.

Writes go to a temporary file in the same directory, are ``fsync``-ed and renamed over
the old sidecar, so a reader sees the old file or the new one, never a mix; a writer
killed mid-write leaves only its temporary file, which the next writer removes.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labmem.core.storage import fsync_directory

__all__ = ["SIDECAR_SUFFIX", "SIDECAR_VERSION", "Sidecar", "SidecarRefused", "load_sidecar",
           "write_sidecar", "sidecar_path", "prefix_crc32"]

SIDECAR_SUFFIX = ".recall-index"
SIDECAR_VERSION = 1
MAGIC = b"LMRIDX01"
_FIXED = struct.Struct("<8sII")  # magic, header length, header CRC-32
_ALIGN = 64
_CHUNK = 1 << 20
_TEMP_PREFIX = "."
_TEMP_SUFFIX = SIDECAR_SUFFIX + ".tmp"


def sidecar_path(records_path: str | os.PathLike[str]) -> Path:
    """Where the sidecar of ``records_path`` lives: beside it, with a suffix added."""
    records_path = Path(records_path)
    return records_path.with_name(records_path.name + SIDECAR_SUFFIX)


def prefix_crc32(handle, size: int) -> int:
    """CRC-32 of the first ``size`` bytes of an open binary file, 1 MiB at a time."""
    buffer = bytearray(min(_CHUNK, max(size, 1)))
    view = memoryview(buffer)
    crc = 0
    handle.seek(0)
    left = size
    while left:
        got = handle.readinto(view[:min(left, len(buffer))])
        if not got:
            raise EOFError(f"the file ended {left} bytes before {size}")
        crc = zlib.crc32(view[:got], crc)
        left -= got
    return crc


@dataclass(frozen=True, eq=False)
class Sidecar:
    """A validated sidecar: its metadata and its arrays (read-only views of a memory map).

    ``meta`` holds what the writer put there (the covered prefix, the record counts);
    ``arrays`` maps names to numpy arrays; :meth:`strings` decodes a stored string list.
    """

    meta: Mapping[str, Any]
    arrays: Mapping[str, np.ndarray]
    _map: Any = None

    def strings(self, name: str) -> list[str]:
        """A list of strings stored with :func:`write_sidecar` (``strings=``)."""
        return json.loads(self.arrays[name].tobytes().decode("utf-8"))


def write_sidecar(records_path: str | os.PathLike[str], meta: Mapping[str, Any],
                  arrays: Mapping[str, np.ndarray],
                  strings: Mapping[str, list[str]] = {}) -> Path:  # noqa: B006 (read only)
    """Write the sidecar of ``records_path`` atomically and return its path.

    ``meta`` must be JSON; ``arrays`` are stored with their dtypes, 64-byte aligned;
    ``strings`` are lists of strings (stored as JSON text).
    """
    target = sidecar_path(records_path)
    parts = dict(arrays)
    for name, values in strings.items():
        text = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
        parts[name] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    layout: dict[str, list[Any]] = {}
    offset = 0
    for name, array in parts.items():
        array = np.ascontiguousarray(array)
        parts[name] = array
        layout[name] = [offset, array.dtype.str, int(array.size)]
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    body_bytes = offset
    crc = 0
    for array in parts.values():
        crc = zlib.crc32(_padded(array), crc)
    header = json.dumps({"version": SIDECAR_VERSION, "meta": dict(meta), "arrays": layout,
                         "body_bytes": body_bytes, "body_crc32": crc},
                        separators=(",", ":")).encode("utf-8")
    head_len = -(-(_FIXED.size + len(header)) // _ALIGN) * _ALIGN
    header = header.ljust(head_len - _FIXED.size, b" ")
    _remove_stale_temporaries(target)
    fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX + target.name + ".",
                                suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o644)  # readable like the records file (mkstemp makes it private)
        with os.fdopen(fd, "wb") as handle:
            handle.write(_FIXED.pack(MAGIC, len(header), zlib.crc32(header)))
            handle.write(header)
            for array in parts.values():
                handle.write(_padded(array))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    fsync_directory(target.parent)
    return target


def _padded(array: np.ndarray) -> bytes:
    data = array.tobytes()
    return data + b"\0" * (-len(data) % _ALIGN)


def _remove_stale_temporaries(target: Path) -> None:
    """Temporary files of writers that were killed mid-write (never read; only removed)."""
    prefix = _TEMP_PREFIX + target.name + "."
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(".tmp"):
            try:
                os.unlink(target.parent / name)
            except OSError:
                pass


class SidecarRefused(Exception):
    """Why a sidecar cannot be used (the caller rebuilds; nothing is raised to the user)."""


def load_sidecar(records_path: str | os.PathLike[str], *, user_scope: str) -> Sidecar:
    """The sidecar of ``records_path`` if it is whole and describes this file; else raise
    :class:`SidecarRefused` with the reason (missing, torn, another file, stale, newer)."""
    records_path = Path(records_path)
    target = sidecar_path(records_path)
    try:
        handle = open(target, "rb")
    except FileNotFoundError:
        raise SidecarRefused("missing") from None
    except OSError as exc:
        raise SidecarRefused(f"unreadable ({exc.strerror})") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        fixed = handle.read(_FIXED.size)
        if len(fixed) < _FIXED.size:
            raise SidecarRefused("torn (shorter than its fixed header)")
        magic, header_len, header_crc = _FIXED.unpack(fixed)
        if magic != MAGIC:
            raise SidecarRefused("not a labmem recall index (wrong magic)")
        header = handle.read(header_len)
        if len(header) != header_len or zlib.crc32(header) != header_crc:
            raise SidecarRefused("torn (its header is incomplete or damaged)")
        try:
            head = json.loads(header)
            meta, layout = head["meta"], head["arrays"]
            body_bytes, body_crc = int(head["body_bytes"]), int(head["body_crc32"])
        except (ValueError, KeyError, TypeError):
            raise SidecarRefused("damaged header") from None
        if head.get("version") != SIDECAR_VERSION:
            raise SidecarRefused(f"format version {head.get('version')!r}, not "
                                 f"{SIDECAR_VERSION}")
        start = _FIXED.size + header_len
        if size != start + body_bytes:
            raise SidecarRefused(f"torn ({size} bytes, its header promises "
                                 f"{start + body_bytes})")
        crc = 0
        left = body_bytes
        buffer = bytearray(min(_CHUNK, max(body_bytes, 1)))
        view = memoryview(buffer)
        while left:
            got = handle.readinto(view[:min(left, len(buffer))])
            if not got:
                raise SidecarRefused("torn (the body ended early)")
            crc = zlib.crc32(view[:got], crc)
            left -= got
        if crc != body_crc:
            raise SidecarRefused("damaged (the body's checksum does not match)")
        _check_records_file(records_path, meta, user_scope)
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    arrays = {}
    for name, (offset, dtype, count) in layout.items():
        arrays[name] = np.frombuffer(mapped, dtype=np.dtype(dtype), count=count,
                                     offset=start + offset)
    return Sidecar(meta, arrays, mapped)


def _check_records_file(records_path: Path, meta: Mapping[str, Any], user_scope: str) -> None:
    """Refuse a sidecar that does not describe this records file's current prefix."""
    if meta.get("user_scope") != user_scope:
        raise SidecarRefused("made for another user scope")
    try:
        with open(records_path, "rb") as records:
            stat = os.fstat(records.fileno())
            if [stat.st_dev, stat.st_ino] != [meta.get("device"), meta.get("inode")]:
                raise SidecarRefused("made for another file (device or inode differ)")
            covered = int(meta["covered_bytes"])
            if stat.st_size < covered:
                raise SidecarRefused(f"newer than the records ({covered} bytes covered, the "
                                     f"file has {stat.st_size})")
            if prefix_crc32(records, covered) != meta["covered_crc32"]:
                raise SidecarRefused("the records it covers were changed (checksum)")
    except FileNotFoundError:
        raise SidecarRefused("the records file is missing") from None
