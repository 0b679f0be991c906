"""The duplicate-id race of chapter s12, run for real against three stores.

N writer *processes* append a record with the same ``memory_id`` at the same moment:

* ``"file, no lock"`` — the from-scratch store of the chapter's Part 1
  (:mod:`labmem.scratch.s12`): it checks the file for the id, then writes, with nothing
  between the two that another process respects;
* ``"file + lock"`` — the library's :class:`~labmem.recall.store.RemoteMemoryStore`: the
  check and the write happen inside one cross-process file lock;
* ``"postgres"`` — :class:`~labmem.recall.postgres.PostgresMemoryStore`: no client-side
  check at all; the server's ``UNIQUE (user_scope, memory_id)`` index refuses every
  insert but the first.

The file writers are held for a moment between their check and their write (as a slow
disk would hold them), so every writer has checked before any writes: the window a lock
must close is open every time, not once in a thousand runs. Workers are started with the
``spawn`` method — fresh interpreters, like separate programs — so the function they run
lives here, importable, not in a notebook cell.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.core.errors import InvalidInputError, LabmemError
from labmem.core.validation import parse_json

__all__ = ["RACE_BACKENDS", "RACE_ID", "RaceOutcome", "race_same_id"]

RACE_BACKENDS = ("file, no lock", "file + lock", "postgres")
RACE_ID = "memory-42"
USER_ID = "alice"
NOW = "2026-08-01T12:00:00Z"
HOLD_SECONDS = 3.0  # how long a writer that passed its check waits for the others
_SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class RaceOutcome:
    """What N writers were told, and how many copies of the id the store holds after."""

    backend: str
    writers: int
    told: tuple[tuple[str, int], ...]  # (what a writer was told, how many), sorted
    copies: int

    def count(self, answer: str) -> int:
        return dict(self.told).get(answer, 0)

    def row(self) -> dict[str, Any]:
        """One table row: the backend, the answers, the copies stored."""
        return {"store": self.backend, "writers": self.writers,
                "told 'stored'": self.count("stored"),
                "refused as duplicate": sum(n for answer, n in self.told
                                            if answer.startswith("refused")),
                f"copies of {RACE_ID}": self.copies}


def _held(function, barrier):
    """``function``, first waiting (up to HOLD_SECONDS) for every writer to reach it."""
    def held(*args, **kwargs):
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=HOLD_SECONDS)
        return function(*args, **kwargs)

    return held


def _scratch_writer(path: str, hold):
    from labmem.scratch import s12 as scratch

    store = scratch.RemoteMemoryStore(Path(path), scratch.scope_of(USER_ID))
    at = scratch.utc_time(NOW)
    record = scratch.StoredMemory(
        RACE_ID, store.user_scope, scratch.CONVERSATION, "Selected SQLite WAL.", "",
        scratch.MemorySource("t-42", "conversation_transcript", "persistence decision", at), at)
    scratch.to_line = _held(scratch.to_line, hold)  # checked; the line is not written yet
    return lambda: store.append(record), (scratch.DuplicateError,)


def _library_draft() -> dict[str, Any]:
    from labmem.core.provenance import MemorySource

    return {"kind": "conversation", "memory_id": RACE_ID, "summary": "",
            "content": "Selected SQLite WAL.",
            "source": MemorySource("t-42", "conversation_transcript",
                                   "persistence decision", NOW)}


def _locked_writer(path: str, hold):
    from labmem.core.clock import FixedClock
    from labmem.core.storage import JsonlLog
    from labmem.recall.store import RemoteMemoryDuplicateError, RemoteMemoryStore

    store = RemoteMemoryStore(path, user_id=USER_ID, clock=FixedClock(NOW))
    store.read_all()
    JsonlLog.append = _held(JsonlLog.append, hold)  # inside the lock, after the check
    return lambda: store.append(**_library_draft()), (RemoteMemoryDuplicateError,)


def _postgres_writer(url: str, hold):
    from labmem.core.clock import FixedClock
    from labmem.recall.postgres import PostgresMemoryStore
    from labmem.recall.store import RemoteMemoryDuplicateError

    store = PostgresMemoryStore(url, user_id=USER_ID, clock=FixedClock(NOW))
    store.read_all()  # connected before the start
    return lambda: store.append(**_library_draft()), (RemoteMemoryDuplicateError,)


_WRITERS = {"file, no lock": _scratch_writer, "file + lock": _locked_writer,
            "postgres": _postgres_writer}


def _writer(backend: str, target: str, start, hold, results) -> None:
    """One racing process: set up, wait for the start, append, report what it was told."""
    try:
        append, duplicate_errors = _WRITERS[backend](target, hold)
        start.wait(timeout=60)
    except Exception as exc:  # noqa: BLE001 - reported, so the caller sees it
        results.put(f"failed: {type(exc).__name__}: {exc}")
        return
    try:
        append()
        results.put("stored")
    except duplicate_errors as exc:
        results.put(f"refused: {type(exc).__name__}")
    except Exception as exc:  # noqa: BLE001 - reported, so the caller sees it
        results.put(f"failed: {type(exc).__name__}: {exc}")


def _copies(backend: str, target: str) -> int:
    """Records with RACE_ID in the store, counted from what is stored, not from answers."""
    if backend == "postgres":
        from labmem.core.clock import FixedClock
        from labmem.recall.postgres import PostgresMemoryStore

        store = PostgresMemoryStore(target, user_id=USER_ID, clock=FixedClock(NOW))
        try:
            return sum(record.memory_id == RACE_ID for record in store.read_all())
        finally:
            store.close()
    path = Path(target)
    if not path.exists():
        return 0
    lines = path.read_bytes().split(b"\n")[:-1]
    return sum(parse_json(line)["memory_id"] == RACE_ID for line in lines)


def race_same_id(backend: str, target: str | Path, writers: int = 8) -> RaceOutcome:
    """``writers`` processes append ``RACE_ID`` to one store at once; what happened.

    ``target`` is a records file for the file stores and the application role's database
    URL for ``"postgres"``. Each writer is told ``stored`` or ``refused: <error>``.
    """
    if backend not in RACE_BACKENDS:
        raise InvalidInputError("backend", f"{backend!r} is not a store the race knows",
                                f"use one of {', '.join(map(repr, RACE_BACKENDS))}")
    if isinstance(writers, bool) or not isinstance(writers, int) or writers < 2:
        raise InvalidInputError("writers", f"{writers!r} cannot race",
                                "use an integer of at least 2")
    start, hold, results = _SPAWN.Barrier(writers), _SPAWN.Barrier(writers), _SPAWN.Queue()
    procs = [_SPAWN.Process(target=_writer, args=(backend, str(target), start, hold, results))
             for _ in range(writers)]
    for proc in procs:
        proc.start()
    try:
        told = [results.get(timeout=120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    failed = [answer for answer in told if answer.startswith("failed")]
    if failed:  # not the race's outcome: the set-up broke (no server, a bad path)
        raise LabmemError(f"a {backend!r} writer failed: {failed[0]}")
    return RaceOutcome(backend, writers, tuple(sorted(Counter(told).items())),
                       _copies(backend, str(target)))
