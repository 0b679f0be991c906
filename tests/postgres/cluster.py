"""A real PostgreSQL server for the tests: one per test process, started from the
operating system's binaries, stopped at the end.

Import the fixtures you use into a test module (``from tests.postgres.cluster import
pg_server, pg_url``); ``tests/postgres/conftest.py`` imports them all. Without the server
binaries (or psycopg) every test that asks for them is skipped, naming the install
command. Under pytest-xdist each worker process starts its own server in its own
temporary directory (its own socket), so workers never share one.

``pg_url`` is the application role's URL on a database initialized once per server and
emptied before each test: a test sees an empty store and pays a ``TRUNCATE``, not a
new database. ``new_database()`` makes a fresh, uninitialized database (schema tests).
"""

from __future__ import annotations

import itertools

import pytest

from labmem.recall.postgres.server import INSTALL_HINT, LocalPostgres, find_server_binaries

SHARED_DATABASE = "labmem_tests"
_names = itertools.count(1)


def _skip_without_server() -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install "
                        "'labmem[postgres]'")
    if find_server_binaries() is None:
        pytest.skip(f"no PostgreSQL server binaries (initdb, pg_ctl): {INSTALL_HINT}")


def admin_execute(url: str, *statements: str) -> list:
    """Run statements as the superuser (autocommit); the last one's rows, if any."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows: list = []
        for statement in statements:
            cur = conn.execute(statement)
            rows = cur.fetchall() if cur.description else []
        return rows


def create_database(server: LocalPostgres, name: str | None = None) -> str:
    """A new empty database on ``server``; its superuser URL."""
    name = name or f"labmem_t{next(_names)}"
    admin_execute(server.url, f"CREATE DATABASE {name}")
    return server.url_for(database=name)


@pytest.fixture(scope="session")
def pg_server():
    _skip_without_server()
    server = LocalPostgres(fsync=False)  # a crash of this machine loses the test anyway
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def pg_admin_url(pg_server):
    """The superuser's URL on the shared database (schema initialized once)."""
    from labmem.recall.postgres import init_database

    url = create_database(pg_server, SHARED_DATABASE)
    init_database(url)
    return url


@pytest.fixture
def pg_url(pg_server, pg_admin_url):
    """The application role's URL on the shared database, emptied for this test."""
    from labmem.recall.postgres import APP_ROLE

    admin_execute(pg_admin_url, "TRUNCATE memories, scope_stats, vocabulary, record_vectors")
    return pg_server.url_for(database=SHARED_DATABASE, user=APP_ROLE)


@pytest.fixture
def new_database(pg_server):
    """``new_database()``: the superuser URL of a fresh database with no schema."""
    return lambda: create_database(pg_server)
