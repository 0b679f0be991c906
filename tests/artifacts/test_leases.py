"""s13 lease journal: state machine, hash chain, crashes, processes, publish, reconcile."""

import json
from dataclasses import dataclass, field

import pytest

from labmem.artifacts.leases import (
    JOURNAL_NAME,
    LeaseCorruptionError,
    LeaseJournal,
    LeaseJournalError,
    LeasePhase,
    LeaseTransitionError,
    LeaseValidationError,
    OwnerStatus,
    PublicationRejected,
    ReferenceOwner,
    RetentionClaim,
)
from labmem.core.clock import FixedClock, SteppingClock
from labmem.core.errors import LabmemError
from tests.artifacts import workers as artifact_workers
from tests.artifacts.workers import claim_for
from tests.procs import run_child, run_processes

T0 = "2026-08-01T00:00:00Z"


@pytest.fixture
def session(tmp_path):
    return tmp_path / "sess-7"


def journal(session):
    return LeaseJournal(session, clock=SteppingClock(T0))


def lines(session):
    return (session / JOURNAL_NAME).read_bytes().split(b"\n")[:-1]


def test_errors_share_the_bases():
    for error in (LeaseCorruptionError, LeaseTransitionError, LeaseValidationError):
        assert issubclass(error, LeaseJournalError) and issubclass(error, LabmemError)
    assert issubclass(PublicationRejected, LabmemError)


# -- 7. claims and the state machine ---------------------------------------------------

def test_claim_names_source_and_full_digest_without_path(session):
    claim = claim_for("sess-7", 1, "tx-1")
    assert set(claim.to_dict()) == {"transaction_id", "source_id", "sha256"}
    with pytest.raises(LeaseValidationError, match="claim.sha256"):
        RetentionClaim("tx-1", claim.source_id, claim.sha256[:12])
    with pytest.raises(LeaseValidationError, match="claim.sha256"):
        RetentionClaim("tx-1", claim.source_id, "0" * 64)  # not the digest the id names
    with pytest.raises(LeaseValidationError, match="claim.source_id"):
        RetentionClaim("tx-1", "/tmp/x.txt", claim.sha256)
    with pytest.raises(LeaseValidationError, match="claim.transaction_id"):
        RetentionClaim("../tx", claim.source_id, claim.sha256)


def test_the_happy_path_and_its_records(session):
    j = journal(session)
    claim = claim_for("sess-7", 1, "tx-1")
    assert j.prepare(claim).phase is LeasePhase.PREPARED
    assert j.commit("tx-1").phase is LeasePhase.COMMITTED
    assert j.release("tx-1").phase is LeasePhase.RELEASED
    records = [json.loads(line) for line in lines(session)]
    assert [r["phase"] for r in records] == ["prepared", "committed", "released"]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[1]["prev"] == records[0]["hash"] and records[0]["prev"] == "0" * 64
    assert [r["at"] for r in records] == ["2026-08-01T00:00:00Z", "2026-08-01T00:00:01Z",
                                          "2026-08-01T00:00:02Z"]
    assert all("tool-results" not in line.decode() for line in lines(session))


@pytest.mark.parametrize("steps,bad", [
    ([], "commit"), ([], "release"), ([], "abort"),
    (["prepare"], "release"),
    (["prepare", "commit"], "abort"),
    (["prepare", "abort"], "commit"),
    (["prepare", "commit", "release"], "commit"),
])
def test_invalid_transitions_raise_and_write_nothing(session, steps, bad):
    j = journal(session)
    claim = claim_for("sess-7", 1, "tx-1")
    for step in steps:
        j.prepare(claim) if step == "prepare" else getattr(j, step)("tx-1")
    before = (session / JOURNAL_NAME).read_bytes() if steps else None
    with pytest.raises(LeaseTransitionError, match="tx-1"):
        getattr(j, bad)("tx-1")
    assert ((session / JOURNAL_NAME).read_bytes() if steps else None) == before


def test_repeating_the_current_phase_is_a_no_op(session):
    j = journal(session)
    claim = claim_for("sess-7", 1, "tx-1")
    j.prepare(claim)
    j.prepare(claim)
    j.commit("tx-1")
    j.commit("tx-1")
    assert len(lines(session)) == 2


def test_the_same_transaction_cannot_change_its_claim(session):
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-1"))
    with pytest.raises(LeaseTransitionError, match="another artifact"):
        j.prepare(claim_for("sess-7", 2, "tx-1"))


def test_an_edited_record_is_detected(session):
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-1"))
    j.commit("tx-1")
    path = session / JOURNAL_NAME
    path.write_bytes(path.read_bytes().replace(b'"committed"', b'"released"'))
    with pytest.raises(LeaseCorruptionError, match="line 2.*hash"):
        journal(session).recover()


def test_a_removed_record_breaks_the_chain(session):
    j = journal(session)
    for i in range(3):
        j.prepare(claim_for("sess-7", i, f"tx-{i}"))
    raw = lines(session)
    (session / JOURNAL_NAME).write_bytes(raw[0] + b"\n" + raw[2] + b"\n")
    with pytest.raises(LeaseCorruptionError, match="line 2"):
        journal(session).recover()


def test_a_recomputed_hash_still_breaks_the_chain(session):
    """Editing a record and fixing its own hash is caught by the next record's ``prev``."""
    from labmem.artifacts.leases import record_hash
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-1"))
    j.commit("tx-1")
    first, second = (json.loads(line) for line in lines(session))
    first["at"] = "2026-07-01T00:00:00Z"
    first["hash"] = record_hash(first)
    text = json.dumps(first) + "\n" + json.dumps(second) + "\n"
    (session / JOURNAL_NAME).write_text(text)
    with pytest.raises(LeaseCorruptionError, match="line 2.*chain"):
        journal(session).recover()


def test_corruption_is_reported_again_and_not_written_over(session):
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-1"))
    path = session / JOURNAL_NAME
    path.write_bytes(path.read_bytes().replace(b'"prepared"', b'"committed"'))
    fresh = journal(session)
    for _ in range(2):
        with pytest.raises(LeaseCorruptionError, match="line 1"):
            fresh.recover()
    before = path.read_bytes()
    with pytest.raises(LeaseCorruptionError):
        fresh.prepare(claim_for("sess-7", 2, "tx-2"))
    assert path.read_bytes() == before


# -- 7. torn tails, crashes and several processes --------------------------------------

def test_a_torn_tail_is_ignored_then_cut_before_the_next_append(session):
    assert run_child(artifact_workers.torn_write, str(session)) == 0
    recovery = journal(session).recover()
    assert recovery.torn_tail_bytes > 0
    assert [lease.phase for lease in recovery.leases] == [LeasePhase.PREPARED]
    j = journal(session)
    j.commit("tx-1")
    assert [json.loads(line)["phase"] for line in lines(session)] == ["prepared", "committed"]
    assert journal(session).recover().by_phase(LeasePhase.COMMITTED)


CRASH_CASES = [
    (["prepared", "committed", "released"], 1, LeasePhase.PREPARED, True),
    (["prepared", "committed", "released"], 2, LeasePhase.COMMITTED, True),
    (["prepared", "committed", "released"], 3, LeasePhase.RELEASED, False),
    (["prepared", "aborted"], 2, LeasePhase.ABORTED, False),
]


@pytest.mark.parametrize("phases,crash_after,expected,protects", CRASH_CASES)
def test_a_child_killed_after_each_durable_write(session, phases, crash_after, expected,
                                                 protects):
    assert run_child(artifact_workers.crash_after_phases, str(session), phases,
                     crash_after) == 0
    recovery = LeaseJournal(session).recover()  # a fresh instance, as after a restart
    (lease,) = recovery.leases
    assert lease.phase is expected and lease.protects is protects
    assert (lease.claim.source_id in recovery.protected_source_ids) is protects


def test_a_crash_inside_the_publisher_leaves_a_protecting_pending_lease(session):
    assert run_child(artifact_workers.crash_inside_publisher, str(session)) == 0
    recovery = LeaseJournal(session).recover()
    (lease,) = recovery.by_phase(LeasePhase.PREPARED)
    assert lease.claim.transaction_id == "tx-publish" and lease.protects


def test_several_processes_interleave_one_valid_chain(session):
    workers, count = 3, 10
    run_processes(artifact_workers.journal_cycles,
                  lambda w, s: (str(session), w, count, s.start), workers, expect=0)
    recovery = LeaseJournal(session).recover()  # verifies every hash and link
    assert len(recovery.leases) == workers * count
    assert len(recovery.by_phase(LeasePhase.RELEASED)) == workers * (count // 2)
    assert len(lines(session)) == workers * (count * 2 + count // 2)


def race(session, writers, *, noop_lock):
    return sorted(run_processes(
        artifact_workers.prepare_same_transaction,
        lambda w, s: (str(session), w, s.start, s.pause, noop_lock, s.results), writers))


def test_one_claim_wins_a_cross_process_race(session):
    outcomes = race(session, 3, noop_lock=False)
    assert outcomes == ["prepared", "refused", "refused"]
    (lease,) = LeaseJournal(session).recover().leases
    assert lease.phase is LeasePhase.PREPARED


def test_the_same_race_breaks_without_the_lock(session):
    """Control: with a no-op lock every writer passes the check, so nobody is refused."""
    outcomes = race(session, 3, noop_lock=True)
    assert "refused" not in outcomes


# -- 8. publish_reference ---------------------------------------------------------------

def test_prepared_is_durable_before_the_publisher_runs(session):
    j = journal(session)
    seen = []

    def publisher(claim):
        fresh = LeaseJournal(session).recover()  # what another process would see now
        seen.append([lease.phase for lease in fresh.leases])
        return "memory-1"

    assert j.publish_reference(claim_for("sess-7", 1, "tx-1"), publisher) == "memory-1"
    assert seen == [[LeasePhase.PREPARED]]
    assert j.leases()["tx-1"].phase is LeasePhase.COMMITTED


def test_a_rejected_publication_aborts(session):
    j = journal(session)

    def publisher(claim):
        raise PublicationRejected("memory refused the reference")

    with pytest.raises(PublicationRejected):
        j.publish_reference(claim_for("sess-7", 1, "tx-1"), publisher)
    assert LeaseJournal(session).leases()["tx-1"].phase is LeasePhase.ABORTED


def test_any_other_failure_leaves_the_lease_pending(session):
    j = journal(session)

    def publisher(claim):
        raise TimeoutError("memory service did not answer")

    with pytest.raises(TimeoutError):
        j.publish_reference(claim_for("sess-7", 1, "tx-1"), publisher)
    lease = LeaseJournal(session).leases()["tx-1"]
    assert lease.phase is LeasePhase.PREPARED and lease.protects


# -- 9. recovery ------------------------------------------------------------------------

def test_recovery_folds_phases_into_protection(session):
    j = journal(session)
    for txid, steps in {"a-pending": [], "b-committed": ["commit"],
                        "c-released": ["commit", "release"], "d-aborted": ["abort"]}.items():
        j.prepare(claim_for("sess-7", ord(txid[0]), txid))
        for step in steps:
            getattr(j, step)(txid)
    recovery = LeaseJournal(session).recover()
    protected = {lease.claim.transaction_id for lease in recovery.leases if lease.protects}
    assert protected == {"a-pending", "b-committed"}
    summary = recovery.to_dict()
    assert (summary["prepared"], summary["committed"], summary["released"],
            summary["aborted"]) == (1, 1, 1, 1)
    assert all(not item.startswith("/") for item in summary["protected"])


def test_a_fresh_journal_sees_other_instances_appends(session):
    a, b = journal(session), journal(session)
    a.prepare(claim_for("sess-7", 1, "tx-1"))
    b.commit("tx-1")  # b catches up under the lock before checking
    assert a.leases()["tx-1"].phase is LeasePhase.COMMITTED


# -- 12. reconciliation -----------------------------------------------------------------

@dataclass
class SmallOwner:
    """A reference owner written for the tests: a dict of publications and a seal list."""

    published: dict = field(default_factory=dict)
    unknown: set = field(default_factory=set)
    sealed: list = field(default_factory=list)
    generation: int = 0
    events: list = field(default_factory=list)

    def status(self, transaction_id):
        if transaction_id in self.unknown:
            return OwnerStatus("unknown")
        if transaction_id in self.published:
            source_id, sha = self.published[transaction_id]
            return OwnerStatus("published", source_id, sha)
        return OwnerStatus("absent")

    def seal_absent(self, transaction_id):
        self.sealed.append(transaction_id)
        self.generation += 1
        self.events.append(("sealed", transaction_id))
        return self.generation


def test_small_owner_satisfies_the_protocol():
    assert isinstance(SmallOwner(), ReferenceOwner)


def test_reconcile_pending(session):
    j = journal(session)
    claims = {txid: claim_for("sess-7", i, txid)
              for i, txid in enumerate(["tx-pub", "tx-absent", "tx-unknown", "tx-other"])}
    for claim in claims.values():
        j.prepare(claim)
    j.prepare(claim_for("sess-7", 9, "tx-done"))
    j.commit("tx-done")
    other = claim_for("sess-7", 99, "x")
    owner = SmallOwner(published={"tx-pub": (claims["tx-pub"].source_id,
                                             claims["tx-pub"].sha256),
                                  "tx-other": (other.source_id, other.sha256)},
                       unknown={"tx-unknown"})
    original_abort = LeaseJournal.abort

    def spying_abort(self, txid, **kw):
        owner.events.append(("aborted", txid))
        return original_abort(self, txid, **kw)

    LeaseJournal.abort = spying_abort
    try:
        report = LeaseJournal(session).reconcile_pending(owner)
    finally:
        LeaseJournal.abort = original_abort
    assert report.committed == ("tx-pub",)
    assert report.aborted == ("tx-absent",)
    assert report.still_pending == ("tx-unknown",)
    assert report.mismatched == ("tx-other",)
    assert owner.events == [("sealed", "tx-absent"), ("aborted", "tx-absent")]  # seal first
    leases = LeaseJournal(session).leases()
    assert leases["tx-pub"].phase is LeasePhase.COMMITTED
    assert leases["tx-absent"].phase is LeasePhase.ABORTED
    assert leases["tx-absent"].sealed_generation == 1
    assert leases["tx-unknown"].protects and leases["tx-other"].protects
    assert LeaseJournal(session).reconcile_pending(SmallOwner()).committed == ()


def test_a_failing_seal_leaves_the_lease_pending(session):
    j = journal(session)
    j.prepare(claim_for("sess-7", 1, "tx-1"))

    class BrokenOwner(SmallOwner):
        def seal_absent(self, transaction_id):
            raise OSError("owner unreachable")

    with pytest.raises(OSError):
        j.reconcile_pending(BrokenOwner())
    assert LeaseJournal(session).leases()["tx-1"].phase is LeasePhase.PREPARED


def test_reconcile_refuses_a_non_owner(session):
    with pytest.raises(LeaseValidationError, match="owner"):
        journal(session).reconcile_pending(object())


def test_owner_status_is_validated():
    with pytest.raises(LeaseValidationError, match="status.state"):
        OwnerStatus("maybe")


def test_journal_times_come_from_the_clock(session):
    j = LeaseJournal(session, clock=FixedClock("2030-05-05T05:05:05Z"))
    j.prepare(claim_for("sess-7", 1, "tx-1"))
    assert json.loads(lines(session)[0])["at"] == "2030-05-05T05:05:05Z"


def test_a_claim_of_another_session_is_refused(session):
    with pytest.raises(LeaseValidationError, match="session"):
        journal(session).prepare(claim_for("sess-8", 1, "tx-1"))
    assert not (session / JOURNAL_NAME).exists()


def test_publish_verifies_the_artifact_after_it_is_protected(tmp_path):
    from labmem.artifacts.externalize import ArtifactMissingError, ToolResultExternalizer
    session = tmp_path / "sess-7"
    ex = ToolResultExternalizer(session, clock=FixedClock(T0))
    artifact = ex.externalize("a" * 40_000, "bash").artifact
    j = journal(session)
    order = []

    def verify(source_id):
        order.append(("verify", j.leases()["tx-1"].phase))
        return ex.verify(source_id)

    j.publish_reference(RetentionClaim.for_reference("tx-1", artifact),
                        lambda claim: order.append(("publish", None)), verify=verify)
    assert order == [("verify", LeasePhase.PREPARED), ("publish", None)]
    gone = ex.externalize("b" * 40_000, "bash").artifact
    (session / "tool-results" / gone.filename).unlink()  # cleaned up just before
    published = []
    with pytest.raises(ArtifactMissingError):
        j.publish_reference(RetentionClaim.for_reference("tx-2", gone), published.append,
                            verify=ex.verify)
    assert published == [] and j.leases()["tx-2"].phase is LeasePhase.ABORTED


def test_the_chapter_picture_of_a_lease_draws_exactly_the_allowed_moves():
    from labmem.artifacts.leases import TRANSITIONS
    from labmem.notebook import DIAGRAMS

    diagram = DIAGRAMS["s13_leases"]
    phases = {phase.value for phase in LeasePhase}
    drawn = {(a.start, a.end) for a in diagram.arrows if {a.start, a.end} <= phases}
    allowed = {(before.value, after.value) for before, afters in TRANSITIONS.items()
               if before is not None for after in afters}
    assert drawn == allowed
    for phase in LeasePhase:  # the box says whether the phase protects
        label = diagram.box(phase.value).label
        assert label.startswith(phase.value.upper())
        assert ("(protects)" in label) == phase.protects
    assert diagram.problems() == []
