"""Code that the SQLite store's tests run in real child processes (importable under 'spawn')."""

from __future__ import annotations

import sqlite3
import sys
import time

NOW = "2026-08-01T12:00:00Z"


def _source(title="Persistence decision"):
    from labmem.core.provenance import MemorySource

    return MemorySource("transcript-42", "conversation_transcript", title, NOW)


def _store(path, user="alice"):
    from labmem.core.clock import FixedClock
    from labmem.recall.sqlite_store import SqliteMemoryStore

    return SqliteMemoryStore(path, user_id=user, clock=FixedClock(NOW))


def append_same_id(path, start, pause, results):
    """One writer in the duplicate-id race on a fresh database file.

    ``start`` lines the writers up; ``pause`` holds each one again right before its
    INSERT transaction, so that all of them try to insert within the same instant.
    """
    from labmem.core.errors import LabmemError
    from labmem.recall.sqlite_store import SqliteMemoryStore
    from labmem.recall.store import RemoteMemoryDuplicateError
    from labmem.resilience import pause_before

    store = _store(path)
    pause_before(SqliteMemoryStore, "_insert", pause)
    start.wait()
    try:
        store.append(kind="conversation", memory_id="memory-42",
                     content="Selected SQLite WAL for local persistence.",
                     summary="Selected SQLite WAL.", source=_source())
        results.put("stored")
    except RemoteMemoryDuplicateError:
        results.put("duplicate")
    except LabmemError as exc:
        results.put(f"refused: {type(exc).__name__}: {exc}")
    finally:
        store.close()


def open_fresh(path, start, results):
    """Open a store on a file that other processes are creating at the same moment."""
    from labmem.core.errors import LabmemError

    store = _store(path)
    start.wait()
    try:
        results.put(f"opened, {len(store)} records")
    except LabmemError as exc:
        results.put(f"refused: {exc}")
    finally:
        store.close()


class CheckThenInsert:
    """The control: the duplicate rule as a SELECT, then an INSERT, and no UNIQUE.

    Each statement is its own (autocommit) transaction, like a client that asks
    "is this id taken?" and then writes. Nothing ties the two together.
    """

    def __init__(self, path):
        self.db = sqlite3.connect(path, timeout=10, isolation_level=None)

    def taken(self, memory_id):
        row = self.db.execute("SELECT 1 FROM naive WHERE memory_id = ?", (memory_id,))
        return row.fetchone() is not None

    def insert(self, memory_id):
        self.db.execute("INSERT INTO naive (memory_id) VALUES (?)", (memory_id,))


def check_then_insert(path, start, pause, results):
    from labmem.resilience import pause_before

    client = CheckThenInsert(path)
    pause_before(CheckThenInsert, "insert", pause)  # a slow network between check and write
    start.wait()
    if client.taken("memory-42"):
        results.put("duplicate")
    else:
        client.insert("memory-42")
        results.put("stored")
    client.db.close()


def append_distinct(path, user, worker, count, start, results):
    """Many distinct ids from one process: single appends and small batches mixed."""
    store = _store(path, user)
    start.wait()
    stored = []
    i = 0
    while i < count:
        if i % 5 == 0 and i + 2 <= count:
            batch = store.append_many(
                {"kind": "conversation", "memory_id": f"w{worker}-{j}",
                 "content": f"worker {worker} note {j} 记忆", "summary": "", "source": _source()}
                for j in (i, i + 1))
            stored.extend(r.memory_id for r in batch)
            i += 2
        else:
            record = store.append(kind="conversation", memory_id=f"w{worker}-{i}",
                                  content=f"worker {worker} note {i}", summary="",
                                  source=_source())
            stored.append(record.memory_id)
            i += 1
    store.close()
    results.put((user, stored))


def append_after_lock(path, results):
    """Append once while another connection holds the write lock; report the wait.

    It puts "ready" first, just before it starts waiting, then the seconds it waited.
    """
    store = _store(path)
    len(store)  # open before timing
    results.put("ready")
    started = time.perf_counter()
    store.append(kind="conversation", memory_id="waited", content="I waited for the lock.",
                 summary="", source=_source())
    results.put(time.perf_counter() - started)
    store.close()


def batches_forever(path, batch_size):
    """Append batches until killed; prints one line per committed batch."""
    store = _store(path)
    n = 0
    while True:
        store.append_many(
            {"kind": "conversation", "memory_id": f"b{n}-{j}",
             "content": f"batch {n} record {j} " + "filler words " * 20, "summary": "",
             "source": _source()}
            for j in range(batch_size))
        n += 1
        print(n, flush=True)


if __name__ == "__main__":  # python sqlite_workers.py batches <path> <size>
    if sys.argv[1] == "batches":
        batches_forever(sys.argv[2], int(sys.argv[3]))
