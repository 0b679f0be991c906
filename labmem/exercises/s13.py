"""Checkers for the s13 exercises (artifacts: thresholds, cleanup, reconciliation).

Each checker compares the learner's answer with what the real library does on a
throw-away session, not with a hand-written copy of the answer.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from labmem.artifacts import (
    ExternalizationPolicy,
    LeaseJournal,
    OwnerStatus,
    RetentionClaim,
    ToolResultExternalizer,
    plan_cleanup,
)
from labmem.core.clock import FixedClock, parse_timestamp
from labmem.exercises import Feedback, not_answered

T0 = parse_timestamp("2026-08-01T00:00:00Z", field="T0")

#: Exercise 1: name → (tool, output). Which does the default policy externalize?
EXERCISE_1_OUTPUTS: dict[str, tuple[str, str]] = {
    "bash, 20,000 Chinese characters": ("bash", "中" * 20_000),
    "grep, 20,000 Chinese characters": ("grep", "中" * 20_000),
    "bash, 40,000 ASCII characters": ("bash", "a" * 40_000),
    "read_file, 50,000 ASCII characters": ("read_file", "a" * 50_000),
    "read_file, 13,000 emoji": ("read_file", "😀" * 13_000),
}

#: Exercise 2: file → (age in hours at cleanup time, lease history, tampered?).
EXERCISE_2_FILES: dict[str, tuple[int, tuple[str, ...], bool]] = {
    "A": (72, ("prepare", "commit"), False),
    "B": (72, (), False),
    "C": (2, (), False),
    "D": (240, ("prepare",), False),  # the process crashed before commit
    "E": (48, ("prepare", "commit", "release"), False),
    "F": (120, (), True),
}

#: Exercise 3: the owner's answer for a pending lease → the lease's phase afterwards.
EXERCISE_3_ANSWERS = ("published", "absent", "unknown")


def externalized_names() -> set[str]:
    """Exercise 1, computed with the real default policy."""
    policy = ExternalizationPolicy()
    return {name for name, (tool, output) in EXERCISE_1_OUTPUTS.items()
            if policy.should_externalize(output, tool)}


def deleted_files() -> set[str]:
    """Exercise 2, computed by planning a real cleanup over a throw-away session."""
    with tempfile.TemporaryDirectory(prefix="labmem-s13-ex-") as root:
        session = Path(root) / "exercise"
        now = T0 + timedelta(hours=max(age for age, _, _ in EXERCISE_2_FILES.values()))
        clock = FixedClock(T0)
        journal = LeaseJournal(session, clock=clock)
        names = {}
        for label, (age, history, tampered) in EXERCISE_2_FILES.items():
            clock.at = now - timedelta(hours=age)
            ex = ToolResultExternalizer(session, clock=clock)
            artifact = ex.externalize(f"{label}\n" * 20_000, "bash").artifact
            names[artifact.filename] = label
            for step in history:
                if step == "prepare":
                    journal.prepare(RetentionClaim.for_reference(f"tx-{label}", artifact))
                else:
                    getattr(journal, step)(f"tx-{label}")
            if tampered:
                path = session / "tool-results" / artifact.filename
                path.write_bytes(b"?" + path.read_bytes()[1:])
        plan = plan_cleanup(journal=journal, now=now)
        return {names[d.filename] for d in plan.to_delete}


class _Owner:
    def __init__(self, state: str) -> None:
        self.state = state
        self.claim: RetentionClaim | None = None

    def status(self, transaction_id: str) -> OwnerStatus:
        if self.state == "published" and self.claim is not None:
            return OwnerStatus("published", self.claim.source_id, self.claim.sha256)
        return OwnerStatus(self.state)

    def seal_absent(self, transaction_id: str) -> int:
        return 1


def reconciled_phases() -> dict[str, str]:
    """Exercise 3: crash between prepare and commit, then reconcile with each answer."""
    phases = {}
    with tempfile.TemporaryDirectory(prefix="labmem-s13-ex-") as root:
        for state in EXERCISE_3_ANSWERS:
            session = Path(root) / state
            ex = ToolResultExternalizer(session, clock=FixedClock(T0))
            artifact = ex.externalize("x" * 40_000, "bash").artifact
            claim = RetentionClaim.for_reference("tx-1", artifact)
            LeaseJournal(session, clock=FixedClock(T0)).prepare(claim)  # ... then a crash
            owner = _Owner(state)
            owner.claim = claim
            fresh = LeaseJournal(session, clock=FixedClock(T0))
            fresh.reconcile_pending(owner)
            phases[state] = fresh.leases()["tx-1"].phase.value
    return phases


def check_externalized(answer: Any) -> Feedback:
    name = "s13.1 externalized outputs"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, (set, frozenset, list, tuple)):
        return Feedback(name, False, "give a set of names from EXERCISE_1_OUTPUTS")
    expected = externalized_names()
    if set(answer) == expected:
        return Feedback(name, True, "bash is measured in characters, other tools in UTF-8 "
                        "bytes (3 per CJK character, 4 per emoji)")
    if "bash, 20,000 Chinese characters" in set(answer):
        return Feedback(name, False, "bash counts characters: 20,000 is under 30,000")
    return Feedback(name, False, "count UTF-8 bytes for every tool except bash "
                    "(limit 51,200), characters for bash (limit 30,000)")


def check_deleted(answer: Any) -> Feedback:
    name = "s13.2 cleanup deletions"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, (set, frozenset, list, tuple)):
        return Feedback(name, False, "give a set of file labels such as {'A'}")
    expected = deleted_files()
    given = set(answer)
    if given == expected:
        return Feedback(name, True, "only unreferenced, intact files past the one-day TTL go")
    if "D" in given:
        return Feedback(name, False, "a pending (prepared) lease protects its artifact, "
                        "whatever its age")
    if "F" in given:
        return Feedback(name, False, "a tampered file is kept as evidence, never deleted")
    if "E" not in given:
        return Feedback(name, False, "a released lease no longer protects anything")
    return Feedback(name, False, "check each file: lease phase, age against one day, digest")


def check_reconciled(answer: Any) -> Feedback:
    name = "s13.3 reconciliation"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, Mapping):
        return Feedback(name, False, "give a dict: owner answer → phase name")
    expected = reconciled_phases()
    given = {key: getattr(value, "value", value) for key, value in answer.items()}
    if given == expected:
        return Feedback(name, True, "only a confirmed answer settles a lease; "
                        "'unknown' keeps it pending and protecting")
    if given.get("unknown") != expected["unknown"]:
        return Feedback(name, False, "an unknown outcome must not release the artifact")
    return Feedback(name, False, "a matching publication commits; a confirmed absence "
                    "(sealed first) aborts")
