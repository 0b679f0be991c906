"""Checkers for the s10 exercises (workspace memory: distill, supersession, staleness)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from labmem.core.clock import FixedClock, parse_timestamp
from labmem.exercises import Feedback, not_answered
from labmem.workspace import DistillPolicy, DistillReport, WorkspaceMemory

T0 = parse_timestamp("2026-07-01T09:00:00Z", field="T0")
AS_OF = parse_timestamp("2026-09-01T00:00:00Z", field="AS_OF")  # default cutoff: 2026-08-02

#: Exercise 1: (content, kind, importance, evidence id, days after T0), unkeyed.
EXERCISE_1_FACTS: tuple[tuple[str, str, int, str, int], ...] = (
    ("Pin Python 3.12", "decision", 4, "t:1", 0),
    ("Run ruff before commit", "convention", 2, "t:2", 1),
    ("run ruff  before commit", "convention", 2, "t:3", 5),
    ("The CI cache is flaky", "pitfall", 3, "t:4", 2),
    ("The CI cache is flaky", "pitfall", 3, "t:4", 3),
    ("Deploy took 3 minutes", "outcome", 5, "t:5", 4),
    ("Vendor the fonts", "decision", 5, "t:6", 40),
)

#: Exercise 2: one key's facts (value, importance, evidence id, days after T0).
EXERCISE_2_KEY = "storage.engine"
EXERCISE_2_FACTS: tuple[tuple[str, int, str, int], ...] = (
    ("SQLite", 5, "t:10", 0),
    ("PostgreSQL", 3, "t:11", 10),
    ("PostgreSQL", 3, "t:11", 11),
    ("SQLite", 3, "t:12", 12),
    ("PostgreSQL", 3, "t:13", 14),
    ("PostgreSQL", 3, "t:14", 15),
    ("SQLite", 3, "t:15", 13),
)


def _replay(root: str, facts: Sequence[dict[str, Any]]) -> tuple[WorkspaceMemory,
                                                                   DistillReport]:
    """Log ``facts`` into a throw-away workspace, distill once with the default policy."""
    memory = WorkspaceMemory(root, workspace_id="exercise", clock=FixedClock(AS_OF))
    for fact in facts:
        memory.append_fact(**fact)
    return memory, memory.distill(policy=DistillPolicy(), as_of=AS_OF)


def replay_exercise_1() -> tuple[tuple[str, ...], DistillReport]:
    """The curated contents (sorted) and the report after distilling exercise 1."""
    with tempfile.TemporaryDirectory(prefix="labmem-s10-ex-") as root:
        memory, report = _replay(root, [
            {"content": c, "kind": k, "importance": i, "evidence": [e],
             "recorded_at": T0 + timedelta(days=d)} for c, k, i, e, d in EXERCISE_1_FACTS])
        return tuple(sorted(e.content for e in memory.curated_entries())), report


def replay_exercise_2() -> tuple[str, int]:
    """The active value of the exercise-2 key after one distill, and the stale count."""
    with tempfile.TemporaryDirectory(prefix="labmem-s10-ex-") as root:
        memory, report = _replay(root, [
            {"content": v, "kind": "decision", "importance": i, "evidence": [e],
             "memory_key": EXERCISE_2_KEY, "recorded_at": T0 + timedelta(days=d)}
            for v, i, e, d in EXERCISE_2_FACTS])
        return memory.revision_chain(EXERCISE_2_KEY)[-1].content, report.stale


def check_promoted(answer: Sequence[str] | None) -> Feedback:
    """Exercise 1: the sorted contents of the curated entries after one distill."""
    name = "exercise 1 (what gets promoted)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, "answer with a list of contents")
    expected, _ = replay_exercise_1()
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, "old + stable + (important or independently repeated); "
                                    "a repeat merges into the first wording")
    if "The CI cache is flaky" in got:
        return Feedback(name, False, "the CI-cache pitfall was logged twice from the same "
                                     "evidence id: one piece of evidence, not a repeat")
    if "Deploy took 3 minutes" in got:
        return Feedback(name, False, "outcomes are not a stable kind")
    if "Vendor the fonts" in got:
        return Feedback(name, False, "check the cutoff: as_of minus 30 days")
    if sorted(set(got)) == list(expected):
        return Feedback(name, False, "right entries; give them sorted, each once")
    return Feedback(name, False, "compare each fact with the policy: age, kind, importance ≥ 4 "
                                 "or 2 independent evidence ids (after normalizing the text)")


def check_active_and_stale(answer: tuple[str, int] | None) -> Feedback:
    """Exercise 2: (active value of the key, number of stale facts) after one distill."""
    name = "exercise 2 (supersession and staleness)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, Sequence) or len(answer) != 2:
        return Feedback(name, False, "answer with a pair: (value, stale count)")
    value, stale = answer
    expected_value, expected_stale = replay_exercise_2()
    if (value, stale) == (expected_value, expected_stale):
        return Feedback(name, True, "a rival needs 2 independent pieces of evidence newer "
                                    "than the active revision; older rival evidence is stale")
    if value != expected_value:
        return Feedback(name, False, "walk the days: which value was adopted first, and when "
                                     "did a rival collect 2 *distinct* evidence ids?")
    return Feedback(name, False, "right value; now count the facts of the losing value that "
                                 "are older than the winner's newest evidence")


#: Exercise 3: the two answers a learner can give.
EXERCISE_3_CHOICES = ("open", "resolved")


def check_after_crash(answer: str | None) -> Feedback:
    """Exercise 3: a resolver dies after its audit line but before ``curated.json`` is
    written. A fresh ``WorkspaceMemory`` calls ``list_conflicts(include_resolved=True)``:
    is the conflict 'open' or 'resolved'?"""
    name = "exercise 3 (a crash between two writes)"
    if answer is None:
        return not_answered(name)
    if answer not in EXERCISE_3_CHOICES:
        return Feedback(name, False, f"answer with one of {EXERCISE_3_CHOICES}")
    if answer == "resolved":
        return Feedback(name, True, "the audit line is the decision; curated.json and "
                                    "MEMORY.md are derived from it and re-derived by the "
                                    "next reader")
    return Feedback(name, False, "the decision is already durable in resolutions.jsonl — "
                                 "what does a reader do with an audited resolution that "
                                 "curated.json does not show yet?")
