"""Child processes for the fold-snapshot tests (importable: started with "spawn")."""

import os
import signal

from labmem.core.clock import SteppingClock
from labmem.mmu import FileMemoryService


def service(root, **kw):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"), **kw)


def save_and_die(root):
    """Open (no snapshot is written: the threshold is high), then write one and be killed
    after its temporary file is complete, before the rename."""
    svc = service(root, snapshot_lines=10**9)
    svc.snapshot_lines = 1

    def hook(name):
        if name == "snapshot_written":
            os.kill(os.getpid(), signal.SIGKILL)

    svc.fault_hook = hook
    svc.save_snapshot()
    os._exit(3)  # the hook never fired: the test fails on the exit code


def save_torn_and_die(root):
    """Be killed in the middle of writing the temporary file (a torn temporary)."""
    from pathlib import Path

    import labmem.core.arrayfile as arrayfile
    from labmem.mmu.snapshot import snapshot_path

    real, target, seen = arrayfile._padded, snapshot_path(Path(root) / "records.jsonl"), []

    def padded(array):
        if arrayfile.temporaries(target):  # writing the body, not yet checksumming it
            seen.append(1)
            if len(seen) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(array)

    arrayfile._padded = padded
    svc = service(root, snapshot_lines=10**9)
    svc.snapshot_lines = 1
    svc.save_snapshot()
    os._exit(3)


def append(index, sync, root, count):
    """Remember ``count`` records of this worker's own origin keys."""
    svc = service(root, snapshot_lines=None)
    sync.start.wait()
    for i in range(count):
        svc.remember("semantic", scope="alice", title=f"w{index} note {i}",
                     text=f"worker {index} wrote billing note {i}", outcome="succeeded",
                     evidence=[f"ev{index}-{i}"], source_kind="tool_observed",
                     origin_key=f"w{index}-{i}")
    sync.results.put(index)
