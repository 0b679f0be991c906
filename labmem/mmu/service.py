"""The memory service: one contract for remember / forget / recall, and a file backend.

:class:`MemoryService` is the seam (in the original C design, a vtable: a struct of
function pointers each backend filled in): callers say which memory type they mean and
call the same six operations whatever the backend. A backend that cannot
do something raises :class:`UnsupportedOperationError`; it never returns quietly.
Everything returned is a fresh value (frozen records, new tuples and dicts), so no caller
can reach into the backend's state — Python's answer to "who frees ``char **text``".

:class:`FileMemoryService` keeps canonical records in one append-only JSONL log (each
line is a record's full new state; the last line per id wins), folds it on open, and
follows it afterwards, so records survive a restart and other processes' writes are seen.
Each line ends in a CRC-32 of its own bytes (:mod:`labmem.mmu.logline`): a record is
validated when it is written, and replay takes a line the checksum vouches for as it is.
The service owns the one term index (:class:`~labmem.mmu.index.KeyedTermIndex`, integer
document ids) that its ``recall_query`` and the Context MMU both search.

Opening does not fold the whole log when it need not: a fold snapshot beside it
(``records.jsonl.fold``, :mod:`labmem.mmu.snapshot`) holds the fold and the term index of
a prefix of the log, checked against the log on every open; only the lines appended
since are folded, and a record's line is decoded when one of its fields is first read.
"""

from __future__ import annotations

import heapq
import json
import os
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from labmem.core.clock import Clock, parse_timestamp, resolve_clock
from labmem.core.errors import validated_as
from labmem.core.storage import (
    JsonlLog,
    LockFactory,
    encode_json_line,
    file_lock,
    file_signature,
    write_text_atomic,
)
from labmem.core.text import extract_terms, normalize_text
from labmem.core.validation import parse_json, require_int, require_text
from labmem.mmu.errors import (
    MemoryCorruptionError,
    MemoryValidationError,
    RecordNotFoundError,
    ServiceClosedError,
    UnsupportedOperationError,
)
from labmem.mmu.index import KeyedTermIndex, paused_gc
from labmem.mmu.lazy import RowPageTable
from labmem.mmu.logline import CHECKSUM_FIELD, checksum_state, encode_line, trusted_record
from labmem.mmu.records import (
    CURRENT_STATUSES,
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    MEMORY_TYPES,
    SOURCE_KINDS,
    MemoryRecord,
    Tombstone,
    check_write_gate,
    claim_key,
    exclusion_reason,
    may_supersede,
    record_id_of,
    require_choice,
    require_unit,
)
from labmem.mmu.snapshot import (
    LineSource,
    SnapshotRefused,
    load_fold,
    remove_snapshot,
    write_fold,
)
from labmem.mmu.trace import Exclusion

RECORDS_FILE = "records.jsonl"
#: Write the fold snapshot once this many log lines are not covered by it (at open and at
#: close); a smaller log is folded in well under a tenth of a second.
SNAPSHOT_LINES = 1_000


class RecordLog(JsonlLog):
    """The core JSONL log, writing checksummed lines and telling the decoder what each
    line's checksum says: its ``crc32`` member becomes ``True`` (it matches: trust the
    fields) or ``False`` (it does not: validate, then refuse); a line without one is
    parsed as it is, and validated in full.

    It also keeps what a fold snapshot records of the bytes consumed: where each line
    starts (:attr:`starts`) and a running CRC-32 of all of them (:attr:`crc`), both
    advanced only when a batch is consumed (read or appended), so they always describe
    exactly the bytes this fold is made of.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, encode=self._encode_captured, **kwargs)
        self.starts: list[int] = []
        self.crc = 0
        self._next = 0
        self._captured: list[bytes] | None = None

    def adopt(self, identity: tuple[int, int], starts: list[int], crc: int) -> None:
        """Go on from a snapshot's prefix (``start=`` gave the offset and line count): the
        file it was made of, its line starts and its CRC-32. (``JsonlLog`` takes a cursor
        but not the identity it belongs to; this sets it, so a replaced file is noticed.)"""
        self._identity = identity
        self.starts, self.crc = starts, crc

    def refresh(self) -> list[MemoryRecord | Tombstone]:
        lines, crc = len(self.starts), self.crc
        self._next = self.offset
        try:
            return super().refresh()
        except BaseException:  # the batch is not consumed: neither are its bytes here
            del self.starts[lines:]
            self.crc = crc
            raise

    def _parse(self, line_number: int, raw: bytes) -> dict[str, Any]:
        self.starts.append(self._next)
        self._next += len(raw) + 1
        self.crc = zlib.crc32(b"\n", zlib.crc32(raw, self.crc))
        state = checksum_state(raw)
        obj = super()._parse(line_number, raw)
        if state is not None:
            obj[CHECKSUM_FIELD] = state
        return obj

    def _encode_captured(self, record: dict[str, Any]) -> bytes:
        line = encode_line(record)
        if self._captured is not None:
            self._captured.append(line)
        return line

    def append_many(self, records: Sequence[dict[str, Any]]) -> int:
        start = self.offset
        self._captured = []
        try:
            count = super().append_many(records)
        finally:
            captured, self._captured = self._captured, None
        for line in captured:  # written and fsync-ed: these bytes are consumed now
            self.starts.append(start)
            start += len(line)
            self.crc = zlib.crc32(line, self.crc)
        return count


@dataclass(frozen=True)
class ServiceHit:
    """One ranked answer of :meth:`MemoryService.recall_query` (a view, never written back)."""

    record: MemoryRecord
    score: float
    matched_terms: tuple[str, ...]


@dataclass(frozen=True)
class QueryExplanation:
    """:meth:`FileMemoryService.explain_query`: the hits, and every matching record of the
    caller's scope that was left out, with the reason."""

    hits: tuple[ServiceHit, ...]
    excluded: tuple[Exclusion, ...]


@runtime_checkable
class MemoryService(Protocol):
    """What the cognitive layer may ask of long-term memory, whatever stores it."""

    def remember(self, memory_type: str, *, scope: str, title: str, text: str, outcome: str,
                 evidence: Sequence[str], source_kind: str, origin_key: str,
                 importance: float = 0.5, confidence: float = 0.5, utility: float = 0.5,
                 salience: float = 0.5) -> MemoryRecord: ...

    def forget(self, record_id: str, *, scope: str) -> MemoryRecord: ...

    def recall_key(self, record_id: str, *, scope: str) -> MemoryRecord: ...

    def recall_query(self, query: str, k: int, *, scope: str,
                     memory_type: str | None = None) -> tuple[ServiceHit, ...]: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def raise_confidence(old: float, new: float) -> float:
    """An independent confirmation closes half the gap to certainty (at least ``new``)."""
    return round(max(new, old + (1.0 - old) / 2.0), 6)


class FileMemoryService:
    """The default backend: canonical records in ``<root>/records.jsonl``.

    ``memory_types`` limits what this backend accepts (default: all four); asking it for
    another type raises :class:`UnsupportedOperationError` instead of storing it anyway.
    ``snapshot_lines``: write the fold snapshot when at least this many log lines are
    not covered by it (checked at open and at :meth:`close`); ``None`` neither reads nor
    writes one. A snapshot is a cache: every answer is the same with it or without it.
    """

    def __init__(self, root: str | os.PathLike[str], *, clock: Clock | None = None,
                 memory_types: Iterable[str] = MEMORY_TYPES,
                 lock_factory: LockFactory = file_lock,
                 snapshot_lines: int | None = SNAPSHOT_LINES) -> None:
        self.root = Path(root)
        self.clock = resolve_clock(clock)
        self.memory_types = tuple(require_choice(t, "memory_types[]", MEMORY_TYPES)
                                  for t in memory_types)
        self._lock_factory = lock_factory
        self.snapshot_lines = (None if snapshot_lines is None else validated_as(
            MemoryValidationError, require_int, snapshot_lines, "snapshot_lines", minimum=1))
        #: fault injection for crash tests: called with the name of each purge step
        #: (and of each snapshot-writing step: ``snapshot_written``)
        self.fault_hook: Callable[[str], None] | None = None
        #: what became of the fold snapshot at the last open: ``"loaded"``, ``"refused:
        #: <why>"``, ``"off"``; and at the last write: ``"written"`` or ``"skipped: <why>"``
        self.snapshot_state = "off"
        self.snapshot_write = ""
        self._reset()
        self._closed = False
        self._catch_up()
        self.save_snapshot(only_if_behind=True)

    # -- reading the log -------------------------------------------------------------
    @staticmethod
    def _decode(line: int, obj: dict[str, Any]) -> MemoryRecord | Tombstone:
        checksum = obj.pop(CHECKSUM_FIELD, None)
        try:
            if checksum is True:  # the bytes a validating writer wrote: types checked only
                return trusted_record(obj)
            if obj.get("tombstone") is True:
                decoded = Tombstone.from_dict(obj)
            else:
                decoded = MemoryRecord.from_dict(obj)
        except MemoryValidationError as exc:  # a bad field is named first, checksum or not
            raise MemoryCorruptionError(RECORDS_FILE, line, str(exc)) from None
        except (TypeError, ValueError) as exc:  # e.g. a list where a dict key was expected
            raise MemoryCorruptionError(RECORDS_FILE, line, "a field has the wrong type or "
                                        f"shape ({type(exc).__name__}: {exc})") from None
        if checksum is not None:  # well-formed, but not the bytes that were written
            raise MemoryCorruptionError(RECORDS_FILE, line,
                                        "its crc32 does not match its bytes (the line was "
                                        "damaged or edited after it was written)")
        return decoded

    @classmethod
    def _decode_line(cls, line: int, raw: bytes) -> MemoryRecord | Tombstone:
        """One line's bytes (no newline) as the log reader decodes them: for a record that
        a fold snapshot restored, decoded when a field is first read."""
        state = checksum_state(raw)
        try:
            obj = parse_json(raw)
        except ValueError as exc:
            raise MemoryCorruptionError(RECORDS_FILE, line, f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise MemoryCorruptionError(RECORDS_FILE, line, "expected a JSON object")
        if state is not None:
            obj[CHECKSUM_FIELD] = state
        return cls._decode(line, obj)

    def _new_log(self, start: tuple[int, int] = (0, 0)) -> RecordLog:
        return RecordLog(self.root / RECORDS_FILE, decode=self._decode, start=start,
                         corruption_error=MemoryCorruptionError,
                         lock_factory=self._lock_factory)

    def _reset(self) -> None:
        self._log = self._new_log()
        self._covered_lines = 0  # log lines the snapshot on disk covers, as far as we know
        self._deferred_claims: bytes | None = None  # the snapshot's claim maps, unread
        # id -> record; an ``int`` is a row of the fold snapshot's records not read yet
        # (:meth:`_get` makes it a record, :attr:`_source` says what the snapshot knows)
        self._records: dict[str, MemoryRecord | int] = {}
        self._source: LineSource | None = None
        self._tombstones: dict[str, Tombstone] = {}  # purged ids: no text is kept
        self._origin: dict[tuple[str, str], str] = {}  # (scope, origin_key) -> current id
        # (scope, origin_key) -> the archived record of a forgotten origin: the tombstone
        # that keeps a replayed remember from writing the forgotten memory again
        self._forgotten: dict[tuple[str, str], str] = {}
        # (scope, origin_key) -> {normalized text: id} of pending lower-ranked claims
        self._pending: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        # the visible records' title + text, tokenized on the first query; the MMU uses it
        self.index = KeyedTermIndex(self._searchable_text)
        self._history: list[str] = []  # record id written by each log line, in order
        if self.snapshot_lines is not None:
            self._restore()

    def _restore(self) -> None:
        """Take the fold of the log's prefix from the snapshot, if it is valid for it."""
        try:
            fold = load_fold(self.root / RECORDS_FILE, self._decode_line)
        except SnapshotRefused as exc:
            self.snapshot_state = f"refused: {exc}"
            return
        self._log = self._new_log(start=(fold.covered_bytes, fold.covered_lines))
        self._log.adopt(fold.identity, fold.line_starts, fold.covered_crc32)
        self._covered_lines = fold.covered_lines
        self._records, self._tombstones, self._history = (fold.records, fold.tombstones,
                                                          fold.history)
        self._source = fold.source
        self._deferred_claims = fold.claims
        self.index = KeyedTermIndex(self._searchable_text, base=fold.index)
        self.snapshot_state = "loaded"

    def _restore_claims(self) -> None:
        """The claim maps, read from the snapshot when a write first needs them."""
        doc = self._claims_document(self._deferred_claims)
        self._deferred_claims = None
        for name in ("origin", "forgotten"):  # three columns: scopes, origin keys, ids
            scopes, keys, ids = doc[name]
            setattr(self, f"_{name}", dict(zip(zip(scopes, keys, strict=True), ids, strict=True)))
        for s, k, text, i in doc["pending"]:
            self._pending[(s, k)][text] = i

    @staticmethod
    def _claims_document(raw: bytes) -> dict[str, Any]:
        """The snapshot's claim maps, through the one validating parser: bytes that are
        not JSON, or nest past the core's bound, are the snapshot's corruption (named),
        not a ``RecursionError`` in the middle of a write."""
        try:
            doc = parse_json(raw)
        except ValueError as exc:
            raise MemoryCorruptionError(f"{RECORDS_FILE}.fold", None,
                                        f"its claim maps cannot be read ({exc})") from None
        if not _claims_shaped(doc):
            raise MemoryCorruptionError(
                f"{RECORDS_FILE}.fold", None, "its claim maps do not have their shape (it is "
                f"a cache: delete it and open the service again to fold {RECORDS_FILE})")
        return doc

    def _claims_json(self) -> bytes:
        if self._deferred_claims is not None:
            return self._deferred_claims

        def columns(claims: dict[tuple[str, str], str]) -> list[Any]:
            return [[scope for scope, _ in claims], [key for _, key in claims],
                    list(claims.values())]

        return json.dumps({
            "origin": columns(self._origin), "forgotten": columns(self._forgotten),
            "pending": [[s, k, text, i] for (s, k), texts in self._pending.items()
                        for text, i in texts.items()]},
            ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def save_snapshot(self, *, only_if_behind: bool = False) -> bool:
        """Write the fold snapshot of everything folded so far; ``True`` if written.

        ``only_if_behind``: only if at least :attr:`snapshot_lines` lines are not covered
        yet. Never raises for the snapshot's sake: a directory that cannot be written, or a
        log replaced since it was folded, leaves the old snapshot (``snapshot_write`` says
        why). Tokenizes every live text not yet tokenized (the snapshot holds the index).
        """
        if self.snapshot_lines is None:
            return False
        behind = self._log.line_count - self._covered_lines
        if behind <= 0 or (only_if_behind and behind < self.snapshot_lines):
            return False
        log = self._log
        identity = log.identity
        if identity is None:
            return False

        def still_valid() -> bool:  # under the lock: the log is still the file folded
            self._step("snapshot_written")
            now = file_signature(log.path)
            return now is not None and (now.device, now.inode) == identity \
                and now.size >= log.offset

        try:
            with log.locked():
                written = write_fold(
                    log.path, identity=identity, covered_bytes=log.offset,
                    covered_crc32=log.crc, history=self._history, starts=log.starts,
                    records=self._records, source=self._source,
                    tombstones=self._tombstones,
                    claims=self._claims_json(), index=self.index, still_valid=still_valid)
        except (OSError, TimeoutError) as exc:  # read-only, full, or the lock not had
            self.snapshot_write = f"skipped: {getattr(exc, 'strerror', None) or exc}"
            return False
        self.snapshot_write = "written" if written else "skipped: the log was replaced"
        if written:
            self._covered_lines = log.line_count
        return written

    def _catch_up(self) -> None:
        identity = self._log.identity
        if identity is not None:  # a purge (here or in another process) replaced the file
            now = file_signature(self._log.path)
            if now is not None and (now.device, now.inode) != identity:
                self._reset()
        with paused_gc():  # a replay makes only acyclic objects: no cycle to look for
            for entry in self._log.refresh():
                self._apply(entry)

    def _apply(self, record: MemoryRecord | Tombstone) -> None:
        if self._deferred_claims is not None:
            self._restore_claims()
        self._history.append(record.record_id)
        key = (record.scope, record.origin_key)
        if isinstance(record, Tombstone):
            self._records.pop(record.record_id, None)
            self.index.remove(record.record_id)
            self._tombstones[record.record_id] = record
            if key not in self._origin:
                self._forgotten[key] = record.record_id
            return
        old = self._get(record.record_id)
        if old is not None and old.status == "conflicted":
            self._pending[key].pop(normalize_text(old.text), None)
        self._records[record.record_id] = record
        if record.status in CURRENT_STATUSES:
            self._origin[key] = record.record_id
            self._forgotten.pop(key, None)
        elif self._origin.get(key) == record.record_id:
            del self._origin[key]
        if record.status == "conflicted":
            self._pending[key][normalize_text(record.text)] = record.record_id
        if record.status == "archived" and key not in self._origin:
            self._forgotten[key] = record.record_id
        if not record.visible:
            self.index.remove(record.record_id)
        elif old is None or not old.visible or (old.title, old.text) != (record.title,
                                                                        record.text):
            self.index.put(record.record_id)

    def _get(self, record_id: str) -> MemoryRecord | None:
        """The record ``record_id`` (``None``: none), made from its snapshot row if need be."""
        record = self._records.get(record_id)
        if type(record) is int:
            record = self._records[record_id] = self._source.record(record)
        return record

    def _status(self, record: MemoryRecord | int) -> str:
        return self._source.status_of(record) if type(record) is int else record.status

    def _searchable_text(self, record_id: str) -> str:
        record = self._get(record_id)
        return record.title + "\n" + record.text

    def _forgotten_record(self, record_id: str) -> MemoryRecord:
        record = self._get(record_id)
        return record if record is not None else self._tombstones[record_id].as_record()

    def _next_id(self, scope: str) -> str:
        """The next id of ``scope``: ``<scope>:m-<n>``, numbered within the scope.

        An id tells its reader nothing about other scopes (bob's first record is
        ``bob:m-000001`` however much alice wrote) and is unique in the whole service, so
        every map here, the fold snapshot and the Context MMU's pages stay keyed by the id
        alone. A scope's ids are dense (a forget or a purge keeps the id), so the first
        free number is found by doubling and then halving: O(log n) lookups.
        """
        def taken(n: int) -> bool:
            record_id = record_id_of(scope, n)
            return record_id in self._records or record_id in self._tombstones

        high = 1
        while taken(high):
            high *= 2
        low = high // 2  # taken (or 0); high is free: the first free number is in (low, high]
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if taken(middle) else (low, middle)
        return record_id_of(scope, high)

    def _open(self) -> None:
        if self._closed:
            raise ServiceClosedError("the memory service is closed; open a new one on the "
                                     "same directory to keep using these records")

    def _require_type(self, memory_type: str) -> str:
        require_choice(memory_type, "memory_type", MEMORY_TYPES)
        if memory_type not in self.memory_types:
            raise UnsupportedOperationError(
                f"memory_type {memory_type!r} is not supported by this backend "
                f"(it stores {list(self.memory_types)}); use a backend configured for it")
        return memory_type

    def _visible(self, record_id: str, scope: str) -> MemoryRecord:
        """The visible record ``record_id`` of ``scope``.

        A missing id, a forgotten one and another scope's id get the very same error, so a
        caller cannot tell them apart: another scope's records can be neither probed nor
        counted by id.
        """
        validated_as(MemoryValidationError, require_text, record_id, "record_id")
        validated_as(MemoryValidationError, require_text, scope, "scope")
        record = self._get(record_id)
        if record is not None:
            _ = record.text  # a lazy record reads its line here, and checks the snapshot's word
        if record is None or not record.visible or record.scope != scope:
            raise RecordNotFoundError(f"record_id {record_id!r}: no such record in scope "
                                      f"{scope!r} (never written, forgotten, or not this "
                                      "scope's)")
        return record

    # -- the six operations ------------------------------------------------------------
    def remember(self, memory_type: str, *, scope: str, title: str, text: str, outcome: str,
                 evidence: Sequence[str], source_kind: str, origin_key: str,
                 importance: float = 0.5, confidence: float = 0.5, utility: float = 0.5,
                 salience: float = 0.5, valid_until: datetime | str | None = None,
                 verified_at: datetime | str | None = None) -> MemoryRecord:
        """Write (or merge) one long-term record after the write gate accepts it.

        Records sharing ``(scope, origin_key)`` are claims about the same thing:

        * same text with new evidence: merge (version + 1, confidence raised, ``trusted``
          once a second independent evidence id confirms it); same evidence again: an
          idempotent retry, returned unchanged;
        * different text from a source of equal or higher rank (:data:`SOURCE_RANK`), or
          over an expired claim: the old record becomes ``superseded`` (naming the new
          one), the new one is written ``provisional``;
        * different text from a lower-ranked source: written ``conflicted`` (naming the
          current record it disagrees with) — a pending conflict, never loaded; the same
          pending claim again is returned unchanged.

        An origin key whose record was forgotten keeps a tombstone: remembering it again
        (a replayed write) returns the archived record, status ``archived``, and writes
        nothing — a forget is not undone by replaying the write that created the memory.
        """
        self._open()
        self._require_type(memory_type)
        if isinstance(evidence, str) or not isinstance(evidence, Sequence):
            raise MemoryValidationError("evidence", "must be a list of evidence ids")
        check_write_gate(outcome, evidence)
        require_choice(source_kind, "source_kind", SOURCE_KINDS)
        for name, value in (("importance", importance), ("confidence", confidence),
                            ("utility", utility), ("salience", salience)):
            require_unit(value, name)
        # every field is checked before it is used as a key or written: a scope given as a
        # list would otherwise escape as a TypeError from the origin lookup
        for name, value, limit in (("scope", scope, 100), ("origin_key", origin_key, 200),
                                   ("title", title, MAX_TITLE_CHARS),
                                   ("text", text, MAX_TEXT_CHARS)):
            validated_as(MemoryValidationError, require_text, value, name, max_chars=limit)
        for i, item in enumerate(evidence):
            validated_as(MemoryValidationError, require_text, item, f"evidence[{i}]",
                         max_chars=200)
        times = {name: None if value is None else validated_as(
                     MemoryValidationError, parse_timestamp, value, field=name)
                 for name, value in (("valid_until", valid_until),
                                     ("verified_at", verified_at))}
        with self._log.locked():
            self._catch_up()
            if self._deferred_claims is not None:
                self._restore_claims()
            now = self.clock.now()
            key = (scope, origin_key)
            current_id = self._origin.get(key)
            current = self._get(current_id) if current_id else None
            forgotten = self._forgotten.get(key)
            if current is None and forgotten is not None:
                return self._forgotten_record(forgotten)  # nothing is written
            if current is not None and normalize_text(current.text) == normalize_text(text):
                new_evidence = [e for e in dict.fromkeys(evidence) if e not in current.evidence]
                if not new_evidence:
                    return current  # a retry is not a second source
                merged = replace(
                    current, evidence=current.evidence + tuple(new_evidence),
                    version=current.version + 1, updated_at=now, status="trusted",
                    confidence=raise_confidence(current.confidence, confidence),
                    valid_until=times["valid_until"] or current.valid_until,
                    verified_at=times["verified_at"] or current.verified_at)
                self._write(merged)
                return merged
            pending = self._pending[key].get(normalize_text(text))
            if pending is not None:
                return self._get(pending)  # the same lower-ranked claim, again
            record = MemoryRecord(
                record_id=self._next_id(scope),
                memory_type=memory_type, scope=scope, title=title, text=text,
                status="provisional", importance=importance, confidence=confidence,
                utility=utility, salience=salience, source_kind=source_kind,
                origin_key=origin_key, evidence=tuple(dict.fromkeys(evidence)), version=1,
                created_at=now, updated_at=now, **times)
            if current is not None and not may_supersede(source_kind, current, now):
                record = replace(record, status="conflicted", conflicts_with=current.record_id)
            elif current is not None:
                self._write(replace(current, status="superseded", superseded_by=record.record_id,
                                    version=current.version + 1, updated_at=now))
            self._write(record)
            return record

    def revise(self, record_id: str, *, scope: str, text: str,
               evidence: Sequence[str]) -> MemoryRecord:
        """Correct a record's text in place (same id, version + 1, new content hash)."""
        self._open()
        validated_as(MemoryValidationError, require_text, text, "text", max_chars=MAX_TEXT_CHARS)
        if isinstance(evidence, str) or not isinstance(evidence, Sequence) or not evidence:
            raise MemoryValidationError("evidence", "a correction needs at least one evidence id")
        for i, item in enumerate(evidence):
            validated_as(MemoryValidationError, require_text, item, f"evidence[{i}]",
                         max_chars=200)
        with self._log.locked():
            self._catch_up()
            current = self._visible(record_id, scope)
            revised = replace(current, text=text, version=current.version + 1,
                              updated_at=self.clock.now(),
                              evidence=tuple(dict.fromkeys(current.evidence + tuple(evidence))))
            self._write(revised)
            return revised

    def forget(self, record_id: str, *, scope: str) -> MemoryRecord:
        """Archive the record: no recall path sees it any more. Its text stays in the log
        until :meth:`purge` rewrites the log without it."""
        self._open()
        with self._log.locked():
            self._catch_up()
            current = self._visible(record_id, scope)
            archived = replace(current, status="archived", version=current.version + 1,
                               updated_at=self.clock.now())
            self._write(archived)
            return archived

    def recall_key(self, record_id: str, *, scope: str) -> MemoryRecord:
        self._open()
        self._catch_up()
        return self._visible(record_id, scope)

    def recall_query(self, query: str, k: int, *, scope: str,
                     memory_type: str | None = None) -> tuple[ServiceHit, ...]:
        """Top ``k`` current records of ``scope`` by query-term coverage (ties: record id)."""
        return self.explain_query(query, k, scope=scope, memory_type=memory_type).hits

    def explain_query(self, query: str, k: int, *, scope: str,
                      memory_type: str | None = None) -> QueryExplanation:
        """:meth:`recall_query` with the reason each matching record was left out.

        Scope (and type) filter the candidates *before* scoring; then the status rule
        (:func:`~labmem.mmu.records.exclusion_reason`: superseded, contradicted, conflicted
        and expired records are not current) and one claim per ``(scope, origin_key)``;
        only records sharing a term with the query are looked at, and ``heapq.nsmallest``
        picks the top ``k``.
        """
        self._open()
        validated_as(MemoryValidationError, require_text, query, "query", max_chars=2_000)
        validated_as(MemoryValidationError, require_text, scope, "scope")
        validated_as(MemoryValidationError, require_int, k, "k", minimum=1)
        if memory_type is not None:
            self._require_type(memory_type)
        self._catch_up()
        now = self.clock.now()
        terms = extract_terms(query)
        hits = self.index.match_counts(terms)
        excluded: list[Exclusion] = []
        claims: dict[tuple[str, str], MemoryRecord] = {}
        for record_id in sorted(hits):
            record = self._get(record_id)
            if record.scope != scope or (memory_type and record.memory_type != memory_type):
                continue  # another scope's records are not even named as excluded
            reason = exclusion_reason(record, now)
            if reason is not None:
                excluded.append(Exclusion(record_id, record.status, reason, record.version))
                continue
            key = (record.scope, record.origin_key)
            rival = claims.get(key)
            if rival is not None:  # two current claims of one origin: the rank rule picks
                loser, claims[key] = sorted((rival, record), key=claim_key)
                excluded.append(Exclusion(loser.record_id, loser.status,
                                          f"outranked by {claims[key].record_id} "
                                          "(same origin)", loser.version))
                continue
            claims[key] = record
        rows = [(-round(hits[r.record_id] / len(terms), 6), r.record_id)
                for r in claims.values()]
        out = []
        for neg_score, record_id in heapq.nsmallest(k, rows):
            record = self._get(record_id)
            record_terms = set(extract_terms(record.title + "\n" + record.text))
            out.append(ServiceHit(record, -neg_score,
                                 tuple(t for t in terms if t in record_terms)))
        return QueryExplanation(tuple(out), tuple(sorted(excluded)))

    def stats(self, *, now: datetime | str | None = None) -> dict[str, Any]:
        """Counts by type and status; ``expired`` counts current-status records past their
        ``valid_until`` at ``now`` (default: the clock); ``purged`` the tombstones left by
        :meth:`purge`."""
        self._open()
        now = (self.clock.now() if now is None
               else validated_as(MemoryValidationError, parse_timestamp, now, field="now"))
        self._catch_up()
        rows = [r for r in self._records.values() if type(r) is int]
        made = [r for r in self._records.values() if type(r) is not int] if rows else \
            self._records.values()
        by_type = Counter(r.memory_type for r in made)
        by_status = Counter(r.status for r in made)
        expired = sum(r.status in CURRENT_STATUSES and r.expired(now) for r in made)
        if rows:  # read from the snapshot's columns, not from the records
            t, b, e = self._source.counts(rows, now)
            by_type.update(t)
            by_status.update(b)
            expired += e
        return {"records": len(self._records), "log_lines": self._log.line_count,
                "by_type": {t: by_type.get(t, 0) for t in MEMORY_TYPES},
                "by_status": dict(sorted(by_status.items())), "expired": expired,
                "purged": len(self._tombstones)}

    def purge(self) -> int:
        """Rewrite the log without the text of forgotten records; return how many.

        Each line of a forgotten record becomes its :class:`Tombstone` (id, scope, origin,
        when it was forgotten — no title, text or evidence), so line numbers, and the
        Context MMU's cursors into them, stay valid. The new log is written next to the
        old one and renamed over it (:func:`~labmem.core.storage.write_text_atomic`): a
        crash leaves either file, each readable, and in both the forget is in force. Other
        services on the same directory notice the new file and fold it again.
        """
        self._open()
        with self._log.locked():
            self._catch_up()
            self._step("start")
            for stale in self.root.glob(f".{RECORDS_FILE}.*.tmp"):  # left by a crashed purge
                stale.unlink(missing_ok=True)
            forgotten = {i: self._get(i) for i, r in self._records.items()
                         if self._status(r) == "archived"}
            if not forgotten:
                return 0
            # before the rewrite, so that no crash leaves a snapshot holding the terms of
            # a record whose text is purged
            remove_snapshot(self.root / RECORDS_FILE)
            raw = (self.root / RECORDS_FILE).read_bytes()[: self._log.offset]
            lines = raw.split(b"\n")[:-1]  # complete lines only: a torn tail goes
            # a tombstone holds seven short fields and no text: it is validated in full
            # on replay (cheap), so it is written as plain JSON, without a checksum
            tombstones = {i: encode_json_line(Tombstone.of(r).to_dict())
                          for i, r in forgotten.items()}
            text = b"".join(tombstones.get(record_id) or line + b"\n"
                            for record_id, line in zip(self._history, lines, strict=True))
            write_text_atomic(self.root / RECORDS_FILE, text.decode("utf-8"),
                              alongside=lambda: self._step("temp_written"))
            self._step("replaced")
            self._reset()
            self._catch_up()
        self.save_snapshot(only_if_behind=True)
        return len(forgotten)

    def _step(self, name: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(name)

    def close(self) -> None:
        """No more operations; the fold snapshot is brought up to date first if it lags by
        :attr:`snapshot_lines` lines or more."""
        if not self._closed:
            self.save_snapshot(only_if_behind=True)
        self._closed = True

    # -- what the Context MMU pages from -----------------------------------------------
    def records(self) -> tuple[MemoryRecord, ...]:
        """Every record's current state (archived included), in id order."""
        self._open()
        self._catch_up()
        return tuple(self._get(i) for i in sorted(self._records))

    def match_counts(self, terms: Iterable[str]) -> Counter[str]:
        """How many of ``terms`` each visible record's title and text hold (records holding
        none are left out): the candidate search of the Context MMU, on this index."""
        self._open()
        self._catch_up()
        return self.index.match_counts(terms)

    def changed_since(self, cursor: int) -> tuple[tuple[MemoryRecord, ...], int]:
        """Current state of records written after log line ``cursor``, and the new cursor."""
        self._open()
        self._catch_up()
        ids = dict.fromkeys(self._history[cursor:])
        return (tuple(self._get(i) if i in self._records else self._tombstones[i].as_record()
                      for i in ids), len(self._history))

    def visible_since(self, cursor: int) -> tuple[dict[str, MemoryRecord | int],
                                                  LineSource | None, int]:
        """:meth:`changed_since` for opening a Context MMU: the visible records written
        after log line ``cursor``, in the same order, as records or as rows of ``source``
        not read yet (``source.record(row)`` makes the record), and the new cursor."""
        self._open()
        self._catch_up()
        records, source = self._records, self._source
        visible = source.visible if source is not None else []
        order = dict.fromkeys(self._history[cursor:])
        # a purged record (a tombstone) is in no record map: never visible
        pairs = zip(order, map(records.get, order), strict=True)
        out = {record_id: record for record_id, record in pairs if record is not None
               and (visible[record] if type(record) is int else record.visible)}
        return out, source, len(self._history)

    def open_pages(self, cursor: int) -> tuple[RowPageTable, int]:
        """A Context MMU's page table for the visible records written after log line
        ``cursor`` (:meth:`visible_since`), each page made when first looked at, and the
        new cursor: opening an MMU on this service reads no record."""
        seeds, source, cursor = self.visible_since(cursor)
        return RowPageTable.of(seeds, source), cursor

    def _write(self, record: MemoryRecord) -> None:
        self._log.append(record.to_dict())
        self._apply(record)


def _claims_shaped(doc: Any) -> bool:
    """Whether ``doc`` is what :meth:`FileMemoryService._claims_json` writes: ``origin`` and
    ``forgotten`` as three equally long columns of strings, ``pending`` as rows of four."""
    if not isinstance(doc, dict):
        return False
    for name in ("origin", "forgotten"):
        columns = doc.get(name)
        if not (isinstance(columns, list) and len(columns) == 3
                and all(isinstance(c, list) and len(c) == len(columns[0]) for c in columns)
                and all(type(x) is str for c in columns for x in c)):
            return False
    pending = doc.get("pending")
    return isinstance(pending, list) and all(
        isinstance(row, list) and len(row) == 4 and all(type(x) is str for x in row)
        for row in pending)
