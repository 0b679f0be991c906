"""s12 remote memory on SQLite: many users in one database file, one contract.

:class:`SqliteMemoryStore` keeps the promises of the JSONL
:class:`~labmem.recall.store.RemoteMemoryStore` (same methods, same validation, same
errors) but gets them from a database instead of a file lock:

* **Duplicates** are refused by the database itself: ``UNIQUE (user_scope, memory_id)``
  and an ``INSERT`` inside ``BEGIN IMMEDIATE``. This is the compare-and-insert a real
  memory service does; there is no check-then-write window for two processes to share.
* **Scope** is a column, and every query says ``WHERE user_scope = ?``: one file can
  hold many users, and a store instance sees only its own.
* **Durability**: WAL journal, ``synchronous=FULL`` (a commit is on disk when
  ``append`` returns) and a busy timeout, so concurrent writers wait instead of failing.
* **Recall index**: the same transaction that stores records writes their postings,
  packed: one row per scope, term and *segment* (the write that added them), holding the
  ordinals (delta-coded) and counts as little-endian integer arrays that numpy decodes
  in one call; each record's length, captured time and a digest of its terms are kept
  once, in per-segment columns too (not once per posting). A write merges a term's
  newest segments when they are no larger than what it adds, so a term has at most
  log2(df) + 1 rows and a store loaded in one batch has exactly one: reading a term is
  one range of adjacent rows. The same transaction adds the terms the scope had not seen
  before (its vocabulary, which an analyzer groups by stem) and the scope's totals, so
  :class:`SqliteTermIndex` never re-tokenizes the store.
* **Tampering**: a content-derived id is re-derived on every read, and a record recall
  returns is checked once against what indexed it (:meth:`SqliteTermIndex._verify`).

Each record is stored as the same JSON object the JSONL store writes
(:meth:`StoredMemory.to_dict`), plus the columns the queries need.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from labmem.core.clock import Clock, resolve_clock
from labmem.core.errors import validated_as
from labmem.core.provenance import scope_digest
from labmem.core.validation import parse_json, require_int
from labmem.recall.index import Postings, TermIndex, record_terms
from labmem.recall.protocols import (
    AppendsInBatches,
    KeepsTermIndex,
    KeepsVectors,
    LendsPostings,
    ReadsInBulk,
)
from labmem.recall.store import (
    AppendsThroughInsert,
    MemoryKind,
    RecallStore,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryValidationError,
    StoredMemory,
    derived_id_problem,
    duplicate_message,
    record_from_object,
)

__all__ = ["SqliteMemoryStore", "SqliteTermIndex", "SCHEMA_VERSION"]

SCHEMA_VERSION = 3  # 2 added the vocabulary; 3 packed the postings (older files are upgraded)
BUSY_TIMEOUT_SECONDS = 10.0
PAGE_SIZE = 16384

# Every surface term of a scope once, with the first record that used it: an analyzer
# lists the terms that share a stem from here (labmem.recall.analyzers), and
# "first_ordinal >= n" is what records from n on added to the vocabulary. Keyed by first
# use, so that one B-tree serves that query (a write adds a term only when the term has
# no postings yet, so each term appears once).
VOCABULARY_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS vocabulary (
        user_scope    TEXT    NOT NULL,
        first_ordinal INTEGER NOT NULL,
        term          TEXT    NOT NULL,
        PRIMARY KEY (user_scope, first_ordinal, term)
    ) WITHOUT ROWID""",
)

# The latest profile is looked up by time; conversations never are, so the index covers
# profiles only (a partial index: a few rows, not one per record).
PROFILE_INDEX = """CREATE INDEX IF NOT EXISTS profiles_by_time
        ON memories (user_scope, captured_at, memory_id) WHERE kind = 'profile'"""

# segment: the first ordinal of the write transaction that made the row (after a merge,
# of the oldest write merged in); size: how many postings / records the row holds.
# postings.data is _pack()'s format; record_columns holds, for the ordinals segment …
# segment + size − 1, each record's length in terms (uint32; 0 for a profile), its
# captured time (float64 POSIX seconds) and the digest of the terms it was indexed by
# (uint32, terms_digest; 0 for a profile), all little-endian.
PACKED_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS postings (
        user_scope  TEXT    NOT NULL,
        term        TEXT    NOT NULL,
        segment     INTEGER NOT NULL,
        size        INTEGER NOT NULL,
        data        BLOB    NOT NULL,
        PRIMARY KEY (user_scope, term, segment)
    ) WITHOUT ROWID""",
    # the keys alone, small and dense: which rows a term has, read without touching a
    # row's packed data (a hit's check that each of its terms is posted; a cache check)
    """CREATE INDEX IF NOT EXISTS postings_keys ON postings (user_scope, term, segment, size)""",
    """CREATE TABLE IF NOT EXISTS record_columns (
        user_scope  TEXT    NOT NULL,
        segment     INTEGER NOT NULL,
        size        INTEGER NOT NULL,
        lengths     BLOB    NOT NULL,
        captured_at BLOB    NOT NULL,
        digests     BLOB    NOT NULL,
        PRIMARY KEY (user_scope, segment)
    ) WITHOUT ROWID""",
)

# ordinal: the record's 0-based position among all records of its scope, in storage
# order (dense per scope). record: StoredMemory.to_dict() as JSON, the source of truth;
# the other columns are copies for querying.
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS memories (
        user_scope  TEXT    NOT NULL,
        ordinal     INTEGER NOT NULL,
        memory_id   TEXT    NOT NULL,
        kind        TEXT    NOT NULL,
        captured_at REAL    NOT NULL,
        record      TEXT    NOT NULL,
        PRIMARY KEY (user_scope, ordinal),
        UNIQUE (user_scope, memory_id)
    )""",
    PROFILE_INDEX,
    *PACKED_SCHEMA,
    """CREATE TABLE IF NOT EXISTS scope_stats (
        user_scope           TEXT PRIMARY KEY,
        records              INTEGER NOT NULL,
        conversation_records INTEGER NOT NULL,
        total_length         INTEGER NOT NULL
    )""",
    *VOCABULARY_SCHEMA,
)

#: Dense recall's stored vectors (labmem.recall.vectors), one row per record and model,
#: created when first used; each row carries a CRC-32 of its memory id and bytes.
VECTOR_SCHEMA = """CREATE TABLE IF NOT EXISTS record_vectors (
    user_scope TEXT NOT NULL,
    model      TEXT NOT NULL,
    ordinal    INTEGER NOT NULL,
    memory_id  TEXT NOT NULL,
    conversation INTEGER NOT NULL,
    inv_norm   REAL NOT NULL,
    codes      BLOB NOT NULL,
    crc32      INTEGER NOT NULL,
    PRIMARY KEY (user_scope, model, ordinal)
) WITHOUT ROWID"""

_validated = partial(validated_as, RemoteMemoryValidationError)


@dataclass(frozen=True)
class _ScopeStats:
    records: int = 0  # every record of the scope (the next ordinal)
    conversation_records: int = 0
    total_length: int = 0


class SqliteMemoryStore(AppendsThroughInsert, RecallStore, KeepsTermIndex,
                        AppendsInBatches, KeepsVectors):
    """Append-only, user-scoped record store in one SQLite file (``path``) shared by users.

    Each record gets an ``ordinal``: its position among this user's records, dense
    from 0, assigned inside the insert transaction — the storage order of
    :meth:`read_all` and the positions of the recall index.

    One connection per instance (and per thread that uses it), opened on first use;
    ``close()`` or ``with`` ends it. Several processes may open the same file: writers
    queue on SQLite's write lock (up to :data:`BUSY_TIMEOUT_SECONDS`), and readers
    never wait for writers (WAL).
    """

    def __init__(self, path: str | os.PathLike[str], *, user_id: str,
                 clock: Clock | None = None) -> None:
        self.user_scope = _validated(scope_digest, user_id, field="user_id")
        self.clock = resolve_clock(clock)
        self.path = Path(path)
        self._connection: sqlite3.Connection | None = None
        self._pid = 0  # the process that opened the connection (never reuse it after fork)
        self._records: list[StoredMemory] = []  # read_all cache, index = ordinal
        self._decoded: dict[int, StoredMemory] = {}  # record_at cache (records never change)
        self._term_index: SqliteTermIndex | None = None

    def __repr__(self) -> str:
        return f"SqliteMemoryStore({self.path.name!r}, user_scope={self.user_scope!r})"

    # -- connection ----------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        if self._connection is not None and self._pid == os.getpid():
            self._connection.close()
        self._connection = None

    def __enter__(self) -> SqliteMemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _db(self) -> sqlite3.Connection:
        if self._connection is None or self._pid != os.getpid():
            self._connection = None
            with self._sqlite_errors():
                self._connection = self._open()
            self._pid = os.getpid()
        return self._connection

    def _open(self) -> sqlite3.Connection:
        """Connect and prepare; retry while another process is setting up the file.

        Switching a new file to WAL needs SQLite's exclusive lock, and SQLite answers
        "database is locked" at once (without its busy wait) when processes open a
        fresh file together — so the set-up is retried until the busy timeout.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            # isolation_level=None: no implicit transactions; we write BEGIN/COMMIT.
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS,
                                 isolation_level=None)
            try:
                self._prepare(db)
                return db
            except sqlite3.OperationalError as exc:
                db.close()
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)
            except BaseException:
                db.close()
                raise

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        db.execute("PRAGMA synchronous = FULL")
        # A new file only (an existing one keeps its page size): records of ~1 KB waste
        # a tenth of a 4 KB page, a fortieth of a 16 KB one.
        db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        # Both steps read first and write only on a new file, so opening an existing
        # store never waits behind another process's write.
        if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise RemoteMemoryError(
                    f"{self.path.name}: SQLite would not switch to WAL "
                    f"(journal_mode={mode}); keep the database on a local disk"
                )
        if self._schema_version(db) == 0:
            with _transaction(db):
                if self._schema_version(db) == 0:  # still: no one created it meanwhile
                    for statement in SCHEMA:
                        db.execute(statement)
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        for old, upgrade in ((1, _upgrade_to_vocabulary), (2, _upgrade_to_packed)):
            if self._schema_version(db) == old:
                with _transaction(db):
                    if self._schema_version(db) == old:  # still: no one upgraded it meanwhile
                        upgrade(db)
        version = self._schema_version(db)
        if version != SCHEMA_VERSION:
            raise RemoteMemoryCorruptionError(
                self.path.name, None,
                f"schema version {version} is not the supported {SCHEMA_VERSION}",
            )

    @staticmethod
    def _schema_version(db: sqlite3.Connection) -> int:
        return db.execute("PRAGMA user_version").fetchone()[0]

    @contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        """Turn SQLite's exceptions into the store's own errors, naming the file."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise RemoteMemoryError(
                    f"{self.path.name}: another process held the write lock for more than "
                    f"{BUSY_TIMEOUT_SECONDS:g} s; nothing was written — retry later"
                ) from None
            raise RemoteMemoryError(f"{self.path.name}: SQLite refused: {exc}") from None
        except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
            raise RemoteMemoryCorruptionError(
                self.path.name, None, f"not a usable SQLite database ({exc})"
            ) from None

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """A read transaction: every query inside sees the same committed state (WAL)."""
        db = self._db()
        if db.in_transaction:  # already inside one
            yield
            return
        with self._sqlite_errors():
            db.execute("BEGIN")
        try:
            yield
        finally:
            if db.in_transaction:
                db.execute("COMMIT")

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        db = self._db()
        with self._sqlite_errors():
            return db.execute(sql, params).fetchall()

    # -- reading -------------------------------------------------------------------

    def _decode_row(self, ordinal: int, memory_id: str, payload: Any) -> StoredMemory:
        name = self.path.name
        where = f"row {ordinal} of user scope {self.user_scope} (memory_id {memory_id!r})"
        try:
            if not isinstance(payload, (str, bytes)):
                raise TypeError(f"the record column holds {type(payload).__name__}, not JSON")
            record = record_from_object(parse_json(payload))  # nesting bounded by the core
        except (TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise RemoteMemoryCorruptionError(name, None, f"{where}: {exc}") from None
        if record.user_scope != self.user_scope or record.memory_id != memory_id:
            raise RemoteMemoryCorruptionError(
                name, None,
                f"{where}: its JSON says user scope {record.user_scope!r}, memory_id "
                f"{record.memory_id!r} — it disagrees with the row's columns",
            )
        problem = derived_id_problem(record)  # an edited body under a content-derived id
        if problem is not None:
            raise RemoteMemoryCorruptionError(name, None, f"{where}: {problem}")
        return record

    def _stats(self) -> _ScopeStats:
        """The scope's totals, which every ordinal and BM25 weight is read by: refused as
        corruption unless they are whole numbers, not negative, and consistent (a row
        written behind the store's back must not escape as a ``TypeError`` later)."""
        rows = self._query(
            "SELECT records, conversation_records, total_length FROM scope_stats "
            "WHERE user_scope = ?", (self.user_scope,))
        if not rows:
            return _ScopeStats()
        records, conversations, total = rows[0]
        if (not all(type(v) is int and v >= 0 for v in rows[0])
                or conversations > records):
            raise RemoteMemoryCorruptionError(
                self.path.name, None,
                f"scope_stats of user scope {self.user_scope} holds {rows[0]!r}, not "
                "counts of its records (whole numbers, not negative, conversations no "
                "more than records)")
        return _ScopeStats(records, conversations, total)

    def read_all(self) -> tuple[StoredMemory, ...]:
        """Every record of this user, in storage order (only new rows are decoded)."""
        start = len(self._records)
        rows = self._query(
            "SELECT ordinal, memory_id, record FROM memories "
            "WHERE user_scope = ? AND ordinal >= ? ORDER BY ordinal", (self.user_scope, start))
        decoded = []
        for expected, (ordinal, memory_id, payload) in enumerate(rows, start):
            if ordinal != expected:
                raise RemoteMemoryCorruptionError(
                    self.path.name, None,
                    f"user scope {self.user_scope} has no row {expected} (next is {ordinal}); "
                    "ordinals must be dense",
                )
            decoded.append(self._decode_row(ordinal, memory_id, payload))
        self._records.extend(decoded)  # only when every new row decoded
        return tuple(self._records)

    def get(self, memory_id: str) -> StoredMemory | None:
        """The record with ``memory_id``, or ``None``."""
        if not isinstance(memory_id, str):
            return None
        rows = self._query(
            "SELECT ordinal, memory_id, record FROM memories "
            "WHERE user_scope = ? AND memory_id = ?", (self.user_scope, memory_id))
        return self._decode_row(*rows[0]) if rows else None

    def record_at(self, ordinal: int) -> StoredMemory:
        """The record at storage position ``ordinal`` (0-based, this user's records)."""
        _validated(require_int, ordinal, "ordinal", minimum=0)
        if ordinal < len(self._records):  # already decoded by read_all
            return self._records[ordinal]
        if ordinal in self._decoded:
            return self._decoded[ordinal]
        rows = self._query(
            "SELECT ordinal, memory_id, record FROM memories "
            "WHERE user_scope = ? AND ordinal = ?", (self.user_scope, ordinal))
        if not rows:
            raise RemoteMemoryValidationError(
                "ordinal", f"{ordinal} is past the last stored record",
                "use an ordinal below len(store)",
            )
        record = self._decoded[ordinal] = self._decode_row(*rows[0])
        return record

    def latest_profile(self) -> StoredMemory | None:
        """The profile snapshot captured last (ties: greatest ``memory_id``), or ``None``."""
        rows = self._query(
            "SELECT ordinal, memory_id, record FROM memories "
            "WHERE user_scope = ? AND kind = 'profile' "  # a literal: the partial index
            "ORDER BY captured_at DESC, memory_id DESC LIMIT 1", (self.user_scope,))
        return self._decode_row(*rows[0]) if rows else None

    def __len__(self) -> int:
        return self._stats().records

    def term_index(self) -> SqliteTermIndex:
        """The recall index over this user's conversation records (one per store)."""
        if self._term_index is None:
            self._term_index = SqliteTermIndex(self)
        return self._term_index

    # -- stored vectors (labmem.recall.vectors) --------------------------------------

    def records_from(self, ordinal: int, end: int) -> tuple[StoredMemory, ...]:
        """The records at ordinals ``ordinal`` to ``end`` − 1, decoded in one query and
        not kept (what stored vectors read to embed the records they do not cover yet)."""
        rows = self._query(
            "SELECT ordinal, memory_id, record FROM memories WHERE user_scope = ? AND "
            "ordinal >= ? AND ordinal < ? ORDER BY ordinal", (self.user_scope, ordinal, end))
        if [row[0] for row in rows] != list(range(ordinal, ordinal + len(rows))):
            raise RemoteMemoryCorruptionError(
                self.path.name, None, f"user scope {self.user_scope} has a gap in its "
                f"ordinals between {ordinal} and {end}; ordinals must be dense")
        return tuple(self._decode_row(*row) for row in rows)

    def memory_ids_below(self, end: int) -> list[str]:
        """The memory ids of ordinals 0 to ``end`` − 1, in order."""
        return [row[0] for row in self._query(
            "SELECT memory_id FROM memories WHERE user_scope = ? AND ordinal < ? "
            "ORDER BY ordinal", (self.user_scope, end))]

    def vector_rows(self, model: str) -> list[tuple[Any, ...]]:
        """(ordinal, memory_id, conversation, inv_norm, codes, crc32) of ``model``'s stored
        vectors for this scope, by ordinal; none before the table exists."""
        with self._sqlite_errors():
            self._db().execute(VECTOR_SCHEMA)
        return self._query(
            "SELECT ordinal, memory_id, conversation, inv_norm, codes, crc32 FROM record_vectors "
            "WHERE user_scope = ? AND model = ? ORDER BY ordinal", (self.user_scope, model))

    def write_vector_rows(self, model: str, rows: Iterable[tuple[Any, ...]], *,
                          replace_all: bool = False) -> None:
        """Store ``model``'s vectors (rows as :meth:`vector_rows` returns them) in one
        transaction; ``replace_all`` first drops this scope's rows of ``model`` (a
        refused set is rebuilt). A row already there is kept (another process wrote the
        same vector of the same record first)."""
        db = self._db()
        with self._sqlite_errors(), _transaction(db):
            db.execute(VECTOR_SCHEMA)
            if replace_all:
                db.execute("DELETE FROM record_vectors WHERE user_scope = ? AND model = ?",
                           (self.user_scope, model))
            db.executemany(
                "INSERT OR IGNORE INTO record_vectors (user_scope, model, ordinal, memory_id, "
                "conversation, inv_norm, codes, crc32) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(self.user_scope, model, *row) for row in rows])

    # -- writing -------------------------------------------------------------------

    # -- writing (append and append_many: AppendsThroughInsert) ---------------------

    def _insert(self, records: tuple[StoredMemory, ...], *, batch: bool) -> None:
        """INSERT the records, their packed postings and the new totals in one transaction."""
        rows = []
        for record in records:  # encode and tokenize before taking the write lock
            counts = (record_terms(record) if record.kind is MemoryKind.CONVERSATION
                      else None)
            rows.append((record, json.dumps(record.to_dict(), ensure_ascii=False,
                                            separators=(",", ":")), counts))
        db = self._db()
        with self._sqlite_errors(), _transaction(db):
            stats = self._stats()
            first = ordinal = stats.records
            conversations, total_length = stats.conversation_records, stats.total_length
            postings: dict[str, tuple[list[int], list[int]]] = {}
            lengths: list[int] = []
            captured_at: list[float] = []
            digests: list[int] = []
            for index, (record, payload, counts) in enumerate(rows):
                captured = record.source.captured_at.timestamp()
                try:
                    db.execute(
                        "INSERT INTO memories (user_scope, ordinal, memory_id, kind, "
                        "captured_at, record) VALUES (?, ?, ?, ?, ?, ?)",
                        (self.user_scope, ordinal, record.memory_id, record.kind.value,
                         captured, payload))
                except sqlite3.IntegrityError as exc:
                    if "memory_id" not in str(exc):
                        raise RemoteMemoryCorruptionError(
                            self.path.name, None,
                            f"scope_stats says user scope {self.user_scope} has {stats.records}"
                            f" records, but row {ordinal} exists ({exc})",
                        ) from None
                    raise RemoteMemoryDuplicateError(duplicate_message(
                        record.memory_id, self.path.name, index if batch else None)) from None
                length = 0
                if counts is not None:
                    length = sum(counts.values())
                    for term, tf in counts.items():
                        entry = postings.setdefault(term, ([], []))
                        entry[0].append(ordinal)
                        entry[1].append(tf)
                    conversations += 1
                    total_length += length
                lengths.append(length)
                captured_at.append(captured)
                digests.append(terms_digest(counts) if counts is not None else 0)
                ordinal += 1
            new_terms = []
            for term in sorted(postings):  # in index order: fewer pages touched
                positions, counts = postings[term]
                if _append_postings(db, self.user_scope, term, first,
                                    np.array(positions, dtype=np.int64),
                                    np.array(counts, dtype=np.int64)):
                    new_terms.append((self.user_scope, positions[0], term))
            _append_columns(db, self.user_scope, first, np.array(lengths, dtype=np.int64),
                            np.array(captured_at, dtype=np.float64),
                            np.array(digests, dtype=np.int64))
            db.executemany("INSERT INTO vocabulary (user_scope, first_ordinal, term) "
                           "VALUES (?, ?, ?)", new_terms)
            db.execute(
                "INSERT INTO scope_stats (user_scope, records, conversation_records, "
                "total_length) VALUES (?, ?, ?, ?) ON CONFLICT (user_scope) DO UPDATE SET "
                "records = excluded.records, conversation_records = "
                "excluded.conversation_records, total_length = excluded.total_length",
                (self.user_scope, ordinal, conversations, total_length))


# -- packed rows ------------------------------------------------------------------------

_WIDTHS = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}


def _width(values: np.ndarray) -> int:
    """The fewest bytes (1, 2, 4 or 8) that hold every value of ``values`` (all ≥ 0)."""
    top = int(values.max()) if len(values) else 0
    return next(w for w in (1, 2, 4, 8) if top < 1 << (8 * w))


def pack_postings(segment: int, positions: np.ndarray, counts: np.ndarray) -> bytes:
    """One postings row's ``data``: a byte ``16·log2(gap width) + log2(count width)``,
    then the gaps (the first from ``segment``, each next from the one before), then the
    counts — each array in the fewest bytes that hold its largest value."""
    gaps = np.diff(positions, prepend=segment)
    gap_width, count_width = _width(gaps), _width(counts)
    header = bytes([(gap_width.bit_length() - 1) << 4 | (count_width.bit_length() - 1)])
    return (header + gaps.astype(_WIDTHS[gap_width]).tobytes()
            + counts.astype(_WIDTHS[count_width]).tobytes())


def unpack_postings(segment: int, size: int, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(positions, counts) of one postings row, both int64; ``ValueError`` if malformed."""
    if not isinstance(data, bytes) or not data or not isinstance(size, int) or size < 1:
        raise ValueError("not a packed postings row")
    gap_width, count_width = 1 << (data[0] >> 4), 1 << (data[0] & 15)
    if gap_width not in _WIDTHS or count_width not in _WIDTHS \
            or len(data) != 1 + size * (gap_width + count_width):
        raise ValueError(f"{len(data)} bytes cannot hold {size} postings")
    gaps = np.frombuffer(data, _WIDTHS[gap_width], size, 1)
    counts = np.frombuffer(data, _WIDTHS[count_width], size, 1 + size * gap_width)
    if size > 1 and not gaps[1:].all():
        raise ValueError("ordinals are not ascending")
    return np.cumsum(gaps, dtype=np.int64) + segment, counts.astype(np.int64)


def _merge_tail(db: sqlite3.Connection, table: str, where: str, key: tuple[Any, ...],
                segment: int, arrays: tuple[np.ndarray, ...],
                decode: Callable[..., tuple[np.ndarray, ...]],
                ) -> tuple[int, tuple[np.ndarray, ...], bool]:
    """Merge a new segment (``arrays``, starting at ``segment``) with the newest rows while
    the next older one is no larger than what is gathered so far — a binary counter: at
    most log2(total) + 1 rows remain. Deletes the rows merged; returns (the merged row's
    segment, its arrays, whether any row existed). The caller inserts that row in the
    same transaction, so a crash leaves either the old rows or the merged one."""
    merged_from, gathered = None, len(arrays[0])
    existing = db.execute(f"SELECT segment, size FROM {table} WHERE user_scope = ? {where} "
                          "ORDER BY segment DESC", (*key,)).fetchall()
    for older, size in existing:
        if size > gathered:
            break
        merged_from, gathered = older, gathered + size
    if merged_from is None:
        return segment, arrays, bool(existing)
    rows = db.execute(f"SELECT * FROM {table} WHERE user_scope = ? {where} AND segment >= ? "
                      "ORDER BY segment", (*key, merged_from)).fetchall()
    db.execute(f"DELETE FROM {table} WHERE user_scope = ? {where} AND segment >= ?",
               (*key, merged_from))
    old = [decode(*row[2:]) for row in rows]  # postings: (segment, …); columns: (size, …)
    merged = tuple(np.concatenate([o[i] for o in old] + [new]) for i, new in enumerate(arrays))
    return merged_from, merged, True


def _append_postings(db: sqlite3.Connection, scope: str, term: str, segment: int,
                     positions: np.ndarray, counts: np.ndarray) -> bool:
    """Store one write's postings of ``term`` as a new segment (merged with small ones);
    ``True`` if the scope had no postings of ``term`` before."""
    segment, (positions, counts), existed = _merge_tail(
        db, "postings", "AND term = ?", (scope, term), segment, (positions, counts),
        unpack_postings)
    db.execute("INSERT INTO postings (user_scope, term, segment, size, data) "
               "VALUES (?, ?, ?, ?, ?)",
               (scope, term, segment, len(positions), pack_postings(segment, positions, counts)))
    return not existed


def terms_digest(counts: Mapping[str, int]) -> int:
    """CRC-32 of a record's terms and counts (sorted): what it was indexed by, in 4 bytes."""
    return zlib.crc32("".join(f"{t}\t{counts[t]}\n" for t in sorted(counts)).encode())


def unpack_columns(size: int, lengths: bytes, captured: bytes,
                   digests: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lengths int64, captured_at float64, digests int64) of one record_columns row."""
    if not (all(isinstance(b, bytes) for b in (lengths, captured, digests))
            and len(lengths) == 4 * size and len(captured) == 8 * size
            and len(digests) == 4 * size):
        raise ValueError(f"record columns of the wrong size for {size} records")
    return (np.frombuffer(lengths, "<u4").astype(np.int64),
            np.frombuffer(captured, "<f8").astype(np.float64),
            np.frombuffer(digests, "<u4").astype(np.int64))


def _append_columns(db: sqlite3.Connection, scope: str, segment: int, lengths: np.ndarray,
                    captured: np.ndarray, digests: np.ndarray) -> None:
    """Store one write's record lengths, times and digests as a new segment (merged
    likewise)."""
    segment, (lengths, captured, digests), _ = _merge_tail(
        db, "record_columns", "", (scope,), segment, (lengths, captured, digests),
        unpack_columns)
    db.execute("INSERT INTO record_columns (user_scope, segment, size, lengths, captured_at, "
               "digests) VALUES (?, ?, ?, ?, ?, ?)",
               (scope, segment, len(lengths), lengths.astype("<u4").tobytes(),
                captured.astype("<f8").tobytes(), digests.astype("<u4").tobytes()))


def _upgrade_to_vocabulary(db: sqlite3.Connection) -> None:
    """Version 1 → 2: build the vocabulary from the postings already stored."""
    db.execute("CREATE TABLE vocabulary (user_scope TEXT NOT NULL, term TEXT NOT NULL, "
               "first_ordinal INTEGER NOT NULL, PRIMARY KEY (user_scope, term)) WITHOUT ROWID")
    db.execute("INSERT INTO vocabulary (user_scope, term, first_ordinal) "
               "SELECT user_scope, term, MIN(ordinal) FROM postings GROUP BY user_scope, term",
               ())
    db.execute("PRAGMA user_version = 2")


def _upgrade_to_packed(db: sqlite3.Connection) -> None:
    """Version 2 → 3: repack the one-row-per-posting table, per scope and term; key the
    vocabulary by first use; index profiles only."""
    db.execute("DROP INDEX IF EXISTS memories_by_kind")
    db.execute("DROP INDEX IF EXISTS vocabulary_by_first")
    db.execute(PROFILE_INDEX)
    db.execute("ALTER TABLE vocabulary RENAME TO vocabulary_v2")
    db.execute("ALTER TABLE postings RENAME TO postings_v2")
    for statement in (*VOCABULARY_SCHEMA, *PACKED_SCHEMA):
        db.execute(statement)
    db.execute("INSERT INTO vocabulary (user_scope, first_ordinal, term) "
               "SELECT user_scope, first_ordinal, term FROM vocabulary_v2", ())
    db.execute("DROP TABLE vocabulary_v2")
    scopes = [row[0] for row in db.execute("SELECT user_scope FROM scope_stats", ())]
    for scope in scopes:
        rows = db.execute("SELECT term, ordinal, tf FROM postings_v2 WHERE user_scope = ? "
                          "ORDER BY term, ordinal", (scope,)).fetchall()
        start = 0
        while start < len(rows):
            end = start
            while end < len(rows) and rows[end][0] == rows[start][0]:
                end += 1
            _append_postings(db, scope, rows[start][0], 0,
                             np.array([r[1] for r in rows[start:end]], dtype=np.int64),
                             np.array([r[2] for r in rows[start:end]], dtype=np.int64))
            start = end
        length_of = dict(db.execute("SELECT ordinal, MAX(length) FROM postings_v2 "
                                    "WHERE user_scope = ? GROUP BY ordinal", (scope,)))
        indexed: dict[int, dict[str, int]] = {}
        for term, ordinal, tf in rows:
            indexed.setdefault(ordinal, {})[term] = tf
        captured = db.execute("SELECT ordinal, captured_at FROM memories WHERE user_scope = ? "
                              "ORDER BY ordinal", (scope,)).fetchall()
        if captured:
            _append_columns(db, scope, 0,
                            np.array([length_of.get(o, 0) for o, _ in captured], np.int64),
                            np.array([c for _, c in captured], np.float64),
                            np.array([terms_digest(indexed[o]) if o in indexed else 0
                                      for o, _ in captured], np.int64))
    db.execute("DROP TABLE postings_v2")
    db.execute("PRAGMA user_version = 3")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``: take the write lock first, so that the reads
    inside (the next ordinal) cannot go stale; roll back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


#: How many postings :class:`SqliteTermIndex` keeps decoded (least recently used terms
#: are dropped first): about 32 bytes each, so some 64 MiB at most.
POSTINGS_CACHE = 2_000_000


class SqliteTermIndex(TermIndex, LendsPostings, ReadsInBulk):
    """The recall engine's inverted index, read from the packed rows the store writes.

    A consistent snapshot: :meth:`refresh` reads the scope's totals and the record
    columns (lengths, times), and :meth:`postings` returns only ordinals below the
    refreshed record count, so the statistics and the postings always describe the same
    records, however many other processes append meanwhile. A term's rows are read
    together (one range of its primary key) and decoded once; the decoded postings are
    kept (up to :data:`POSTINGS_CACHE`) until a refresh finds that the term's rows changed.
    """

    def __init__(self, store: SqliteMemoryStore) -> None:
        self.store = store
        self._stats = _ScopeStats()
        self._lengths = np.zeros(0, dtype=np.int64)  # per ordinal
        self._captured = np.zeros(0, dtype=np.float64)
        self._digests = np.zeros(0, dtype=np.int64)
        self._columns: tuple[tuple[int, int], ...] = ()  # (segment, size) rows read
        # term -> (bound it was read at, its (segment, size) rows, postings below the bound)
        self._postings: dict[str, tuple[int, tuple[tuple[int, int], ...], Postings]] = {}
        self._cached = 0  # postings held in self._postings
        self._verified: set[int] = set()  # ordinals whose record matched its postings
        self._terms: dict[int, dict[str, int]] = {}  # ordinal -> its record's term counts
        # the postings read since the last refresh (a query's terms): a record they
        # propose must hold each of them as often as they say (record())
        self._lent: dict[str, Postings] = {}
        self.refresh()

    def __repr__(self) -> str:
        return (f"SqliteTermIndex({self.store!r}, records={self._stats.records}, "
                f"searched_records={self.searched_records})")

    def refresh(self) -> None:
        """Catch up with records appended since (by this or any other process).

        The totals and the record columns are read in one read transaction (one
        snapshot); only the column rows that changed since the last refresh are decoded.
        """
        self._lent.clear()
        with self.store._snapshot():
            stats = self.store._stats()
            if stats == self._stats:
                return
            scope = self.store.user_scope
            keys = tuple((int(a), int(b)) for a, b in self.store._query(
                "SELECT segment, size FROM record_columns WHERE user_scope = ? "
                "ORDER BY segment", (scope,)))
            kept = 0  # leading rows as last read: their records' columns are unchanged
            while (kept < min(len(keys), len(self._columns))
                   and keys[kept] == self._columns[kept]):
                kept += 1
            start = keys[kept][0] if kept < len(keys) else sum(size for _, size in keys)
            parts = [[self._lengths[:start]], [self._captured[:start]], [self._digests[:start]]]
            for segment, size, *packed in self.store._query(
                    "SELECT segment, size, lengths, captured_at, digests FROM record_columns "
                    "WHERE user_scope = ? AND segment >= ? ORDER BY segment", (scope, start)):
                try:
                    more = unpack_columns(size, *packed)
                except ValueError as exc:
                    raise self._corrupt(f"record columns at ordinal {segment}: {exc}") from None
                for part, column in zip(parts, more, strict=True):
                    part.append(column)
        self._lengths, self._captured, self._digests = (np.concatenate(p) for p in parts)
        self._columns = keys
        if self._lengths.size != sum(size for _, size in keys) or self._lengths.size < \
                stats.records:
            raise self._corrupt(f"record columns cover {self._lengths.size} of "
                                f"{stats.records} records")
        self._stats = stats

    def _corrupt(self, detail: str) -> RemoteMemoryCorruptionError:
        return RemoteMemoryCorruptionError(
            self.store.path.name, None, f"user scope {self.store.user_scope}: {detail}")

    @property
    def records(self) -> int:
        """All records (profiles too) covered by this snapshot: valid positions."""
        return self._stats.records

    @property
    def searched_records(self) -> int:
        """Conversation records in scope: the documents recall searches."""
        return self._stats.conversation_records

    @property
    def total_length(self) -> int:
        """Sum of the searched records' lengths (for an average document length)."""
        return self._stats.total_length

    def postings(self, term: str) -> Postings:
        """Where ``term`` occurs, ascending by ordinal; empty arrays when nowhere."""
        bound = self._stats.records
        cached = self._postings.get(term)
        if cached is not None and cached[0] == bound:
            self._postings[term] = self._postings.pop(term)  # most recently used: last
            self._lent[term] = cached[2]
            return cached[2]
        with self.store._snapshot():  # the rows' keys and their data: one snapshot
            keys = tuple((int(a), int(b)) for a, b in self.store._query(
                "SELECT segment, size FROM postings WHERE user_scope = ? AND term = ? "
                "ORDER BY segment", (self.store.user_scope, term)))
            if cached is not None and cached[1] == keys and (
                    cached[2].positions.size == sum(size for _, size in keys)):
                found = cached[2]  # no record appended since has the term
            else:
                found = self._read(term, bound)
        self._remember(term, (bound, keys, found))
        self._lent[term] = found
        return found

    def _read(self, term: str, bound: int) -> Postings:
        rows = self.store._query(
            "SELECT segment, size, data FROM postings WHERE user_scope = ? AND term = ? "
            "ORDER BY segment", (self.store.user_scope, term))
        if not rows:
            return Postings.empty()
        try:
            decoded = [unpack_postings(*row) for row in rows]
        except ValueError as exc:
            raise self._corrupt(f"the postings of term {term!r} are damaged ({exc})") from None
        positions = np.concatenate([p for p, _ in decoded]) if len(decoded) > 1 \
            else decoded[0][0]
        counts = np.concatenate([c for _, c in decoded]) if len(decoded) > 1 \
            else decoded[0][1]
        cut = int(np.searchsorted(positions, bound))  # a snapshot: only records it counts
        if cut and (positions[cut - 1] >= self._lengths.size or (
                len(decoded) > 1 and not (np.diff(positions[:cut]) > 0).all())):
            raise self._corrupt(f"the postings of term {term!r} are out of order")
        positions, counts = positions[:cut], counts[:cut]
        return Postings(positions, counts, self._lengths[positions], self._captured[positions])

    def _remember(self, term: str, entry) -> None:
        old = self._postings.pop(term, None)
        if old is not None:
            self._cached -= len(old[2])
        self._postings[term] = entry
        self._cached += len(entry[2])
        while self._cached > POSTINGS_CACHE and len(self._postings) > 1:
            dropped = self._postings.pop(next(iter(self._postings)))
            self._cached -= len(dropped[2])

    def term_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions, counts) of ``term``: the kept arrays, not copies."""
        found = self.postings(term)
        return found.positions, found.counts

    def record_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Every record's (length, captured time), by ordinal (read at refresh)."""
        return self._lengths, self._captured

    def document_frequency(self, term: str) -> int:
        """How many searched records contain ``term``."""
        return len(self.postings(term).positions)

    def vocabulary(self, start: int = 0) -> tuple[str, ...]:
        """The surface terms first used by a record at a position from ``start`` on (and
        below :attr:`records`), in order of first use: what an analyzer has not seen yet."""
        rows = self.store._query(
            "SELECT term FROM vocabulary WHERE user_scope = ? AND first_ordinal >= ? "
            "AND first_ordinal < ? ORDER BY first_ordinal, term",
            (self.store.user_scope, start, self._stats.records))
        return tuple(row[0] for row in rows)

    def read_records(self) -> None:
        """Decode every record in one query (:meth:`record` decodes one row per call, and
        then looks these up)."""
        self.store.read_all()

    def record(self, position: int) -> StoredMemory:
        """The record at ``position`` (an ordinal from :meth:`postings`), checked once
        against its postings: recall never returns a record its postings do not describe."""
        last = self._stats.records - 1
        if (isinstance(position, bool) or not isinstance(position, (int, np.integer))
                or not 0 <= position <= last):
            raise RemoteMemoryValidationError(
                "position", f"{position!r} is not an ordinal of this index (0 to {last})",
                "pass a position from postings(); refresh() to see newer records",
            )
        position = int(position)
        record = self.store.record_at(position)
        if record.kind is MemoryKind.CONVERSATION and position not in self._verified:
            self._verify(position, record)
            self._verified.add(position)
        self._check_claims(position, record)
        return record

    def _check_claims(self, ordinal: int, record: StoredMemory) -> None:
        """Refuse a record that the postings read since the last refresh (the query's
        terms) place at ``ordinal`` with other counts than the record's own. A record
        proposed by a term it does not hold — another scope's postings copied under this
        scope, say: :meth:`_verify` checks only the record's own terms — is caught here,
        by a look-up in each of the query's postings (no row is read)."""
        if not self._lent:
            return
        counts = self._terms.get(ordinal)
        if counts is None:
            counts = (record_terms(record) if record.kind is MemoryKind.CONVERSATION
                      else {})
            if len(self._terms) >= 4096:
                self._terms.clear()
            self._terms[ordinal] = counts
        for term, postings in self._lent.items():
            at = int(np.searchsorted(postings.positions, ordinal))
            claimed = (int(postings.counts[at]) if at < len(postings)
                       and postings.positions[at] == ordinal else 0)
            if claimed != counts.get(term, 0):
                raise RemoteMemoryCorruptionError(
                    self.store.path.name, None,
                    f"row {ordinal} of user scope {self.store.user_scope} (memory_id "
                    f"{record.memory_id!r}): its postings do not match the record (term "
                    f"{term!r}: posted {claimed} times, the record holds it "
                    f"{counts.get(term, 0)} times) — the record or its postings were edited "
                    "after they were stored")

    def _verify(self, ordinal: int, record: StoredMemory) -> None:
        """Refuse a conversation record that is not the one its postings were built from.

        The postings and the record columns are written in the record's own transaction
        and never change; recall finds a record through them. Checked without decoding
        any postings list that is not already decoded: the record's terms must give the
        digest, length and captured time its columns hold (an edited body fails this);
        every term must have postings rows from its ordinal's write or earlier (a deleted
        term fails this, by key alone); and every term whose postings this index holds
        decoded — the query's — must be posted at ``ordinal`` with the record's count (an
        edited count fails this). (A posting edited inside the blob of a term the query
        does not use is seen only when a query uses it.)
        """
        counts = record_terms(record)
        length = sum(counts.values())
        captured = record.source.captured_at.timestamp()
        columns = (int(self._lengths[ordinal]), float(self._captured[ordinal]),
                   int(self._digests[ordinal]))
        given = (length, captured, terms_digest(counts))
        detail = None
        if columns != given:
            detail = (f"the record gives (length, captured_at, terms digest) {given}, its "
                      f"columns {columns}")
        terms = sorted(counts)
        for start in range(0, len(terms), 500):  # well below SQLite's parameter limit
            if detail is not None:
                break
            chunk = terms[start:start + 500]
            rows = dict(self.store._query(
                "SELECT term, MIN(segment) FROM postings WHERE user_scope = ? AND term IN "
                f"({', '.join('?' * len(chunk))}) GROUP BY term",
                (self.store.user_scope, *chunk)))
            missing = next((t for t in chunk if rows.get(t, ordinal + 1) > ordinal), None)
            if missing is not None:
                detail = f"term {missing!r} of the record has no posting"
        bound = self._stats.records
        for term in terms:
            held = self._postings.get(term)
            if detail is not None or held is None or held[0] != bound:
                continue  # not decoded (or for an older snapshot): not read for this check
            postings = held[2]
            at = int(np.searchsorted(postings.positions, ordinal))
            if at == len(postings) or postings.positions[at] != ordinal:
                detail = f"term {term!r} of the record has no posting"
            elif postings.counts[at] != counts[term]:
                detail = (f"term {term!r}: the record counts it {counts[term]} times, its "
                          f"posting {int(postings.counts[at])}")
        if detail is not None:
            raise RemoteMemoryCorruptionError(
                self.store.path.name, None,
                f"row {ordinal} of user scope {self.store.user_scope} (memory_id "
                f"{record.memory_id!r}): its postings do not match the record ({detail}) — "
                "the record or its postings were edited after they were stored",
            )
