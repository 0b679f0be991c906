"""Durable files: an append-only JSONL log and atomic JSON snapshots.

Every layer stores its canonical state with one of these two shapes (DESIGN §3):

* :class:`JsonlLog` — one JSON object per line. Each append is a single ``os.write``
  on an ``O_APPEND`` descriptor followed by ``fsync``. Readers *follow* the log: they
  remember how many bytes they have consumed and read only what was appended since,
  so the cost of staying current does not grow with the file. An unterminated final
  line (a writer crashed mid-line) is ignored on read and cut off, under the lock,
  before the next append. A complete line that does not decode is corruption and is
  reported with its line number — never skipped.
* :func:`write_snapshot` / :func:`read_snapshot` — a whole JSON document replaced
  atomically (temp file in the same directory, ``fsync``, ``os.replace``, directory
  ``fsync``), so a failure leaves the previous file byte-identical.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Generic, TypeVar

from filelock import FileLock

from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError

T = TypeVar("T")
Decoder = Callable[[int, dict[str, Any]], T]
LockFactory = Callable[[Path], AbstractContextManager[Any]]

DEFAULT_LOCK_TIMEOUT_SECONDS = 30.0


def file_lock(path: Path, timeout: float = DEFAULT_LOCK_TIMEOUT_SECONDS) -> FileLock:
    """The cross-process advisory lock that guards ``path`` (a ``<name>.lock`` beside it)."""
    return FileLock(str(path) + ".lock", timeout=timeout)


def encode_json_line(record: dict[str, Any]) -> bytes:
    """One record as one UTF-8 line ending in ``\\n`` (JSON escapes any newline inside)."""
    if not isinstance(record, dict):
        raise InvalidInputError("record", f"must be a dict, got {type(record).__name__}")
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("record", f"is not JSON-serializable ({exc})") from None
    return (text + "\n").encode("utf-8")


def fsync_directory(directory: Path) -> None:
    """Make a file's creation or rename in ``directory`` durable (no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class JsonlLog(Generic[T]):
    """An append-only JSONL file and a reader that follows it.

    ``decode(line_number, obj)`` turns each parsed line into the layer's record and
    raises the layer's error for a bad one; a batch is only consumed when every line
    in it decoded, so a bad line is reported again on every read, not just once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        decode: Decoder[T],
        corruption_error: type[CorruptionError] = CorruptionError,
        lock_factory: LockFactory = file_lock,
    ) -> None:
        self.path = Path(path)
        self._decode = decode
        self._corruption_error = corruption_error
        self._lock = lock_factory(self.path)
        self._offset = 0  # bytes of complete lines consumed so far
        self._lines = 0  # complete lines consumed so far
        self.bytes_read = 0  # instrumentation: proves appends do not re-read the file
        self.torn_tail_bytes = 0  # unterminated bytes after the last complete line

    @property
    def line_count(self) -> int:
        """Complete lines consumed so far (the next line's number is this + 1)."""
        return self._lines

    def locked(self) -> AbstractContextManager[Any]:
        """The exclusive cross-process section for check-then-append."""
        return self._lock

    def refresh(self) -> list[T]:
        """Decode and return the complete lines appended since the last refresh."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            if self._offset:
                raise self._corruption_error(
                    self.path.name, None, "the file disappeared"
                ) from None
            return []
        if size < self._offset:
            raise self._corruption_error(
                self.path.name, None,
                f"the file shrank from {self._offset} to {size} bytes behind this reader",
            )
        if size == self._offset:
            self.torn_tail_bytes = 0
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read(size - self._offset)
        self.bytes_read += len(chunk)
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a torn tail stays unread
        self.torn_tail_bytes = len(chunk) - len(complete)
        decoded: list[T] = []
        line_number = self._lines
        for raw in complete.split(b"\n")[:-1]:  # split on \n only, never splitlines()
            line_number += 1
            decoded.append(self._decode(line_number, self._parse(line_number, raw)))
        self._offset += len(complete)
        self._lines = line_number
        return decoded

    def _parse(self, line_number: int, raw: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self._corruption_error(
                self.path.name, line_number, f"not valid JSON ({exc})"
            ) from None
        if not isinstance(obj, dict):
            raise self._corruption_error(
                self.path.name, line_number, f"expected a JSON object, got {type(obj).__name__}"
            )
        return obj

    def append(self, record: dict[str, Any]) -> int:
        """Append one record durably and return its line number.

        Call it inside :meth:`locked` right after :meth:`refresh`, so that this reader
        has consumed every complete line; anything past that is a torn tail from a
        crashed writer, and is cut off before writing.
        """
        return self.append_many([record])

    def append_many(self, records: Sequence[dict[str, Any]]) -> int:
        """Append several records with one ``os.write`` and one ``fsync``; return the
        last line number.

        Every record is encoded before anything is written, so a record that is not
        JSON leaves the file untouched. Same calling rule as :meth:`append`. A crash
        mid-write can leave only a prefix of the batch plus a torn tail; readers see
        the complete lines, so callers that need all-or-nothing across a crash must
        not rely on this alone.
        """
        payload = b"".join(encode_json_line(record) for record in records)
        if not payload:
            return self._lines
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size > self._offset:
                self._cut_torn_tail(fd, size)
            view = memoryview(payload)
            while view:  # a regular file takes it in one write; loop only if it does not
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_directory(self.path.parent)
        self._offset += len(payload)
        self._lines += len(records)
        return self._lines

    def _cut_torn_tail(self, fd: int, size: int) -> None:
        tail = os.pread(fd, size - self._offset, self._offset)
        self.bytes_read += len(tail)
        if b"\n" in tail:
            raise LabmemError(
                f"{self.path.name}: complete lines were appended that this reader has not "
                "consumed; call refresh() inside locked() before append()"
            )
        os.ftruncate(fd, self._offset)
        os.fsync(fd)
        self.torn_tail_bytes = 0


def write_snapshot(path: str | os.PathLike[str], document: Any) -> None:
    """Replace ``path`` with ``document`` as JSON, atomically and durably."""
    try:
        payload = json.dumps(document, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("document", f"is not JSON-serializable ({exc})") from None
    write_text_atomic(path, payload)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically and durably.

    Used for snapshots and for projections such as ``MEMORY.md``: a reader sees the
    old file or the new one, never half of either.
    """
    if not isinstance(text, str):
        raise InvalidInputError("text", f"must be a string, got {type(text).__name__}")
    payload = text
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)


def read_snapshot(
    path: str | os.PathLike[str],
    *,
    corruption_error: type[CorruptionError] = CorruptionError,
) -> Any | None:
    """The document stored at ``path``, or ``None`` when no snapshot exists yet."""
    target = Path(path)
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise corruption_error(target.name, None, f"not a valid JSON snapshot ({exc})") from None
