"""s12 remote memory on a PostgreSQL server: many users, many hosts, one contract.

:class:`PostgresMemoryStore` keeps the promises of the JSONL and SQLite stores (same
methods, same validation, same errors and messages) with the database server doing
what the file lock only imitates:

* **Duplicates** are refused by the constraint ``UNIQUE (user_scope, memory_id)``. There
  is no client lock and no check-then-write: the ``INSERT`` fails, the transaction rolls
  back, and the caller gets :class:`RemoteMemoryDuplicateError`.
* **Order**: each record gets its scope's next ordinal from ``scope_stats``, updated in
  the same transaction (``INSERT … ON CONFLICT DO UPDATE … RETURNING``): that row lock
  queues writers of one user, while writers of other users never wait.
* **Scope** is enforced by the server (row-level security,
  :mod:`labmem.recall.postgres.schema`); the queries still say ``WHERE user_scope = …``,
  which the primary key serves.
* **Recall**: each conversation row carries the terms labmem's analyzer gives it
  (:mod:`labmem.recall.postgres.terms`), written in the record's own transaction; the
  index (:mod:`labmem.recall.postgres.index`) reads candidates through a GIN index.
* **Tampering**: a row whose JSON does not decode, disagrees with its columns, or whose
  content-derived id no longer matches, is refused as corruption naming the row.

Each record is stored as the JSON object the JSONL store writes
(:meth:`StoredMemory.to_dict`), plus the columns the queries need.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from typing import Any

import psycopg

from labmem.core.clock import Clock, resolve_clock
from labmem.core.errors import validated_as
from labmem.core.provenance import scope_digest
from labmem.core.validation import parse_json, require_int
from labmem.recall.postgres.connection import StoreConnection
from labmem.recall.postgres.schema import require_schema
from labmem.recall.postgres.terms import analyzed, vocabulary_rows
from labmem.recall.protocols import AppendsInBatches, KeepsTermIndex, KeepsVectors
from labmem.recall.store import (
    AppendsThroughInsert,
    MemoryKind,
    RecallStore,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryValidationError,
    StoredMemory,
    derived_id_problem,
    duplicate_message,
    record_from_object,
)

__all__ = ["PostgresMemoryStore"]

_validated = partial(validated_as, RemoteMemoryValidationError)
_SELECT = "SELECT ordinal, memory_id, user_scope, record FROM memories "


class PostgresMemoryStore(AppendsThroughInsert, RecallStore, KeepsTermIndex,
                          AppendsInBatches, KeepsVectors):
    """Append-only, user-scoped record store on a PostgreSQL database (``url``).

    ``url`` is a libpq URL for the application role (``labmem db init`` creates the
    schema and the role once). One connection per instance, opened on first use and
    again after a lost connection; ``close()`` or ``with`` ends it. Any number of
    processes and hosts may use the same database at once.
    """

    def __init__(self, url: str, *, user_id: str, clock: Clock | None = None) -> None:
        self.user_scope = _validated(scope_digest, user_id, field="user_id")
        if not isinstance(url, str) or not url.strip():
            raise RemoteMemoryValidationError(
                "url", f"must be a PostgreSQL URL, got {url!r}",
                "pass postgresql://labmem_app@host/database")
        self.clock = resolve_clock(clock)
        self.url = url
        self._db = StoreConnection(url, self.user_scope, require_schema)
        self.name = self._db.name
        self._records: list[StoredMemory] = []  # read_all cache, index = ordinal
        self._decoded: dict[int, StoredMemory] = {}  # record_at cache (records never change)
        self._term_index = None

    def __repr__(self) -> str:
        return f"PostgresMemoryStore({self.name!r}, user_scope={self.user_scope!r})"

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        self._db.close()

    def __enter__(self) -> PostgresMemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connection(self) -> psycopg.Connection:
        """This store's own psycopg connection, its scope applied (for raw SQL: row-level
        security shows it this scope's rows only)."""
        return self._db.raw

    # -- reading -------------------------------------------------------------------

    def _decode_row(self, ordinal: int, memory_id: str, scope: str,
                    payload: Any) -> StoredMemory:
        where = f"row {ordinal} of user scope {self.user_scope} (memory_id {memory_id!r})"
        try:
            if not isinstance(payload, str):
                raise TypeError(f"the record column holds {type(payload).__name__}, not JSON")
            record = record_from_object(parse_json(payload))
        except (TypeError, ValueError) as exc:
            raise RemoteMemoryCorruptionError(self.name, None, f"{where}: {exc}") from None
        if (scope != self.user_scope or record.user_scope != self.user_scope
                or record.memory_id != memory_id):
            raise RemoteMemoryCorruptionError(
                self.name, None,
                f"{where}: its JSON says user scope {record.user_scope!r}, memory_id "
                f"{record.memory_id!r}, its columns {scope!r}, {memory_id!r} — they disagree")
        problem = derived_id_problem(record)
        if problem is not None:
            raise RemoteMemoryCorruptionError(self.name, None, f"{where}: {problem}")
        return record

    def read_all(self) -> tuple[StoredMemory, ...]:
        """Every record of this user, in storage order (only new rows are decoded)."""
        start = len(self._records)
        rows = self._db.query(_SELECT + "WHERE user_scope = %s AND ordinal >= %s "
                              "ORDER BY ordinal", (self.user_scope, start))
        decoded = []
        for expected, row in enumerate(rows, start):
            if row[0] != expected:
                raise RemoteMemoryCorruptionError(
                    self.name, None, f"user scope {self.user_scope} has no row {expected} "
                    f"(next is {row[0]}); ordinals must be dense")
            decoded.append(self._decode_row(*row))
        self._records.extend(decoded)  # only when every new row decoded
        return tuple(self._records)

    def get(self, memory_id: str) -> StoredMemory | None:
        """The record with ``memory_id``, or ``None``."""
        if not isinstance(memory_id, str):
            return None
        rows = self._db.query(_SELECT + "WHERE user_scope = %s AND memory_id = %s",
                              (self.user_scope, memory_id))
        return self._decode_row(*rows[0]) if rows else None

    def record_at(self, ordinal: int) -> StoredMemory:
        """The record at storage position ``ordinal`` (0-based, this user's records)."""
        _validated(require_int, ordinal, "ordinal", minimum=0)
        if ordinal < len(self._records):
            return self._records[ordinal]
        if ordinal in self._decoded:
            return self._decoded[ordinal]
        rows = self._db.query(_SELECT + "WHERE user_scope = %s AND ordinal = %s",
                              (self.user_scope, ordinal))
        if not rows:
            raise RemoteMemoryValidationError(
                "ordinal", f"{ordinal} is past the last stored record",
                "use an ordinal below len(store)")
        record = self._decoded[ordinal] = self._decode_row(*rows[0])
        return record

    def latest_profile(self) -> StoredMemory | None:
        """The profile snapshot captured last (ties: greatest ``memory_id``), or ``None``."""
        rows = self._db.query(_SELECT + "WHERE user_scope = %s AND kind = 'profile' "
                              "ORDER BY captured_at DESC, memory_id DESC LIMIT 1",
                              (self.user_scope,))
        return self._decode_row(*rows[0]) if rows else None

    def stats(self) -> tuple[int, int, int]:
        """(records, conversation records, their total length) of this scope, checked."""
        rows = self._db.query("SELECT records, conversation_records, total_length "
                              "FROM scope_stats WHERE user_scope = %s", (self.user_scope,))
        if not rows:
            return 0, 0, 0
        records, conversations, total = rows[0]
        if min(rows[0]) < 0 or conversations > records:
            raise RemoteMemoryCorruptionError(
                self.name, None, f"scope_stats of user scope {self.user_scope} holds "
                f"{rows[0]!r}, not counts of its records")
        return int(records), int(conversations), int(total)

    def __len__(self) -> int:
        return self.stats()[0]

    def is_empty(self) -> bool:
        """Whether this user has no record (one indexed look-up; nothing decoded)."""
        return not self._db.query("SELECT 1 FROM memories WHERE user_scope = %s LIMIT 1",
                                  (self.user_scope,))

    def records_from(self, ordinal: int, end: int) -> tuple[StoredMemory, ...]:
        """The records at ordinals ``ordinal`` to ``end`` − 1, in order (what stored
        vectors read to embed the records they do not cover yet)."""
        records = self.read_all()
        if len(records) < end:
            raise RemoteMemoryCorruptionError(
                self.name, None, f"user scope {self.user_scope} has {len(records)} rows, "
                f"fewer than the {end} its counter promised")
        return records[ordinal:end]

    def memory_ids_below(self, end: int) -> list[str]:
        """The memory ids of ordinals 0 to ``end`` − 1, in order."""
        return [row[0] for row in self._db.query(
            "SELECT memory_id FROM memories WHERE user_scope = %s AND ordinal < %s "
            "ORDER BY ordinal", (self.user_scope, end))]

    def vector_rows(self, model: str) -> list[tuple[Any, ...]]:
        """(ordinal, memory_id, conversation, inv_norm, codes, crc32) of ``model``'s stored
        vectors for this scope, by ordinal (:mod:`labmem.recall.vectors`)."""
        return self._db.query(
            "SELECT ordinal, memory_id, conversation, inv_norm, codes, crc32 FROM "
            "record_vectors WHERE user_scope = %s AND model = %s ORDER BY ordinal",
            (self.user_scope, model))

    def write_vector_rows(self, model: str, rows: Iterable[tuple[Any, ...]], *,
                          replace_all: bool = False) -> None:
        """Store ``model``'s vectors in one transaction; ``replace_all`` first drops this
        scope's rows of ``model``. A row already there is kept (another process or host
        wrote the same record's vector first)."""
        rows = [(self.user_scope, model, *row) for row in rows]

        def write(cur: psycopg.Cursor) -> None:
            if replace_all:
                cur.execute("DELETE FROM record_vectors WHERE user_scope = %s AND model = %s",
                            (self.user_scope, model))
            if rows:
                cur.executemany(
                    "INSERT INTO record_vectors (user_scope, model, ordinal, memory_id, "
                    "conversation, inv_norm, codes, crc32) VALUES (%s, %s, %s, %s, %s, %s, "
                    "%s, %s) ON CONFLICT DO NOTHING", rows)

        self._db.transaction(write)

    def term_index(self):
        """The recall index over this user's records on the server (one per store)."""
        if self._term_index is None:
            from labmem.recall.postgres.index import PostgresTermIndex

            self._term_index = PostgresTermIndex(self)
        return self._term_index

    # -- writing (append and append_many: AppendsThroughInsert) ---------------------

    def _insert(self, records: tuple[StoredMemory, ...], *, batch: bool) -> None:
        """Encode and analyze first (no transaction open meanwhile), then one transaction:
        take the next ordinals, insert the rows (one statement), add the new vocabulary.
        A duplicate id anywhere rolls it all back; then the error names the first draft
        whose id is stored."""
        encoded = [(r, json.dumps(r.to_dict(), ensure_ascii=False, separators=(",", ":")),
                    *analyzed(r)) for r in records]
        conversations = sum(1 for r in records if r.kind is MemoryKind.CONVERSATION)
        length = sum(row[4] for row in encoded)
        scope = self.user_scope

        def write(cur: psycopg.Cursor) -> None:
            cur.execute(_NEXT_ORDINALS, (scope, len(records), conversations, length))
            first = cur.fetchone()[0] - len(records)
            ordinals = list(range(first, first + len(records)))
            try:
                cur.execute(_INSERT_ROWS, (
                    scope, ordinals, [r.memory_id for r in records],
                    [r.kind.value for r in records],
                    [r.source.captured_at.timestamp() for r in records],
                    [row[1] for row in encoded],
                    [None if row[2] is None else "\t".join(row[2]) for row in encoded],
                    [None if row[3] is None else ",".join(map(str, row[3])) for row in encoded],
                    [row[4] for row in encoded]))
            except psycopg.errors.UniqueViolation as exc:
                if exc.diag.constraint_name == "memories_one_id_per_scope":
                    raise _IdTaken from None
                raise RemoteMemoryCorruptionError(
                    self.name, None, f"scope_stats of user scope {scope} gives ordinal "
                    f"{first}, which is already stored; the counter disagrees with the rows"
                ) from None
            vocabulary = vocabulary_rows((scope, o, row[2])
                                         for o, row in zip(ordinals, encoded, strict=True))
            cur.execute(_INSERT_VOCABULARY, (scope, [v[1] for v in vocabulary],
                                             [v[2] for v in vocabulary]))

        try:
            self._db.transaction(write)
        except _IdTaken:
            raise self._duplicate(records, batch) from None

    def _duplicate(self, records: tuple[StoredMemory, ...],
                   batch: bool) -> RemoteMemoryDuplicateError:
        """The constraint refused the write (the server does not say which key: it hides
        key values from a table under row-level security); name the first draft whose id
        is stored."""
        ids = [r.memory_id for r in records]
        stored = {row[0] for row in self._db.query(
            "SELECT memory_id FROM memories WHERE user_scope = %s AND memory_id = ANY(%s)",
            (self.user_scope, ids))}
        index = next((i for i, memory_id in enumerate(ids) if memory_id in stored), 0)
        return RemoteMemoryDuplicateError(
            duplicate_message(ids[index], self.name, index if batch else None))


class _IdTaken(Exception):
    """Inside the write transaction: the unique constraint refused an id (rolled back)."""


# The scope's counter: a new row, or the old one plus this write; RETURNING the new total.
# Its row lock queues writers of one scope until commit (so ordinals stay dense).
_NEXT_ORDINALS = (
    "INSERT INTO scope_stats AS s (user_scope, records, conversation_records, total_length) "
    "VALUES (%s, %s, %s, %s) ON CONFLICT (user_scope) DO UPDATE SET "
    "records = s.records + excluded.records, "
    "conversation_records = s.conversation_records + excluded.conversation_records, "
    "total_length = s.total_length + excluded.total_length RETURNING records")
# Every row of a write in one statement: parallel arrays, a record's terms tab-joined and
# its counts comma-joined (a term never holds a tab), split again on the server.
_INSERT_ROWS = (
    "INSERT INTO memories (user_scope, ordinal, memory_id, kind, captured_at, record, terms, "
    "term_counts, length) SELECT %s, o, m, k, c, r, string_to_array(t, E'\\t'), "
    "string_to_array(n, ',')::integer[], l FROM unnest(%s::bigint[], %s::text[], %s::text[], "
    "%s::float8[], %s::text[], %s::text[], %s::text[], %s::integer[]) "
    "AS u(o, m, k, c, r, t, n, l)")
_INSERT_VOCABULARY = (
    "INSERT INTO vocabulary (user_scope, term, first_ordinal) SELECT %s, t, o "
    "FROM unnest(%s::text[], %s::bigint[]) AS u(t, o) ON CONFLICT DO NOTHING")
