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
  ``fsync``), so a failure leaves the previous file byte-identical. With ``records=`` the
  document is written by the C JSON encoder, one record per line (:func:`encode_snapshot`).
* :func:`file_signature` — a file's identity (device, inode) with its size and mtime, so
  a layer can cache what it decoded and re-read only when the file changed. A reader
  follows a log by identity and size; an atomic replacement is always a new inode.
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import os
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from stat import S_ISREG
from typing import Any, Generic, NamedTuple, TypeVar

from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError
from labmem.core.locking import FileLock
from labmem.core.validation import (
    MAX_JSON_DEPTH,
    may_nest_deeper_than,
    parse_json,
    require_json,
    require_text,
)

T = TypeVar("T")
#: What a line decoder raises when a stored field has a type it did not expect (see
#: :meth:`JsonlLog._as_corruption`); a labmem error among them passes through as it is.
_WRONG_SHAPE = (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError,
                InvalidInputError)
Decoder = Callable[[int, dict[str, Any]], T]
LockFactory = Callable[[Path], AbstractContextManager[Any]]

DEFAULT_LOCK_TIMEOUT_SECONDS = 30.0

#: One C-accelerated encoder for every compact line and record (``json.dumps`` with
#: ``indent`` runs the pure-Python encoder instead).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class FileSignature(NamedTuple):
    """What says "the same file, unchanged": identity, size and modification time."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, stat: os.stat_result) -> FileSignature:
        return cls(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def file_signature(path: str | os.PathLike[str]) -> FileSignature | None:
    """The signature of ``path`` now, or ``None`` when there is no such file."""
    try:
        return FileSignature.of(os.stat(path))
    except FileNotFoundError:
        return None


def file_lock(path: Path, timeout: float = DEFAULT_LOCK_TIMEOUT_SECONDS) -> FileLock:
    """The cross-process advisory lock that guards ``path`` (a ``<name>.lock`` beside it;
    see :mod:`labmem.core.locking`)."""
    return FileLock(str(path) + ".lock", timeout=timeout)


def encode_json_line(record: dict[str, Any]) -> bytes:
    """One record as one UTF-8 line ending in ``\\n`` (JSON escapes any newline inside)."""
    if not isinstance(record, dict):
        raise InvalidInputError("record", f"must be a dict, got {type(record).__name__}")
    try:
        text = _COMPACT.encode(record)
    except RecursionError:  # nested far past the bound: named below, without recursion
        text = None
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("record", f"is not JSON-serializable ({exc})") from None
    line = None
    if text is not None:
        try:
            line = (text + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: named below
            pass
    if line is None or _may_nest_too_deep(text):
        require_json(record, "record")  # names what cannot be stored: too deep, a surrogate
    if line is None:  # pragma: no cover - require_json has refused it already
        raise InvalidInputError("record", "cannot be stored as UTF-8 JSON")
    return line


def _may_nest_too_deep(text: str | None) -> bool:
    """Cheap: could ``text`` nest past the core's bound? Only then is the value walked
    (:func:`labmem.core.validation.require_json`); ``None`` means the encoder recursed."""
    return text is None or may_nest_deeper_than(text, MAX_JSON_DEPTH)


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside. Decoding a whole log (100k records) allocates
    millions of objects that all stay alive and hold no cycles, and each batch of them
    makes the collector walk every one allocated before: a third of a first distill, most
    of a cold index build. Use it around such a bulk decode, nowhere else."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def write_durably(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, then ``fsync`` it. A regular file takes it in one
    write; the loop is for the write that does not."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


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
        start: tuple[int, int] = (0, 0),
        encode: Callable[[dict[str, Any]], bytes] | None = None,
        identity: tuple[int, int] | None = None,
    ) -> None:
        self.path = Path(path)
        self._decode = decode
        # ``encode``: one record to one ``\n``-terminated line (default encode_json_line);
        # a layer may add to the line, e.g. a checksum its own ``_parse`` verifies
        self._encode = encode or encode_json_line
        self._corruption_error = corruption_error
        self._lock = lock_factory(self.path)
        # ``start``: a cursor (offset, lines) a caller stored after an earlier read —
        # the reader goes on from there and never reads the lines before it again
        self._offset, self._lines = start  # complete lines (bytes, count) consumed so far
        # (device, inode) of the file followed; given with ``start``: the file the cursor
        # was taken in, so a file replaced since is refused before anything is read
        self._identity: tuple[int, int] | None = identity
        self.bytes_read = 0  # instrumentation: proves appends do not re-read the file
        self.torn_tail_bytes = 0  # unterminated bytes after the last complete line

    @property
    def line_count(self) -> int:
        """Complete lines consumed so far (the next line's number is this + 1)."""
        return self._lines

    @property
    def offset(self) -> int:
        """Bytes of complete lines consumed so far."""
        return self._offset

    @property
    def identity(self) -> tuple[int, int] | None:
        """``(device, inode)`` of the file this reader follows, once it has seen it.

        A log is only ever appended to, so a different identity under the same name means
        the file was replaced; :meth:`refresh` refuses to read on from the old offset.
        """
        return self._identity

    def locked(self) -> AbstractContextManager[Any]:
        """The exclusive cross-process section for check-then-append."""
        return self._lock

    def refresh(self) -> list[T]:
        """Decode and return the complete lines appended since the last refresh."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return self._missing()
        self._check_identity(stat)
        size = stat.st_size
        if size < self._offset:
            raise self._corruption_error(
                self.path.name, None,
                f"the file shrank from {self._offset} to {size} bytes behind this reader",
            )
        if size == self._offset:
            self.torn_tail_bytes = 0
            return []
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:  # removed between the stat and the open
            return self._missing()
        with handle:
            opened = os.fstat(handle.fileno())
            self._check_identity(opened)  # the name may have moved since the stat
            handle.seek(self._offset)
            chunk = handle.read(max(0, opened.st_size - self._offset))
        self.bytes_read += len(chunk)
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a torn tail stays unread
        self.torn_tail_bytes = len(chunk) - len(complete)
        decoded: list[T] = []
        line_number = self._lines
        try:
            for raw in complete.split(b"\n")[:-1]:  # split on \n only, never splitlines()
                line_number += 1
                decoded.append(self._decode(line_number, self._parse(line_number, raw)))
        except _WRONG_SHAPE as exc:  # a decoder met a field of a type it did not expect
            raise self._as_corruption(line_number, exc) from None
        self._offset += len(complete)
        self._lines = line_number
        return decoded

    def _as_corruption(self, line_number: int, exc: Exception) -> Exception:
        """What a decoder raised by accident, as this log's corruption error naming the
        line. A line can be valid JSON (its checksum even recomputed) with a field of the
        wrong type — ``"kind": []``, ``"title": 7`` — and a decoder that indexes, hashes or
        joins it raises ``TypeError`` & co.: never a caller's concern, always the file's. A
        labmem validation error (a field a decoder checked) keeps its field and problem;
        any other labmem error (another user's record, say) is the decoder's answer."""
        if isinstance(exc, LabmemError) and not isinstance(exc, InvalidInputError):
            return exc
        if isinstance(exc, InvalidInputError):
            problem = f"{exc.field}: {exc.problem}"
        else:
            problem = f"a field has the wrong type or shape ({type(exc).__name__}: {exc})"
        return self._corruption_error(self.path.name, line_number,
                                      f"{problem}; labmem never writes that")

    def _missing(self) -> list[T]:
        if self._offset:
            raise self._corruption_error(self.path.name, None, "the file disappeared")
        return []

    def _check_identity(self, stat: os.stat_result) -> None:
        identity = (stat.st_dev, stat.st_ino)
        if self._identity is not None and identity != self._identity and self._offset:
            raise self._corruption_error(
                self.path.name, None,
                "the file was replaced behind this reader (another inode under the same name)")
        self._identity = identity

    def _parse(self, line_number: int, raw: bytes) -> dict[str, Any]:
        # parse_json: the same scanner fast path, plus the core's bound on what can be read
        # back — a line nested past MAX_JSON_DEPTH is corruption here, not a RecursionError
        try:
            obj = parse_json(raw)
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
            raise self._corruption_error(
                self.path.name, line_number, _unreadable("valid JSON", exc)
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
        payload = b"".join(self._encode(record) for record in records)
        if not payload:
            return self._lines
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the first record of a layer: its directory comes first
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            stat = os.fstat(fd)
            created = stat.st_size == 0  # new (or empty): make its name durable too
            self._check_identity(stat)
            size = stat.st_size
            if size > self._offset:
                self._cut_torn_tail(fd, size)
            write_durably(fd, payload)
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


def encode_snapshot(document: Mapping[str, Any], *, records: Collection[str] = ()) -> str:
    """``document`` as JSON text with the C encoder, readable one record per line.

    Each top-level member is one line; a member named in ``records`` whose value is an
    object or an array has one line per item instead. JSON escapes every newline inside
    a string, so a line never holds part of two records::

        {
        "format":"…",
        "preferences":{
        "theme":{"key":"theme","value":"dark",…},
        "reply.language":{…}
        }
        }
    """
    if not isinstance(document, Mapping):
        raise InvalidInputError("document", f"must be a mapping, got {type(document).__name__}")
    encode = _COMPACT.encode
    members = []
    try:
        for name, value in document.items():
            if not isinstance(name, str):
                raise TypeError(f"keys must be strings, got {type(name).__name__}")
            if name in records and isinstance(value, Mapping) and value:
                for key in value:
                    if not isinstance(key, str):
                        raise TypeError(f"keys must be strings, got {type(key).__name__}")
                body = "{\n" + ",\n".join(f"{encode(k)}:{encode(v)}"
                                           for k, v in value.items()) + "\n}"
            elif name in records and isinstance(value, (list, tuple)) and value:
                body = "[\n" + ",\n".join(encode(v) for v in value) + "\n]"
            else:
                body = encode(value)
            members.append(f"{encode(name)}:{body}")
    except RecursionError:
        members = None
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("document", f"is not JSON-serializable ({exc})") from None
    text = None if members is None else "{\n" + ",\n".join(members) + "\n}\n"
    if _may_nest_too_deep(text):
        require_json(dict(document), "document")
    if text is None:  # pragma: no cover - require_json has refused it already
        raise InvalidInputError("document", "cannot be stored as JSON")
    return text


def write_snapshot(path: str | os.PathLike[str], document: Any, *,
                   records: Collection[str] | None = None) -> None:
    """Replace ``path`` with ``document`` as JSON, atomically and durably.

    Without ``records`` the document is indented (small documents people read); with it,
    it is written by :func:`encode_snapshot` — the C encoder, one record per line.
    """
    if records is not None:
        text = encode_snapshot(document, records=records)
    else:
        try:
            text = json.dumps(document, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
        except RecursionError:
            text = None
        except (TypeError, ValueError) as exc:
            raise InvalidInputError("document", f"is not JSON-serializable ({exc})") from None
        if _may_nest_too_deep(text):
            require_json(document, "document")
        if text is None:  # pragma: no cover - require_json has refused it already
            raise InvalidInputError("document", "cannot be stored as JSON")
    try:
        write_text_atomic(path, text)
    except InvalidInputError as exc:
        if "surrogate" in exc.problem:  # name where in the document it is
            require_json(document, "document")
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str, *,
                      alongside: Callable[[], Any] | None = None,
                      durable: bool = True) -> Any:
    """Replace ``path`` with ``text`` (UTF-8) atomically and durably.

    Used for snapshots and for projections such as ``MEMORY.md``: a reader sees the
    old file or the new one, never half of either.

    ``alongside`` is the step the new text depends on (say, the log line it projects): it
    runs after the text is written to the temp file and before the rename, so a failure to
    write the text surfaces before that step, and a reader never sees text whose source
    was not written. Its result is returned; if it raises, ``path`` is untouched.

    ``durable=False`` keeps the atomic rename but skips both ``fsync`` calls: for a
    projection that is rewritten from canonical files (a crash of the process loses
    nothing — the kernel has the bytes; a power cut can leave the previous version, which
    the next write replaces). Call :func:`sync_file` on it before relying on it on disk.
    It also swaps rather than renames over (:func:`swap_into_place`).
    """
    if not isinstance(text, str):
        raise InvalidInputError("text", f"must be a string, got {type(text).__name__}")
    try:
        payload = text.encode("utf-8")
    except UnicodeEncodeError:  # before the temp file exists: nothing is written
        require_text(text, "text", allow_blank=True)
        raise
    return write_bytes_atomic(path, payload, alongside=alongside, durable=durable)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *,
                       alongside: Callable[[], Any] | None = None,
                       durable: bool = True) -> Any:
    """:func:`write_text_atomic` of text already encoded: ``data`` is written as it is.

    For a layer that keeps its file's lines encoded between writes, so a rewrite after a
    change of one line joins bytes instead of encoding the whole text again.
    """
    if not isinstance(data, bytes):
        raise InvalidInputError("data", f"must be bytes, got {type(data).__name__}")
    payload = memoryview(data)
    target = path if isinstance(path, Path) else Path(path)
    try:
        fd, temp_name = _create_temporary(target)
    except FileNotFoundError:  # the first file of a layer: its directory comes first
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = _create_temporary(target)
    result = None
    try:
        try:
            while payload:
                payload = payload[os.write(fd, payload):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if alongside is not None:
            result = alongside()
        if durable:
            os.replace(temp_name, target)
        else:
            swap_into_place(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    if durable:
        fsync_directory(target.parent)
    return result


_temporaries = itertools.count()


def _create_temporary(target: Path) -> tuple[int, str]:
    """A new file beside ``target``, ``.<name>.<pid>.<n>.tmp``, created exclusively (what
    ``tempfile.mkstemp`` does, without drawing random names: a quarter of a small write)."""
    directory, name = os.path.split(os.fspath(target))  # target.parent, .name: as strings
    stem = os.path.join(directory or ".", f".{name}.{os.getpid()}.")
    while True:
        name = f"{stem}{next(_temporaries)}.tmp"
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600), name
        except FileExistsError:  # left by a killed process that had our pid: skip it
            continue


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def swap_into_place(temp_name: str, target: Path) -> None:
    """Put the file ``temp_name`` at ``target`` atomically, then remove the old version.

    ``os.replace`` would do, but on ext4 a rename *over* an existing file first allocates
    the new file's blocks and then frees the old file's, ~200 µs here: as much as the
    fsync'd log line a projection follows. Linux's ``renameat2(RENAME_EXCHANGE)`` swaps the
    two names in one atomic step instead (a reader by name sees the old file or the new
    one); the old version, now under the temporary name, is then unlinked — cheap while
    its blocks were never written out. A reader still holding the old file keeps reading
    the old version whole. Elsewhere, or where the filesystem refuses, ``os.replace``.
    """
    exchange = _exchange_function()
    if exchange is not None and _is_regular_file(target) and exchange(temp_name, target):
        os.unlink(temp_name)  # the previous version, now under the temporary name
    else:  # no old file, or not a plain one (a link, a directory): the rename decides
        os.replace(temp_name, target)


def _is_regular_file(path: Path) -> bool:
    try:
        return S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@functools.cache
def _exchange_function() -> Callable[[str, Path], bool] | None:
    """``renameat2(..., RENAME_EXCHANGE)`` from the C library, or ``None`` without it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library older than glibc 2.28
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2

    def exchange(temp_name: str, target: Path) -> bool:
        """Swapped? ``False``: nothing changed (no old file yet, or no support here)."""
        return call(at_fdcwd, os.fsencode(temp_name), at_fdcwd, os.fsencode(target),
                    rename_exchange) == 0

    return exchange


def sync_file(path: str | os.PathLike[str]) -> None:
    """``fsync`` an existing file's data (e.g. one written with ``durable=False``); the
    next :func:`fsync_directory` of its directory then makes its name durable too."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(
    path: str | os.PathLike[str],
    *,
    corruption_error: type[CorruptionError] = CorruptionError,
) -> Any | None:
    """The document stored at ``path``, or ``None`` when no snapshot exists yet."""
    return read_snapshot_signed(path, corruption_error=corruption_error)[0]


def read_snapshot_signed(
    path: str | os.PathLike[str],
    *,
    corruption_error: type[CorruptionError] = CorruptionError,
) -> tuple[Any | None, FileSignature | None]:
    """The document at ``path`` and the signature of the very file it was read from
    (``(None, None)`` when there is none): cache the document under that signature."""
    target = Path(path)
    try:
        handle = open(target, "rb")
    except FileNotFoundError:
        return None, None
    with handle:
        signature = FileSignature.of(os.fstat(handle.fileno()))
        raw = handle.read()
    try:  # the core's nesting bound holds for snapshots too
        document = parse_json(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise corruption_error(target.name, None,
                               _unreadable("a valid JSON snapshot", exc)) from None
    if document is None:  # no snapshot is ever null; "no snapshot yet" is a missing file
        raise corruption_error(target.name, None, "holds JSON null, not a document")
    return document, signature


def _unreadable(what: str, exc: ValueError) -> str:
    """Why stored bytes cannot be read back: not decodable, or not what could be written."""
    if isinstance(exc, (UnicodeDecodeError, json.JSONDecodeError)):
        return f"not {what} ({exc})"
    return f"cannot be read back ({exc}); labmem never writes that"
