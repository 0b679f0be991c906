"""s13 code that tests run in real child processes (importable under 'spawn')."""

from __future__ import annotations

import contextlib
import hashlib
import os

T0 = "2026-08-01T00:00:00Z"


def claim_for(session: str, index: int, transaction_id: str):
    """A well-formed claim on a synthetic artifact (the journal never opens the file)."""
    from labmem.artifacts.externalize import format_source_id
    from labmem.artifacts.leases import RetentionClaim

    sha = hashlib.sha256(f"body-{index}".encode()).hexdigest()
    filename = f"{index:06d}-bash-{sha[:12]}.txt"
    return RetentionClaim(transaction_id, format_source_id(session, filename, sha), sha)


def journal_cycles(session_dir, worker, count, start):
    """prepare → commit → release ``count`` transactions of this worker, interleaving."""
    from labmem.artifacts.leases import LeaseJournal
    from labmem.core.clock import FixedClock

    journal = LeaseJournal(session_dir, clock=FixedClock(T0))
    session = os.path.basename(session_dir)
    start.wait()
    for i in range(count):
        txid = f"w{worker}-t{i}"
        journal.prepare(claim_for(session, worker * 1000 + i, txid))
        journal.commit(txid)
        if i % 2:
            journal.release(txid)


def prepare_same_transaction(session_dir, worker, start, pause, noop_lock, results):
    """Every worker prepares transaction ``tx-shared`` with a *different* claim.

    ``pause`` widens the window between the journal's check and its append, as in
    the s12 race: with the real lock one writer is ever inside it.
    """
    from labmem.artifacts.leases import LeaseJournal, LeaseTransitionError
    from labmem.core import storage
    from labmem.core.clock import FixedClock
    from labmem.core.errors import LabmemError
    from labmem.resilience import pause_before

    factory = (lambda p: contextlib.nullcontext()) if noop_lock else None
    journal = LeaseJournal(session_dir, clock=FixedClock(T0), lock_factory=factory)
    journal.refresh()
    pause_before(storage.JsonlLog, "append", pause)
    start.wait()
    try:
        journal.prepare(claim_for(os.path.basename(session_dir), worker, "tx-shared"))
        results.put("prepared")
    except LeaseTransitionError:
        results.put("refused")
    except LabmemError as exc:
        results.put(f"error: {type(exc).__name__}")


def crash_after_phases(session_dir, phases, crash_after):
    """Run ``phases`` on tx-crash and die (``os._exit``) right after write ``crash_after``."""
    from labmem.artifacts.leases import LeaseJournal
    from labmem.core.clock import FixedClock

    journal = LeaseJournal(session_dir, clock=FixedClock(T0))
    claim = claim_for(os.path.basename(session_dir), 1, "tx-crash")
    for number, phase in enumerate(phases, start=1):
        if phase == "prepared":
            journal.prepare(claim)
        elif phase == "committed":
            journal.commit("tx-crash")
        elif phase == "aborted":
            journal.abort("tx-crash")
        else:
            journal.release("tx-crash")
        if number == crash_after:
            os._exit(0)  # the write above is durable; nothing after it happens
    os._exit(3)


def crash_inside_publisher(session_dir):
    """publish_reference: PREPARED is durable, then the process dies inside the publisher."""
    from labmem.artifacts.leases import LeaseJournal
    from labmem.core.clock import FixedClock

    journal = LeaseJournal(session_dir, clock=FixedClock(T0))
    claim = claim_for(os.path.basename(session_dir), 7, "tx-publish")
    journal.publish_reference(claim, lambda _claim: os._exit(0))
    os._exit(3)


def torn_write(session_dir):
    """Prepare one lease, then die halfway through writing the next line."""
    from labmem.artifacts.leases import JOURNAL_NAME, LeaseJournal
    from labmem.core.clock import FixedClock

    journal = LeaseJournal(session_dir, clock=FixedClock(T0))
    journal.prepare(claim_for(os.path.basename(session_dir), 1, "tx-1"))
    fd = os.open(os.path.join(session_dir, JOURNAL_NAME), os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'{"seq":2,"transaction_id":"tx-1","pha')
    os.fsync(fd)
    os._exit(0)


def crash_before_manifest(session_dir):
    """Externalize, but die after the body is fsynced and before its manifest record."""
    from labmem.artifacts.externalize import ToolResultExternalizer
    from labmem.core.clock import FixedClock
    from labmem.core.storage import JsonlLog

    def die(self, record):
        os._exit(0)

    JsonlLog.append = die  # fault injection at the durable boundary
    ToolResultExternalizer(session_dir, clock=FixedClock(T0)).externalize("x" * 40_000, "bash")
    os._exit(3)


def externalize_many(session_dir, count, start, results):
    """Externalize ``count`` identical outputs concurrently with other workers."""
    from labmem.artifacts.externalize import ToolResultExternalizer
    from labmem.core.clock import FixedClock

    externalizer = ToolResultExternalizer(session_dir, clock=FixedClock(T0))
    start.wait()
    for _ in range(count):
        results.put(externalizer.externalize("same output\n" * 3_000, "bash").artifact.filename)
