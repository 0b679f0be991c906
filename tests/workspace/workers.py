"""Child-process code for the s10 workspace memory tests (importable under 'spawn')."""

from __future__ import annotations

import os

CRASH_EXIT_CODE = 17


def resolve_and_die_at(project_dir, boundary, conflict_id, candidate_id, expected_revision):
    """Resolve a conflict, but die with ``os._exit`` right after ``boundary``.

    Replacing the module's ``_reached`` hook happens only here, in the child: the
    library calls it after each durable step and does nothing by default.
    """
    from labmem.core.clock import FixedClock
    from labmem.workspace import memory

    def die_at(reached):
        if reached == boundary:
            os._exit(CRASH_EXIT_CODE)  # no cleanup, no flush: like a killed process

    memory._reached = die_at
    workspace = memory.WorkspaceMemory(project_dir,
                                       clock=FixedClock("2026-10-01T12:00:00Z"))
    workspace.resolve_conflict(conflict_id, candidate_id, expected_revision=expected_revision,
                               actor="ann", rationale="we benchmarked both")
    os._exit(0)


def append_many(project_dir, worker, count, noop_lock, start, results):
    """Append ``count`` facts to the same day file as the other workers, after the barrier.

    With ``noop_lock`` the workspace lock does nothing and a short pause widens the gap
    between reading the line count and appending: the control run that shows the lock
    is what keeps generated ids unique.
    """
    import contextlib
    import time

    from labmem.core import storage
    from labmem.core.clock import FixedClock
    from labmem.core.errors import LabmemError
    from labmem.workspace import WorkspaceMemory

    factory = (lambda p: contextlib.nullcontext()) if noop_lock else storage.file_lock
    workspace = WorkspaceMemory(project_dir, clock=FixedClock("2026-08-01T12:00:00Z"),
                                lock_factory=factory)
    if noop_lock:
        original = storage.JsonlLog.append

        def paused_append(self, record):
            time.sleep(0.005)
            return original(self, record)

        storage.JsonlLog.append = paused_append
    start.wait()
    ids = []
    for i in range(count):
        try:
            ids.append(workspace.append_fact(f"worker {worker} fact {i}", kind="outcome").fact_id)
        except LabmemError as exc:  # the log noticing lines it has not read
            ids.append(f"refused: {type(exc).__name__}")
    results.put(ids)


def append_fact_at(project_dir, content, recorded_at, evidence):
    """Append one fact through the library from another process (a fresh interpreter, a
    fresh :class:`WorkspaceMemory`), back-dated to ``recorded_at``."""
    from labmem.core.clock import FixedClock
    from labmem.workspace import WorkspaceMemory

    workspace = WorkspaceMemory(project_dir, clock=FixedClock("2026-10-01T12:00:00Z"))
    workspace.append_fact(content, kind="pitfall", evidence=[evidence], recorded_at=recorded_at)
