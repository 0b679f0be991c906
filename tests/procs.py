"""Real child processes for the concurrency and crash tests, started in one way.

Every child is started with the "spawn" method: a fresh interpreter that shares nothing
with the test process but what it is given, as when two programs open the same file.
So ``target`` must be importable (a module-level function); ``args_for`` runs here, in
the parent, and may be a lambda.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

_SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Sync:
    """What the workers of one run share; pass them the parts they use.

    ``start``: every worker waits here before the contested step, so they all reach it
    together. ``pause``: a second barrier that races use to widen a window (see
    ``labmem.resilience.pause_before``). ``results``: where workers report.
    """

    start: Any
    pause: Any
    results: Any


def _name(target: Callable) -> str:
    return getattr(target, "__qualname__", repr(target))


def _wait(proc: Any, timeout: float) -> int:
    """Join ``proc``; one still running after ``timeout`` is killed and fails the test."""
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail(f"{proc.name} still running after {timeout}s (killed)")
    return proc.exitcode


@contextlib.contextmanager
def _started(target, args_for, workers, timeout):
    """:func:`running`, also yielding the processes (for :func:`run_processes`)."""
    sync = Sync(_SPAWN.Barrier(workers), _SPAWN.Barrier(workers), _SPAWN.Queue())
    procs = [_SPAWN.Process(target=target, args=args_for(i, sync), name=f"{_name(target)}[{i}]")
             for i in range(workers)]
    for proc in procs:
        proc.start()
    try:
        yield sync, procs
        for proc in procs:
            code = _wait(proc, timeout)
            assert code == 0, f"{proc.name} exited with code {code}"
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()


@contextlib.contextmanager
def running(target: Callable, args_for: Callable[[int, Sync], tuple], workers: int = 1, *,
            timeout: float = 60) -> Iterator[Sync]:
    """Start ``workers`` processes running ``target(*args_for(i, sync))``; yield the Sync.

    For a test that talks to its workers while they run. On leaving the block every
    worker must end within ``timeout`` with exit code 0; if the block fails, they are
    killed at once (a worker waiting at a barrier would otherwise wait for ever).
    """
    with _started(target, args_for, workers, timeout) as (sync, _):
        yield sync


def run_processes(target: Callable, args_for: Callable[[int, Sync], tuple], workers: int = 1,
                  *, expect: int | None = None, timeout: float = 60) -> list:
    """Run ``workers`` processes to the end and return what they put on ``results``.

    ``expect`` results are read (default: one per worker), in the order they arrive,
    before the workers are joined: a child cannot exit while what it put is unread.
    A worker that dies with a non-zero code fails the test at once, not at the timeout.
    """
    count = workers if expect is None else expect
    got: list = []
    with _started(target, args_for, workers, timeout) as (sync, procs):
        deadline = time.monotonic() + timeout
        while len(got) < count:
            try:
                got.append(sync.results.get(timeout=0.1))
            except queue.Empty:
                for proc in procs:
                    code = proc.exitcode
                    assert code in (None, 0), f"{proc.name} exited with code {code}"
                if time.monotonic() > deadline:
                    pytest.fail(f"{_name(target)}: {len(got)} of {count} results in {timeout}s")
    return got


def run_child(target: Callable, *args: Any, timeout: float = 60) -> int:
    """Run ``target(*args)`` in one child and return its exit code.

    Not checked here: crash tests expect the code the child died with.
    """
    proc = _SPAWN.Process(target=target, args=args, name=_name(target))
    proc.start()
    return _wait(proc, timeout)
