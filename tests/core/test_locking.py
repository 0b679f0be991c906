"""The core's cross-process lock: excludes processes, objects and threads; never stale."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from labmem.core.errors import LabmemError
from labmem.core.locking import FileLock, LockTimeoutError
from labmem.core.storage import file_lock

HOLDER = """
import sys, time
from labmem.core.storage import file_lock
lock = file_lock(__import__("pathlib").Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""

COUNTER = """
import sys
from pathlib import Path
from labmem.core.storage import file_lock
path = Path(sys.argv[1])
for _ in range(int(sys.argv[2])):
    with file_lock(path):
        value = int(path.read_text() or "0")   # read, then write: lost without the lock
        path.write_text(str(value + 1))
"""


def _hold_in_child(target: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_another_process_holding_it_times_out_with_a_named_error(tmp_path):
    target = tmp_path / "log.jsonl"
    child = _hold_in_child(target)
    try:
        with pytest.raises(LockTimeoutError) as caught:
            file_lock(target, timeout=0.2).acquire()
        assert isinstance(caught.value, LabmemError) and isinstance(caught.value, TimeoutError)
        assert "log.jsonl.lock" in str(caught.value) and "0.2 s" in str(caught.value)
    finally:
        child.kill()
        child.wait()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    target = tmp_path / "log.jsonl"
    child = _hold_in_child(target)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert (tmp_path / "log.jsonl.lock").exists()  # the file stays; the lock does not
    started = time.monotonic()
    with file_lock(target, timeout=5):
        pass
    assert time.monotonic() - started < 2


def test_processes_counting_under_the_lock_lose_no_update(tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    workers = [subprocess.Popen([sys.executable, "-c", COUNTER, str(counter), "200"])
               for _ in range(3)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    assert counter.read_text() == "600"


def test_two_objects_in_one_process_exclude_each_other(tmp_path):
    first, second = file_lock(tmp_path / "f"), file_lock(tmp_path / "f", timeout=0.1)
    with first:
        with pytest.raises(LockTimeoutError):
            second.acquire()
    with second:
        assert second.is_locked and not first.is_locked


def test_one_object_is_reentrant_for_its_thread_and_exclusive_for_others(tmp_path):
    lock = FileLock(tmp_path / "f.lock", timeout=5)
    with lock:
        with lock:
            assert lock.is_locked
        assert lock.is_locked  # the inner exit does not release the outer hold
        seen: list[str] = []
        other = threading.Thread(target=lambda: seen.append(
            "timeout" if _times_out(lock) else "acquired"))
        other.start()
        other.join()
        assert seen == ["timeout"]
    assert not lock.is_locked


def _times_out(lock: FileLock) -> bool:
    try:
        lock.acquire(timeout=0.1)
    except LockTimeoutError:
        return True
    lock.release()
    return False


def test_threads_sharing_one_object_are_serialized(tmp_path):
    lock, inside, overlaps = FileLock(tmp_path / "f.lock"), [0], []

    def work() -> None:
        for _ in range(200):
            with lock:
                inside[0] += 1
                overlaps.append(inside[0])
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(overlaps) == 1 and len(overlaps) == 800


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_releasing_its_copy_keeps_the_parents_lock(tmp_path):
    lock = file_lock(tmp_path / "f")
    lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # the child inherited a held object: release its copy, then exit
            lock.release()
            os._exit(0)
        os.waitpid(pid, 0)
        with pytest.raises(LockTimeoutError):
            file_lock(tmp_path / "f", timeout=0.1).acquire()
    finally:
        lock.release()


def test_releasing_more_often_than_taken_is_a_bug_not_silence(tmp_path):
    with pytest.raises(RuntimeError, match="released more often"):
        FileLock(tmp_path / "f.lock").release()
