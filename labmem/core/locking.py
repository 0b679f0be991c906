"""The cross-process lock every multi-writer file takes around check-then-append.

An *advisory* lock: the operating system keeps, per open lock file, who holds it, and
a second taker waits until the first lets go. Nothing stops a program that never asks
— which is why every labmem writer goes through :func:`labmem.core.storage.file_lock`.

Why not the ``filelock`` package, which DESIGN §3 first named: from version 4 it probes
the filesystem, tracks forks and checks ownership on every acquire, so one acquire and
release cost 150–390 µs here, more than the fsync'd append the lock protects (a bare
``flock`` is about 5 µs). Those checks guard shared, world-writable lock directories;
labmem's locks live inside the user's own memory directories. What remains is the
mechanism itself, small enough to read:

* POSIX: ``flock(LOCK_EX)`` on ``<name>.lock``. The lock belongs to the *open file*, so
  two objects in one process exclude each other as two processes do, and the kernel
  drops it when the holder exits or is killed: there is never a stale lock to delete.
* Windows: ``msvcrt.locking`` of the file's first byte, which behaves the same way.

A timeout turns "wait forever" into a :class:`LockTimeoutError` that names the file.
One object may be re-entered by the thread that holds it (a count, like ``RLock``);
other threads block on it as other processes do.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

from labmem.core.errors import LabmemError

__all__ = ["FileLock", "LockTimeoutError"]

_POLL_SECONDS = (0.001, 0.005, 0.02, 0.05)  # back off while another process holds it

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class LockTimeoutError(LabmemError, TimeoutError):
    """Another holder kept the lock longer than the caller was willing to wait."""

    def __init__(self, lock_path: str, timeout: float) -> None:
        self.lock_path = lock_path
        self.timeout = timeout
        super().__init__(
            f"{Path(lock_path).name}: another writer held this lock for more than "
            f"{timeout:g} s; retry when it has finished (a lock is released when its "
            "holder exits, so there is no stale lock file to delete)")


class FileLock:
    """An exclusive lock on ``lock_path`` (created with its directory if missing; never
    deleted, since removing a lock file another process has open would let two hold it)."""

    def __init__(self, lock_path: str | os.PathLike[str], timeout: float = 30.0) -> None:
        self.lock_path = os.fspath(lock_path)
        self.timeout = timeout
        self._fd: int | None = None
        self._owner_pid = 0
        self._depth = 0
        self._guard = threading.RLock()  # one thread at a time per object

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float | None = None) -> FileLock:
        """Take the lock, waiting at most ``timeout`` seconds (default: the object's)."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        if not self._guard.acquire(timeout=max(wait, 0.0)):
            raise LockTimeoutError(self.lock_path, wait)
        try:
            if self._depth == 0:
                self._take(deadline, wait)
            self._depth += 1
        except BaseException:
            self._guard.release()
            raise
        return self

    def _take(self, deadline: float, wait: float) -> None:
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # a layer's first write: its directory is made with it
            os.makedirs(os.path.dirname(self.lock_path) or ".", exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            attempt = 0
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(self.lock_path, wait)
                time.sleep(_POLL_SECONDS[min(attempt, len(_POLL_SECONDS) - 1)])
                attempt += 1
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._owner_pid = fd, os.getpid()

    def release(self) -> None:
        """Let go once; the lock itself is released when the outermost hold ends."""
        if self._depth == 0:
            raise RuntimeError(f"{Path(self.lock_path).name}: released more often than taken")
        self._depth -= 1
        if self._depth == 0:
            fd, self._fd = self._fd, None
            assert fd is not None
            try:
                # A forked child shares the parent's open file: unlocking it there would
                # release the parent's lock too, so the child only closes its copy.
                if os.getpid() == self._owner_pid:
                    _unlock(fd)
            finally:
                os.close(fd)
        self._guard.release()

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.is_locked else "free"
        return f"FileLock({Path(self.lock_path).name!r}, {state})"
