"""One store's connection to the server: its scope set at connect, errors made labmem's.

A connection carries its user scope in the session setting ``labmem.user_scope`` (set
once, right after connecting); every row-level-security policy compares a row's scope
with it. *Why a setting and not a role per user?* A role per user scope lets the server
prove who is asking (the scope cannot be changed by the client), but needs an
administrator to create a role for every new user and a connection pool per user. A
setting needs one role for everyone and no admin step per user; the policies then
protect against every query that forgets its ``WHERE user_scope = …`` (a bug, a
hand-written ``SELECT``), not against a client that runs ``SET labmem.user_scope`` on
purpose. labmem's hosts are trusted code serving many users, so the setting fits; a
service that lets untrusted code send SQL would use a role per scope.

A lost connection (the server restarted, a network blip) is opened again once: a read is
simply asked again; a write is retried only when it failed before its ``COMMIT`` was
sent (nothing of it can be stored). A failure *during* ``COMMIT`` has an unknown
outcome, and :class:`RemoteMemoryConnectionError` says so instead of guessing. No
psycopg exception leaves this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

from labmem.recall.postgres.urls import database_name
from labmem.recall.store import (
    RemoteMemoryError,
    RemoteMemoryScopeError,
)

__all__ = ["RemoteMemoryConnectionError", "StoreConnection", "admin_connection",
           "pg_errors", "database_name", "CONNECT_TIMEOUT_SECONDS"]

T = TypeVar("T")
CONNECT_TIMEOUT_SECONDS = 10


class RemoteMemoryConnectionError(RemoteMemoryError):
    """The database server cannot be reached (or was lost mid-request)."""


def _connect(url: str) -> psycopg.Connection:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except psycopg.Error as exc:
        raise RemoteMemoryConnectionError(
            f"database {database_name(url)!r}: cannot connect ({_why_not(exc)}); check "
            "that the server is running and the URL (host, port, user, database)") from None


def _why_not(exc: psycopg.Error) -> str:
    """libpq's reason without where it tried ('connection to server on socket "/tmp/…"
    failed: No such file or directory' → 'No such file or directory'): the same words on
    every machine, and no socket path or host in a message."""
    reason = _first_line(exc).rpartition(" failed: ")[2]
    return " ".join(reason.replace("FATAL:", "").split())


@contextmanager
def admin_connection(url: str) -> Iterator[psycopg.Connection]:
    """A plain autocommit connection for the admin functions, closed at the end."""
    conn = _connect(url)
    try:
        yield conn
    finally:
        conn.close()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@contextmanager
def pg_errors(conn: psycopg.Connection | None, name: str | None = None) -> Iterator[None]:
    """Turn psycopg's exceptions into labmem's, naming the database."""
    where = f"database {name or (conn.info.dbname if conn is not None else '?')!r}"
    try:
        yield
    except psycopg.OperationalError as exc:
        raise RemoteMemoryConnectionError(
            f"{where}: the connection failed ({_first_line(exc)}); nothing more was "
            "done — retry when the server is back") from None
    except psycopg.errors.InsufficientPrivilege as exc:
        if "row-level security" in str(exc):
            raise RemoteMemoryScopeError(
                f"{where}: the server refused a row of another user scope "
                f"({_first_line(exc)}); a store writes only its own scope") from None
        raise RemoteMemoryError(
            f"{where}: the server refused ({_first_line(exc)}); the labmem role may read "
            "and append records, nothing else") from None
    except psycopg.Error as exc:
        raise RemoteMemoryError(f"{where}: PostgreSQL refused: {_first_line(exc)}") from None


class StoreConnection:
    """The connection of one store instance, opened on first use (and again in a child
    process after ``fork``), with the scope setting applied and the schema checked."""

    def __init__(self, url: str, user_scope: str,
                 on_connect: Callable[[psycopg.Cursor], None]) -> None:
        self.url = url
        self.name = database_name(url)
        self.user_scope = user_scope
        self._on_connect = on_connect
        self._conn: psycopg.Connection | None = None
        self._pid = 0

    def _open(self) -> psycopg.Connection:
        if self._conn is None or self._pid != os.getpid() or self._conn.closed:
            # a connection inherited over fork is the parent's session: dropped here, never
            # used (psycopg does not end a session from another process than its own)
            self._conn = None
            conn = _connect(self.url)
            try:
                with pg_errors(conn, self.name), conn.cursor() as cur:
                    cur.execute("SELECT set_config('labmem.user_scope', %s, false)",
                                (self.user_scope,))
                    self._on_connect(cur)
            except BaseException:
                conn.close()
                raise
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

    @property
    def raw(self) -> psycopg.Connection:
        """The psycopg connection itself, scope applied (tests run raw SQL on it)."""
        return self._open()

    def _lost(self) -> bool:
        conn = self._conn
        return conn is None or conn.closed or conn.broken

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One read statement (its own snapshot); asked again once on a lost connection."""
        for attempt in (1, 2):
            conn = self._open()
            try:
                with pg_errors(conn, self.name), conn.cursor() as cur:
                    cur.execute(sql, params)
                    return cur.fetchall()
            except RemoteMemoryConnectionError:
                if not self._lost() or attempt == 2:
                    raise
                self.close()
        raise AssertionError("unreachable")

    def transaction(self, work: Callable[[psycopg.Cursor], T]) -> T:
        """``work(cursor)`` in one transaction: committed whole, or rolled back whole.
        Retried once on a fresh connection when the connection was lost before COMMIT."""
        for attempt in (1, 2):
            conn = self._open()
            committing = False
            try:
                with pg_errors(conn, self.name), conn.cursor() as cur:
                    cur.execute("BEGIN")
                    try:
                        result = work(cur)
                    except BaseException:
                        if not self._lost():
                            cur.execute("ROLLBACK")
                        raise
                    committing = True
                    cur.execute("COMMIT")
                    return result
            except RemoteMemoryConnectionError:
                if not self._lost():
                    raise
                self.close()
                if committing:
                    raise RemoteMemoryConnectionError(
                        f"database {self.name!r}: the connection was lost while committing; "
                        "the write may or may not be stored — read it back (get) before "
                        "retrying") from None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
