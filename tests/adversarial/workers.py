"""Code the adversarial tests run in real child processes (importable under 'spawn')."""

from __future__ import annotations

import os

T0 = "2026-08-01T00:00:00Z"


def die_between_append_and_head(session_dir):
    """Prepare one lease, then die after its journal line is durable but before the chain
    head is replaced: the crash window the head must tolerate."""
    from labmem.artifacts.leases import LeaseJournal
    from labmem.core.clock import FixedClock
    from tests.artifacts.workers import claim_for

    journal = LeaseJournal(session_dir, clock=FixedClock(T0))
    session = os.path.basename(session_dir)
    journal.prepare(claim_for(session, 1, "tx-1"))
    journal.commit("tx-1")

    def die(self):
        os._exit(0)

    LeaseJournal._write_head = die  # fault injection at the durable boundary
    journal.prepare(claim_for(session, 2, "tx-2"))
    os._exit(3)


def write_or_read(session_dir, worker, count, start, results):
    """Worker 0 and 1 write lease cycles; the others read the journal as fast as they can.

    Readers report every refusal they saw: with honest writers there must be none.
    """
    from labmem.artifacts.leases import LeaseJournal, LeaseJournalError
    from labmem.core.clock import FixedClock
    from tests.artifacts.workers import claim_for

    session = os.path.basename(session_dir)
    start.wait()
    if worker < 2:
        journal = LeaseJournal(session_dir, clock=FixedClock(T0))
        for i in range(count):
            txid = f"w{worker}-t{i}"
            journal.prepare(claim_for(session, worker * 1000 + i, txid))
            journal.commit(txid)
        results.put("wrote")
        return
    refusals = []
    for _ in range(count * 2):
        try:
            LeaseJournal(session_dir).recover()
        except LeaseJournalError as exc:
            refusals.append(str(exc))
    results.put(refusals[:1] or "clean")
