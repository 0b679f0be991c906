"""s13 cleanup: a read-only plan, then a locked, re-verified, idempotent apply."""

import json
import os
from datetime import timedelta

import pytest

from labmem.artifacts.cleanup import (
    ACTION_FOR_REASON,
    CORRUPT,
    ORPHAN,
    OVER_LIMIT,
    RECENT,
    REFERENCED,
    SYMLINK,
    UNKNOWN,
    ArtifactFacts,
    CleanupError,
    CleanupPolicy,
    apply_cleanup,
    cleanup_reason,
    plan_cleanup,
)
from labmem.artifacts.externalize import ToolResultExternalizer
from labmem.artifacts.leases import LeaseJournal, LeasePhase, RetentionClaim
from labmem.core.clock import FixedClock

T0 = "2026-08-01T00:00:00Z"


class Session:
    """An externalizer, a journal and a clock over one session directory."""

    def __init__(self, root):
        self.dir = root / "sess-9"
        self.clock = FixedClock(T0)
        self.ex = ToolResultExternalizer(self.dir, clock=self.clock)
        self.journal = LeaseJournal(self.dir, clock=self.clock)
        self.results = self.dir / "tool-results"

    def artifact(self, text):
        return self.ex.externalize(text * 40_000, "bash").artifact

    def reference(self, artifact, txid):
        self.journal.publish_reference(RetentionClaim.for_reference(txid, artifact),
                                       lambda claim: None)

    def plan(self, **policy):
        return plan_cleanup(journal=self.journal, policy=CleanupPolicy(**policy),
                            now=self.clock.now())

    def apply(self, plan):
        return apply_cleanup(plan, journal=self.journal, now=self.clock.now())


@pytest.fixture
def s(tmp_path):
    return Session(tmp_path)


def tree(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def reasons(plan):
    return {d.filename: d.reason for d in plan.decisions}


# -- the rule for one file: cleanup_reason ----------------------------------------------

DAY = timedelta(days=1)
P, C, R, A = LeasePhase.PREPARED, LeasePhase.COMMITTED, LeasePhase.RELEASED, LeasePhase.ABORTED


def intact(age=2 * DAY, leases=()):
    return ArtifactFacts("file", "d1", "d1", age, leases)


@pytest.mark.parametrize("facts,reason", [
    (ArtifactFacts("symlink", "d1", "d1", 2 * DAY), SYMLINK),
    (ArtifactFacts("other", "d1", "d1", 2 * DAY), UNKNOWN),
    (ArtifactFacts("file"), UNKNOWN),  # not an artifact name, or no record
    (ArtifactFacts("file", "d1", "d2", 2 * DAY), CORRUPT),
    (intact(leases=((P, "d1"),)), REFERENCED),
    (intact(leases=((C, "d1"),)), REFERENCED),
    (intact(age=DAY - timedelta(seconds=1)), RECENT),
    (intact(age=DAY), ORPHAN),  # exactly the TTL: no longer recent
    (intact(leases=((R, "d1"), (A, "d1"))), ORPHAN),  # finished leases protect nothing
])
def test_cleanup_reason_each_rule(facts, reason):
    assert cleanup_reason(facts, DAY) == reason


@pytest.mark.parametrize("facts,reason", [
    (ArtifactFacts("symlink", None, None, None, ((P, "d1"),)), SYMLINK),  # links first
    (ArtifactFacts("file", "d1", "d2", 0 * DAY, ((C, "d1"),)), CORRUPT),  # evidence > lease
    (intact(leases=((C, "d1"), (P, "d2"))), CORRUPT),  # a protecting claim on other bytes
    (intact(leases=((R, "d2"),)), ORPHAN),  # a finished claim's digest does not matter
    (intact(age=365 * DAY, leases=((P, "d1"),)), REFERENCED),  # pending beats any age
    (intact(age=None), RECENT),  # an artifact that cannot be dated is not shown to be old
])
def test_cleanup_reason_order_of_the_rules(facts, reason):
    assert cleanup_reason(facts, DAY) == reason


def test_cleanup_reason_ttl_zero_and_phase_names():
    assert cleanup_reason(intact(age=0 * DAY), timedelta(0)) == ORPHAN
    assert ArtifactFacts("file", "d1", "d1", DAY, (("prepared", "d1"),)).leases == ((P, "d1"),)
    assert set(ACTION_FOR_REASON) == {REFERENCED, RECENT, OVER_LIMIT, UNKNOWN, CORRUPT,
                                      SYMLINK, ORPHAN}
    assert [r for r, action in ACTION_FOR_REASON.items() if action != "retain"] == [SYMLINK,
                                                                                     ORPHAN]


def test_artifact_facts_refuse_an_unknown_file_type():
    with pytest.raises(CleanupError, match="file_type"):
        ArtifactFacts("fifo")


# -- 10. planning ------------------------------------------------------------------------

def test_plan_decides_every_file_and_changes_nothing(s):
    old_ref = s.artifact("a")
    old_orphan = s.artifact("b")
    tampered = s.artifact("c")
    s.reference(old_ref, "tx-ref")
    s.clock.advance(timedelta(days=2))
    recent = s.artifact("d")
    (s.results / "notes.txt").write_text("not ours")
    path = s.results / tampered.filename
    path.write_bytes(b"X" + path.read_bytes()[1:])
    before, journal_before = tree(s.results), (s.dir / "leases.jsonl").read_bytes()
    plan = s.plan()
    assert reasons(plan) == {old_ref.filename: REFERENCED, old_orphan.filename: ORPHAN,
                             tampered.filename: CORRUPT, recent.filename: RECENT,
                             "notes.txt": UNKNOWN}
    assert [d.filename for d in plan.to_delete] == [old_orphan.filename]
    assert tree(s.results) == before  # the dry run is read-only
    assert (s.dir / "leases.jsonl").read_bytes() == journal_before


def test_ages_use_the_recorded_creation_time_not_mtime(s):
    artifact = s.artifact("a")
    os.utime(s.results / artifact.filename, (0, 0))  # mtime in 1970
    assert reasons(s.plan())[artifact.filename] == RECENT
    s.clock.advance(timedelta(hours=23, minutes=59))
    assert reasons(s.plan())[artifact.filename] == RECENT
    s.clock.advance(timedelta(minutes=1))  # exactly one day old: past the default TTL
    assert reasons(s.plan())[artifact.filename] == ORPHAN
    assert reasons(s.plan(orphan_ttl=timedelta(days=7)))[artifact.filename] == RECENT


def test_pending_leases_protect_regardless_of_ttl_released_ones_do_not(s):
    pending, committed, released, aborted = (s.artifact(c) for c in "abcd")
    s.journal.prepare(RetentionClaim.for_reference("tx-p", pending))
    s.reference(committed, "tx-c")
    s.reference(released, "tx-r")
    s.journal.release("tx-r")
    s.journal.prepare(RetentionClaim.for_reference("tx-a", aborted))
    s.journal.abort("tx-a")
    s.clock.advance(timedelta(days=365))
    got = reasons(s.plan())
    assert got == {pending.filename: REFERENCED, committed.filename: REFERENCED,
                   released.filename: ORPHAN, aborted.filename: ORPHAN}


def test_a_claim_with_another_digest_marks_the_file_corrupt(s):
    artifact = s.artifact("a")
    path = s.results / artifact.filename
    s.reference(artifact, "tx-1")
    path.write_bytes(path.read_bytes()[:-1] + b"Z")
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    assert reasons(plan)[artifact.filename] == CORRUPT and not plan.to_delete


def test_deletion_limit(s):
    for c in "abcde":
        s.artifact(c)
    s.clock.advance(timedelta(days=2))
    plan = s.plan(max_deletions=2)
    assert plan.counts() == {ORPHAN: 2, OVER_LIMIT: 3}
    assert len(s.apply(plan).deleted) == 2


def test_missing_but_referenced_claims_are_listed(s):
    artifact = s.artifact("a")
    s.reference(artifact, "tx-1")
    (s.results / artifact.filename).unlink()
    plan = s.plan()
    assert plan.missing_references == (artifact.source_id,) and plan.decisions == ()


def test_plans_and_reports_contain_no_paths(s, tmp_path):
    s.artifact("a")
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    report = s.apply(plan)
    text = json.dumps(plan.to_dict()) + json.dumps(report.to_dict())
    assert str(tmp_path) not in text and "tool-results" not in text and "/" not in text
    assert plan.to_dict()["dry_run"] is True


def test_an_empty_session_plans_nothing(s):
    plan = s.plan()
    assert plan.decisions == () and s.apply(plan).deleted == ()


@pytest.mark.parametrize("kwargs,field", [({"orphan_ttl": 5}, "orphan_ttl"),
                                          ({"max_deletions": -1}, "max_deletions")])
def test_policy_is_validated(kwargs, field):
    with pytest.raises(CleanupError, match=field):
        CleanupPolicy(**kwargs)


def test_naive_now_is_refused(s):
    from datetime import datetime
    with pytest.raises(CleanupError, match="now"):
        plan_cleanup(journal=s.journal, now=datetime(2026, 8, 1))


# -- 11. applying ------------------------------------------------------------------------

def test_apply_deletes_orphans_and_is_idempotent(s):
    keep, orphan = s.artifact("a"), s.artifact("b")
    s.reference(keep, "tx-1")
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    first = s.apply(plan)
    assert first.deleted == (orphan.filename,) and first.bytes_freed == orphan.byte_size
    assert sorted(p.name for p in s.results.iterdir()) == [keep.filename]
    second = s.apply(plan)
    assert second.deleted == () and second.already_gone == (orphan.filename,)
    assert s.ex.verify(keep.source_id) == keep


def test_a_reference_published_after_planning_is_retained(s):
    artifact = s.artifact("a")
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    assert plan.to_delete
    s.reference(artifact, "tx-late")
    report = s.apply(plan)
    assert report.retained_referenced == (artifact.filename,) and report.deleted == ()
    assert (s.results / artifact.filename).exists()


def test_a_pending_lease_from_another_instance_after_planning_is_retained(s):
    artifact = s.artifact("a")
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    LeaseJournal(s.dir).prepare(RetentionClaim.for_reference("tx-other", artifact))
    assert s.apply(plan).retained_referenced == (artifact.filename,)


def test_a_file_changed_after_planning_is_a_race_not_a_deletion(s):
    changed, replaced = s.artifact("a"), s.artifact("b")
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    path = s.results / changed.filename
    path.write_bytes(b"!" + path.read_bytes()[1:])  # same inode, new bytes
    other = s.results / replaced.filename
    copy = s.results / "copy.tmp"
    copy.write_bytes(other.read_bytes())
    os.replace(copy, other)  # same bytes, another inode: another file now
    report = s.apply(plan)
    assert sorted(report.races) == sorted([changed.filename, replaced.filename])
    assert report.deleted == () and path.exists() and other.exists()


def test_a_symlink_is_denied_and_its_target_never_touched(s, tmp_path):
    artifact = s.artifact("a")
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    (s.results / "link.txt").symlink_to(outside)
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    assert reasons(plan) == {artifact.filename: ORPHAN, "link.txt": SYMLINK}
    assert {d.action for d in plan.decisions if d.reason == SYMLINK} == {"deny"}
    # swap the orphan for a symlink to the outside file after planning
    path = s.results / artifact.filename
    path.unlink()
    path.symlink_to(outside)
    report = s.apply(plan)
    assert report.races == (artifact.filename,) and report.deleted == ()
    assert outside.read_text() == "keep me" and (s.results / "link.txt").is_symlink()


def test_apply_waits_for_the_journal_lock(s):
    """apply re-reads claims under the journal's lock: it cannot start while a writer holds it."""
    from labmem.core.locking import LockTimeoutError
    from labmem.core.storage import file_lock
    s.artifact("a")
    s.clock.advance(timedelta(days=2))
    plan = s.plan()
    holder = file_lock(s.dir / "leases.jsonl")
    holder.acquire()
    try:
        blocked = LeaseJournal(s.dir, lock_factory=lambda p: file_lock(p, timeout=0.2))
        with pytest.raises(LockTimeoutError):
            apply_cleanup(plan, journal=blocked, now=s.clock.now())
    finally:
        holder.release()
    assert len(s.apply(plan).deleted) == 1


def test_a_plan_of_another_session_is_refused(s, tmp_path):
    plan = s.plan()
    other = LeaseJournal(tmp_path / "sess-10")
    with pytest.raises(CleanupError, match="session"):
        apply_cleanup(plan, journal=other, now=s.clock.now())
    with pytest.raises(CleanupError, match="before"):
        apply_cleanup(plan, journal=s.journal, now=s.clock.now() - timedelta(seconds=1))
