"""Faults against a real server, with real processes: many writers with colliding ids, a
writer killed inside its transaction, the server restarted between two appends, and
appends seen by a recall in another process at once."""

import multiprocessing
import queue
from collections import Counter

import pytest

from labmem.core.clock import FixedClock
from labmem.core.provenance import MemorySource
from labmem.recall import RecallEngine
from labmem.recall.postgres import PostgresMemoryStore, RemoteMemoryConnectionError
from tests.postgres import workers
from tests.postgres.cluster import admin_execute
from tests.procs import run_processes

SPAWN = multiprocessing.get_context("spawn")
SOURCE = MemorySource("t-0", "conversation_transcript", "Faults", "2026-08-01T12:00:00Z")


def store(url, user="alice"):
    return PostgresMemoryStore(url, user_id=user, clock=FixedClock("2026-08-02T00:00:00Z"))


def add(s, memory_id, content="Chose PostgreSQL for shared memory."):
    return s.append(kind="conversation", memory_id=memory_id, content=content, summary="",
                    source=SOURCE)


def rows(admin_url):
    return admin_execute(admin_url, "SELECT user_scope, ordinal, memory_id FROM memories "
                         "ORDER BY user_scope, ordinal")


WRITERS = 16


def run_forked(target, args_for, count, timeout=120):
    """Run ``count`` forked children (this process has imported labmem already: a child
    starts in milliseconds, not the second a fresh interpreter takes); their results.
    Each child opens its own connection (a store never reuses one across a fork)."""
    fork = multiprocessing.get_context("fork")
    start, results = fork.Barrier(count), fork.Queue()
    procs = [fork.Process(target=target, args=args_for(i, start, results)) for i in range(count)]
    for proc in procs:
        proc.start()
    try:
        got = [results.get(timeout=timeout) for _ in procs]
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    assert [proc.exitcode for proc in procs] == [0] * count
    return got


def test_many_writers_with_colliding_ids_store_each_id_once(pg_url, pg_admin_url):
    """16 processes × 50 appends; 25 ids are every writer's, 25 each writer's own. The
    constraint, not a lock, decides: every id stored once, no write lost, every loser
    told with RemoteMemoryDuplicateError."""
    reports = dict(run_forked(workers.append_colliding,
                              lambda i, start, results: (pg_url, i, start, results), WRITERS))
    outcomes = Counter(outcome for report in reports.values() for _, outcome in report)
    shared, own = workers.SHARED_IDS, workers.APPENDS - workers.SHARED_IDS
    assert outcomes == {"stored": shared + WRITERS * own, "duplicate": (WRITERS - 1) * shared}
    stored = rows(pg_admin_url)
    ids = [memory_id for _, _, memory_id in stored]
    assert len(ids) == len(set(ids)) == shared + WRITERS * own
    assert [ordinal for _, ordinal, _ in stored] == list(range(len(ids)))  # dense
    for j in range(shared):  # each shared id: one winner, the rest refused
        winners = [w for w, report in reports.items() if (f"shared-{j}", "stored") in report]
        assert len(winners) == 1
    records = store(pg_url).read_all()
    assert {r.memory_id for r in records} == set(ids)
    assert len(store(pg_url)) == len(ids)


def test_a_writer_killed_inside_its_transaction_leaves_nothing(pg_url, pg_admin_url):
    alice = store(pg_url)
    add(alice, "before")
    results = SPAWN.Queue()
    child = SPAWN.Process(target=workers.append_many_then_hang, args=(pg_url, 200, results))
    child.start()
    try:
        assert results.get(timeout=60) == "inside the transaction"
        # the 200 rows are inserted but not committed: no one sees them
        assert [r.memory_id for r in store(pg_url).read_all()] == ["before"]
        # another user's writer does not wait for alice's open transaction
        add(store(pg_url, "bob"), "bob-1")
    finally:
        child.kill()
        child.join(30)
    assert child.exitcode == -9
    add(alice, "after")  # waits until the server has rolled the dead writer back
    assert [r.memory_id for r in store(pg_url).read_all()] == ["before", "after"]
    assert admin_execute(pg_admin_url, "SELECT count(*) FROM memories WHERE memory_id "
                         "LIKE 'batch-%'") == [(0,)]
    assert admin_execute(pg_admin_url, "SELECT count(*) FROM vocabulary "
                         "WHERE term = 'batch'") == [(0,)]
    assert len(store(pg_url)) == 2


def test_a_restart_between_two_appends_loses_nothing(pg_server, pg_url):
    alice = store(pg_url)
    first = add(alice, "m-1")
    pg_server.restart()
    second = add(alice, "m-2")  # the lost connection is opened again, once
    assert store(pg_url).read_all() == (first, second)
    assert alice.get("m-1") == first


def test_a_stopped_server_is_a_clear_labmem_error_then_recovers(pg_server, pg_url):
    alice = store(pg_url)
    first = add(alice, "m-1")
    pg_server.stop()
    try:
        with pytest.raises(RemoteMemoryConnectionError, match="cannot connect.*server is "
                           "running") as err:
            add(alice, "m-2")
        assert str(err.value) == (  # the same words on every machine: no socket path
            f"database {alice.name!r}: cannot connect (No such file or directory); check "
            "that the server is running and the URL (host, port, user, database)")
        with pytest.raises(RemoteMemoryConnectionError):
            alice.read_all()
    finally:
        pg_server.start()
    second = add(alice, "m-2")
    assert store(pg_url).read_all() == (first, second)


def test_an_append_is_seen_at_once_by_a_recall_in_another_process(pg_url):
    alice = store(pg_url)
    add(alice, "m-1", "We keep memory on a PostgreSQL server.")
    assert run_processes(workers.recall_ids,
                         lambda i, s: (pg_url, "postgresql server", s.results)) == [["m-1"]]
    engine = RecallEngine(alice, scorer="bm25")
    assert [h.memory_id for h in engine.recall("shared hosts").hits] == []
    assert run_processes(workers.append_one, lambda i, s: (
        pg_url, "m-2", "Two hosts share one user's memory.", s.results)) == ["stored"]
    assert [h.memory_id for h in engine.recall("shared hosts").hits] == ["m-2"]


def test_nothing_is_left_waiting(pg_admin_url):
    """No test here leaves a transaction open on the server."""
    try:
        found = admin_execute(pg_admin_url, "SELECT count(*) FROM pg_stat_activity WHERE "
                              "state LIKE 'idle in transaction%'")
    except Exception:  # noqa: BLE001
        pytest.skip("pg_stat_activity not readable")
    assert found == [(0,)]


_ = queue  # the children's queues are multiprocessing ones


def test_a_connection_lost_while_committing_is_not_retried(pg_url, pg_admin_url, monkeypatch):
    """Lost during COMMIT, a write may or may not be stored; the store does not retry it
    blindly (a retry could store it twice, or call a stored record a duplicate): it says
    so, and ``get`` tells the truth. Here the server ended the session just before the
    COMMIT arrived, so nothing was stored."""
    import psycopg

    alice = store(pg_url)
    add(alice, "m-1")
    pid = alice.connection.info.backend_pid
    original = psycopg.Cursor.execute

    def execute(cur, query, *args, **kwargs):
        if query == "COMMIT" and cur.connection.info.backend_pid == pid:
            admin_execute(pg_admin_url, f"SELECT pg_terminate_backend({pid})")
        return original(cur, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    with pytest.raises(RemoteMemoryConnectionError, match="may or may not be stored"):
        add(alice, "m-2")
    monkeypatch.undo()
    assert alice.get("m-2") is None  # the next call opens a new connection
    assert [r.memory_id for r in store(pg_url).read_all()] == ["m-1"]


def test_a_forked_child_leaves_its_parents_session_alone(pg_url):
    """A store used in a child after ``fork`` opens its own connection and never closes
    the one it inherited (closing it would end the parent's session on the server)."""
    alice = store(pg_url)
    add(alice, "m-1")
    parent_pid = alice.connection.info.backend_pid
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    child = fork.Process(target=workers.append_with, args=(alice, "m-2", results))
    child.start()
    child_pid = results.get(timeout=60)
    child.join(30)
    assert child.exitcode == 0 and child_pid != parent_pid
    conn = alice.connection
    assert conn.info.backend_pid == parent_pid and not conn.broken
    assert conn.execute("SELECT count(*) FROM memories").fetchone() == (2,)
