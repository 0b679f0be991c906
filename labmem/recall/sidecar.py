"""s12 recall at scale: the persistent index beside a JSONL records file (the *sidecar*).

Building the in-memory index means decoding, validating and tokenizing every record, in
every new process (seconds at 100,000 records: bench/results/recall_design_notes.md).
The sidecar keeps the result: named numpy arrays (postings, lengths, times, byte
offsets, the record context) and a little JSON metadata, in one file written atomically
next to ``records.jsonl`` (``records.jsonl.recall-index``). A reader takes from it only
what it uses: an array when first asked for, a term's postings when a query names the term.

It is a cache, never a source of truth. Before anything in it is used, :func:`load_sidecar`
checks that it is whole (its length and a CRC-32 of its header and of its body), that it
was made for this user scope, and that the records file is the one it describes: the same
file (device and inode), at least as long as the prefix it covers, and that prefix
byte-for-byte unchanged (a CRC-32 of the covered bytes, read in 1 MiB chunks so the check
costs no memory). Anything else — missing, torn, from another file, older than a rewrite,
newer than the records, half-written by a crashed process — is refused with the reason,
and the caller rebuilds from the records.

Those two checksums read both files whole (most of a cold open: bench/results/
recall_design_notes.md). So a full check that passes leaves a *stamp* beside the sidecar
(``records.jsonl.recall-index.verified``): the identity, size and modification time of
both files as they were when checked. A later open whose two files still show exactly
those is trusted without reading them — the proof ``make`` and ``git`` use for "this file
has not changed". It holds because a write to either file moves its modification time,
with one trap (git calls it "racy"): timestamps are coarse, so a write in the same clock
tick as the last one leaves the time unchanged. A stamp is therefore written only when
both files' times are :data:`SETTLED_NS` older than the stamp's own creation, so any later
write gets a later time. Appending to the records moves their time too, so the first open
after new records does the full check again (and stamps the new state). What a stamp
cannot see is a deliberate in-place edit that also resets the file's time (``touch -d``).

Those checks prove the sidecar is whole and describes this file, not that what it says of
the records is true: its checksums are computed by whoever writes it, so anyone who can
write the directory can seal a lying one. What the index reads is therefore also checked
for shape here (:func:`_check_shape`) and where it is used, and every hit it proposes is
read from the records and compared (:mod:`labmem.recall.index`); a record a lying sidecar
leaves out is the one thing no such check sees.

Writes go to a temporary file in the same directory, are ``fsync``-ed and renamed over
the old sidecar, so a reader sees the old file or the new one, never a mix; a writer
killed mid-write leaves only its temporary file, which the next writer removes.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import weakref
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labmem.core.arrayfile import (
    ArrayFileRefused,
    check_body,
    open_array_file,
    prefix_crc32,
    read_header,
    write_arrays,
)
from labmem.core.storage import FileSignature, file_signature, write_bytes_atomic
from labmem.core.validation import parse_json

__all__ = ["SIDECAR_SUFFIX", "SIDECAR_VERSION", "SETTLED_NS", "Sidecar", "SidecarRefused",
           "load_sidecar", "write_sidecar", "sidecar_path", "stamp_path",
           "load_companion", "write_companion", "PackedStrings", "packed_strings",
           "string_key", "string_keys", "check_records_file"]

SIDECAR_SUFFIX = ".recall-index"
SIDECAR_VERSION = 3  # 2: each term's largest count and shortest record (pruning's
#   bounds); 3: the records of terms in many records as bits (pruning's counts)
MAGIC = b"LMRIDX01"
_TEMP_PREFIX = "."
STAMP_SUFFIX = ".verified"

#: How much older than a stamp both files' modification times must be for the stamp to
#: vouch for them: well above the timestamp granularity of common filesystems (a clock
#: tick on ext4 or XFS, one second on HFS+, two on FAT).
SETTLED_NS = 2_000_000_000


def sidecar_path(records_path: str | os.PathLike[str]) -> Path:
    """Where the sidecar of ``records_path`` lives: beside it, with a suffix added."""
    records_path = Path(records_path)
    return records_path.with_name(records_path.name + SIDECAR_SUFFIX)


def stamp_path(records_path: str | os.PathLike[str]) -> Path:
    """Where the stamp of a fully checked sidecar lives (see the module docstring)."""
    side = sidecar_path(records_path)
    return side.with_name(side.name + STAMP_SUFFIX)


class _OpenFile:
    """One read-only descriptor of the sidecar, closed when the last user lets go. Reads go
    through it (``pread``), not a memory map: a map's pages would count as this process's
    memory, and the kernel maps whole neighbourhoods around every page a term touches."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._closer = weakref.finalize(self, os.close, fd)

    def read(self, offset: int, size: int) -> bytes:
        data = os.pread(self.fd, size, offset)
        if len(data) != size:  # pragma: no cover - the file is ours and was checked whole
            raise SidecarRefused(f"torn (read {len(data)} of {size} bytes at {offset})")
        return data


class _Arrays(Mapping[str, np.ndarray]):
    """The sidecar's arrays by name, each read whole on first use (read-only)."""

    def __init__(self, file: _OpenFile, layout: Mapping[str, tuple[int, np.dtype, int]]):
        self._file, self._layout = file, layout
        self._read: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        found = self._read.get(name)
        if found is None:
            offset, dtype, count = self._layout[name]
            found = self._read[name] = np.frombuffer(
                self._file.read(offset, count * dtype.itemsize), dtype=dtype)
        return found

    def __iter__(self):
        return iter(self._layout)

    def __len__(self) -> int:
        return len(self._layout)


@dataclass(frozen=True, eq=False)
class Sidecar:
    """A validated sidecar: its metadata and its arrays, read from the file as needed.

    ``meta`` holds what the writer put there (the covered prefix, the record counts);
    ``arrays`` maps names to numpy arrays, each read whole on first use; :meth:`slice`
    reads part of one (a term's postings); :meth:`strings` decodes a stored string list.
    """

    meta: Mapping[str, Any]
    layout: Mapping[str, tuple[int, np.dtype, int]]  # name -> (file offset, dtype, count)
    _file: _OpenFile
    proof: str = "checksums"  # or "stamp": how this open knew both files were unchanged
    identity: tuple[int, ...] = ()  # (device, inode, size, body CRC-32): which sidecar
    arrays: Mapping[str, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arrays", _Arrays(self._file, self.layout))

    def slice(self, name: str, lo: int, hi: int) -> np.ndarray:
        """``arrays[name][lo:hi]``, read on its own (a new, read-only array)."""
        offset, dtype, count = self.layout[name]
        hi = min(hi, count)
        if hi <= lo:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(self._file.read(offset + lo * dtype.itemsize,
                                             (hi - lo) * dtype.itemsize), dtype=dtype)

    def strings(self, name: str) -> list[str]:
        """A list of strings stored with :func:`write_sidecar` (``strings=``); a part that
        is not one (not JSON, nested past the bound, not a list of strings) is refused."""
        offset, _, count = self.layout[name]
        try:
            found = parse_json(self._file.read(offset, count))
        except ValueError as exc:
            raise SidecarRefused(f"its {name!r} are not JSON ({exc})") from None
        if not isinstance(found, list) or not all(type(item) is str for item in found):
            raise SidecarRefused(f"its {name!r} are not a list of strings")
        return found


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
    write_arrays(target, MAGIC, {**meta, "version": SIDECAR_VERSION}, parts)
    return target


class SidecarRefused(ArrayFileRefused):
    """Why a sidecar cannot be used (the caller rebuilds; nothing is raised to the user)."""


def load_sidecar(records_path: str | os.PathLike[str], *, user_scope: str) -> Sidecar:
    """The sidecar of ``records_path`` if it is whole and describes this file; else raise
    :class:`SidecarRefused` with the reason (missing, torn, another file, stale, newer)."""
    try:
        return _load_sidecar(Path(records_path), user_scope)
    except SidecarRefused:
        raise
    except ArrayFileRefused as refused:  # the file shape's own reasons (missing, torn, ...)
        raise SidecarRefused(str(refused)) from None


def _load_sidecar(records_path: Path, user_scope: str) -> Sidecar:
    with open_array_file(sidecar_path(records_path)) as handle:
        side_stat = os.fstat(handle.fileno())
        size = side_stat.st_size
        records_before = file_signature(records_path)
        stamped = _stamp_vouches(records_path, FileSignature.of(side_stat), records_before)
        header = read_header(handle, MAGIC)
        meta = header.meta
        if meta.get("version") != SIDECAR_VERSION:
            raise SidecarRefused(f"format version {meta.get('version')!r}, not "
                                 f"{SIDECAR_VERSION}")
        if meta.get("user_scope") != user_scope:
            raise SidecarRefused("made for another user scope")
        _check_shape(meta, header.layout)
        if not stamped:
            stamp = _begin_stamp(records_path)  # first: its time precedes what is checked
            records_checked = file_signature(records_path)
            side_checked = FileSignature.of(os.fstat(handle.fileno()))
            try:
                _both(lambda: check_body(handle.fileno(), header),
                      lambda: check_records_file(records_path, meta))
                if FileSignature.of(os.fstat(handle.fileno())) == side_checked:
                    _finish_stamp(stamp, records_path, side_checked, records_checked)
            finally:
                _discard(stamp)
        else:
            _check_identity(records_before, meta)
        file = _OpenFile(os.dup(handle.fileno()))
    where = {name: (header.start + offset, np.dtype(dtype), count)
             for name, (offset, dtype, count) in header.layout.items()}
    return Sidecar(meta, where, file, "stamp" if stamped else "checksums",
                   (side_stat.st_dev, side_stat.st_ino, size, header.body_crc32))


#: The metadata every reader indexes by: whole numbers, never negative.
_META_COUNTS = ("device", "inode", "covered_bytes", "covered_lines", "covered_crc32",
                "records", "searched_records", "total_length", "titles", "dates")
#: Arrays with one entry per record (``offsets``: one more, the end of the last line).
_PER_RECORD = ("lengths", "captured_at", "context_conversation", "context_thread",
               "context_previous", "context_next", "context_title", "context_date",
               "context_captured", "context_lengths")
#: Arrays with one entry per term (``postings_offsets``: one more).
_PER_TERM = ("max_counts", "min_lengths", "first_use")
_STRINGS = ("terms", "memory_ids", "context_threads")


def _check_shape(meta: Mapping[str, Any], layout: Mapping[str, list[Any]]) -> None:
    """Refuse a sidecar whose metadata or arrays are not of the shape the index writes.

    Its checksums prove only that the file is as its writer left it, not that a labmem
    index wrote it: anyone who can write the directory can seal a file with valid CRCs.
    So what a reader indexes by is checked here, once and without reading an array: the
    counts are whole numbers, every array is there with a whole-number (or, for times,
    floating) type and as long as the counts say. What only the arrays' values can show
    (a position past the last record, postings out of order) is checked where a query
    reads them (:class:`~labmem.recall.index.InMemoryTermIndex`)."""
    for key in _META_COUNTS:
        value = meta.get(key)
        if type(value) is not int or value < 0:
            raise SidecarRefused(f"damaged metadata ({key} is {value!r})")
    records = meta["records"]
    if meta["covered_lines"] != records or meta["searched_records"] > records:
        raise SidecarRefused("damaged metadata (its record counts disagree)")
    kinds: dict[str, tuple[str, int]] = {}
    for name in ("postings_offsets", "positions", "counts", "bits_slots", "bits", "offsets",
                 *_PER_RECORD, *_PER_TERM, *_STRINGS):
        entry = layout.get(name)
        if entry is None:
            raise SidecarRefused(f"damaged (no {name!r} array)")
        kinds[name] = (np.dtype(entry[1]).kind, entry[2])
    wanted = {name: records for name in _PER_RECORD}
    wanted["offsets"] = records + 1
    wanted["counts"] = kinds["positions"][1]
    terms = kinds["postings_offsets"][1] - 1
    wanted.update((name, terms) for name in _PER_TERM)
    for name, (kind, count) in kinds.items():
        if kind not in ("f" if name.endswith("captured") or name == "captured_at" else "iu"):
            raise SidecarRefused(f"damaged ({name!r} holds {kind!r} values)")
        if count != wanted.get(name, count) or terms < 0:
            raise SidecarRefused(f"damaged ({name!r} has {count} entries, not "
                                 f"{wanted.get(name)})")


def _both(first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run two whole-file checks at once (zlib's CRC-32 and the reads let go of the GIL,
    so on two cores the sidecar's body and the records' prefix are read side by side);
    ``first``'s error wins, as if it had run first."""
    failed: list[BaseException] = []

    def run_first() -> None:
        try:
            first()
        except BaseException as exc:  # handed to the caller's thread below
            failed.append(exc)

    worker = threading.Thread(target=run_first, name="labmem-sidecar-check", daemon=True)
    worker.start()
    try:
        second()
    finally:
        worker.join()
        if failed:
            raise failed[0]


# -- the stamp: "both files were checked in full, and have not been written since" -------

def _stamp_text(side: FileSignature, records: FileSignature) -> bytes:
    """A stamp's bytes: the two signatures and a CRC-32 of them (so a torn or damaged
    stamp is never read as another, valid one)."""
    body = json.dumps({"sidecar": list(side), "records": list(records)},
                      separators=(",", ":"))
    return json.dumps({"stamp": body, "crc32": zlib.crc32(body.encode("ascii"))},
                      separators=(",", ":")).encode("ascii")


def _stamp_vouches(records_path: Path, side: FileSignature,
                   records: FileSignature | None) -> bool:
    """Does a stamp describe exactly these two files as they are now? Read through the
    one validating parser (a stamp nested 100,000 deep is just not a stamp), and only if
    its own CRC-32 holds."""
    if records is None:
        return False
    try:
        outer = parse_json(stamp_path(records_path).read_bytes())
        body = outer["stamp"]
        if type(body) is not str or zlib.crc32(body.encode("utf-8")) != outer["crc32"]:
            return False
        stamp = parse_json(body)
        return (_signature(stamp["sidecar"]) == side
                and _signature(stamp["records"]) == records)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False  # missing, unreadable or not a stamp: the full check decides


def _signature(value: Any) -> FileSignature | None:
    """A signature from a stamp, only if it is a list of whole numbers of the right size."""
    if (not isinstance(value, list) or len(value) != len(FileSignature._fields)
            or not all(type(part) is int for part in value)):
        return None
    return FileSignature(*value)


def _begin_stamp(records_path: Path) -> tuple[int, str, int] | None:
    """A temporary file for the stamp, created *before* the files are checked: its creation
    time is the filesystem's clock then (or ``None`` where it cannot be written)."""
    target = stamp_path(records_path)
    try:
        fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX + target.name + ".", suffix=".tmp",
                                    dir=target.parent)
        return fd, temp, os.fstat(fd).st_mtime_ns
    except OSError:
        return None


def _finish_stamp(stamp: tuple[int, str, int] | None, records_path: Path,
                  side: FileSignature, records_before: FileSignature | None) -> None:
    """After a full check passed: stamp the two files if neither changed while they were
    read (``side`` and ``records_before`` were taken after the stamp's temporary file was
    created) and both were settled before that (see :data:`SETTLED_NS`)."""
    if stamp is None or records_before is None:
        return
    fd, temp, created_ns = stamp
    if file_signature(records_path) != records_before:
        return
    if max(side.mtime_ns, records_before.mtime_ns) + SETTLED_NS > created_ns:
        return  # written too recently: a write in the same clock tick would not show
    try:
        os.write(fd, _stamp_text(side, records_before))
        os.close(fd)
        os.replace(temp, stamp_path(records_path))  # a projection of the check: no fsync
    except OSError:
        pass


def _discard(stamp: tuple[int, str, int] | None) -> None:
    if stamp is None:
        return
    fd, temp, _ = stamp
    try:
        os.close(fd)
    except OSError:
        pass  # closed by a finished stamp
    try:
        os.unlink(temp)
    except OSError:
        pass  # renamed into place


def _check_identity(records: FileSignature | None, meta: Mapping[str, Any]) -> None:
    if records is None:
        raise SidecarRefused("the records file is missing")
    if [records.device, records.inode] != [meta.get("device"), meta.get("inode")]:
        raise SidecarRefused("made for another file (device or inode differ)")
    covered = int(meta["covered_bytes"])
    if records.size < covered:
        raise SidecarRefused(f"newer than the records ({covered} bytes covered, the "
                             f"file has {records.size})")


def check_records_file(records_path: Path, meta: Mapping[str, Any]) -> None:
    """Refuse a cache (a sidecar, stored vectors) whose ``meta`` does not describe this
    records file's current prefix: ``device``, ``inode``, ``covered_bytes`` and
    ``covered_crc32``."""
    try:
        with open(records_path, "rb") as records:
            _check_identity(FileSignature.of(os.fstat(records.fileno())), meta)
            covered = int(meta["covered_bytes"])
            if prefix_crc32(records.fileno(), covered) != meta["covered_crc32"]:
                raise SidecarRefused("the records it covers were changed (checksum)")
    except FileNotFoundError:
        raise SidecarRefused("the records file is missing") from None


# -- companions: work derived from one sidecar, kept beside it -------------------------
#
# A companion is one line of JSON — the sidecar it was derived from, a CRC-32 of the body,
# where each array lies in it — and the arrays' bytes, so a reader takes arrays from it
# instead of decoding one Python object per entry. Version 1 was a JSON document; a file
# of another version is never trusted, only written again.

COMPANION_VERSION = 2  # 1: a JSON document; 2: named arrays
_COMPANION_ALIGN = 8


def _companion_path(records_path: str | os.PathLike[str], name: str) -> Path:
    side = sidecar_path(records_path)
    return side.with_name(f"{side.name}.{name}")


def write_companion(sidecar: Sidecar, records_path: str | os.PathLike[str], name: str,
                    meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Keep ``arrays`` (and the JSON ``meta``) derived from a sidecar — say, its vocabulary
    grouped by an analyzer — beside it, atomically; a failure to write is only a lost
    cache."""
    layout: dict[str, list[Any]] = {}
    parts: list[bytes] = []
    offset = 0
    for key, values in arrays.items():
        data = np.ascontiguousarray(values).tobytes()
        layout[key] = [offset, values.dtype.str, int(values.size)]
        parts.append(data + b"\0" * (-len(data) % _COMPANION_ALIGN))
        offset += len(parts[-1])
    body = b"".join(parts)
    head = json.dumps({**meta, "version": COMPANION_VERSION, "sidecar": list(sidecar.identity),
                       "crc32": zlib.crc32(body), "arrays": layout}, separators=(",", ":"))
    try:  # a cache of a cache: atomic, without an fsync
        write_bytes_atomic(_companion_path(records_path, name),
                           head.encode("utf-8") + b"\n" + body, durable=False)
    except OSError:
        pass


def load_companion(sidecar: Sidecar, records_path: str | os.PathLike[str], name: str
                   ) -> tuple[Mapping[str, Any], dict[str, np.ndarray]] | None:
    """``(meta, arrays)`` that :func:`write_companion` kept for *this* sidecar, or ``None``
    (missing, damaged, of another version or shape, or derived from another sidecar: the
    caller computes it again). The arrays are read-only views of the file's bytes."""
    try:
        head, _, body = _companion_path(records_path, name).read_bytes().partition(b"\n")
        meta = parse_json(head)  # bounded nesting: a deep head is damage, not a crash
        if (not isinstance(meta, dict) or meta["version"] != COMPANION_VERSION
                or meta["sidecar"] != list(sidecar.identity)
                or zlib.crc32(body) != meta["crc32"]):
            return None
        arrays = {}
        for key, (offset, dtype, count) in meta["arrays"].items():
            kind = np.dtype(dtype)
            if kind.hasobject or type(offset) is not int or type(count) is not int:
                return None
            arrays[key] = np.frombuffer(body, dtype=kind, count=count, offset=offset)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
    return meta, arrays


# -- string lists kept packed -----------------------------------------------------------

class PackedStrings:
    """A list of strings as one UTF-8 buffer and the byte range of each: a few bytes per
    string where a Python ``str`` costs about 50 (bench/results/recall_design_notes.md).

    :meth:`find` looks a string up exactly (a table of hashes, built on first use, then
    the bytes compared), so a vocabulary needs no ``dict`` of its own either. Read-only.
    """

    def __init__(self, buffer: bytes | np.ndarray, starts: np.ndarray,
                 ends: np.ndarray) -> None:
        self._buffer = memoryview(buffer).cast("B")
        self._starts, self._ends = starts, ends
        self._hashes: np.ndarray | None = None  # sorted hash of every string
        self._order: np.ndarray | None = None  # the index each of those belongs to

    @classmethod
    def of(cls, strings: list[str] | tuple[str, ...]) -> PackedStrings:
        encoded = [text.encode("utf-8") for text in strings]
        ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        starts = ends - np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        return cls(b"".join(encoded), _narrow(starts), _narrow(ends))

    @classmethod
    def from_json(cls, text: bytes | np.ndarray) -> PackedStrings:
        """The strings of a JSON list of strings (what :func:`write_sidecar` stores), kept
        in that text: without a backslash, no string has an escape, so each is exactly the
        UTF-8 between two quotes. With one, the list is decoded and packed again."""
        raw = np.frombuffer(text, dtype=np.uint8)
        if (raw == 0x5C).any() or not _looks_like_a_list(raw):
            found = parse_json(raw.tobytes())  # ValueError: not JSON, or too deep
            if not isinstance(found, list) or not all(type(s) is str for s in found):
                raise ValueError("not a list of strings")
            return cls.of(found)
        quotes = np.flatnonzero(raw == 0x22)
        return cls(raw, _narrow(quotes[0::2] + 1), _narrow(quotes[1::2]))

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The buffer and the ranges as named arrays (:meth:`from_arrays` reads them)."""
        return {prefix + "utf8": np.frombuffer(self._buffer, dtype=np.uint8),
                prefix + "starts": self._starts, prefix + "ends": self._ends}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str
                    ) -> PackedStrings | None:
        """What :meth:`arrays` wrote, or ``None`` when it is not of that shape: whole
        numbers for ranges that lie in the buffer and cut it only between characters."""
        try:
            buffer, starts, ends = (arrays[prefix + key] for key in ("utf8", "starts", "ends"))
        except KeyError:
            return None
        if (buffer.dtype != np.uint8 or starts.dtype.kind not in "iu"
                or ends.dtype.kind not in "iu" or starts.shape != ends.shape
                or starts.ndim != 1):
            return None
        if len(starts):
            cuts = np.concatenate((starts, ends))
            if int(cuts.min()) < 0 or int(cuts.max()) > len(buffer) or (ends < starts).any():
                return None
            inside = cuts[cuts < len(buffer)]
            if ((buffer[inside] & 0xC0) == 0x80).any():  # a UTF-8 continuation byte
                return None
        try:
            buffer.tobytes().decode("utf-8")
        except UnicodeDecodeError:
            return None
        return cls(buffer, starts, ends)

    def __len__(self) -> int:
        return len(self._starts)

    def __iter__(self):
        text = self._buffer
        for start, end in zip(self._starts.tolist(), self._ends.tolist(), strict=True):
            yield str(text[start:end], "utf-8")

    def encoded(self, index: int) -> bytes:
        """The UTF-8 bytes of string ``index``."""
        return bytes(self._buffer[self._starts[index]:self._ends[index]])

    def __getitem__(self, index):  # a slice gives a list
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return str(self._buffer[self._starts[index]:self._ends[index]], "utf-8")

    def find(self, text: str) -> int | None:
        """The index of ``text`` (the first, should it occur twice), or ``None``.

        The first call gives every string a 64-bit key at once (:func:`string_keys`: a
        few array passes, no Python string made) and sorts the keys; a lookup is then one
        binary search of its own key, and the bytes of a match are compared."""
        if self._hashes is None:
            keys = string_keys(self._buffer, self._starts, self._ends)
            order = np.argsort(keys, kind="stable")
            self._hashes, self._order = keys[order], _narrow(order)
        encoded = text.encode("utf-8")
        key = np.uint64(string_key(encoded))
        at = int(np.searchsorted(self._hashes, key))
        while at < len(self._hashes) and self._hashes[at] == key:
            index = int(self._order[at])
            if self.encoded(index) == encoded:
                return index
            at += 1
        return None


#: :func:`string_key` mixes a string's first and last eight bytes and its length with
#: these odd 64-bit multipliers (a word of up to 16 bytes is all in its key).
_KEY_FIRST, _KEY_LAST, _KEY_LENGTH = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F,
                                      0x165667B19E3779F9)
_KEY_MASK = (1 << 64) - 1


def string_key(encoded: bytes) -> int:
    """A 64-bit key of a UTF-8 string: its first 8 bytes (big-endian, zero-padded) times
    one multiplier, xor its last 8 (little-endian from the end) times another, xor its
    length times a third, modulo 2^64 — what :func:`string_keys` gives each string."""
    size = len(encoded)
    first = int.from_bytes(encoded[:8], "big") << (8 * (8 - size) if size < 8 else 0)
    last = int.from_bytes(encoded[-8:], "big")
    return ((first * _KEY_FIRST) ^ (last * _KEY_LAST) ^ (size * _KEY_LENGTH)) & _KEY_MASK


def string_keys(buffer, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`string_key` of every ``buffer[start:end]`` at once (uint64, which wraps
    modulo 2^64): sixteen gathers of one byte per string, not a loop over the strings."""
    # one zero byte past the buffer: where a string shorter than eight bytes reads it
    data = np.append(np.frombuffer(buffer, dtype=np.uint8), np.uint8(0))
    outside = len(data) - 1
    starts, ends = starts.astype(np.int64), ends.astype(np.int64)
    lengths = ends - starts
    first = np.zeros(len(starts), dtype=np.uint64)
    last = np.zeros(len(starts), dtype=np.uint64)
    for at in range(8):
        inside = at < lengths
        first = (first << np.uint64(8)) | data[np.where(inside, starts + at, outside)]
        last |= data[np.where(inside, ends - 1 - at, outside)].astype(np.uint64) << np.uint64(
            8 * at)
    with np.errstate(over="ignore"):
        return ((first * np.uint64(_KEY_FIRST)) ^ (last * np.uint64(_KEY_LAST))
                ^ (lengths.astype(np.uint64) * np.uint64(_KEY_LENGTH)))


def _looks_like_a_list(raw: np.ndarray) -> bool:
    """Is ``raw`` (no backslash in it) what a list of strings encodes to: ``[`` … ``]``,
    an even number of quotes, and only commas between the strings? Cheap array passes:
    the fast path of :meth:`PackedStrings.from_json` takes every other quote as a string's
    end, which is only true of such text."""
    if len(raw) < 2 or raw[0] != 0x5B or raw[-1] != 0x5D:
        return False
    quotes = np.flatnonzero(raw == 0x22)
    if len(quotes) % 2:
        return False
    if not len(quotes):
        return len(raw) == 2
    between = np.ones(len(raw), dtype=bool)  # outside every string
    marks = np.zeros(len(raw) + 1, dtype=np.int8)
    marks[quotes[0::2]] += 1
    marks[quotes[1::2] + 1] -= 1
    between &= np.cumsum(marks[:-1]) == 0
    outside = raw[1:-1][between[1:-1]]
    return (len(outside) == len(quotes) // 2 - 1 and bool((outside == 0x2C).all())
            and quotes[0] == 1 and quotes[-1] == len(raw) - 2)


def _narrow(offsets: np.ndarray) -> np.ndarray:
    """``offsets`` as int32 when they fit (half the memory), else int64."""
    if not len(offsets) or int(offsets.max()) < 1 << 31:
        return offsets.astype(np.int32)
    return offsets.astype(np.int64, copy=False)


def packed_strings(sidecar: Sidecar, name: str) -> PackedStrings:
    """A string list the sidecar stores (:func:`write_sidecar` ``strings=``), packed
    (:class:`PackedStrings`): read from the file, never decoded as a whole. A part that is
    not such a list is refused (:class:`SidecarRefused`)."""
    try:
        return PackedStrings.from_json(sidecar.slice(name, 0, sidecar.layout[name][2]))
    except ValueError as exc:
        raise SidecarRefused(f"its {name!r} are not a list of strings ({exc})") from None
