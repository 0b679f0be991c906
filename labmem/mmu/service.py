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
"""

from __future__ import annotations

import heapq
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from labmem.core.clock import Clock, resolve_clock
from labmem.core.errors import validated_as
from labmem.core.storage import JsonlLog, LockFactory, file_lock
from labmem.core.text import extract_terms, normalize_text
from labmem.core.validation import require_int, require_text
from labmem.mmu.errors import (
    MemoryCorruptionError,
    MemoryValidationError,
    RecordNotFoundError,
    ServiceClosedError,
    UnsupportedOperationError,
)
from labmem.mmu.records import (
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    MEMORY_TYPES,
    SOURCE_KINDS,
    MemoryRecord,
    check_write_gate,
    require_choice,
    require_unit,
)

RECORDS_FILE = "records.jsonl"


@dataclass(frozen=True)
class RecallHit:
    """One ranked answer of :meth:`MemoryService.recall_query` (a view, never written back)."""

    record: MemoryRecord
    score: float
    matched_terms: tuple[str, ...]


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
                     memory_type: str | None = None) -> tuple[RecallHit, ...]: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def raise_confidence(old: float, new: float) -> float:
    """An independent confirmation closes half the gap to certainty (at least ``new``)."""
    return round(max(new, old + (1.0 - old) / 2.0), 6)


class FileMemoryService:
    """The default backend: canonical records in ``<root>/records.jsonl``.

    ``memory_types`` limits what this backend accepts (default: all four); asking it for
    another type raises :class:`UnsupportedOperationError` instead of storing it anyway.
    """

    def __init__(self, root: str | os.PathLike[str], *, clock: Clock | None = None,
                 memory_types: Iterable[str] = MEMORY_TYPES,
                 lock_factory: LockFactory = file_lock) -> None:
        self.root = Path(root)
        self.clock = resolve_clock(clock)
        self.memory_types = tuple(require_choice(t, "memory_types[]", MEMORY_TYPES)
                                  for t in memory_types)
        self._log: JsonlLog[MemoryRecord] = JsonlLog(
            self.root / RECORDS_FILE, decode=self._decode,
            corruption_error=MemoryCorruptionError, lock_factory=lock_factory)
        self._records: dict[str, MemoryRecord] = {}
        self._origin: dict[tuple[str, str], str] = {}  # (scope, origin_key) -> current id
        # (scope, origin_key) -> the archived record of a forgotten origin: the tombstone
        # that keeps a replayed remember from writing the forgotten memory again
        self._forgotten: dict[tuple[str, str], str] = {}
        self._index: dict[str, set[str]] = defaultdict(set)  # term -> visible record ids
        self._history: list[str] = []  # record id written by each log line, in order
        self._closed = False
        self._catch_up()

    # -- reading the log -------------------------------------------------------------
    @staticmethod
    def _decode(line: int, obj: dict[str, Any]) -> MemoryRecord:
        try:
            return MemoryRecord.from_dict(obj)
        except MemoryValidationError as exc:
            raise MemoryCorruptionError(RECORDS_FILE, line, str(exc)) from None

    def _catch_up(self) -> None:
        for record in self._log.refresh():
            self._apply(record)

    def _apply(self, record: MemoryRecord) -> None:
        old = self._records.get(record.record_id)
        if old is not None:
            for term in extract_terms(old.title + "\n" + old.text):
                self._index[term].discard(old.record_id)
        self._records[record.record_id] = record
        self._history.append(record.record_id)
        key = (record.scope, record.origin_key)
        if record.status in ("provisional", "trusted"):
            self._origin[key] = record.record_id
            self._forgotten.pop(key, None)
        elif self._origin.get(key) == record.record_id:
            del self._origin[key]
        if record.status == "archived" and key not in self._origin:
            self._forgotten[key] = record.record_id
        if record.visible:
            for term in extract_terms(record.title + "\n" + record.text):
                self._index[term].add(record.record_id)

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
        record = self._records.get(record_id)
        if record is None or not record.visible or record.scope != scope:
            raise RecordNotFoundError(f"record_id {record_id!r}: no such record in scope "
                                      f"{scope!r} (never written, forgotten, or not this "
                                      "scope's)")
        return record

    # -- the six operations ------------------------------------------------------------
    def remember(self, memory_type: str, *, scope: str, title: str, text: str, outcome: str,
                 evidence: Sequence[str], source_kind: str, origin_key: str,
                 importance: float = 0.5, confidence: float = 0.5, utility: float = 0.5,
                 salience: float = 0.5) -> MemoryRecord:
        """Write (or merge) one long-term record after the write gate accepts it.

        Same origin key and same text with new evidence: merge (version + 1, confidence
        raised, ``trusted`` once a second independent evidence id confirms it). Same
        evidence again: an idempotent retry, returned unchanged. Same origin key with
        different text: the old record becomes ``contradicted``, the new one is written.
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
        with self._log.locked():
            self._catch_up()
            now = self.clock.now()
            current_id = self._origin.get((scope, origin_key))
            current = self._records.get(current_id) if current_id else None
            forgotten = self._forgotten.get((scope, origin_key))
            if current is None and forgotten is not None:
                return self._records[forgotten]  # the tombstone answers; nothing is written
            if current is not None and normalize_text(current.text) == normalize_text(text):
                new_evidence = [e for e in dict.fromkeys(evidence) if e not in current.evidence]
                if not new_evidence:
                    return current  # a retry is not a second source
                merged = replace(
                    current, evidence=current.evidence + tuple(new_evidence),
                    version=current.version + 1, updated_at=now, status="trusted",
                    confidence=raise_confidence(current.confidence, confidence))
                self._write(merged)
                return merged
            record = MemoryRecord(
                record_id=f"m-{len(self._records) + 1:06d}", memory_type=memory_type,
                scope=scope, title=title, text=text, status="provisional",
                importance=importance, confidence=confidence, utility=utility,
                salience=salience, source_kind=source_kind, origin_key=origin_key,
                evidence=tuple(dict.fromkeys(evidence)), version=1,
                created_at=now, updated_at=now)
            if current is not None:
                self._write(replace(current, status="contradicted",
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
        """Archive the record: it stays on disk as history but no recall path sees it."""
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
                     memory_type: str | None = None) -> tuple[RecallHit, ...]:
        """Top ``k`` visible records of ``scope`` by query-term coverage (ties: record id).

        Scope (and type) filter the candidates *before* scoring; only records sharing a
        term with the query are scored, and ``heapq.nsmallest`` picks the top ``k``.
        """
        self._open()
        validated_as(MemoryValidationError, require_text, query, "query", max_chars=2_000)
        validated_as(MemoryValidationError, require_text, scope, "scope")
        validated_as(MemoryValidationError, require_int, k, "k", minimum=1)
        if memory_type is not None:
            self._require_type(memory_type)
        self._catch_up()
        terms = extract_terms(query)
        hits: Counter[str] = Counter()
        for term in terms:
            hits.update(self._index.get(term, ()))
        rows = []
        for record_id, matched in hits.items():
            record = self._records[record_id]
            if record.scope != scope or (memory_type and record.memory_type != memory_type):
                continue
            rows.append((-round(matched / len(terms), 6), record_id))
        best = heapq.nsmallest(k, rows)
        out = []
        for neg_score, record_id in best:
            record = self._records[record_id]
            record_terms = set(extract_terms(record.title + "\n" + record.text))
            out.append(RecallHit(record, -neg_score,
                                 tuple(t for t in terms if t in record_terms)))
        return tuple(out)

    def stats(self) -> dict[str, Any]:
        self._open()
        self._catch_up()
        by_type = Counter(r.memory_type for r in self._records.values())
        by_status = Counter(r.status for r in self._records.values())
        return {"records": len(self._records), "log_lines": self._log.line_count,
                "by_type": {t: by_type.get(t, 0) for t in MEMORY_TYPES},
                "by_status": dict(sorted(by_status.items()))}

    def close(self) -> None:
        self._closed = True

    # -- what the Context MMU pages from -----------------------------------------------
    def records(self) -> tuple[MemoryRecord, ...]:
        """Every record's current state (archived included), in id order."""
        self._open()
        self._catch_up()
        return tuple(self._records[i] for i in sorted(self._records))

    def changed_since(self, cursor: int) -> tuple[tuple[MemoryRecord, ...], int]:
        """Current state of records written after log line ``cursor``, and the new cursor."""
        self._open()
        self._catch_up()
        ids = dict.fromkeys(self._history[cursor:])
        return tuple(self._records[i] for i in ids), len(self._history)

    def _write(self, record: MemoryRecord) -> None:
        self._log.append(record.to_dict())
        self._apply(record)


