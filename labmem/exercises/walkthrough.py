"""Checkers for the walkthrough's exercises (the glue between layers, and the seam between
workspace memory and leases).

The walkthrough composes the chapters. Exercise 1 asks what reconciliation does in three
crash situations and replays them with real objects; Exercise 2 (:data:`BUILD`) compares
the learner's ``reference_status`` — what the workspace, as an artifact's reference owner,
can vouch for after a restart — with the library's on generated facts; Exercise 3 puts the
learner's glue (:data:`PIECES`) into the chapter's from-scratch run
(:mod:`labmem.scratch.walkthrough`) and judges it with the walkthrough's contract suite
(:func:`check_layer`). :func:`compare_runs` measures the from-scratch run beside the
library's.
"""

from __future__ import annotations

import inspect
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labmem.artifacts import (
    LeaseJournal,
    OwnerStatus,
    RetentionClaim,
    ToolResultExternalizer,
)
from labmem.core.clock import FixedClock, parse_timestamp
from labmem.core.i18n import N_, _
from labmem.core.provenance import MemorySource
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.exercises.contracts import ContractReport, assemble
from labmem.exercises.suites.walkthrough import START, SUITE
from labmem.scratch import walkthrough as scratch
from labmem.walkthrough import (
    WorkspaceReferenceOwner,
    home_listing,
    reference_evidence,
    reference_status,
    run_walkthrough,
)
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
    name = _("exercise 1 (reconciliation after a crash)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, Sequence) or len(answer) != 3 \
            or any(a not in EXERCISE_1_CHOICES for a in answer):
        return Feedback(name, False, _("answer with three words, one per transaction, each one "
                                       "of {choices}")
                                     .format(choices=EXERCISE_1_CHOICES))
    expected = replay_exercise_1()
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, _("published with the same digest commits; absent is "
                                      "sealed, then aborted; unknown keeps protecting"))
    if got[2] == "abort":
        return Feedback(name, False, _("tx-c: the workspace holds a fact it cannot read a digest "
                                       "from — is that the same as holding nothing?"))
    if got[1] != expected[1]:
        return Feedback(name, False, _("tx-b: the owner definitely holds nothing; what makes it "
                                       "safe to let the artifact go?"))
    return Feedback(name, False, _("ask the owner's question for each transaction first "
                                   "(published, absent or unknown), then apply the lease rule"))


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
        hint=N_("unknown is not absent: a stored fact proves a publication only when it names "
                "its source and exactly one digest")),
)


# -- building the glue ----------------------------------------------------------------------

#: The pieces of the chapter's from-scratch run the learner writes in Exercise 3, in order.
PIECES = ("hand_to_workspace", "hand_to_store")


def check_layer(**pieces: Any) -> ContractReport:
    """Exercise 3: the chapter's from-scratch run with the learner's glue
    (``hand_to_workspace=...``, ``hand_to_store=...``) put in place of the module's, judged
    by the walkthrough's contract suite. A piece left as ``None`` keeps the module's own."""
    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        raise TypeError(f"check_layer() takes {', '.join(PIECES)}; not {unknown[0]!r}")
    given = {name: piece for name, piece in pieces.items() if piece is not None}
    return SUITE.run(assemble(scratch, given), who="your")


# -- from scratch vs the library, measured --------------------------------------------------

def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".lock")


def _source_lines(*objects: Any) -> int:
    """Lines of the source files that define ``objects`` (a module, or what a module defines)."""
    files = {Path(inspect.getsourcefile(o)) for o in objects}
    return sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)


def compare_runs(directory: str | Path) -> dict[str, dict[str, Any]]:
    """The from-scratch run and the library's, each in a new home under ``directory``:
    what each composes, checks and leaves on disk (lock files aside). Deterministic."""
    root = Path(directory)
    mine = root / "compare-scratch"
    checks = scratch.run_all(scratch.Home(mine), scratch.Clock(START))
    library_home = root / "compare-library"
    result = run_walkthrough(library_home, clock=FixedClock(START), out=lambda line: None)
    columns = {}
    for label, home, found, layers, lines in (
            ("from scratch", mine, checks, "s09–s12", _source_lines(scratch)),
            ("library", library_home, result.checks, "s09–s14",
             _source_lines(run_walkthrough, WorkspaceReferenceOwner))):
        files = _files(home)
        log_lines = sum(p.read_bytes().count(b"\n") for p in files if p.suffix == ".jsonl")
        columns[label] = {
            "layers composed": layers,
            "boundary checks passed": f"{sum(found.values())} of {len(found)}",
            "files in the home": len(files),
            "bytes in the home": sum(p.stat().st_size for p in files),
            "lines in .jsonl logs": log_lines,
            "lines of the run's own code": lines}
    assert len(_files(library_home)) == len(home_listing(library_home))
    return columns


__all__ = ["BUILD", "EXERCISE_1_CHOICES", "EXERCISE_1_SITUATIONS", "PIECES", "check_layer",
           "check_reconciliation", "compare_runs", "replay_exercise_1"]
