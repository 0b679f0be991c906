"""The walkthrough's seam rule: what the workspace, as reference owner, can vouch for."""

from datetime import datetime, timezone

from labmem.artifacts import OwnerStatus
from labmem.core.clock import FixedClock
from labmem.core.provenance import MemorySource
from labmem.walkthrough import (
    DIGEST_MARK,
    WorkspaceReferenceOwner,
    reference_evidence,
    reference_status,
)
from labmem.workspace import Fact, WorkspaceMemory

SOURCE = "artifact:session-1:000001"
DIGEST = "a3bb10bc" * 8


def outcome(*evidence, source=SOURCE):
    return Fact(fact_id="tx-1", recorded_at=datetime(2026, 8, 1, tzinfo=timezone.utc),
                kind="outcome", content="The test log is kept.", importance=3, memory_key=None,
                source=None if source is None else MemorySource(source, "tool_artifact", "log",
                                                                "2026-08-01T00:00:00Z"),
                evidence=tuple(sorted(evidence)))


def test_the_evidence_id_carries_source_and_full_digest():
    assert reference_evidence(SOURCE, DIGEST) == f"{SOURCE}{DIGEST_MARK}{DIGEST}"


def test_no_fact_is_absent():
    assert reference_status(None) == OwnerStatus("absent")


def test_a_written_reference_reads_back_as_published():
    fact = outcome(reference_evidence(SOURCE, DIGEST), "transcript:session-1:2")
    assert reference_status(fact) == OwnerStatus("published", SOURCE, DIGEST)


def test_a_fact_it_cannot_read_is_unknown_never_absent():
    marked = reference_evidence(SOURCE, DIGEST)
    assert reference_status(outcome()) == OwnerStatus("unknown")  # no digest at all
    assert reference_status(outcome(marked, source=None)) == OwnerStatus("unknown")
    two = outcome(marked, reference_evidence("artifact:session-1:000002", DIGEST))
    assert reference_status(two) == OwnerStatus("unknown")  # two digests: no guessing


def test_the_digest_evidence_says_which_artifact_is_held():
    other = "artifact:session-1:000002"
    fact = outcome(reference_evidence(other, DIGEST))
    assert reference_status(fact) == OwnerStatus("published", other, DIGEST)


def test_a_doubled_mark_does_not_crash_reconciliation():
    fact = outcome(f"{SOURCE}{DIGEST_MARK}{DIGEST}{DIGEST_MARK}x")
    status = reference_status(fact)  # read at the first mark: a digest no claim has
    assert status.state == "published" and status.sha256 != DIGEST


def test_the_owner_answers_from_the_stored_fact(tmp_path):
    clock = FixedClock("2026-08-01T12:00:00Z")
    workspace = WorkspaceMemory(tmp_path / "ws", workspace_id="w", clock=clock)
    workspace.append_fact("The test log is kept.", kind="outcome", fact_id="tx-9",
                          source=MemorySource(SOURCE, "tool_artifact", "log",
                                              "2026-08-01T12:00:00Z"),
                          evidence=[reference_evidence(SOURCE, DIGEST)])
    fresh = WorkspaceReferenceOwner(WorkspaceMemory(tmp_path / "ws", clock=clock))
    assert fresh.status("tx-9") == OwnerStatus("published", SOURCE, DIGEST)
    assert fresh.status("tx-10") == OwnerStatus("absent")
