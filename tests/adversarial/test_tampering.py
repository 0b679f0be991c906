"""Tampering and replay (issue items 7, 10 and 11): every tamper is seen, no replay repeats.

* 7 — the lease journal's end is anchored: cutting records off its tail is detected on
  open (a committed lease can no longer silently lose its protection), a crash between
  the append and the head write is not mistaken for it, and the recovery is explicit.
* 10 — a retried ``publish_reference`` after an unknown outcome never runs the publisher
  a second time; reconciliation settles it.
* 11 — a replayed ``remember`` cannot resurrect a forgotten memory, and ids cannot probe
  another scope.
"""

from __future__ import annotations

import pytest

from labmem.artifacts import (
    LeaseCorruptionError,
    LeaseJournal,
    LeaseJournalError,
    LeasePhase,
    OwnerStatus,
    RetentionClaim,
    ToolResultExternalizer,
    plan_cleanup,
)
from labmem.core.clock import FixedClock, SteppingClock
from labmem.mmu import FileMemoryService, RecordNotFoundError
from tests.adversarial import workers
from tests.artifacts.workers import claim_for
from tests.procs import run_child, run_processes

T0 = "2026-08-01T00:00:00Z"
JOURNAL = "leases.jsonl"


@pytest.fixture
def session(tmp_path):
    return tmp_path / "sess-7"


def journal(session):
    return LeaseJournal(session, clock=SteppingClock(T0))


def cut_last_lines(path, n):
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"".join(line + b"\n" for line in lines[:-n]))


# -- 7. truncating the lease journal ----------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 2])
def test_cutting_records_off_the_journal_end_is_detected(session, cut):
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-a"))
    j.commit("tx-a")
    j.prepare(claim_for("sess-7", 2, "tx-b"))
    j.commit("tx-b")  # cut=2 removes tx-b entirely: its artifact would lose its protection
    cut_last_lines(session / JOURNAL, cut)
    before = (session / JOURNAL).read_bytes()
    fresh = journal(session)
    for _ in range(2):  # reported on every read, not once
        with pytest.raises(LeaseCorruptionError, match="cut off its end"):
            fresh.recover()
    with pytest.raises(LeaseCorruptionError):
        fresh.prepare(claim_for("sess-7", 3, "tx-c"))
    assert (session / JOURNAL).read_bytes() == before  # nothing written over the evidence


def test_a_truncated_journal_stops_cleanup(tmp_path):
    session = tmp_path / "s1"
    clock = FixedClock(T0)
    artifact = ToolResultExternalizer(session, clock=clock).externalize("x\n" * 30_000,
                                                                       "bash").artifact
    j = LeaseJournal(session, clock=clock)
    j.publish_reference(RetentionClaim.for_reference("tx-1", artifact), lambda claim: "ok")
    cut_last_lines(session / JOURNAL, 2)  # the committed lease is gone without a trace
    with pytest.raises(LeaseCorruptionError):
        plan_cleanup(journal=LeaseJournal(session), now="2026-09-01T00:00:00Z")
    assert (session / "tool-results" / artifact.filename).exists()


def test_removing_the_chain_head_is_detected(session):
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-a"))
    j.commit("tx-a")
    (session / "leases.head.json").unlink()
    with pytest.raises(LeaseCorruptionError, match="chain head .* is missing"):
        journal(session).recover()


def test_a_rewritten_journal_of_the_same_length_is_detected(session):
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-a"))
    other = session.parent / "other"
    k = LeaseJournal(other, clock=SteppingClock("2027-01-01T00:00:00Z"))
    k.prepare(claim_for("other", 1, "tx-a"))  # a valid chain of one record, not this one
    (session / JOURNAL).write_bytes((other / JOURNAL).read_bytes())
    with pytest.raises(LeaseCorruptionError, match="was rewritten"):
        journal(session).recover()


def test_a_crash_between_append_and_head_is_not_a_truncation(session):
    assert run_child(workers.die_between_append_and_head, str(session)) == 0
    recovery = journal(session).recover()  # the head is one record behind: accepted
    assert recovery.by_phase(LeasePhase.PREPARED)[0].claim.transaction_id == "tx-2"
    j = journal(session)
    j.commit("tx-2")  # the next write brings the head up to the end again
    assert journal(session).recover().by_phase(LeasePhase.COMMITTED)
    cut_last_lines(session / JOURNAL, 1)
    with pytest.raises(LeaseCorruptionError):
        journal(session).recover()


def test_readers_racing_writers_never_see_a_false_truncation(session):
    session.mkdir()
    outcomes = run_processes(workers.write_or_read,
                             lambda w, s: (str(session), w, 15, s.start, s.results), 4)
    assert sorted(map(str, outcomes)) == ["clean", "clean", "wrote", "wrote"]
    assert len(journal(session).recover().leases) == 30


def test_reanchor_is_the_explicit_recovery(session):
    j = journal(session)
    for i in range(3):
        j.prepare(claim_for("sess-7", i, f"tx-{i}"))
    cut_last_lines(session / JOURNAL, 1)
    with pytest.raises(LeaseCorruptionError, match="reanchor"):
        journal(session).recover()  # the message names the way out
    recovery = journal(session).reanchor()
    assert [lease.claim.transaction_id for lease in recovery.leases] == ["tx-0", "tx-1"]
    j = journal(session)
    j.prepare(claim_for("sess-7", 2, "tx-2"))  # re-publish what was lost
    assert len(journal(session).recover().leases) == 3
    path = session / JOURNAL
    path.write_bytes(path.read_bytes().replace(b'"prepared"', b'"committed"', 1))
    with pytest.raises(LeaseCorruptionError, match="line 1"):
        journal(session).reanchor()  # an edited chain is never accepted


# -- 10. retrying a publication whose outcome is unknown ----------------------------------------

class Memory:
    """A memory that stores the reference and then loses the acknowledgement."""

    def __init__(self):
        self.held: list[tuple[str, str]] = []
        self.calls = 0

    def publish_then_lose_the_ack(self, claim):
        self.calls += 1
        self.held.append((claim.transaction_id, claim.source_id))
        raise TimeoutError("the memory service did not answer")

    def status(self, transaction_id):
        for txid, source_id in self.held:
            if txid == transaction_id:
                sha = claim_for("sess-7", 1, "tx-1").sha256
                return OwnerStatus("published", source_id, sha)
        return OwnerStatus("absent")

    def seal_absent(self, transaction_id):
        return 1


def test_a_retry_after_an_unknown_outcome_does_not_publish_twice(session):
    memory = Memory()
    claim = claim_for("sess-7", 1, "tx-1")
    with pytest.raises(TimeoutError):
        journal(session).publish_reference(claim, memory.publish_then_lose_the_ack)
    before = (session / JOURNAL).read_bytes()
    for retry in (journal(session), LeaseJournal(session)):  # same process or after restart
        with pytest.raises(LeaseJournalError, match="reconcile_pending"):
            retry.publish_reference(claim, memory.publish_then_lose_the_ack)
    assert memory.calls == 1 and len(memory.held) == 1
    assert (session / JOURNAL).read_bytes() == before
    assert journal(session).leases()["tx-1"].phase is LeasePhase.PREPARED  # still protecting
    report = journal(session).reconcile_pending(memory)
    assert report.committed == ("tx-1",)
    assert journal(session).leases()["tx-1"].phase is LeasePhase.COMMITTED
    with pytest.raises(LeaseJournalError):  # settled: a retry still cannot publish again
        journal(session).publish_reference(claim, memory.publish_then_lose_the_ack)
    assert memory.calls == 1


# -- 11. the Context MMU: replay after forget, probing by id -------------------------------------

def service(root):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"))


def remember(svc, scope="alice", key="db-host", text="The database host is db-1."):
    return svc.remember("semantic", scope=scope, title="db host", text=text,
                        outcome="succeeded", evidence=["ev:1"], source_kind="tool_observed",
                        origin_key=key)


@pytest.mark.parametrize("restart", [False, True])
def test_a_replayed_remember_does_not_resurrect_a_forgotten_memory(tmp_path, restart):
    svc = service(tmp_path)
    record = remember(svc)
    svc.forget(record.record_id, scope="alice")
    log = (tmp_path / "records.jsonl").read_bytes()
    if restart:
        svc = service(tmp_path)
    for text in ("The database host is db-1.", "The database host is db-2."):
        replay = remember(svc, text=text)
        assert replay.record_id == record.record_id and replay.status == "archived"
    assert (tmp_path / "records.jsonl").read_bytes() == log  # nothing written
    assert svc.recall_query("database host", 5, scope="alice") == ()
    assert service(tmp_path).stats()["by_status"] == {"archived": 1}
    other = remember(svc, scope="bob")  # the tombstone is (scope, origin_key): bob is free
    assert other.status == "provisional"


def test_a_missing_id_and_another_scopes_id_get_the_same_answer(tmp_path):
    svc = service(tmp_path)
    bobs = remember(svc, scope="bob")
    answers = []
    for record_id in (bobs.record_id, "m-999999"):
        for call in (svc.recall_key, svc.forget):
            with pytest.raises(RecordNotFoundError) as caught:
                call(record_id, scope="alice")
            answers.append((type(caught.value), str(caught.value).replace(record_id, "ID")))
        with pytest.raises(RecordNotFoundError) as caught:
            svc.revise(record_id, scope="alice", text="x", evidence=["ev:2"])
        answers.append((type(caught.value), str(caught.value).replace(record_id, "ID")))
    assert answers[:3] == answers[3:]
    assert svc.recall_key(bobs.record_id, scope="bob").status == "provisional"
