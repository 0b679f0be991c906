"""Child-process code for the s11 user memory tests (importable under 'spawn')."""

from __future__ import annotations


def set_distinct_keys(root, worker, count, start, results):
    """Write ``count`` preferences whose keys only this worker uses, after the barrier."""
    from labmem.core.clock import SteppingClock
    from labmem.user import UserMemory

    memory = UserMemory(root, user_id="alice", clock=SteppingClock("2026-08-01T00:00:00Z"))
    start.wait()
    statuses = [memory.set_preference(f"w{worker}.k{i:02d}", f"value {worker}/{i}").status
                for i in range(count)]
    results.put(statuses)


def set_same_key(root, start, results):
    """Write the same key, value and source at the same moment as the other workers."""
    from labmem.core.clock import FixedClock
    from labmem.user import UserMemory

    memory = UserMemory(root, user_id="alice", clock=FixedClock("2026-08-01T00:00:00Z"))
    start.wait()
    write = memory.set_preference("reply.language", "English", source_event_id="evt-1")
    results.put((write.status, write.revision))


def set_keys_with_widened_window(root, worker, count, noop_lock, start, pause, results):
    """Like :func:`set_distinct_keys`, but each writer pauses between reading the file and
    saving it (up to 2 s, at a shared barrier), so that without the lock every writer has
    read the same old state before anyone saves."""
    import contextlib

    from labmem.core import storage
    from labmem.core.clock import SteppingClock
    from labmem.resilience import pause_before
    from labmem.user import UserMemory

    factory = (lambda p: contextlib.nullcontext()) if noop_lock else storage.file_lock
    memory = UserMemory(root, user_id="alice", clock=SteppingClock("2026-08-01T00:00:00Z"),
                        lock_factory=factory)
    pause_before(UserMemory, "_save_preferences", pause)
    start.wait()
    for i in range(count):
        memory.set_preference(f"w{worker}.k{i:02d}", f"value {worker}/{i}")
    results.put(worker)
