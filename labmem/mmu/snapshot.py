"""The fold snapshot: the memory service's opened state, kept beside its log.

Opening a :class:`~labmem.mmu.service.FileMemoryService` folds ``records.jsonl``: every
line is parsed, checked, turned into a record and applied — most of a second per 100,000
records, in every new process, before the term index is even built. The snapshot
(``records.jsonl.fold``, :mod:`labmem.core.arrayfile`) keeps the result of that fold for a
prefix of the log:

* per record (a *row*, numbered in order of first appearance in the log): its id, status,
  memory type, ``valid_until`` and the log line that holds its latest state;
* per log line: the row it wrote and the byte offset it starts at (the Context MMU's
  cursors count lines; a purge needs the lines);
* the claim maps (origin → current record, forgotten origins, pending conflicts), as
  JSON read only when a write first needs them, and the purged records' tombstones;
* the term index of the live records: term list, per-term row postings (``int32``).

Open maps it and keeps, per record id, only its row number; ``stats()`` reads the row
columns. A record object is made when something asks for that record
(:meth:`LineSource.record`): a :class:`~labmem.mmu.lazy.LazyRecord` holding id,
status, type and ``valid_until``; any other field — title, text, scope, evidence, … —
decodes the record's latest line by byte offset, once, when first read
(:meth:`LineSource.fill`, validated by the line's own checksum as on replay). The Context
MMU's page table keeps the same rows (:class:`~labmem.mmu.lazy.RowPageTable`), so opening a
service and an MMU decodes no line, makes no record and tokenizes no text; a recall decodes
the candidates it looks at. Lines appended after the covered prefix are then folded the
usual way, so the snapshot may lag the log by any number of lines.

Why this shape: the log is the truth and already holds every byte of every record, so the
snapshot stores only what an open needs *of every record* (ids, statuses, offsets, the
claim maps, the postings) in arrays that cost nothing to map; everything needed of *one*
record is one ``pread`` away. A snapshot holding the records themselves would be a second
copy of the log to keep right.

**The log stays the source of truth.** A snapshot is used only if it is whole (length and
CRC-32 of its header and body, :func:`~labmem.core.arrayfile.read_arrays`), of this format,
made for this very file (device and inode: a purge's atomic rewrite, a copy or a restore
is another file), no longer than the log (*newer* than it: refused), and if the bytes it
covers are unchanged: a CRC-32 of the covered prefix is recomputed on every open — about
30 ms per 76 MiB here; a cheaper proof (size and mtime) would not see a same-length edit
in place, and the line checksums inside the prefix are never read when lines are not
decoded. Anything else is refused with the reason (:attr:`FileMemoryService.snapshot_state
<labmem.mmu.service.FileMemoryService.snapshot_state>`) and the log is folded from its first
line, exactly as without a snapshot. The log's file descriptor stays open while lazy
records need it, so a record decoded late reads the file it was folded from even after a
purge in another process replaced the name.

**A snapshot proposes, the log decides.** Its checksums prove the file is as its writer
left it, not that labmem wrote it: anyone who can write the directory can seal a snapshot
with valid CRCs. So what is cheap to check is checked at open (every code in range, each
row's latest line the last line of that row, the tables consistent: else refused, and the
log folded), and every record a recall *returns* is read from its line in the log and
compared with everything the snapshot said of it — id, status, scope, type, version,
importance and the other numbers (:meth:`LineSource.fill`): a disagreement removes the
snapshot (the next open folds the log) and raises :class:`~labmem.mmu.errors.
MemoryCorruptionError`. What this cannot see: a record the snapshot *hides* (left out of
the postings, or given another scope), the columns of candidates that are scored but not
returned, and a row pointed consistently at an older line of its record (only the log
after that line could show a later one). Proving those would mean folding the log, which
the snapshot exists to avoid.

Writes (:func:`write_fold`) go to a temporary file, ``fsync``, rename, under the log's lock
and only if the log is still the file that was folded: a writer killed mid-write leaves a
temporary file (removed by the next writer or purge) and the previous snapshot intact, and
a purge — which deletes the snapshot before it rewrites the log — cannot be followed by a
snapshot of the log it replaced (that one could still name a forgotten record's terms).
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from labmem.core.arrayfile import (
    ArrayFileRefused,
    prefix_crc32,
    read_arrays,
    remove_temporaries,
    write_arrays,
)
from labmem.core.validation import may_nest_deeper_than, parse_json
from labmem.mmu.errors import MemoryCorruptionError, MemoryValidationError
from labmem.mmu.index import BasePostings, KeyedTermIndex
from labmem.mmu.lazy import LazyRecord
from labmem.mmu.records import (
    CURRENT_STATUSES,
    MEMORY_TYPES,
    SOURCE_KINDS,
    STATUSES,
    MemoryRecord,
    Tombstone,
)

SNAPSHOT_SUFFIX = ".fold"
MAGIC = b"LMFOLD01"
FORMAT = 2
TOMBSTONE = 255  # the status code of a row that is a purged record's tombstone
NO_TIME = np.iinfo(np.int64).min
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_STATUS_CODE = {name: i for i, name in enumerate(STATUSES)}
_TYPE_CODE = {name: i for i, name in enumerate(MEMORY_TYPES)}
_ARCHIVED = _STATUS_CODE["archived"]
_SOURCE_CODE = {name: i for i, name in enumerate(SOURCE_KINDS)}
#: The numeric row columns and their types. With ``status``, ``memory_type`` and
#: ``valid_until`` a made record holds them at once; the others (and ``scope``,
#: ``origin_key``, ``superseded_by``, ``conflicts_with``) are set from the columns when one
#: of them is first read: every field a recall's candidate selection reads, so only the
#: pages it loads (and the candidates its trace names, by content hash) decode a line.
COLUMNS = {"status": np.uint8, "memory_type": np.uint8, "valid_until": np.int64,
           "latest": np.int32, "source_kind": np.uint8, "scope": np.int32,
           "version": np.int64, "updated_at": np.int64, "importance": np.float64,
           "confidence": np.float64, "utility": np.float64, "salience": np.float64}
UNIT_FIELDS = ("importance", "confidence", "utility", "salience")
#: Read from the record's line: everything else.
LINE_FIELDS = frozenset({"title", "text", "evidence", "created_at", "verified_at"})

Decode = Callable[[int, bytes], Any]


class SnapshotRefused(Exception):
    """Why the snapshot is not used (the log is folded from the start instead)."""


def snapshot_path(log_path: str | os.PathLike[str]) -> Path:
    log_path = Path(log_path)
    return log_path.with_name(log_path.name + SNAPSHOT_SUFFIX)


def remove_snapshot(log_path: str | os.PathLike[str]) -> None:
    """Delete the snapshot and any temporary file a writer left (a purge's first step)."""
    target = snapshot_path(log_path)
    target.unlink(missing_ok=True)
    remove_temporaries(target)


def _time(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


class LineSource:
    """The folded log file, held open, and what the snapshot says of each record row:
    status, memory type, ``valid_until`` and the line holding its latest state."""

    def __init__(self, fd: int, name: str, starts: np.ndarray, covered_bytes: int,
                 rows: Mapping[str, np.ndarray], ids: list[str], strings: np.ndarray,
                 decode: Decode, log_path: Path | None = None) -> None:
        self.fd, self.name, self.decode, self.ids = fd, name, decode, ids
        self.log_path = log_path  # whose snapshot is removed when it is caught lying
        self._starts, self._covered = starts, covered_bytes
        self.columns = rows
        self.latest, self.status = rows["latest"], rows["status"]
        self.memory_type, self.valid_until = rows["memory_type"], rows["valid_until"]
        self._strings_json: np.ndarray | None = strings
        self._made: dict[int, LazyRecord] = {}
        self.decoded = 0  # instrumentation: lines decoded lazily so far
        weakref.finalize(self, os.close, fd)

    @cached_property
    def strings(self) -> dict[str, Any]:
        """The string columns — ``scopes`` (the scope table), ``origin_keys`` (per row),
        ``superseded_by`` / ``conflicts_with`` (``{row: id}``, sparse) — read when first
        needed (a service whose records are never looked at never reads them)."""
        try:
            doc = _json(self._strings_json)
        except ValueError:  # not JSON, or nested past the bound
            doc = None
        scopes = self.columns["scope"][self.status != TOMBSTONE]  # (a tombstone has none)
        doc = _strings_columns(doc, len(self.ids), int(scopes.max(initial=-1)))
        if doc is None:
            self._lied("its string columns are not the ones it writes")
        self._strings_json = None
        return doc

    def status_of(self, row: int) -> str:
        return STATUSES[self.status[row]]

    @cached_property
    def visible(self) -> list[bool]:
        """Per row: not forgotten (a list: indexing it costs less than a numpy scalar)."""
        return (self.status != _ARCHIVED).tolist()

    def counts(self, rows: list[int], now: datetime) -> tuple[dict[str, int], dict[str, int],
                                                              int]:
        """``stats()`` of these rows from the columns: by type, by status, expired at
        ``now`` (a current status past its ``valid_until``)."""
        at = np.asarray(rows, dtype=np.int64)
        status, kinds, until = self.status[at], self.memory_type[at], self.valid_until[at]
        by_type = {MEMORY_TYPES[k]: int(n) for k, n in enumerate(np.bincount(kinds)) if n}
        by_status = {STATUSES[k]: int(n) for k, n in enumerate(np.bincount(status)) if n}
        current = np.isin(status, [_STATUS_CODE[name] for name in CURRENT_STATUSES])
        now_us = (now - EPOCH) // _US
        expired = int(np.count_nonzero(current & (until != NO_TIME) & (until <= now_us)))
        return by_type, by_status, expired

    def record(self, row: int) -> LazyRecord:
        """The lazy record of ``row`` — one object per row, whoever asks (the service and
        the Context MMU's page share it, and its line is decoded once): id, status, type
        and ``valid_until`` set, every other field read from its line when first used."""
        made = self._made.get(row)
        if made is None:
            made = object.__new__(LazyRecord)
            fields = made.__dict__
            fields["record_id"] = self.ids[row]
            fields["status"] = STATUSES[self.status[row]]
            fields["memory_type"] = MEMORY_TYPES[self.memory_type[row]]
            until = int(self.valid_until[row])
            fields["valid_until"] = None if until == NO_TIME else _time(until)
            fields["_source"] = self
            fields["_row"] = row
            self._made[row] = made
        return made

    def fill(self, record: LazyRecord, name: str) -> None:
        """Give ``record`` the field ``name`` (called from its ``__getattr__``): the column
        fields all at once from the columns, or — for a field only its line holds
        (:data:`LINE_FIELDS`) — every field, from its line."""
        fields = record.__dict__
        if name not in LINE_FIELDS and "scope" not in fields:
            self._fill_columns(fields)
            return
        self._fill_line(fields)

    @cached_property
    def _lists(self) -> dict[str, list[Any]]:
        """The columns :meth:`_fill_columns` reads, as lists (a list item costs a tenth of
        a numpy scalar; converted once, on the first record that needs one)."""
        return {name: self.columns[name].tolist()
                for name in ("scope", "source_kind", "version", "updated_at", *UNIT_FIELDS)}

    def _fill_columns(self, fields: dict[str, Any]) -> None:
        row, columns, strings = fields["_row"], self._lists, self.strings
        fields["scope"] = strings["scopes"][columns["scope"][row]]
        fields["origin_key"] = strings["origin_keys"][row]
        fields["source_kind"] = SOURCE_KINDS[columns["source_kind"][row]]
        for unit in UNIT_FIELDS:
            fields[unit] = columns[unit][row]
        fields["version"] = columns["version"][row]
        fields["updated_at"] = _time(columns["updated_at"][row])
        fields["superseded_by"] = strings["superseded_by"].get(row)
        fields["conflicts_with"] = strings["conflicts_with"].get(row)

    def _fill_line(self, fields: dict[str, Any]) -> None:
        line = int(self.latest[fields["_row"]])
        start = int(self._starts[line])
        end = (int(self._starts[line + 1]) if line + 1 < len(self._starts)
               else self._covered) - 1
        decoded = self.decode(line + 1, os.pread(self.fd, end - start, start))
        differs = _differing_field(fields, decoded)
        if differs is not None:
            self._lied(f"line {line + 1} is not the record it names "
                       f"({fields['record_id']!r}: {differs} differs)")
        self.decoded += 1
        fields.update(decoded.__dict__)
        fields.pop("_source", None)
        fields.pop("_row", None)


    def _lied(self, what: str):
        """The snapshot said what the log does not: remove it, so the next open folds the
        log, and raise :class:`MemoryCorruptionError` (the log itself is not at fault)."""
        if self.log_path is not None:
            try:
                remove_snapshot(self.log_path)
            except OSError:
                pass
        raise MemoryCorruptionError(self.name + SNAPSHOT_SUFFIX, None,
                                    f"the fold snapshot lied: {what}; it was removed, and "
                                    "opening the service again folds the log")


#: Every field a lazy record may hold before its line is read, compared with the line.
_COMPARED = ("record_id", "status", "memory_type", "valid_until", "scope", "origin_key",
             "source_kind", *UNIT_FIELDS, "version", "updated_at", "superseded_by",
             "conflicts_with")


def _differing_field(fields: Mapping[str, Any], decoded: Any) -> str | None:
    """The first field the snapshot gave a lazy record (``fields``) that its line
    (``decoded``) does not hold, or ``None``."""
    if not isinstance(decoded, MemoryRecord):
        return "its kind (a tombstone)"
    held = decoded.__dict__
    for name in _COMPARED:
        if name in fields and fields[name] != held.get(name):
            return name
    return None


def _strings_columns(doc: Any, rows: int, top_scope: int) -> dict[str, Any] | None:
    """The string columns as :class:`LineSource` uses them (sparse maps keyed by row), or
    ``None`` when ``doc`` is not what :func:`write_fold` writes for ``rows`` rows whose
    scope codes reach ``top_scope`` (-1: no record row)."""
    try:
        scopes, keys = doc["scopes"], doc["origin_keys"]
        if (not isinstance(scopes, list) or not isinstance(keys, list) or len(keys) != rows
                or top_scope >= len(scopes)
                or not all(type(x) is str for x in (*scopes, *keys))):
            return None
        for name in ("superseded_by", "conflicts_with"):
            sparse = {int(row): value for row, value in doc[name].items()}
            if not all(0 <= row < rows and type(v) is str for row, v in sparse.items()):
                return None
            doc[name] = sparse
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return doc


@dataclass
class Fold:
    """What a valid snapshot restores (see the module docstring). ``records`` maps each
    record's id to its row: :meth:`LineSource.record` makes the record when it is needed."""

    identity: tuple[int, int]
    covered_bytes: int
    covered_lines: int
    covered_crc32: int
    source: LineSource
    records: dict[str, int]
    tombstones: dict[str, Tombstone]
    history: list[str]
    line_starts: list[int]
    claims: bytes
    index: BasePostings


def _json(array: np.ndarray) -> Any:
    """A JSON part of the snapshot, through the one validating parser (a part nested
    100,000 deep is a ``ValueError``, which refuses the snapshot, not a RecursionError)."""
    return parse_json(array.tobytes())


def _bytes(value: Any) -> np.ndarray:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def load_fold(log_path: str | os.PathLike[str], decode: Decode) -> Fold:
    """The snapshot of ``log_path`` if it is whole and describes the log's current prefix;
    else :class:`SnapshotRefused` with the reason."""
    log_path = Path(log_path)
    try:
        meta, arrays = read_arrays(snapshot_path(log_path), MAGIC)
    except ArrayFileRefused as exc:
        raise SnapshotRefused(str(exc)) from None
    if meta.get("format") != FORMAT or meta.get("log") != log_path.name:
        raise SnapshotRefused(f"format {meta.get('format')!r} of {meta.get('log')!r}, not "
                              f"{FORMAT} of {log_path.name!r}")
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except FileNotFoundError:
        raise SnapshotRefused("the log is missing") from None
    try:
        parts = _check_and_read(fd, os.fstat(fd), meta, arrays)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, (KeyError, ValueError, TypeError, IndexError,
                            MemoryValidationError)):  # whole, yet not what we write
            raise SnapshotRefused(f"damaged content ({type(exc).__name__}: {exc})") from None
        raise
    source = LineSource(fd, log_path.name, parts.pop("starts"), parts["covered_bytes"],
                        parts.pop("rows"), parts.pop("ids"), parts.pop("strings"), decode,
                        log_path)
    return Fold(source=source, **parts)


def _check_and_read(fd: int, stat: os.stat_result, meta: Mapping[str, Any],
                    arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Refuse a snapshot that does not describe the log open as ``fd``; else its parts."""
    if [stat.st_dev, stat.st_ino] != [meta["device"], meta["inode"]]:
        raise SnapshotRefused("made for another file (device or inode differ)")
    covered, lines = int(meta["covered_bytes"]), int(meta["covered_lines"])
    if stat.st_size < covered:
        raise SnapshotRefused(f"newer than the log ({covered} bytes covered, the log has "
                              f"{stat.st_size})")
    if prefix_crc32(fd, covered) != meta["covered_crc32"]:
        raise SnapshotRefused("the lines it covers were changed (checksum)")
    if not len(arrays["history"]) == len(arrays["starts"]) == lines:
        raise SnapshotRefused("its line tables do not match its header")
    ids: list[str] = _json(arrays["ids"])
    if (not isinstance(ids, list) or not all(type(i) is str for i in ids)
            or len(set(ids)) != len(ids)):
        raise SnapshotRefused("its ids are not a list of distinct strings")
    rows = {name: np.array(arrays[name], dtype=dtype) for name, dtype in COLUMNS.items()}
    if not all(len(column) == len(ids) for column in rows.values()):
        raise SnapshotRefused("its row columns do not match its ids")
    problem = _tables_problem(rows, arrays, len(ids), covered)
    if problem is not None:
        raise SnapshotRefused(f"its tables are not what it writes ({problem})")
    record_rows = np.flatnonzero(rows["status"] != TOMBSTONE).tolist()
    return {
        "identity": (stat.st_dev, stat.st_ino), "covered_bytes": covered,
        "covered_lines": lines, "covered_crc32": int(meta["covered_crc32"]),
        "ids": ids, "rows": rows, "starts": np.array(arrays["starts"]),
        "strings": arrays["strings"],
        "records": dict(zip(map(ids.__getitem__, record_rows), record_rows,
                            strict=True)),
        "tombstones": {t["record_id"]: Tombstone.from_dict(t)
                       for t in _json(arrays["tombstones"])},
        "history": list(map(ids.__getitem__, arrays["history"].tolist())),
        "line_starts": arrays["starts"].tolist(), "claims": arrays["claims"].tobytes(),
        "index": BasePostings(ids, arrays["terms"], arrays["term_starts"],
                              arrays["postings"], np.array(arrays["alive"], dtype=bool))}


def _tables_problem(rows: Mapping[str, np.ndarray], arrays: Mapping[str, np.ndarray],
                    count: int, covered: int) -> str | None:
    """What is wrong with a snapshot's row columns and tables, or ``None``: checked at
    open in a few array passes (milliseconds at 100,000 records), so that nothing a
    reader indexes by is out of range and each row's ``latest`` is the last line of the
    log's prefix that wrote that row (as its ``history`` tells)."""
    status, history = rows["status"], np.asarray(arrays["history"])
    if history.dtype.kind not in "iu" or (len(history) and (
            int(history.min()) < 0 or int(history.max()) >= count)):
        return "history names rows that do not exist"
    codes = {"memory_type": len(MEMORY_TYPES), "source_kind": len(SOURCE_KINDS)}
    if ((status >= len(STATUSES)) & (status != TOMBSTONE)).any() or any(
            (rows[name] >= top).any() for name, top in codes.items()):
        return "a status, type or source code out of range"
    units = np.stack([rows[name] for name in UNIT_FIELDS]) if count else np.zeros((1, 0))
    if not ((units >= 0) & (units <= 1)).all() or (rows["scope"] < 0).any():
        return "a unit number or scope code out of range"
    latest = np.full(count, -1, dtype=np.int64)
    np.maximum.at(latest, history.astype(np.int64), np.arange(len(history), dtype=np.int64))
    if not np.array_equal(latest, rows["latest"].astype(np.int64)):
        return "a row's latest line is not its last line"
    starts = np.asarray(arrays["starts"], dtype=np.int64)
    if len(starts) and (int(starts[0]) != 0 or int(starts[-1]) >= covered
                        or (np.diff(starts) < 1).any()):
        return "line starts that do not cut the prefix into lines"
    term_starts, postings = arrays["term_starts"], arrays["postings"]
    if (len(term_starts) < 1 or int(term_starts[0]) != 0
            or int(term_starts[-1]) != len(postings) or (np.diff(term_starts) < 0).any()
            or len(arrays["alive"]) != count
            or (len(postings) and (int(postings.min()) < 0 or int(postings.max()) >= count))):
        return "postings that do not fit its rows"
    claims = arrays["claims"].tobytes().decode("utf-8", "replace")
    if may_nest_deeper_than(claims):
        return "claims nested too deep"
    return None


def write_fold(log_path: str | os.PathLike[str], *, identity: tuple[int, int],
               covered_bytes: int, covered_crc32: int, history: list[str], starts: list[int],
               records: Mapping[str, MemoryRecord | int], source: LineSource | None,
               tombstones: Mapping[str, Tombstone], claims: bytes, index: KeyedTermIndex,
               still_valid: Callable[[], bool]) -> bool:
    """Write the snapshot of a fold covering ``history`` (one record id per log line, the
    lines starting at ``starts``); ``True`` once it replaced the old one. A record given
    as an ``int`` is that row of ``source`` (the snapshot this fold was restored from).
    ``still_valid`` runs (under the caller's lock) just before the rename: ``False``
    keeps the old file."""
    ids = list(dict.fromkeys(history))
    row_of = {record_id: row for row, record_id in enumerate(ids)}
    rows = np.fromiter(map(row_of.__getitem__, history), dtype=np.int32, count=len(history))
    columns = {name: np.zeros(len(ids), dtype=dtype) for name, dtype in COLUMNS.items()}
    columns["latest"][:] = -1
    np.maximum.at(columns["latest"], rows, np.arange(len(history), dtype=np.int32))
    columns["valid_until"][:] = NO_TIME
    strings = _row_strings(ids, records, source, columns)
    terms, term_starts, postings, alive = index.export(row_of, len(ids))
    meta = {"format": FORMAT, "log": Path(log_path).name, "device": identity[0],
            "inode": identity[1], "covered_bytes": covered_bytes,
            "covered_lines": len(history), "covered_crc32": covered_crc32}
    arrays = {"ids": _bytes(ids), **columns, "strings": _bytes(strings), "history": rows,
              "starts": np.asarray(starts, dtype=np.int64),
              "tombstones": _bytes([t.to_dict() for t in tombstones.values()]),
              "claims": np.frombuffer(claims, dtype=np.uint8),
              "terms": _bytes(terms), "term_starts": term_starts, "postings": postings,
              "alive": alive.astype(np.uint8)}
    return write_arrays(snapshot_path(log_path), MAGIC, meta, arrays, before_rename=still_valid)


def _row_strings(ids: list[str], records: Mapping[str, MemoryRecord | int],
                 source: LineSource | None, columns: dict[str, np.ndarray]) -> dict[str, Any]:
    """Fill ``columns`` for every row and return the string columns. A row still an
    ``int`` (unchanged since ``source`` was written) is copied from ``source``, whole
    columns at a time; any other is read from its record (a lazy one, from its columns)."""
    old = source.strings if source is not None else None
    scopes: dict[str, int] = {name: i for i, name in enumerate(old["scopes"])} if old else {}
    origin_keys = [""] * len(ids)
    sparse: dict[str, dict[int, str]] = {"superseded_by": {}, "conflicts_with": {}}
    copied = []
    status = columns["status"]
    for row, record_id in enumerate(ids):
        record = records.get(record_id)
        if record is None:
            status[row] = TOMBSTONE
        elif type(record) is int:
            copied.append(row)
        else:
            status[row] = _STATUS_CODE[record.status]
            columns["memory_type"][row] = _TYPE_CODE[record.memory_type]
            if record.valid_until is not None:
                columns["valid_until"][row] = (record.valid_until - EPOCH) // _US
            columns["source_kind"][row] = _SOURCE_CODE[record.source_kind]
            columns["scope"][row] = scopes.setdefault(record.scope, len(scopes))
            columns["version"][row] = record.version
            columns["updated_at"][row] = (record.updated_at - EPOCH) // _US
            for unit in UNIT_FIELDS:
                columns[unit][row] = getattr(record, unit)
            origin_keys[row] = record.origin_key
            for name, values in sparse.items():
                if getattr(record, name) is not None:
                    values[row] = getattr(record, name)
    if copied:  # rows keep their numbers, and scope codes theirs (the table only grows)
        at = np.asarray(copied, dtype=np.int64)
        for name, column in columns.items():
            if name != "latest":
                column[at] = source.columns[name][at]
        old_keys = old["origin_keys"]
        for row in copied:
            origin_keys[row] = old_keys[row]
        for name, values in sparse.items():
            values.update((row, value) for row, value in old[name].items()
                          if type(records.get(ids[row])) is int)
    return {"scopes": list(scopes), "origin_keys": origin_keys,
            **{name: {str(row): value for row, value in sorted(values.items())}
               for name, values in sparse.items()}}
