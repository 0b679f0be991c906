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
    """Like :func:`set_distinct_keys`, but each writer pauses between reading the state and
    appending its revision line (up to 2 s, at a shared barrier), so that without the lock
    every writer has read the same old state before anyone writes. Reports how many of its
    writes were refused (without the lock, the log's own guard refuses an append from a
    reader that missed another writer's line — the write is lost, but not silently — or
    another writer's compaction removes its staged MEMORY.md: the OSError case)."""
    import contextlib

    from labmem.core import storage
    from labmem.core.clock import SteppingClock
    from labmem.core.errors import LabmemError
    from labmem.resilience import pause_before
    from labmem.user import UserMemory

    factory = (lambda p: contextlib.nullcontext()) if noop_lock else storage.file_lock
    memory = UserMemory(root, user_id="alice", clock=SteppingClock("2026-08-01T00:00:00Z"),
                        lock_factory=factory)
    pause_before(UserMemory, "_append_revision", pause)
    start.wait()
    refused = 0
    for i in range(count):
        try:
            memory.set_preference(f"w{worker}.k{i:02d}", f"value {worker}/{i}")
        except (LabmemError, OSError):
            refused += 1
    results.put(refused)


CRASH_EXIT_CODE = 17


def write_and_die_at(root, boundary, operation, key, value):
    """One preference write that dies with ``os._exit`` right after ``boundary``.

    Replacing the module's ``_reached`` hook happens only here, in the child: the library
    calls it after each durable step of a write and does nothing by default.
    """
    import os

    from labmem import user
    from labmem.core.clock import FixedClock
    from labmem.user import memory as user_memory

    def die_at(reached):
        if reached == boundary:
            os._exit(CRASH_EXIT_CODE)  # no cleanup, no flush: like a killed process

    user_memory._reached = die_at
    memory = user.UserMemory(root, user_id="alice", clock=FixedClock("2026-08-01T12:00:00Z"))
    if operation == "delete":
        memory.delete_preference(key)
    else:
        memory.set_preference(key, value)
    os._exit(0)


def write_until_killed(root, acks_path, first, compact_every, kill_after):
    """Write distinct keys (and delete every fifth one again) until a timer thread sends
    this process SIGKILL, after ``kill_after`` seconds — whatever step it is in.

    After each call returns, one line goes to ``acks_path`` ("set N" / "del N"): what the
    caller was told is durable. Compaction is made frequent, so kills land in it too.
    """
    import os
    import signal
    import threading

    from labmem import user
    from labmem.core.clock import SteppingClock
    from labmem.user import compaction

    compaction.COMPACT_MIN_LINES = compact_every
    memory = user.UserMemory(root, user_id="alice",
                             clock=SteppingClock("2026-08-01T00:00:00Z"))
    threading.Timer(kill_after, os.kill, (os.getpid(), signal.SIGKILL)).start()
    with open(acks_path, "a", encoding="utf-8") as acks:
        n = first
        while True:
            memory.set_preference(f"k{n:05d}", f"value {n}")
            acks.write(f"set {n}\n")
            acks.flush()
            if n % 5 == 4:
                memory.delete_preference(f"k{n - 2:05d}")
                acks.write(f"del {n - 2}\n")
                acks.flush()
            n += 1


def churn_or_read(root, worker, writers, count, start, results):
    """Workers below ``writers`` write with a tiny compaction threshold, so that they
    compact all the time: sets, re-sets and deletes of keys only that worker uses; each
    reports the final value it expects for its keys. The others read without the lock
    meanwhile: a read must never fail, nor show a key at an older revision than before.
    """
    import time

    from labmem import user
    from labmem.core.clock import SteppingClock
    from labmem.user import compaction

    compaction.COMPACT_MIN_LINES = 2
    memory = user.UserMemory(root, user_id="alice",
                             clock=SteppingClock("2026-08-01T00:00:00Z"))
    start.wait()
    if worker >= writers:
        seen, reads, deadline = {}, 0, time.monotonic() + 60
        while time.monotonic() < deadline and not (root_done(root) and reads > 50):
            for pref in memory.list_preferences():
                assert pref.revision >= seen.get(pref.key, 0), (pref, seen.get(pref.key))
                seen[pref.key] = pref.revision
            reads += 1
        results.put(("reader", reads))
        return
    expected = {}
    for i in range(count):
        key = f"w{worker}.k{i % 7}"
        if i % 4 == 3:
            memory.delete_preference(key)
            expected[key] = None
        else:
            memory.set_preference(key, f"v{worker}/{i}")
            expected[key] = f"v{worker}/{i}"
    mark_done(root, worker)
    results.put(("writer", expected))


def mark_done(root, worker):
    import os

    open(os.path.join(root, f"done-{worker}"), "w").close()


def root_done(root, writers=4):
    import os

    return all(os.path.exists(os.path.join(root, f"done-{w}")) for w in range(writers))
