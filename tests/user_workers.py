"""Child-process code for the s11 user memory tests (importable under 'spawn')."""

from __future__ import annotations


def set_distinct_keys(root, worker, count, start, results):
    """Write ``count`` preferences whose keys only this worker uses, after the barrier."""
    from labmem.clock import SteppingClock
    from labmem.user import UserMemory

    memory = UserMemory(root, user_id="alice", clock=SteppingClock("2026-08-01T00:00:00Z"))
    start.wait()
    statuses = [memory.set_preference(f"w{worker}.k{i:02d}", f"value {worker}/{i}").status
                for i in range(count)]
    results.put(statuses)


def set_same_key(root, start, results):
    """Write the same key, value and source at the same moment as the other workers."""
    from labmem.clock import FixedClock
    from labmem.user import UserMemory

    memory = UserMemory(root, user_id="alice", clock=FixedClock("2026-08-01T00:00:00Z"))
    start.wait()
    write = memory.set_preference("reply.language", "English", source_event_id="evt-1")
    results.put((write.status, write.revision))
