"""s12 remote memory: scoped, source-bearing stored records.

A :class:`RemoteMemoryStore` is the teaching stand-in for a remote memory service:
an append-only JSONL file of :class:`StoredMemory` records for one user. Every record
carries the user's scope digest and its :class:`MemorySource`; a file that holds
another scope's record is refused on every read path.

The duplicate check and the append happen in one exclusive cross-process section
(a file lock), which is how this local file imitates a server's atomic
compare-and-insert. A real service would use a unique index or a conditional write
(:mod:`labmem.recall.sqlite_store` does exactly that, with the same contract).

The validation, id and duplicate rules live in module functions
(:func:`validate_draft`, :func:`validate_drafts`, :func:`record_from_object`) that
both stores call, so the two backends cannot drift apart.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from labmem.core.clock import (
    Clock,
    format_timestamp,
    parse_stored_timestamp,
    parse_timestamp,
    resolve_clock,
)
from labmem.core.errors import (
    CorruptionError,
    DuplicateError,
    InvalidInputError,
    LabmemError,
    ScopeError,
    validated_as,
)
from labmem.core.provenance import MAX_SOURCE_CHARS, MemorySource, scope_digest
from labmem.core.storage import JsonlLog, LockFactory, file_lock, file_signature
from labmem.core.validation import parse_json, require_text
from labmem.recall.protocols import AppendsInBatches

__all__ = [
    "MemoryKind",
    "MemorySource",
    "StoredMemory",
    "RecallStore",
    "RemoteMemoryStore",
    "RemoteMemoryError",
    "RemoteMemoryValidationError",
    "RemoteMemoryDuplicateError",
    "RemoteMemoryScopeError",
    "RemoteMemoryCorruptionError",
    "derive_memory_id",
    "derived_id_problem",
    "MemoryDraft",
    "validate_draft",
    "validate_drafts",
    "record_from_object",
    "duplicate_message",
    "stamp_now",
    "decode_stored_line",
    "AppendsThroughInsert",
]

#: A batch with more ids than this decodes the whole file before its duplicate check, where
#: a smaller one searches the undecoded prefix once per id (:meth:`RemoteMemoryStore.
#: _prefix_holds`).
SEARCHED_IDS = 16
MAX_CONTENT_CHARS = 20_000
MAX_SUMMARY_CHARS = 2_000
MEMORY_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
#: The shape of a content-derived id (:func:`derive_memory_id`). It is reserved: a caller
#: may pass such an id only if it *is* the derived one, so a store can re-derive any id
#: of this shape on read and notice a record body edited under it.
DERIVED_ID_PATTERN = re.compile(r"(?:conversation|profile)-[0-9a-f]{16}")


class RemoteMemoryError(LabmemError):
    """Base of every error the remote store raises."""


class RemoteMemoryValidationError(RemoteMemoryError, InvalidInputError):
    """An append was refused before anything was written."""


class RemoteMemoryDuplicateError(RemoteMemoryError, DuplicateError):
    """The ``memory_id`` is already stored; the store is unchanged."""


class RemoteMemoryScopeError(RemoteMemoryError, ScopeError):
    """The records file holds a record of another user scope."""


class RemoteMemoryCorruptionError(RemoteMemoryError, CorruptionError):
    """A complete line of the records file cannot be decoded (``line N``)."""


class MemoryKind(str, Enum):
    """What a stored record is: a piece of conversation history, or a profile snapshot."""

    CONVERSATION = "conversation"
    PROFILE = "profile"


@dataclass(frozen=True)
class StoredMemory:
    """One durable record: stable id, owner scope, provenance, and when it was stored."""

    memory_id: str
    user_scope: str
    kind: MemoryKind
    content: str
    summary: str
    source: MemorySource
    stored_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "user_scope": self.user_scope,
            "kind": self.kind.value,
            "content": self.content,
            "summary": self.summary,
            "source": self.source.to_dict(),
            "stored_at": format_timestamp(self.stored_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredMemory:
        return cls(
            memory_id=data["memory_id"],
            user_scope=data["user_scope"],
            kind=MemoryKind(data["kind"]),
            content=data["content"],
            summary=data["summary"],
            source=MemorySource.from_dict(data["source"]),
            stored_at=parse_timestamp(data["stored_at"], field="stored_at"),
        )


def derive_memory_id(kind: MemoryKind, source: MemorySource, content: str) -> str:
    """A content-addressed id: retrying the same append yields the same id (a duplicate)."""
    basis = json.dumps(
        {"kind": kind.value, "source": source.to_dict(), "content": content},
        ensure_ascii=False, sort_keys=True,
    )
    return f"{kind.value}-{hashlib.sha256(basis.encode()).hexdigest()[:16]}"


def derived_id_problem(record: StoredMemory) -> str | None:
    """Why ``record`` cannot be the record its content-derived id was derived from, or
    ``None`` (also for an id of another shape, which names nothing it could be checked
    against)."""
    if not DERIVED_ID_PATTERN.fullmatch(record.memory_id):
        return None
    expected = derive_memory_id(record.kind, record.source, record.content)
    if expected == record.memory_id:
        return None
    return (f"memory_id {record.memory_id!r} is derived from a record's kind, source and "
            f"content, but this record's derive to {expected!r}: the record was edited "
            "after it was stored")


_validated = partial(validated_as, RemoteMemoryValidationError)

DRAFT_KEYS = ("kind", "content", "summary", "source", "memory_id")
REQUIRED_DRAFT_KEYS = DRAFT_KEYS[:4]


@dataclass(frozen=True)
class MemoryDraft:
    """One validated append request: a record minus its owner scope and stored time."""

    kind: MemoryKind
    content: str
    summary: str
    source: MemorySource
    memory_id: str

    def stored(self, user_scope: str, stored_at: datetime) -> StoredMemory:
        return StoredMemory(self.memory_id, user_scope, self.kind, self.content,
                            self.summary, self.source, stored_at)


def _validate_kind(kind: MemoryKind | str) -> MemoryKind:
    try:
        return MemoryKind(kind)
    except ValueError:
        allowed = ", ".join(k.value for k in MemoryKind)
        raise RemoteMemoryValidationError(
            "kind", f"{kind!r} is not a memory kind", f"use one of: {allowed}"
        ) from None


def validate_draft(
    *,
    kind: MemoryKind | str,
    content: str,
    summary: str,
    source: MemorySource | Mapping[str, Any],
    memory_id: str | None = None,
) -> MemoryDraft:
    """Check one append's arguments (every store calls this before touching storage)."""
    record_kind = _validate_kind(kind)
    _validated(require_text, content, "content", max_chars=MAX_CONTENT_CHARS)
    _validated(require_text, summary, "summary", max_chars=MAX_SUMMARY_CHARS, allow_blank=True)
    if not isinstance(source, MemorySource):
        source = _validated(MemorySource.from_dict, source)
    if memory_id is None:
        memory_id = derive_memory_id(record_kind, source, content)
    elif not isinstance(memory_id, str) or not MEMORY_ID_PATTERN.fullmatch(memory_id):
        raise RemoteMemoryValidationError(
            "memory_id", f"{memory_id!r} is not a valid id",
            "use 1-128 characters from A-Z a-z 0-9 . _ : -, starting with a letter or "
            "digit, or pass memory_id=None to derive one",
        )
    elif (DERIVED_ID_PATTERN.fullmatch(memory_id)
          and memory_id != derive_memory_id(record_kind, source, content)):
        raise RemoteMemoryValidationError(
            "memory_id", f"{memory_id!r} has the shape of a content-derived id but is not "
            "this record's",
            "ids '<kind>-<16 hex>' are reserved for derived ids: pass memory_id=None, or an "
            "id of another shape",
        )
    return MemoryDraft(record_kind, content, summary, source, memory_id)


def validate_drafts(drafts: Iterable[Mapping[str, Any]]) -> tuple[MemoryDraft, ...]:
    """Check a whole batch before anything is written.

    A bad draft raises :class:`RemoteMemoryValidationError` whose field is
    ``drafts[i].<field>``; an id that appears twice in the batch raises
    :class:`RemoteMemoryDuplicateError` — the batch is refused as a whole either way.
    """
    if isinstance(drafts, (Mapping, str, bytes)) or not isinstance(drafts, Iterable):
        raise RemoteMemoryValidationError(
            "drafts", f"must be a list of mappings, got {type(drafts).__name__}",
            "pass [{'kind': ..., 'content': ..., 'summary': ..., 'source': ...}, ...]; "
            "use append() for a single record",
        )
    checked: list[MemoryDraft] = []
    for index, draft in enumerate(drafts):
        label = f"drafts[{index}]"
        if not isinstance(draft, Mapping):
            raise RemoteMemoryValidationError(
                label, f"must be a mapping, got {type(draft).__name__}",
                f"give each draft the keys of append(): {', '.join(DRAFT_KEYS)}",
            )
        unknown = sorted(str(key) for key in draft if key not in DRAFT_KEYS)
        if unknown:
            raise RemoteMemoryValidationError(
                label, f"has unknown key(s) {', '.join(unknown)}",
                f"use only the keys of append(): {', '.join(DRAFT_KEYS)}",
            )
        missing = [key for key in REQUIRED_DRAFT_KEYS if key not in draft]
        if missing:
            raise RemoteMemoryValidationError(
                f"{label}.{missing[0]}", "is required",
                f"every draft needs {', '.join(REQUIRED_DRAFT_KEYS)} (memory_id is optional)",
            )
        try:
            checked.append(validate_draft(**draft))
        except RemoteMemoryValidationError as exc:
            raise RemoteMemoryValidationError(f"{label}.{exc.field}", exc.problem,
                                              exc.fix) from None
    first_seen: dict[str, int] = {}
    for index, draft in enumerate(checked):
        first = first_seen.setdefault(draft.memory_id, index)
        if first != index:
            raise RemoteMemoryDuplicateError(
                f"drafts[{index}].memory_id {draft.memory_id!r} repeats drafts[{first}]; "
                "nothing from this batch was stored — a batch may hold each id once"
            )
    return tuple(checked)


def stamp_now(clock: Clock) -> datetime:
    """The stored time of the next record (or batch): one ``clock.now()``, validated."""
    return _validated(parse_timestamp, clock.now(), field="clock.now()")


def duplicate_message(memory_id: str, store_name: str, index: int | None = None) -> str:
    """Why an append was refused as a duplicate, and what to do (same for both stores)."""
    if index is None:
        return (f"memory_id {memory_id!r} is already stored in {store_name}; the store is "
                "unchanged; records are immutable — use a new id for new content")
    return (f"drafts[{index}].memory_id {memory_id!r} is already stored in {store_name}; "
            "nothing from this batch was stored — drop that draft or give it a new id, "
            "then retry the batch")


def record_from_object(obj: Any) -> StoredMemory:
    """Decode one stored JSON object; a ``ValueError`` says what is wrong with it.

    Callers add *where* (a line, a row) and raise their corruption error.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    canonical = _canonical_record(obj)
    if canonical is not None:
        return canonical
    try:
        return StoredMemory.from_dict(obj)
    except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
        problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"not a stored memory ({problem})") from None


_KINDS = {kind.value: kind for kind in MemoryKind}
_RECORD_KEYS = frozenset(("memory_id", "user_scope", "content", "summary", "stored_at"))
_SOURCE_KEYS = frozenset((*MAX_SOURCE_CHARS, "captured_at"))
_SOURCE_ID_CHARS, _SOURCE_TYPE_CHARS, _TITLE_CHARS = (
    MAX_SOURCE_CHARS[name] for name in ("source_id", "source_type", "title"))
_new_object = object.__new__


def _plain_text(value: Any, max_chars: int) -> bool:
    """Would ``require_text(value, …, max_chars=max_chars)`` accept ``value``? Decided
    here only for ASCII (which holds no surrogate); ``False`` leaves it to the checker."""
    return (type(value) is str and value.isascii() and 0 < len(value) <= max_chars
            and not value.isspace())


def _canonical_record(obj: dict[str, Any]) -> StoredMemory | None:
    """The common stored line, checked by cheap exact tests, or ``None`` (then the full
    :meth:`StoredMemory.from_dict` decides, and names what is wrong). A hit decoded by
    offset pays this, not a dataclass's checks field by field; it accepts only what the
    full path accepts and builds the same record (a property test holds the two to that).
    """
    source, kind = obj.get("source"), _KINDS.get(obj.get("kind"))
    if (kind is None or type(source) is not dict or not _RECORD_KEYS <= obj.keys()
            or not all(type(obj[key]) is str
                       for key in ("memory_id", "user_scope", "content", "summary"))
            or not _SOURCE_KEYS <= source.keys()
            or not _plain_text(source["source_id"], _SOURCE_ID_CHARS)
            or not _plain_text(source["source_type"], _SOURCE_TYPE_CHARS)
            or not _plain_text(source["title"], _TITLE_CHARS)):
        return None
    try:
        captured_at = parse_stored_timestamp(source["captured_at"], field="captured_at")
        stored_at = parse_stored_timestamp(obj["stored_at"], field="stored_at")
    except InvalidInputError:
        return None
    provenance = _new_object(MemorySource)  # filled in place: its checks just passed
    provenance.__dict__.update(source_id=source["source_id"],
                               source_type=source["source_type"], title=source["title"],
                               captured_at=captured_at)
    record = _new_object(StoredMemory)
    record.__dict__.update(memory_id=obj["memory_id"], user_scope=obj["user_scope"],
                           kind=kind, content=obj["content"], summary=obj["summary"],
                           source=provenance, stored_at=stored_at)
    return record


def _ends_a_line(path: Path, offset: int) -> bool:
    """Is ``offset`` of the file at ``path`` the end of a whole line (or its start)? One
    byte read: a sidecar that covers part of a line is not taken as the file's prefix."""
    if offset == 0:
        return True
    try:
        with open(path, "rb") as handle:
            return os.pread(handle.fileno(), 1, offset - 1) == b"\n"
    except OSError:
        return False


def decode_stored_line(name: str, user_scope: str, line: int, obj: dict[str, Any]
                       ) -> StoredMemory:
    """One parsed line of ``name`` as a record of ``user_scope``, or the store's error
    (another scope's record, or not a stored memory). Duplicates are the caller's check."""
    scope = obj.get("user_scope")
    if not isinstance(scope, str):
        raise RemoteMemoryCorruptionError(name, line, "not a stored memory (no user_scope)")
    if scope != user_scope:
        raise RemoteMemoryScopeError(
            f"{name} line {line}: record belongs to user scope {scope!r}, not "
            f"{user_scope!r}; each user needs their own records file"
        )
    try:
        return record_from_object(obj)
    except ValueError as exc:
        raise RemoteMemoryCorruptionError(name, line, str(exc)) from None


@runtime_checkable
class RecallStore(Protocol):
    """What recall needs from a store: its user's scope and every record, in storage
    order (what else a store may offer, it declares: :mod:`labmem.recall.protocols`)."""

    user_scope: str

    def read_all(self) -> tuple[StoredMemory, ...]:
        """Every record of this user, in storage order."""


class AppendsThroughInsert:
    """``append`` and ``append_many``, the same for every store: validate every draft,
    stamp one ``stored_at``, then the store's ``_insert`` writes the records — all of them
    or none, as far as its medium allows (the JSONL file: one write under its lock; SQLite
    and PostgreSQL: one transaction). So the backends cannot drift apart in what they
    refuse or how they stamp. Named first among a store's bases (a protocol's method stubs
    must not come before it)."""

    user_scope: str
    clock: Clock

    def _insert(self, records: tuple[StoredMemory, ...], *, batch: bool) -> None:
        """Store ``records``, or none: a duplicate id raises
        :class:`RemoteMemoryDuplicateError` (``batch``: naming its draft's index)."""
        raise NotImplementedError

    def append(
        self,
        *,
        kind: MemoryKind | str,
        content: str,
        summary: str,
        source: MemorySource | Mapping[str, Any],
        memory_id: str | None = None,
    ) -> StoredMemory:
        """Validate, then store one record; raise :class:`RemoteMemoryDuplicateError`
        if ``memory_id`` (given or derived) is already stored."""
        draft = validate_draft(kind=kind, content=content, summary=summary, source=source,
                               memory_id=memory_id)
        record = draft.stored(self.user_scope, stamp_now(self.clock))
        self._insert((record,), batch=False)
        return record

    def append_many(self, drafts: Iterable[Mapping[str, Any]]) -> tuple[StoredMemory, ...]:
        """Store a batch in one transaction: every draft, or — on any invalid draft or
        duplicate id, in the batch or already stored — nothing.

        Each draft is a mapping of :meth:`append`'s keyword arguments; the batch gets
        one ``clock.now()`` as its ``stored_at`` and one write (one commit).
        """
        checked = validate_drafts(drafts)
        if not checked:
            return ()
        stored_at = stamp_now(self.clock)
        records = tuple(draft.stored(self.user_scope, stored_at) for draft in checked)
        self._insert(records, batch=True)
        return records


class RemoteMemoryStore(AppendsThroughInsert, RecallStore, AppendsInBatches):
    """Append-only, user-scoped record store backed by one JSONL file (``path``).

    Reads follow the file: the first read decodes it once and builds the id index;
    later reads and appends decode only the bytes appended since (by this or any
    other process), so an append costs the same in a store of 10 or 100,000 records.

    An append before any read needs only the ids: when a recall sidecar beside the file
    vouches for a prefix of it (:func:`labmem.recall.sidecar.load_sidecar`: the records it
    covers were decoded and checked when it was written, and are unchanged), only the
    lines after that prefix are decoded. The duplicate check never takes the sidecar's
    word for which ids the prefix holds (a sidecar sealed with valid checksums can still
    leave an id out, and a second line with that id would make the file unreadable for
    good): an id is looked for in the prefix's own bytes (:meth:`_prefix_holds`, a
    ``memchr``-speed search, no line decoded but the ones it finds), and a batch of more
    than :data:`SEARCHED_IDS` ids decodes the whole file instead. The first read of
    records then decodes the whole file, as it always did.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        user_id: str,
        clock: Clock | None = None,
        lock_factory: LockFactory = file_lock,
    ) -> None:
        self.user_scope = _validated(scope_digest, user_id, field="user_id")
        self.clock = resolve_clock(clock)
        self._lock = lock_factory(Path(path))  # one lock, whichever log reads the file
        self._log: JsonlLog[StoredMemory] = self._new_log(path)
        self._records: list[StoredMemory] = []
        self._by_id: dict[str, StoredMemory] = {}
        self._latest_profile: StoredMemory | None = None
        self._batch_ids: set[str] = set()  # ids decoded in the refresh under way
        self._prefix_ids = None  # ids of the prefix a sidecar vouches for (not decoded)
        self._prefix_bytes = 0  # how long that prefix is (searched by _prefix_holds)
        self._earlier_bytes = 0  # read by a log this instance replaced (bytes_read)

    def _new_log(self, path, start: tuple[int, int] = (0, 0),
                 identity: tuple[int, int] | None = None) -> JsonlLog[StoredMemory]:
        return JsonlLog(path, decode=self._decode, corruption_error=RemoteMemoryCorruptionError,
                        lock_factory=lambda _: self._lock, start=start, identity=identity)

    @property
    def path(self):
        return self._log.path

    @property
    def bytes_read(self) -> int:
        """Bytes this instance has read from disk so far (to show appends don't re-read)."""
        return self._earlier_bytes + self._log.bytes_read

    @property
    def read_cursor(self) -> tuple[int, int]:
        """(bytes, lines) of the complete lines this instance has decoded so far."""
        return self._log.offset, self._log.line_count

    def __repr__(self) -> str:
        return f"RemoteMemoryStore({self.path.name!r}, user_scope={self.user_scope!r})"

    # -- reading -----------------------------------------------------------------

    def _decode(self, line: int, obj: dict[str, Any]) -> StoredMemory:
        name = self.path.name
        record = decode_stored_line(name, self.user_scope, line, obj)
        if self._is_stored(record.memory_id) or record.memory_id in self._batch_ids:
            raise RemoteMemoryCorruptionError(
                name, line, f"memory_id {record.memory_id!r} is stored twice"
            )
        self._batch_ids.add(record.memory_id)
        return record

    def _is_stored(self, memory_id: str) -> bool:
        """Is ``memory_id`` among the records read so far? (Reading, a prefix a sidecar
        vouches for is known by the sidecar's ids: a duplicate there is corruption the
        full read reports anyway. Appending asks :meth:`_holds` instead.)"""
        return memory_id in self._by_id or (
            self._prefix_ids is not None and self._prefix_ids.find(memory_id) is not None)

    def _holds(self, memory_id: str) -> bool:
        """Is ``memory_id`` stored? What an append refuses a duplicate by: the records
        decoded so far, and the prefix not decoded searched in the file itself."""
        return memory_id in self._by_id or (
            self._prefix_ids is not None and self._prefix_holds(memory_id))

    def _prefix_holds(self, memory_id: str) -> bool:
        """Does a line of the prefix the sidecar covers (not decoded) store ``memory_id``?

        Asked of the records file, not of the sidecar. An id is 1–128 characters that JSON
        never escapes, and a quote inside a stored string always is, so ``"<id>"`` with
        bare quotes appears only as a whole JSON string; each line where it appears is
        decoded and its ``memory_id`` compared (the id may also be some other field's
        value). No appearance: not stored. Searching is a ``memchr``-speed scan of the
        prefix, paid by an append only (bench/results/recall_design_notes.md).
        """
        needle = json.dumps(memory_id).encode("ascii")
        end = self._prefix_bytes
        with open(self.path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            if (stat.st_dev, stat.st_ino) != self._log.identity or stat.st_size < end:
                raise RemoteMemoryCorruptionError(
                    self.path.name, None, "the file was replaced behind this reader "
                    "(another inode under the same name, or shorter than it was)")
            if end == 0:
                return False
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                at = data.find(needle, 0, end)
                while at != -1:
                    start = data.rfind(b"\n", 0, at) + 1
                    stop = data.find(b"\n", at, end)
                    stop = end if stop == -1 else stop
                    try:
                        obj = parse_json(data[start:stop])
                    except ValueError as exc:
                        raise RemoteMemoryCorruptionError(
                            self.path.name, None,
                            f"the line at byte {start} is not valid JSON ({exc})") from None
                    if isinstance(obj, dict) and obj.get("memory_id") == memory_id:
                        return True
                    at = data.find(needle, stop, end)
        return False

    def _catch_up(self) -> None:
        """Every record: a prefix known by its ids alone is decoded first (from the start)."""
        if self._prefix_ids is not None:
            replaced = self._log
            now = file_signature(replaced.path)
            if replaced.identity is not None and (
                    now is None or (now.device, now.inode) != replaced.identity):
                raise RemoteMemoryCorruptionError(  # what the log itself says of a new inode
                    replaced.path.name, None,
                    "the file was replaced behind this reader (another inode under the same "
                    "name)")
            self._earlier_bytes += replaced.bytes_read
            self._records, self._by_id, self._latest_profile = [], {}, None
            self._prefix_ids = None
            self._log = self._new_log(replaced.path)
        self._follow()

    def _follow(self) -> None:
        """Decode the lines appended since the last read (this instance's or another's)."""
        self._batch_ids.clear()
        for record in self._log.refresh():
            self._remember(record)

    def _catch_up_ids(self) -> None:
        """What an append needs, every stored id: before any read, a prefix a recall sidecar
        vouches for is left undecoded (the lines after it are decoded; :meth:`_holds`
        searches the prefix itself for an id); else as a read."""
        if self._log.offset == 0 and self._prefix_ids is None:
            from labmem.recall.sidecar import SidecarRefused, load_sidecar, packed_strings

            try:
                sidecar = load_sidecar(self.path, user_scope=self.user_scope)
                prefix_ids = packed_strings(sidecar, "memory_ids")
                if (len(prefix_ids) != sidecar.meta["covered_lines"]
                        or not _ends_a_line(self.path, sidecar.meta["covered_bytes"])):
                    sidecar = None  # not one id per line, or not whole lines: not used
            except SidecarRefused:
                sidecar = None
            if sidecar is not None:
                meta = sidecar.meta
                self._prefix_ids = prefix_ids
                self._prefix_bytes = meta["covered_bytes"]
                self._log = self._new_log(
                    self.path, start=(int(meta["covered_bytes"]), int(meta["covered_lines"])),
                    identity=(int(meta["device"]), int(meta["inode"])))
        self._follow()

    def _remember(self, record: StoredMemory) -> None:
        self._records.append(record)
        self._by_id[record.memory_id] = record
        if record.kind is MemoryKind.PROFILE and (
            self._latest_profile is None
            or (record.source.captured_at, record.memory_id)
            > (self._latest_profile.source.captured_at, self._latest_profile.memory_id)
        ):
            self._latest_profile = record

    def read_all(self) -> tuple[StoredMemory, ...]:
        """Every record in this user's file, in storage order."""
        self._catch_up()
        return tuple(self._records)

    def get(self, memory_id: str) -> StoredMemory | None:
        """The record with ``memory_id``, or ``None``."""
        self._catch_up()
        return self._by_id.get(memory_id)

    def latest_profile(self) -> StoredMemory | None:
        """The profile snapshot captured last (ties: greatest ``memory_id``), or ``None``."""
        self._catch_up()
        return self._latest_profile

    def __len__(self) -> int:
        self._catch_up()
        return len(self._records)

    def is_empty(self) -> bool:
        """Whether the file holds no complete record, known from its size and first line
        alone: nothing is decoded (what a fast start asks before anything else)."""
        if self._records:
            return False
        try:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                while handle.tell() < size:  # a torn first line is not a record
                    if b"\n" in handle.read(1 << 16):
                        return False
        except FileNotFoundError:
            return True
        return True

    # -- writing (append and append_many: AppendsThroughInsert) -----------------

    def _insert(self, records: tuple[StoredMemory, ...], *, batch: bool) -> None:
        """Under the lock, refuse the write if any id is stored; else every line goes out
        in one write and one ``fsync``. (A crash in the middle of that write can still
        leave a prefix of a batch: a JSONL file has no transactions; the database stores
        have.)"""
        with self._log.locked():
            if len(records) > SEARCHED_IDS:  # one search of the prefix per id: decode instead
                self._catch_up()
            else:
                self._catch_up_ids()
            for index, record in enumerate(records):
                if self._holds(record.memory_id):
                    raise RemoteMemoryDuplicateError(duplicate_message(
                        record.memory_id, self.path.name, index if batch else None))
            if batch:
                self._log.append_many([record.to_dict() for record in records])
            else:
                self._log.append(records[0].to_dict())
        for record in records:
            self._remember(record)
