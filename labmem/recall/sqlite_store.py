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
* **Recall index**: the same transaction that stores a conversation record writes its
  postings (term → ordinal, count, record length, captured time), the terms the scope
  had not seen before (its vocabulary, which an analyzer groups by stem) and the scope's
  totals, so :class:`SqliteTermIndex` never re-tokenizes the store.

Each record is stored as the same JSON object the JSONL store writes
(:meth:`StoredMemory.to_dict`), plus the columns the queries need.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from labmem.core.clock import Clock, resolve_clock
from labmem.core.errors import validated_as
from labmem.core.provenance import MemorySource, scope_digest
from labmem.core.validation import parse_json, require_int
from labmem.recall.index import Postings, record_terms
from labmem.recall.store import (
    MemoryKind,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryValidationError,
    StoredMemory,
    derived_id_problem,
    duplicate_message,
    record_from_object,
    stamp_now,
    validate_draft,
    validate_drafts,
)

__all__ = ["SqliteMemoryStore", "SqliteTermIndex", "SCHEMA_VERSION"]

SCHEMA_VERSION = 2  # 2 added the vocabulary table (a version-1 file is upgraded)
BUSY_TIMEOUT_SECONDS = 10.0

# Every surface term of a scope once, with the first record that used it: an analyzer
# lists the terms that share a stem from here (labmem.recall.analyzers), and
# "first_ordinal >= n" is what records from n on added to the vocabulary.
VOCABULARY_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS vocabulary (
        user_scope    TEXT    NOT NULL,
        term          TEXT    NOT NULL,
        first_ordinal INTEGER NOT NULL,
        PRIMARY KEY (user_scope, term)
    ) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS vocabulary_by_first
        ON vocabulary (user_scope, first_ordinal)""",
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
    """CREATE INDEX IF NOT EXISTS memories_by_kind
        ON memories (user_scope, kind, captured_at, memory_id)""",
    # Clustered on (user_scope, term, ordinal): the (user_scope, term) index recall
    # needs, with each term's postings stored together in ordinal order.
    """CREATE TABLE IF NOT EXISTS postings (
        user_scope  TEXT    NOT NULL,
        term        TEXT    NOT NULL,
        ordinal     INTEGER NOT NULL,
        tf          INTEGER NOT NULL,
        length      INTEGER NOT NULL,
        captured_at REAL    NOT NULL,
        PRIMARY KEY (user_scope, term, ordinal)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS scope_stats (
        user_scope           TEXT PRIMARY KEY,
        records              INTEGER NOT NULL,
        conversation_records INTEGER NOT NULL,
        total_length         INTEGER NOT NULL
    )""",
    *VOCABULARY_SCHEMA,
)

_validated = partial(validated_as, RemoteMemoryValidationError)


@dataclass(frozen=True)
class _ScopeStats:
    records: int = 0  # every record of the scope (the next ordinal)
    conversation_records: int = 0
    total_length: int = 0


class SqliteMemoryStore:
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
        if self._schema_version(db) == 1:
            with _transaction(db):
                if self._schema_version(db) == 1:  # still: no one upgraded it meanwhile
                    _upgrade_to_vocabulary(db)
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

    def _verify_postings(self, ordinal: int, record: StoredMemory) -> None:
        """Refuse a conversation record that is not the one its postings were built from.

        The postings (term, tf, record length, captured time) are written in the record's
        own transaction and never change; recall finds a record through them. Every term
        of the record must be posted at ``ordinal`` with its count, and each posting must
        carry the record's length and captured time — then no posting of another term can
        exist either (the lengths would not add up). An edited body fails this.
        """
        counts = record_terms(record)
        length = sum(counts.values())
        captured = record.source.captured_at.timestamp()
        terms = list(counts)
        posted: dict[str, tuple[int, int, float]] = {}
        for start in range(0, len(terms), 500):  # well below SQLite's parameter limit
            chunk = terms[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            for term, tf, posted_length, posted_captured in self._query(
                    "SELECT term, tf, length, captured_at FROM postings WHERE user_scope = ? "
                    f"AND ordinal = ? AND term IN ({marks})",
                    (self.user_scope, ordinal, *chunk)):
                posted[term] = (tf, posted_length, posted_captured)
        wrong = next((t for t in terms if posted.get(t) != (counts[t], length, captured)),
                     None)
        if wrong is not None or (not terms and self._query(
                "SELECT 1 FROM postings WHERE user_scope = ? AND ordinal = ? LIMIT 1",
                (self.user_scope, ordinal))):
            if wrong is None:
                detail = "the record has no terms, yet terms are posted for it"
            elif wrong not in posted:
                detail = f"term {wrong!r} of the record has no posting"
            else:
                detail = (f"term {wrong!r}: the record gives (tf, length, captured_at) "
                          f"{(counts[wrong], length, captured)}, its posting {posted[wrong]}")
            raise RemoteMemoryCorruptionError(
                self.path.name, None,
                f"row {ordinal} of user scope {self.user_scope} (memory_id "
                f"{record.memory_id!r}): its postings do not match the record ({detail}) — "
                "the record or its postings were edited after they were stored",
            )

    def _stats(self) -> _ScopeStats:
        rows = self._query(
            "SELECT records, conversation_records, total_length FROM scope_stats "
            "WHERE user_scope = ?", (self.user_scope,))
        return _ScopeStats(*rows[0]) if rows else _ScopeStats()

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
            "WHERE user_scope = ? AND kind = ? "
            "ORDER BY captured_at DESC, memory_id DESC LIMIT 1",
            (self.user_scope, MemoryKind.PROFILE.value))
        return self._decode_row(*rows[0]) if rows else None

    def __len__(self) -> int:
        return self._stats().records

    def term_index(self) -> SqliteTermIndex:
        """The recall index over this user's conversation records (one per store)."""
        if self._term_index is None:
            self._term_index = SqliteTermIndex(self)
        return self._term_index

    # -- writing -------------------------------------------------------------------

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
        one ``clock.now()`` as its ``stored_at`` and one commit (one ``fsync``).
        """
        checked = validate_drafts(drafts)
        if not checked:
            return ()
        stored_at = stamp_now(self.clock)
        records = tuple(draft.stored(self.user_scope, stored_at) for draft in checked)
        self._insert(records, batch=True)
        return records

    def _insert(self, records: tuple[StoredMemory, ...], *, batch: bool) -> None:
        """INSERT the records, their postings and the new totals in one transaction."""
        rows = []
        for record in records:  # encode and tokenize before taking the write lock
            counts = (record_terms(record) if record.kind is MemoryKind.CONVERSATION
                      else None)
            rows.append((record, json.dumps(record.to_dict(), ensure_ascii=False,
                                            separators=(",", ":")), counts))
        db = self._db()
        with self._sqlite_errors(), _transaction(db):
            stats = self._stats()
            ordinal = stats.records
            conversations, total_length = stats.conversation_records, stats.total_length
            postings = []
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
                if counts is not None:
                    length = sum(counts.values())
                    postings.extend((self.user_scope, term, ordinal, tf, length, captured)
                                    for term, tf in counts.items())
                    conversations += 1
                    total_length += length
                ordinal += 1
            postings.sort(key=lambda row: row[1])  # in index order: fewer pages touched
            db.executemany(
                "INSERT INTO postings (user_scope, term, ordinal, tf, length, captured_at) "
                "VALUES (?, ?, ?, ?, ?, ?)", postings)
            first_use: dict[str, int] = {}
            for _, term, term_ordinal, *_ in postings:  # sorted by term, then ordinal
                first_use.setdefault(term, term_ordinal)
            # a term the scope already has keeps its earlier first_ordinal
            db.executemany(
                "INSERT OR IGNORE INTO vocabulary (user_scope, term, first_ordinal) "
                "VALUES (?, ?, ?)",
                ((self.user_scope, term, first) for term, first in first_use.items()))
            db.execute(
                "INSERT INTO scope_stats (user_scope, records, conversation_records, "
                "total_length) VALUES (?, ?, ?, ?) ON CONFLICT (user_scope) DO UPDATE SET "
                "records = excluded.records, conversation_records = "
                "excluded.conversation_records, total_length = excluded.total_length",
                (self.user_scope, ordinal, conversations, total_length))


def _upgrade_to_vocabulary(db: sqlite3.Connection) -> None:
    """Version 1 → 2: build the vocabulary from the postings already stored."""
    for statement in VOCABULARY_SCHEMA:
        db.execute(statement)
    db.execute("INSERT INTO vocabulary (user_scope, term, first_ordinal) "
               "SELECT user_scope, term, MIN(ordinal) FROM postings GROUP BY user_scope, term")
    db.execute("PRAGMA user_version = 2")


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


class SqliteTermIndex:
    """The recall engine's inverted index, read from the postings the store writes.

    A consistent snapshot: :meth:`refresh` reads the scope's totals, and
    :meth:`postings` returns only ordinals below the refreshed record count, so the
    statistics and the postings always describe the same records, however many
    other processes append meanwhile. Each term's postings are cached and extended
    with only the rows added since (postings of a stored record never change).
    """

    def __init__(self, store: SqliteMemoryStore) -> None:
        self.store = store
        self._stats = _ScopeStats()
        self._postings: dict[str, tuple[int, Postings]] = {}  # term -> (bound, postings)
        self._verified: set[int] = set()  # ordinals whose record matched its postings
        self.refresh()

    def __repr__(self) -> str:
        return (f"SqliteTermIndex({self.store!r}, records={self._stats.records}, "
                f"searched_records={self.searched_records})")

    def refresh(self) -> None:
        """Catch up with records appended since (by this or any other process)."""
        self._stats = self.store._stats()

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
        cached_bound, cached = self._postings.get(term, (0, None))
        if cached is not None and cached_bound == bound:
            return cached
        rows = self.store._query(
            "SELECT ordinal, tf, length, captured_at FROM postings "
            "WHERE user_scope = ? AND term = ? AND ordinal >= ? AND ordinal < ? "
            "ORDER BY ordinal", (self.store.user_scope, term, cached_bound, bound))
        fresh = _to_postings(rows)
        if cached is not None:
            fresh = Postings(*(np.concatenate((old, new))
                               for old, new in zip(_arrays(cached), _arrays(fresh), strict=True)))
        self._postings[term] = (bound, fresh)
        return fresh

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
            self.store._verify_postings(position, record)
            self._verified.add(position)
        return record


def _arrays(postings: Postings) -> tuple[np.ndarray, ...]:
    return postings.positions, postings.counts, postings.lengths, postings.captured_at


def _to_postings(rows: list[tuple[Any, ...]]) -> Postings:
    if not rows:
        return Postings.empty()
    ordinals, counts, lengths, captured = zip(*rows, strict=True)
    return Postings(np.array(ordinals, dtype=np.int64), np.array(counts, dtype=np.int64),
                    np.array(lengths, dtype=np.int64), np.array(captured, dtype=np.float64))
