"""s12 recall, stage 2 at scale: an inverted index from term to the records that use it.

Stage 2 done by hand (:func:`~labmem.recall.pipeline.build_recall_candidates`) re-reads
and re-tokenizes every record for every query. An inverted index does that work once: for
each term it keeps a *postings list* — the positions of the records that contain the term,
with how often and in how long a record.
A query's candidates are then the union of its terms' postings, and a query that shares
no term with the store touches nothing.

The index answers only "which records, how often, how long, captured when"; scoring and
ranking stay in :mod:`labmem.recall.scorers` and :mod:`labmem.recall.pipeline`. Two backends
implement the same small :class:`TermIndex` protocol:

* :class:`InMemoryTermIndex` — for a JSONL :class:`RemoteMemoryStore`: mapped from its
  sidecar (:mod:`labmem.recall.sidecar`) when that describes the file, else built from the
  file once and persisted; then extended with only the records appended since (by any
  process), decoding a record by its byte offset only when it is a hit;
* ``SqliteTermIndex`` (:mod:`labmem.recall.sqlite_store`) — postings packed per term in
  SQLite rows, written in the same transaction as each record.

Both also lend a term's postings as arrays they already hold and every record's length
and time (they declare :class:`~labmem.recall.protocols.LendsPostings`): what the packed
estimates and MaxScore pruning (:mod:`labmem.recall.packed`, :mod:`labmem.recall.pruning`)
need to read terms without copying their postings. The JSONL one also names a position's
memory id and keeps its terms' bounds in its sidecar (``NamesPositions``,
``KeepsTermBounds``).

**A cache proposes, the records decide.** A sidecar (or SQLite's packed postings) is
never a source of truth, and its checksums prove only that it is as its writer left it:
anyone who can write the directory can seal a lying one. So every record a cache proposes
as a hit is read again from the records (its line, by offset) and checked before it is
returned: it is of this scope, it is the record the cache names at that position (memory
id, length, time), and each term the query looked up is in it exactly as often as the
postings claim (:meth:`InMemoryTermIndex.record`). A disagreement drops the sidecar,
rebuilds the index from the records and raises :class:`CacheDisagreed`, on which
:meth:`~labmem.recall.pipeline.RecallEngine.recall` answers again, from the truth. What a
check of the hits cannot see is what the cache *leaves out*: a record whose postings were
removed or renamed is not proposed, so it is not read; nor are the statistics of records
that are not hits (their lengths, the totals BM25 weighs by). Against someone who can
write the home directory a checksum proves nothing; proving that nothing was hidden would
mean reading every record, which is what the sidecar exists to avoid.
"""

from __future__ import annotations

import os
import weakref
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from labmem.core.text import term_frequencies
from labmem.core.validation import parse_json
from labmem.recall.protocols import (
    KeepsAnalyzedGroups,
    KeepsRecordContext,
    KeepsTermBounds,
    KeepsTermIndex,
    LendsPostings,
    NamesPositions,
    offers,
)
from labmem.recall.store import (
    MemoryKind,
    RemoteMemoryCorruptionError,
    StoredMemory,
    decode_stored_line,
)

__all__ = ["Postings", "TermIndex", "InMemoryTermIndex", "open_term_index", "record_terms",
           "merge_postings", "union_sorted", "CacheDisagreed"]


class CacheDisagreed(RemoteMemoryCorruptionError):
    """A cache (the recall sidecar) claimed what the records do not hold. The index has
    already dropped it and rebuilt itself from the records: asking again gets the answer
    of the records alone (:meth:`~labmem.recall.pipeline.RecallEngine.recall` does, once).
    The records file itself is not at fault."""


def record_terms(record: StoredMemory):
    """Term counts of what a record is searchable by: source title, summary, content."""
    return term_frequencies("\n".join((record.source.title, record.summary, record.content)))


@dataclass(frozen=True, eq=False)
class Postings:
    """One term's postings list as parallel arrays, ascending by ``positions``.

    ``counts`` is the term's frequency in the record, ``lengths`` the record's length in
    terms (what BM25 normalizes by) and ``captured_at`` its source time in POSIX seconds
    (what recency needs), so a scorer never has to load a record to score it.
    """

    positions: np.ndarray  # int64 record positions in the store
    counts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    captured_at: np.ndarray  # float64 seconds

    def __len__(self) -> int:
        return len(self.positions)

    @classmethod
    def empty(cls) -> Postings:
        ints = np.zeros(0, dtype=np.int64)
        return cls(ints, ints, ints, np.zeros(0, dtype=np.float64))


@runtime_checkable
class TermIndex(Protocol):
    """What the recall engine needs from a backend's index (what else it may offer, it
    declares: :mod:`labmem.recall.protocols`)."""

    searched_records: int  # conversation records in scope: BM25's N
    total_length: int  # sum of their lengths: BM25's average length × N

    def refresh(self) -> None:
        """Catch up with records appended since the last call, by this or any process."""

    def postings(self, term: str) -> Postings:
        """The records containing ``term``; empty arrays when none does."""

    def record(self, position: int) -> StoredMemory:
        """The stored record at ``position`` (to build hits for the top of the ranking)."""

    @property
    def records(self) -> int:
        """Records of any kind this snapshot covers: positions run from 0 to records − 1."""

    def vocabulary(self, start: int = 0) -> tuple[str, ...]:
        """Surface terms first used by a record at a position from ``start`` on, in order
        of first use (an analyzer groups them; :mod:`labmem.recall.analyzers`)."""


#: Below this many records, building the index from the file is fast enough (tens of
#: milliseconds) that a sidecar is not written; one already there is still read.
SIDECAR_MIN_RECORDS = 1000

#: Postings of terms whose sidecar part and tail were joined, kept for the next query.
TAIL_CACHE = 1_000_000

#: Bytes of the sidecar's postings kept in memory between queries (like SQLite's page
#: cache): a term's postings are read from the file when a query first names it, and those
#: used least recently beyond this are dropped (the OS file cache usually still has them).
POSTINGS_CACHE_BYTES = 16 << 20

#: Records decoded from their lines (hits) kept for the next query.
DECODED_CACHE = 4096

#: A term in at least 1/BITS_SHARE of the records has its records kept in the sidecar as
#: bits too (one bit per record: no more bytes than its positions): pruning counts the
#: records of skipped terms by ORing them (labmem.recall.pruning).
BITS_SHARE = 32

_EMPTY = np.zeros(0, dtype=np.int64)


class InMemoryTermIndex(TermIndex, LendsPostings, NamesPositions, KeepsTermBounds,
                        KeepsRecordContext, KeepsAnalyzedGroups):
    """The inverted index of one JSONL store, kept in compact arrays, persisted beside it.

    Per record it stores two numbers (length, capture time) and the byte offset of its
    line; per term, the positions and counts of its records. On the first
    :meth:`refresh` it opens the sidecar (:mod:`labmem.recall.sidecar`) if that is whole and
    describes the file, and reads from it only what queries use; else it reads and
    validates the whole file through the store and writes a new sidecar. Either way it then
    follows the file, decoding only records appended since, and a hit's record is decoded
    from its line by offset.

    ``sidecar=False`` never reads or writes one (results are the same, byte for byte).
    """

    def __init__(self, store, *, sidecar: bool = True,
                 sidecar_min_records: int = SIDECAR_MIN_RECORDS) -> None:
        self.store = store
        self.use_sidecar = sidecar
        self.sidecar_min_records = sidecar_min_records
        self.sidecar_status = "not opened"  # how the last open went (shown by tests/bench)
        self.sidecar_proof = None  # "stamp" or "checksums": how a loaded one was trusted
        self.searched_records = 0
        self.total_length = 0
        self._opened = False
        self._indexed = 0  # records (of any kind) indexed so far
        self._lengths = array("q")
        self._captured = array("d")
        self._offsets = array("q", [0])  # byte offset of each record's line, and the end
        # the base: what a sidecar holds (its arrays are read from the file as needed)
        self._base = None
        self._base_records = 0
        self._base_slots: dict[str, int] = {}
        self._base_terms: list[str] = []
        # the tail: postings of records indexed in this process (positions >= base)
        self._postings: dict[str, tuple[array, array]] = {}
        self._vocabulary: list[str] = []  # tail terms unknown to the base, in first use
        self._first_use = array("q")
        self._records: dict[int, StoredMemory] = {}  # records indexed in this process
        # hits read by offset and checked: (record, its term counts, terms checked)
        self._decoded: OrderedDict[int, tuple[StoredMemory, dict[str, int], set[str]]] = \
            OrderedDict()
        self._cached: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._cached_bytes = 0  # of the sidecar postings in _cached (slot -> arrays)
        self._held: tuple[StoredMemory, ...] = ()  # every record, after a full read
        self._tail_ids: list[str] = []
        self._base_ids = None  # the sidecar's, packed (PackedStrings), read on first need
        self._ids: set[str] | None = None
        self._batch_ids: set[str] = set()
        self._log = None
        self._context = None  # the RecordContext; from a sidecar, built on first need
        self._context_columns = None  # (sidecar, RecordContext type, meta) until then
        self._context_pending: list[tuple[int, StoredMemory, int]] = []
        self._persisted = 0  # records the sidecar on disk covers
        self._joined: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}  # base + tail
        self._joined_size = 0
        self._columns: tuple[np.ndarray, np.ndarray] | None = None
        self._reader: int | None = None  # descriptor hits are read through (_records_fd)
        self._records_name = store.path.name  # what a corruption error names
        self._bits_rows: dict[int, int] | None = None  # slot -> its row of sidecar bits
        self._bounds: np.ndarray | None = None  # the sidecar's postings_offsets, checked
        # the sidecar postings lent since the last refresh (a query's terms): what a hit
        # proposed by them is checked against (record())
        self._lent: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._distrusted: str | None = None  # why the sidecar is not to be read again
        self._closer = None  # closes _reader

    def __repr__(self) -> str:
        terms = len(self._base_slots) + len(self._vocabulary)
        return f"InMemoryTermIndex(records={self._indexed}, terms={terms})"

    # -- opening --------------------------------------------------------------------

    def refresh(self) -> None:
        self._lent.clear()
        if not self._opened:
            self._open()
            self._opened = True
        else:
            self._follow()
        if (self.use_sidecar and self._indexed >= self.sidecar_min_records
                and self._indexed - self._persisted >= max(self.sidecar_min_records,
                                                           self._persisted // 8)):
            self._persist()

    def _open(self) -> None:
        from labmem.recall.fields import RecordContext  # fields imports this module
        from labmem.recall.sidecar import SidecarRefused, load_sidecar

        if self.use_sidecar and self._distrusted is not None:
            self.sidecar_status = f"rebuilt: {self._distrusted}"
        elif self.use_sidecar:
            try:
                sidecar = load_sidecar(self.store.path, user_scope=self.store.user_scope)
                self._adopt(sidecar, RecordContext)
            except SidecarRefused as refused:
                self.sidecar_status = f"rebuilt: {refused}"
            else:
                self.sidecar_status = "loaded"
                self.sidecar_proof = sidecar.proof
                self._start_following(int(sidecar.meta["covered_bytes"]), self._base_records)
                self._follow()
                return
        else:
            self.sidecar_status = "off"
        # the full read: every line decoded and validated by the store itself
        self._context = RecordContext()
        self._context.fed_by_index = True
        self._held = self.store.read_all()
        covered, lines = self.store.read_cursor
        offsets = _line_ends(self.store.path, covered)
        if len(offsets) != lines or lines != len(self._held):  # pragma: no cover - a race
            raise RemoteMemoryCorruptionError(self.store.path.name, None,
                                              "the file changed while it was read")
        self._offsets.extend(offsets.tolist())
        for position, record in enumerate(self._held):
            self._add(position, record)
            self._tail_ids.append(record.memory_id)
        self._ids = set(self._tail_ids)
        self._start_following(covered, lines)

    def _adopt(self, sidecar, context_type) -> None:
        """Take the sidecar as the base, after checking what is cheap to check of it (its
        shape, :func:`~labmem.recall.sidecar.load_sidecar`; here its columns): a
        :class:`~labmem.recall.sidecar.SidecarRefused` leaves this index untouched."""
        from labmem.recall.sidecar import SidecarRefused

        meta = sidecar.meta
        records = meta["records"]
        terms = sidecar.strings("terms")
        slots = {term: slot for slot, term in enumerate(terms)}
        arrays = sidecar.arrays
        lengths = arrays["lengths"].astype(np.int64)
        offsets = arrays["offsets"].astype(np.int64)
        problem = _columns_problem(meta, len(terms), len(slots),
                                   sidecar.layout["postings_offsets"][2], lengths, offsets)
        if problem is not None:
            raise SidecarRefused(f"damaged ({problem})")
        self._base = sidecar
        self._base_records = self._persisted = self._indexed = records
        self.searched_records = meta["searched_records"]
        self.total_length = meta["total_length"]
        self._base_terms = terms
        self._base_slots = slots
        self._lengths = array("q", lengths.tobytes())
        self._captured = array("d", arrays["captured_at"].astype(np.float64).tobytes())
        self._offsets = array("q", offsets.tobytes())
        # Threads, titles and dates serve only the contextual scorer: decoded when asked.
        self._context_columns = (sidecar, context_type, meta)

    def _start_following(self, offset: int, lines: int) -> None:
        from labmem.core.storage import JsonlLog

        self._log = JsonlLog(self.store.path, decode=self._decode_line,
                             corruption_error=RemoteMemoryCorruptionError,
                             lock_factory=lambda path: nullcontext(), start=(offset, lines))

    def analyzed_groups(self, analyzer, group):
        """The sidecar's vocabulary grouped by ``analyzer`` (``group(terms)`` computes the
        groups as a dict), packed (:class:`~labmem.recall.analyzers.PackedGroups`), and how
        many terms that covers. Kept beside the sidecar
        (:func:`~labmem.recall.sidecar.write_companion`), so a new process need not analyze
        them again, nor decode them: it reads arrays. ``None`` without a sidecar, or for an
        analyzer without a :attr:`~labmem.recall.analyzers.Analyzer.cache_key`."""
        from labmem.recall.analyzers import Analyzer, PackedGroups
        from labmem.recall.sidecar import load_companion, write_companion

        key = analyzer.cache_key if isinstance(analyzer, Analyzer) else None
        if self._base is None or key is None:
            return None
        count = len(self._base_terms)
        kept = load_companion(self._base, self.store.path, key)
        if kept is not None and kept[0].get("terms") == count:
            packed = PackedGroups.from_arrays(kept[1])
            if packed is not None:
                return count, _CheckedGroups(packed, analyzer)
        packed = PackedGroups.of(group(self._base_terms))
        write_companion(self._base, self.store.path, key, {"terms": count}, packed.arrays())
        return count, packed

    def memory_id(self, position: int) -> str:
        """The memory id of the record at ``position``, without decoding the record (nor
        every id: the sidecar's stay packed, :class:`~labmem.recall.sidecar.PackedStrings`)."""
        if position >= self._base_records:
            return self._tail_ids[position - self._base_records]
        return self._sidecar_ids()[position]

    def _sidecar_ids(self):
        """The sidecar's memory ids, packed, read on first need: one per record it covers,
        or the sidecar is distrusted (:class:`CacheDisagreed`)."""
        if self._base_ids is None:
            from labmem.recall.sidecar import SidecarRefused, packed_strings

            try:
                ids = packed_strings(self._base, "memory_ids")
            except SidecarRefused as refused:
                self._distrust(str(refused))
            if len(ids) != self._base_records:
                self._distrust(f"names {len(ids)} memory ids for {self._base_records} records")
            self._base_ids = ids
        return self._base_ids

    def _tail_id_set(self) -> set[str]:
        if self._ids is None:
            self._ids = set(self._tail_ids)
        return self._ids

    def _is_known(self, memory_id: str) -> bool:
        """Is ``memory_id`` indexed already? The records indexed in this process are a set;
        the sidecar's are looked up in its packed ids (no set of 100,000 strings)."""
        if memory_id in self._tail_id_set():
            return True
        if self._base is None:
            return False
        return self._sidecar_ids().find(memory_id) is not None

    def _decode_line(self, line: int, obj: dict) -> StoredMemory:
        record = decode_stored_line(self.store.path.name, self.store.user_scope, line, obj)
        if self._is_known(record.memory_id) or record.memory_id in self._batch_ids:
            raise RemoteMemoryCorruptionError(
                self.store.path.name, line, f"memory_id {record.memory_id!r} is stored twice")
        self._batch_ids.add(record.memory_id)
        return record

    def _follow(self) -> None:
        """Index the records appended since (by any process): only their lines are read."""
        start = self._log.offset
        self._batch_ids.clear()
        fresh = self._log.refresh()
        if not fresh:
            return
        ends = _line_ends(self.store.path, self._log.offset, start)
        self._offsets.extend(ends.tolist())
        ids = self._tail_id_set()
        for record in fresh:
            position = self._indexed
            self._records[position] = record
            self._add(position, record)
            self._tail_ids.append(record.memory_id)
            ids.add(record.memory_id)

    def _add(self, position: int, record: StoredMemory) -> None:
        if record.kind is not MemoryKind.CONVERSATION:  # profiles are never recalled
            self._lengths.append(0)
            self._context_add(position, record, 0)
            self._captured.append(record.source.captured_at.timestamp())
            self._indexed = position + 1
            return
        counts = record_terms(record)
        length = sum(counts.values())
        self._lengths.append(length)
        self._captured.append(record.source.captured_at.timestamp())
        self._context_add(position, record, length)
        self.searched_records += 1
        self.total_length += length
        for term, count in counts.items():
            entry = self._postings.get(term)
            if entry is None:
                entry = self._postings[term] = (array("q"), array("q"))
                if term not in self._base_slots:
                    self._vocabulary.append(term)
                    self._first_use.append(position)
            entry[0].append(position)
            entry[1].append(count)
        self._indexed = position + 1

    # -- persisting ------------------------------------------------------------------

    def _persist(self) -> None:
        """Write a sidecar covering every record indexed so far (atomically; a failure to
        write — a read-only directory, a full disk — only means the next open rebuilds)."""
        from labmem.core.arrayfile import prefix_crc32
        from labmem.recall.sidecar import write_sidecar

        terms = self._base_terms + self._vocabulary
        offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        positions: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for slot, term in enumerate(terms):
            term_positions, term_counts = self.term_postings(term, keep=False)
            positions.append(term_positions.astype(np.uint32))
            counts.append(term_counts)
            offsets[slot + 1] = offsets[slot] + len(term_positions)
        all_counts = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
        all_positions = np.concatenate(positions) if positions else np.zeros(0, np.uint32)
        count_type = np.uint16 if not len(all_counts) or all_counts.max() < 1 << 16 else np.uint32
        # each term's (largest count, shortest record): pruning bounds a term by them, and
        # a term has at least one posting, so no segment of reduceat is empty
        lengths = np.array(self._lengths, dtype=np.uint32)
        starts = offsets[:-1]
        sizes = np.diff(offsets)
        with_bits = np.flatnonzero(sizes * BITS_SHARE >= max(self._indexed, 1))
        row = (self._indexed + 7) // 8
        bits = np.zeros(len(with_bits) * row, dtype=np.uint8)
        for at, slot in enumerate(with_bits.tolist()):
            marks = np.zeros(row * 8, dtype=bool)
            marks[all_positions[offsets[slot]:offsets[slot + 1]]] = True
            bits[at * row:(at + 1) * row] = np.packbits(marks)
        max_counts = (np.maximum.reduceat(all_counts, starts) if len(terms)
                      else np.zeros(0, dtype=np.int64))
        min_lengths = (np.minimum.reduceat(lengths[all_positions], starts) if len(terms)
                       else np.zeros(0, dtype=np.uint32))
        first_use = np.concatenate((np.asarray(self._base.arrays["first_use"], dtype=np.int64)
                                    if self._base is not None else np.zeros(0, np.int64),
                                    np.array(self._first_use, dtype=np.int64)))
        covered = self._offsets[self._indexed]
        context = self._record_context()
        context_arrays, context_strings = context.columns()
        ids = (self._base.strings("memory_ids") if self._base is not None else []) + self._tail_ids
        try:
            with open(self.store.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                crc = prefix_crc32(handle.fileno(), covered)
            meta = {"user_scope": self.store.user_scope, "device": stat.st_dev,
                    "inode": stat.st_ino, "covered_bytes": covered,
                    "covered_lines": self._indexed, "covered_crc32": crc,
                    "records": self._indexed, "searched_records": self.searched_records,
                    "total_length": self.total_length, "titles": len(context.titles),
                    "dates": len(context.dates)}
            write_sidecar(self.store.path, meta, {
                "postings_offsets": offsets,
                "positions": all_positions,
                "counts": all_counts.astype(count_type),
                "max_counts": max_counts.astype(count_type),
                "min_lengths": min_lengths,
                "bits_slots": with_bits.astype(np.int32),
                "bits": bits,
                "first_use": first_use,
                "lengths": lengths,
                "captured_at": np.array(self._captured, dtype=np.float64),
                "offsets": np.array(self._offsets, dtype=np.int64),
                **context_arrays,
            }, {"terms": terms, "memory_ids": ids, **context_strings})
        except OSError as exc:
            self.sidecar_status += f"; not written ({exc.strerror or exc})"
            return
        self._persisted = self._indexed

    # -- the TermIndex protocol ------------------------------------------------------

    def record_context(self):
        """The record context (threads, titles, dates) this index keeps and persists."""
        if not self._opened:
            self.refresh()
        return self._record_context()

    def _record_context(self):
        if self._context is None:
            sidecar, context_type, meta = self._context_columns
            self._context = context_type.from_columns(
                sidecar, self._base_records, titles=int(meta["titles"]),
                dates=int(meta["dates"]))
            for position, record, length in self._context_pending:
                self._context.add(position, record, length)
            self._context_pending.clear()
        return self._context

    def _context_add(self, position: int, record: StoredMemory, length: int) -> None:
        if self._context is None:  # not decoded yet: fed when it is
            self._context_pending.append((position, record, length))
        else:
            self._context.add(position, record, length)

    def document_frequency(self, term: str) -> int:
        return len(self.term_postings(term)[0])

    def term_postings(self, term: str, *, keep: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(positions, counts) of ``term``, ascending — without a copy per call.

        A term only the sidecar holds is read from it once and kept while it fits
        :data:`POSTINGS_CACHE_BYTES`; a term with postings indexed in this process (the
        tail) is joined once and kept (:data:`TAIL_CACHE` postings at most) until the
        tail grows again.
        """
        slot = self._base_slots.get(term)
        entry = self._postings.get(term)
        if entry is None:
            if slot is None:
                return _EMPTY, _EMPTY
            found = self._base_postings(slot)
            if keep:
                self._lent[term] = found
            return found
        cached = self._joined.get(term)
        if cached is not None and cached[0] == len(entry[0]):
            self._joined[term] = self._joined.pop(term)  # most recently used: last
            return cached[1], cached[2]
        # copies, not views: an array.array cannot grow while numpy holds its buffer
        positions = np.array(entry[0], dtype=np.int64)
        counts = np.array(entry[1], dtype=np.int64)
        if slot is not None:
            base_positions, base_counts = self._base_postings(slot)
            positions = np.concatenate((base_positions, positions))
            counts = np.concatenate((base_counts, counts))
        if keep:
            self._remember_joined(term, len(entry[0]), positions, counts)
            if slot is not None:
                self._lent[term] = (positions, counts)
        return positions, counts

    def term_extremes(self, term: str) -> tuple[int, int] | None:
        """(largest count, shortest record length) over ``term``'s postings; ``None``
        when it has none. The sidecar keeps both per term (pruning bounds a term by them),
        so only postings indexed since are looked at."""
        found = None
        slot = self._base_slots.get(term)
        if slot is not None:
            arrays = self._base.arrays
            found = (int(arrays["max_counts"][slot]), int(arrays["min_lengths"][slot]))
        entry = self._postings.get(term)
        if entry is not None and len(entry[0]):
            lengths = self.record_columns()[0]
            tail = (max(entry[1]), int(lengths[np.array(entry[0], dtype=np.intp)].min()))
            found = tail if found is None else (max(found[0], tail[0]), min(found[1], tail[1]))
        return found

    def term_bits(self, term: str) -> np.ndarray | None:
        """``term``'s records as :func:`~labmem.recall.pruning.term_bits` (bit ``p`` set:
        record ``p`` holds it; the length may differ), if the sidecar keeps them (a term
        in 1/:data:`BITS_SHARE` of the records or more), with the records indexed since
        added; else ``None``."""
        slot = self._base_slots.get(term)
        if slot is None:
            return None
        row = (self._base_records + 7) // 8
        if self._bits_rows is None:
            slots = self._base.arrays["bits_slots"]
            if (self._base.layout["bits"][2] != len(slots) * row
                    or (len(slots) and not 0 <= int(slots.min()) <= int(slots.max())
                        < len(self._base_terms))):
                self._distrust("keeps bits that do not fit its terms and records")
            self._bits_rows = {int(s): at for at, s in enumerate(slots.tolist())}
        at = self._bits_rows.get(slot)
        if at is None:
            return None
        found = self._base.slice("bits", at * row, (at + 1) * row)
        entry = self._postings.get(term)
        if entry is not None and len(entry[0]):  # the tail: positions past the base
            marks = np.zeros(entry[0][-1] + 1, dtype=bool)  # positions ascend
            marks[np.array(entry[0], dtype=np.intp)] = True
            tail = np.packbits(marks)
            tail[:row] |= found
            found = tail
        return found

    def _base_postings(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """The sidecar's postings of one term, read once and kept while they fit
        :data:`POSTINGS_CACHE_BYTES` (so a query reuses them without a copy)."""
        found = self._cached.get(slot)
        if found is not None:
            self._cached.move_to_end(slot)
            return found
        bounds = self._postings_bounds()
        lo, hi = int(bounds[slot]), int(bounds[slot + 1])
        found = (self._base.slice("positions", lo, hi), self._base.slice("counts", lo, hi))
        problem = _postings_problem(*found, self._base_records)
        if problem is not None:
            self._distrust(f"holds postings of {self._base_terms[slot]!r} that {problem}")
        self._cached[slot] = found
        self._cached_bytes += found[0].nbytes + found[1].nbytes
        while self._cached_bytes > POSTINGS_CACHE_BYTES and len(self._cached) > 1:
            dropped = self._cached.popitem(last=False)[1]
            self._cached_bytes -= dropped[0].nbytes + dropped[1].nbytes
        return found

    def _postings_bounds(self) -> np.ndarray:
        """Where each sidecar term's postings lie, checked once: from 0, never falling,
        ending at the last posting (else :class:`CacheDisagreed`)."""
        if self._bounds is None:
            bounds = self._base.arrays["postings_offsets"]
            if (int(bounds[0]) != 0 or int(bounds[-1]) != self._base.layout["positions"][2]
                    or (len(bounds) > 1 and (np.diff(bounds) < 1).any())):
                self._distrust("has postings bounds that do not cover its postings")
            self._bounds = bounds
        return self._bounds

    def _remember_joined(self, term: str, tail: int, positions, counts) -> None:
        old = self._joined.pop(term, None)
        if old is not None:
            self._joined_size -= len(old[1])
        self._joined[term] = (tail, positions, counts)
        self._joined_size += len(positions)
        while self._joined_size > TAIL_CACHE and len(self._joined) > 1:
            dropped = self._joined.pop(next(iter(self._joined)))
            self._joined_size -= len(dropped[1])

    def record_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Every record's (length, captured time), by position: numpy arrays, rebuilt only
        after records were indexed (so a query gathers from them without converting)."""
        if self._columns is None or len(self._columns[0]) != self._indexed:
            self._columns = (np.array(self._lengths, dtype=np.int64),
                             np.array(self._captured, dtype=np.float64))
        return self._columns

    def postings(self, term: str) -> Postings:
        positions, counts = self.term_postings(term)
        if not len(positions):
            return Postings.empty()
        lengths, captured = self.record_columns()
        return Postings(positions=positions, counts=counts, lengths=lengths[positions],
                        captured_at=captured[positions])

    def record(self, position: int) -> StoredMemory:
        """The record at ``position``. One the sidecar covers is read from its line in the
        records file (the truth) and checked against everything the sidecar claims of it
        and every postings list lent since the last :meth:`refresh` (the query's terms):
        a disagreement raises :class:`CacheDisagreed` (see the module docstring)."""
        if self._held:
            if position < len(self._held):
                return self._held[position]
        record = self._records.get(position)
        if record is not None:
            return record
        found = self._decoded.get(position)
        if found is None:  # a record the sidecar covers: decode its one line, check it
            found = self._decoded[position] = self._read_checked(position)
            if len(self._decoded) > DECODED_CACHE:
                self._decoded.popitem(last=False)
        else:
            self._decoded.move_to_end(position)
        record, counts, checked = found
        for term, (positions, term_counts) in self._lent.items():
            if term in checked:  # this term's sidecar postings agreed for this record
                continue  # before (they never change: the tail is this process's own)
            at = int(np.searchsorted(positions, position))
            claimed = int(term_counts[at]) if at < len(positions) and \
                positions[at] == position else 0
            if claimed != counts.get(term, 0):
                self._distrust(f"posts {term!r} {claimed} times in record {position + 1} "
                               f"({record.memory_id!r}), which holds it "
                               f"{counts.get(term, 0)} times")
            checked.add(term)
        return record

    def _read_checked(self, position: int) -> tuple[StoredMemory, dict[str, int], set[str]]:
        """The record the sidecar places at ``position``, read from the records file, with
        its term counts, once it is shown to be the record the sidecar describes there:
        a whole line at that offset, in this scope, with the sidecar's memory id, length
        and time (else :class:`CacheDisagreed`)."""
        try:
            record = self._read_line(position)
        except RemoteMemoryCorruptionError as exc:  # (a scope error is raised as it is)
            self._distrust(f"points record {position + 1} at bytes that are not its line "
                           f"({exc.problem})")
        counts = record_terms(record) if record.kind is MemoryKind.CONVERSATION else {}
        named = self.memory_id(position)
        claims = (named, self._lengths[position], self._captured[position])
        truth = (record.memory_id, sum(counts.values()),
                 record.source.captured_at.timestamp())
        if claims != truth:
            self._distrust(f"says record {position + 1} is (memory id, length, time) "
                           f"{claims}; the records file says {truth}")
        return record, counts, set()  # (the terms whose postings it was checked against)

    def _distrust(self, reason: str):
        """Drop the sidecar that claimed what the records do not hold: this index starts
        again and reads the records themselves on its next refresh (then writes a new
        sidecar over the one that lied). Raises :class:`CacheDisagreed`."""
        name = self.store.path.name
        if self._closer is not None:
            self._closer()
        self.__init__(self.store, sidecar=self.use_sidecar,
                      sidecar_min_records=self.sidecar_min_records)
        self._distrusted = f"distrusted: {reason}"
        raise CacheDisagreed(name, None, f"its recall sidecar {reason}; it was dropped and "
                             "the index is rebuilt from the records")

    def _records_fd(self) -> int:
        """One read-only descriptor of the records file, kept while the index lives (an
        open per hit cost as much as decoding it). It must be the file the log follows:
        each recall's refresh checks that the name still holds it."""
        if self._reader is None:
            fd = os.open(self.store.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            stat = os.fstat(fd)
            followed = self._log.identity if self._log is not None else None
            if followed is not None and (stat.st_dev, stat.st_ino) != followed:
                os.close(fd)
                raise RemoteMemoryCorruptionError(
                    self.store.path.name, None,
                    "the file was replaced behind this index (records are only appended)")
            self._reader = fd
            self._closer = weakref.finalize(self, os.close, fd)
        return self._reader

    def _read_line(self, position: int) -> StoredMemory:
        start, end = self._offsets[position], self._offsets[position + 1]
        name = self._records_name
        before = 1 if start > 0 else 0  # the newline that ends the line before, if any
        raw = os.pread(self._records_fd(), end - start + before, start - before) \
            if 0 <= start < end else b""
        if not raw.endswith(b"\n") or (before and raw[:1] != b"\n"):
            raise RemoteMemoryCorruptionError(name, position + 1, "not a whole line")
        raw = raw[before:]
        try:
            obj = parse_json(raw)
        except ValueError as exc:
            raise RemoteMemoryCorruptionError(name, position + 1,
                                              f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise RemoteMemoryCorruptionError(
                name, position + 1, f"expected a JSON object, got {type(obj).__name__}")
        return decode_stored_line(name, self.store.user_scope, position + 1, obj)

    @property
    def records(self) -> int:
        return self._indexed

    def vocabulary(self, start: int = 0) -> tuple[str, ...]:
        base: list[str] = []
        if self._base is not None:
            first = self._base.arrays["first_use"]
            base = self._base_terms[int(np.searchsorted(first, start, side="left")):]
        return (*base, *self._vocabulary[bisect_left(self._first_use, start):])


class _CheckedGroups:
    """Groups read back from a companion file, each checked when a query asks for it.

    The companion is a cache of a cache, sealed by a CRC-32 anyone can recompute: a
    group that names a surface term the analyzer does not make ``term`` would have a
    query find records that hold neither. So a surface is kept only if the analyzer makes
    it ``term`` (a few calls per query term; :class:`~labmem.recall.analyzers.
    AnalyzedIndex` keeps the answer). A surface the companion leaves out cannot be seen
    this way: that record is not proposed (the limit in the module docstring)."""

    def __init__(self, packed, analyzer) -> None:
        self._packed, self._term = packed, analyzer.term

    def group(self, term: str) -> tuple[str, ...]:
        return tuple(s for s in self._packed.group(term) if self._term(s) == term)

    def __len__(self) -> int:
        return len(self._packed)


def _columns_problem(meta, terms: int, distinct: int, bounds: int, lengths: np.ndarray,
                     offsets: np.ndarray) -> str | None:
    """What is wrong with a sidecar's per-record columns and totals, or ``None``: one pass
    over arrays the index reads whole anyway (offsets: from 0, rising, ending where the
    sidecar's coverage ends; lengths: adding up to its total length; one term per postings
    list)."""
    if terms != bounds - 1 or distinct != terms:
        return f"{terms} terms ({distinct} distinct) for {bounds - 1} postings lists"
    if (len(offsets) and (int(offsets[0]) != 0 or int(offsets[-1]) != meta["covered_bytes"]
                          or (np.diff(offsets) < 1).any())):
        return "line offsets that do not cut its records into lines"
    if int(lengths.sum()) != meta["total_length"] or (
            int(np.count_nonzero(lengths)) > meta["searched_records"]):
        return "record lengths that do not add up to its totals"
    return None


def _postings_problem(positions: np.ndarray, counts: np.ndarray, records: int) -> str | None:
    """What is wrong with one term's postings read from a sidecar, or ``None``: they must
    name records it covers, each once, ascending, each at least once."""
    if not len(positions):
        return "are empty"
    if int(positions[0]) < 0 or int(positions[-1]) >= records:
        return "name records past its last"
    if len(positions) > 1 and not (np.diff(positions.astype(np.int64)) > 0).all():
        return "name records out of order"
    if int(counts.min()) < 1:
        return "count a term no times"
    return None


def _line_ends(path, end: int, start: int = 0) -> np.ndarray:
    """Byte offsets just past each newline in ``path`` between ``start`` and ``end``."""
    found: list[np.ndarray] = []
    if end <= start:
        return np.zeros(0, dtype=np.int64)
    with open(path, "rb") as handle:
        handle.seek(start)
        at = start
        while at < end:
            chunk = handle.read(min(1 << 22, end - at))
            if not chunk:
                break
            found.append(np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + at + 1)
            at += len(chunk)
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def open_term_index(store) -> TermIndex:
    """The index that fits ``store``: its own when it keeps one
    (:class:`~labmem.recall.protocols.KeepsTermIndex`), else an in-memory one."""
    return store.term_index() if offers(store, KeepsTermIndex) else InMemoryTermIndex(store)


def merge_postings(postings: Iterable[Postings]) -> np.ndarray:
    """The ascending, distinct positions of every record in any of ``postings``."""
    return union_sorted([p.positions for p in postings])


def union_sorted(arrays: Iterable[np.ndarray]) -> np.ndarray:
    """The ascending distinct values of several ascending arrays of positions (int64): a
    stable sort of sorted runs is a merge (numpy's timsort finds the runs), in O(n)."""
    arrays = [a for a in arrays if len(a)]
    if not arrays:
        return np.zeros(0, dtype=np.int64)
    merged = np.concatenate(arrays).astype(np.int64, copy=False)
    merged.sort(kind="stable")
    keep = np.empty(len(merged), dtype=bool)
    keep[0] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    return merged[keep]


# ``np.unique`` checks for masked arrays, which imports numpy.ma the first time: a
# short-lived process such as ``labmem recall`` would pay that for one call (measured:
# bench/results/recall_design_notes.md). Recall only
# ever asks for the distinct values of a 1-d array of positions; these two do exactly that.

def distinct(values: np.ndarray) -> np.ndarray:
    """The ascending distinct values of a 1-d array (``np.unique(values)``)."""
    return distinct_groups(values)[0]


def distinct_groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct values ascending, index of each one's first occurrence, each element's
    group): ``np.unique(values, return_index=True, return_inverse=True)``."""
    values = np.asarray(values)
    if not len(values):
        empty = np.zeros(0, dtype=np.intp)
        return values.copy(), empty, empty
    order = np.argsort(values, kind="stable")  # stable: equal values keep their order
    ordered = values[order]
    starts = np.empty(len(ordered), dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    group = np.empty(len(values), dtype=np.intp)
    group[order] = np.cumsum(starts) - 1
    return ordered[starts], order[starts], group
