"""Child-process code for the s12 store tests (importable under 'spawn')."""

from __future__ import annotations

import contextlib


def append_same_id(path, start, pause, noop_lock, results, read_first=True):
    """One writer in the duplicate-id race (``read_first=False``: it appends before any
    read, so a recall sidecar beside the file may vouch for the ids of its prefix).

    ``pause`` widens the window between the duplicate check and the write: a writer
    that passed the check waits (up to 2 s) for the others before writing. With the
    real lock only one writer is ever inside that window, so the wait times out;
    with a no-op lock every writer passes the check before anyone writes.
    """
    from labmem.core import storage
    from labmem.core.clock import FixedClock
    from labmem.core.errors import LabmemError
    from labmem.core.provenance import MemorySource
    from labmem.recall.store import MemoryKind, RemoteMemoryDuplicateError, RemoteMemoryStore
    from labmem.resilience import pause_before

    factory = (lambda p: contextlib.nullcontext()) if noop_lock else storage.file_lock
    store = RemoteMemoryStore(path, user_id="alice", clock=FixedClock("2026-08-01T12:00:00Z"),
                              lock_factory=factory)
    if read_first:
        store.read_all()
    pause_before(storage.JsonlLog, "append", pause)
    start.wait()
    try:
        store.append(kind=MemoryKind.CONVERSATION, memory_id="memory-42",
                     content="Selected SQLite WAL for local persistence.",
                     summary="Selected SQLite WAL.",
                     source=MemorySource("transcript-42", "conversation_transcript",
                                         "Persistence decision", "2026-08-01T12:00:00Z"))
        results.put("stored")
    except RemoteMemoryDuplicateError:
        results.put("duplicate")
    except LabmemError as exc:  # e.g. the log noticing a write it did not expect
        results.put(f"refused: {type(exc).__name__}")
