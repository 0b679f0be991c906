"""Checkers for the s13 exercises (artifacts: thresholds, cleanup, reconciliation).

Each checker compares the learner's answer with what the real library does on a
throw-away session, not with a hand-written copy of the answer. ``BUILD`` holds the
build-it-yourself exercise: the cleanup rule for one file, checked against
:func:`labmem.artifacts.cleanup_reason`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labmem.artifacts import (
    ArtifactFacts,
    ExternalizationPolicy,
    LeaseJournal,
    LeasePhase,
    OwnerStatus,
    RetentionClaim,
    ToolResultExternalizer,
    cleanup_reason,
    plan_cleanup,
)
from labmem.core.clock import FixedClock, parse_timestamp
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise

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
    "B": (24, (), False),  # exactly the one-day TTL
    "C": (23, (), False),
    "D": (240, ("prepare",), False),  # the process crashed before commit
    "E": (20, ("prepare", "commit", "release"), False),  # released, but young
    "F": (120, (), True),
    "G": (30, ("prepare", "abort"), False),
}

#: Exercise 3: what the owner answers about a pending lease (label → description).
EXERCISE_3_ANSWERS: dict[str, str] = {
    "published": "published, with the same source id and digest",
    "published_other": "published, but a reference with another digest",
    "absent": "absent: it definitely does not hold the reference",
    "unknown": "unknown: it cannot tell right now",
}


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
    """An owner that gives one of the exercise's answers about any transaction."""

    def __init__(self, answer: str, claim: RetentionClaim) -> None:
        self.answer, self.claim = answer, claim

    def status(self, transaction_id: str) -> OwnerStatus:
        if self.answer == "published":
            return OwnerStatus("published", self.claim.source_id, self.claim.sha256)
        if self.answer == "published_other":
            return OwnerStatus("published", self.claim.source_id, "0" * 64)
        return OwnerStatus(self.answer)

    def seal_absent(self, transaction_id: str) -> int:
        return 1


def reconciled_phases() -> dict[str, str]:
    """Exercise 3: crash between prepare and commit, then reconcile with each answer."""
    phases = {}
    with tempfile.TemporaryDirectory(prefix="labmem-s13-ex-") as root:
        for answer in EXERCISE_3_ANSWERS:
            session = Path(root) / answer.replace("_", "-")
            ex = ToolResultExternalizer(session, clock=FixedClock(T0))
            artifact = ex.externalize("x" * 40_000, "bash").artifact
            claim = RetentionClaim.for_reference("tx-1", artifact)
            LeaseJournal(session, clock=FixedClock(T0)).prepare(claim)  # ... then a crash
            fresh = LeaseJournal(session, clock=FixedClock(T0))
            fresh.reconcile_pending(_Owner(answer, claim))
            phases[answer] = fresh.leases()["tx-1"].phase.value
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
        return Feedback(name, True, "only unreferenced, intact files at least one day old go: "
                        "B is exactly one day old, G's lease was aborted")
    unknown = given - set(EXERCISE_2_FILES)
    if unknown:
        return Feedback(name, False, f"no file is labelled {sorted(unknown)[0]!r}; use "
                        f"{', '.join(EXERCISE_2_FILES)}")
    if "D" in given:
        return Feedback(name, False, "a pending (prepared) lease protects its artifact, "
                        "whatever its age")
    if "F" in given:
        return Feedback(name, False, "a tampered file is kept as evidence, never deleted")
    if "E" in given:
        return Feedback(name, False, "E's lease was released, so nothing protects it — but "
                        "how old is it?")
    if "G" not in given:
        return Feedback(name, False, "an aborted lease protects nothing")
    if "B" not in given:
        return Feedback(name, False, "a file stays only while it is *younger* than the TTL")
    return Feedback(name, False, "check each file: lease phase, digest, then age against "
                    "one day")


def check_reconciled(answer: Any) -> Feedback:
    name = "s13.3 reconciliation"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, Mapping):
        return Feedback(name, False, "give a dict: owner answer → phase name")
    expected = reconciled_phases()
    given = {key: getattr(value, "value", value) for key, value in answer.items()}
    if set(given) != set(expected):
        return Feedback(name, False, f"answer for exactly these keys: {', '.join(expected)}")
    if given == expected:
        return Feedback(name, True, "only a confirmed, matching answer settles a lease; "
                        "'unknown' and a reference to other bytes keep it pending and protecting")
    if given["unknown"] != expected["unknown"]:
        return Feedback(name, False, "an unknown outcome must not release the artifact")
    if given["published_other"] != expected["published_other"]:
        return Feedback(name, False, "the owner holds a reference to *other* bytes: that "
                        "confirms neither this claim nor its absence")
    return Feedback(name, False, "a matching publication commits; a confirmed absence "
                    "(sealed first) aborts")


# -- build it yourself: the cleanup rule for one file ---------------------------------------

_DIGESTS = ("sha-A", "sha-B")
_HOURS = timedelta(hours=1)


def _hours(value: timedelta) -> str:
    return f"{value / _HOURS:g} h"


def describe_facts(args: tuple) -> str:
    """One counterexample as the learner would write it, with ages in hours."""
    facts, ttl = args
    leases = ", ".join(f"({phase.value!r}, {digest!r})" for phase, digest in facts.leases)
    trail = "," if len(facts.leases) == 1 else ""
    age = "None" if facts.age is None else _hours(facts.age)
    return (f"ArtifactFacts(file_type={facts.file_type!r}, recorded_sha256="
            f"{facts.recorded_sha256!r}, sha256={facts.sha256!r}, age={age}, "
            f"leases=({leases}{trail})) with orphan_ttl={_hours(ttl)}")


_FACTS = st.builds(
    ArtifactFacts,
    file_type=st.sampled_from(("file", "symlink", "other")),
    recorded_sha256=st.one_of(st.sampled_from(_DIGESTS), st.none()),
    sha256=st.sampled_from(_DIGESTS),
    age=st.integers(0, 72).map(lambda hours: hours * _HOURS),
    leases=st.lists(st.tuples(st.sampled_from(list(LeasePhase)), st.sampled_from(_DIGESTS)),
                    max_size=3).map(tuple),
)

BUILD = (
    BuildExercise(
        chapter="s13", name="cleanup reason for one file", reference=cleanup_reason,
        inputs=st.tuples(_FACTS, st.sampled_from((0, 12, 24, 48)).map(lambda h: h * _HOURS)),
        hint="go through the rules in the order Stage 3 lists them; the first that applies "
             "decides",
        describe=describe_facts),
)
