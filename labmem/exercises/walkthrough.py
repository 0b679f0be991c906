"""Checkers for the walkthrough's exercises (the seam between workspace memory and leases).

The walkthrough composes the chapters; its one rule of its own is what the workspace, as
an artifact's reference owner, can vouch for after a restart
(:func:`~labmem.walkthrough.reference_status`). Exercise 1 asks what reconciliation does
in three crash situations and replays them with real objects; the build exercise
(:data:`BUILD`) compares the learner's ``reference_status`` with the library's on
generated facts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypothesis import strategies as st

from labmem.artifacts import (
    LeaseJournal,
    OwnerStatus,
    RetentionClaim,
    ToolResultExternalizer,
)
from labmem.core.clock import FixedClock, parse_timestamp
from labmem.core.provenance import MemorySource
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.walkthrough import WorkspaceReferenceOwner, reference_evidence, reference_status
from labmem.workspace import Fact, WorkspaceMemory

NOW = parse_timestamp("2026-08-01T12:00:00Z", field="NOW")

#: Exercise 1: three prepared leases, each interrupted differently before its commit.
EXERCISE_1_SITUATIONS = (
    ("tx-a", "the outcome fact was written, with the artifact's source and digest"),
    ("tx-b", "the process died before writing anything to the workspace"),
    ("tx-c", "a fact with the transaction id was written, but without source or digest"),
)
EXERCISE_1_CHOICES = ("commit", "abort", "pending")


def replay_exercise_1() -> tuple[str, str, str]:
    """What ``reconcile_pending`` does with each situation, replayed with real objects."""
    clock = FixedClock(NOW)
    with tempfile.TemporaryDirectory(prefix="labmem-walkthrough-ex-") as root:
        session = Path(root) / "session-1"
        artifact = ToolResultExternalizer(session, clock=clock).externalize(
            "tests/test_store.py::test_case PASSED\n" * 2_000, "bash").artifact
        journal = LeaseJournal(session, clock=clock)
        workspace = WorkspaceMemory(Path(root) / "workspace", workspace_id="exercise",
                                    clock=clock)
        owner = WorkspaceReferenceOwner(workspace)
        claims = {tx: RetentionClaim.for_reference(tx, artifact)
                  for tx, _ in EXERCISE_1_SITUATIONS}
        for claim in claims.values():
            journal.prepare(claim)
        owner.publish(claims["tx-a"], content="The test log is kept.", title="pytest log")
        workspace.append_fact("The test log is kept.", kind="outcome", fact_id="tx-c")
        report = journal.reconcile_pending(owner)
        outcome = {**{tx: "commit" for tx in report.committed},
                   **{tx: "abort" for tx in report.aborted},
                   **{tx: "pending" for tx in (*report.still_pending, *report.mismatched)}}
        return tuple(outcome[tx] for tx, _ in EXERCISE_1_SITUATIONS)


def check_reconciliation(answer: Sequence[str] | None) -> Feedback:
    """Exercise 1: for tx-a, tx-b, tx-c, what ``reconcile_pending`` does: commit, abort
    or pending."""
    name = "exercise 1 (reconciliation after a crash)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, Sequence) or len(answer) != 3 \
            or any(a not in EXERCISE_1_CHOICES for a in answer):
        return Feedback(name, False, "answer with three words, one per transaction, each "
                                     f"one of {EXERCISE_1_CHOICES}")
    expected = replay_exercise_1()
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, "published with the same digest commits; absent is "
                                    "sealed, then aborted; unknown keeps protecting")
    if got[2] == "abort":
        return Feedback(name, False, "tx-c: the workspace holds a fact it cannot read a digest "
                                     "from — is that the same as holding nothing?")
    if got[1] != expected[1]:
        return Feedback(name, False, "tx-b: the owner definitely holds nothing; what makes it "
                                     "safe to let the artifact go?")
    return Feedback(name, False, "ask the owner's question for each transaction first "
                                 "(published, absent or unknown), then apply the lease rule")


# -- build it yourself ------------------------------------------------------------------

_SOURCES = ("artifact:session-1:000001", "artifact:session-1:000002")
_EVIDENCE = (reference_evidence(_SOURCES[0], "a3bb10bc"),  # short digests, easy to read
             reference_evidence(_SOURCES[1], "c7fcd2aa"), _SOURCES[0], "transcript:session-1:2")


def _fact(source: str | None, evidence: Sequence[str]) -> Fact:
    return Fact(fact_id="tx-1", recorded_at=NOW, kind="outcome",
                content="The test log is kept as an artifact.", importance=3,
                memory_key=None,
                source=None if source is None else MemorySource(
                    source, "tool_artifact", "pytest log", "2026-08-01T12:00:00Z"),
                evidence=tuple(sorted(set(evidence))))


_FACTS = st.one_of(
    st.none(),
    st.builds(_fact, st.one_of(st.none(), st.sampled_from(_SOURCES)),
              st.lists(st.sampled_from(_EVIDENCE), max_size=3)))


def _describe(args: tuple) -> str:
    (fact,) = args
    if fact is None:
        return "no fact under the transaction id (None)"
    source = None if fact.source is None else fact.source.source_id
    return f"a fact with source {source!r} and evidence {list(fact.evidence)}"


def _status(value: OwnerStatus) -> str:
    """The answer as one readable phrase: the state, then what it vouches for (if any)."""
    return " ".join(str(part) for part in (value.state, value.source_id, value.sha256)
                    if part is not None)


BUILD = (
    BuildExercise(
        chapter="walkthrough", name="reference_status", reference=reference_status,
        inputs=st.tuples(_FACTS), describe=_describe, project=_status,
        hint="unknown is not absent: a stored fact proves a publication only when it names "
             "its source and exactly one digest"),
)

__all__ = ["BUILD", "EXERCISE_1_CHOICES", "EXERCISE_1_SITUATIONS", "check_reconciliation",
           "replay_exercise_1"]
