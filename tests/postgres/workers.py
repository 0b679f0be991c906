"""Child-process code for the PostgreSQL fault tests (importable under 'spawn')."""

from __future__ import annotations

import time

SHARED_IDS = 25  # of each writer's appends, how many use ids every writer uses
APPENDS = 50


def _store(url: str, user: str = "alice"):
    from labmem.core.clock import FixedClock
    from labmem.recall.postgres import PostgresMemoryStore

    return PostgresMemoryStore(url, user_id=user, clock=FixedClock("2026-08-02T00:00:00Z"))


def _source(n):
    from labmem.core.provenance import MemorySource

    return MemorySource(f"t-{n}", "conversation_transcript", "Race", "2026-08-01T12:00:00Z")


def writer_ids(worker: int) -> list[str]:
    """The ids writer ``worker`` appends: the shared ones first, then its own."""
    return [f"shared-{j}" if j < SHARED_IDS else f"w{worker}-{j}" for j in range(APPENDS)]


def append_colliding(url, worker, start, results):
    """One of many writers: append every id of :func:`writer_ids`, report each outcome."""
    from labmem.core.errors import LabmemError
    from labmem.recall.store import RemoteMemoryDuplicateError

    store = _store(url)
    store.is_empty()  # connected before the race starts
    start.wait()
    outcomes = []
    for memory_id in writer_ids(worker):
        try:
            store.append(kind="conversation", memory_id=memory_id, summary="",
                         content=f"written by worker {worker} as {memory_id}",
                         source=_source(memory_id))
            outcomes.append((memory_id, "stored"))
        except RemoteMemoryDuplicateError:
            outcomes.append((memory_id, "duplicate"))
        except LabmemError as exc:
            outcomes.append((memory_id, f"refused: {type(exc).__name__}: {exc}"))
    results.put((worker, outcomes))


def append_many_then_hang(url, size, results):
    """Start an ``append_many`` of ``size`` drafts and stop inside its transaction (after
    the rows are inserted, before the vocabulary and the commit) until killed."""
    import labmem.recall.postgres.store as module

    def hang(rows):
        results.put("inside the transaction")
        time.sleep(120)
        raise AssertionError("should have been killed")

    module.vocabulary_rows = hang
    _store(url).append_many([{"kind": "conversation", "content": f"batch record {i}",
                              "summary": "", "source": _source(i), "memory_id": f"batch-{i}"}
                             for i in range(size)])


def recall_ids(url, text, results):
    """A recall in a fresh process: the ids of the hits."""
    from labmem.recall import RecallEngine

    results.put([hit.memory_id for hit in RecallEngine(_store(url), scorer="bm25")
                 .recall(text).hits])


def append_one(url, memory_id, content, results):
    _store(url).append(kind="conversation", memory_id=memory_id, content=content, summary="",
                       source=_source(memory_id))
    results.put("stored")


def append_with(store, memory_id, results):
    """A forked child appending through the store object it inherited: it must open its
    own connection; reports that connection's server process id."""
    import gc

    store.append(kind="conversation", memory_id=memory_id, content="from the child",
                 summary="", source=_source(memory_id))
    gc.collect()  # whatever the child dropped is finalized now, not at some later point
    results.put(store.connection.info.backend_pid)
