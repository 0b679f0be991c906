"""Checkers for the s10 exercises (workspace memory: distill, supersession, staleness).

Three predict exercises replay the learner's scenario in a throw-away
:class:`~labmem.workspace.WorkspaceMemory`. :func:`check_layer` puts the learner's own
pieces of the from-scratch layer (``is_promotable``, ``judge_rivals``, ``resolve``) into a
fresh copy of :mod:`labmem.scratch.s10` and runs the layer's contract suite
(:mod:`labmem.exercises.suites.s10`) on it. The two single-rule checkers in :data:`BUILD`
compare a promotion or supersession rule with the library's on generated facts (facts
without evidence included).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from labmem.core.clock import FixedClock, parse_timestamp
from labmem.core.i18n import N_, _
from labmem.core.text import normalize_text
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.exercises.contracts import ContractReport, assemble
from labmem.workspace import (
    DistillPolicy,
    DistillReport,
    Fact,
    RivalVerdict,
    WorkspaceMemory,
    is_promotable,
    judge_rivals,
)

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
    name = _("exercise 1 (what gets promoted)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, _("answer with a list of contents"))
    expected = replay_exercise_1()[0]
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, _("old + stable + (important or independently repeated); "
                                      "a repeat merges into the first wording"))
    if "The CI cache is flaky" in got:
        return Feedback(name, False, _("the CI-cache pitfall was logged twice from the same "
                                       "evidence id: one piece of evidence, not a repeat"))
    if "Deploy took 3 minutes" in got:
        return Feedback(name, False, _("outcomes are not a stable kind"))
    if "Vendor the fonts" in got:
        return Feedback(name, False, _("check the cutoff: as_of minus 30 days"))
    if sorted(set(got)) == list(expected):
        return Feedback(name, False, _("right entries; give them sorted, each once"))
    return Feedback(name, False, _("compare each fact with the policy: age, kind, importance ≥ 4 "
                                   "or 2 independent evidence ids (after normalizing the text)"))


def check_active_and_stale(answer: tuple[str, int] | None) -> Feedback:
    """Exercise 2: (active value of the key, number of stale facts) after one distill."""
    name = _("exercise 2 (supersession and staleness)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, Sequence) or len(answer) != 2:
        return Feedback(name, False, _("answer with a pair: (value, stale count)"))
    value, stale = answer
    expected_value, expected_stale = replay_exercise_2()
    if (value, stale) == (expected_value, expected_stale):
        return Feedback(name, True, _("a rival needs 2 independent pieces of evidence newer "
                                      "than the active revision; older rival evidence is stale"))
    if value != expected_value:
        return Feedback(name, False, _("walk the days: which value was adopted first, and when "
                                       "did a rival collect 2 *distinct* evidence ids?"))
    return Feedback(name, False, _("right value; now count the facts of the losing value that "
                                   "are older than the winner's newest evidence"))


#: Exercise 3: a key whose two rivals are equally strong, so distill opens a conflict.
EXERCISE_3_KEY = "ci.runner"
EXERCISE_3_FACTS: tuple[tuple[str, str, int], ...] = (  # (value, evidence id, days after T0)
    ("GitHub Actions", "t:20", 0), ("GitHub Actions", "t:21", 1),
    ("Buildkite", "t:22", 5), ("Jenkins", "t:23", 6),
    ("Buildkite", "t:24", 7), ("Jenkins", "t:25", 8),
)


def replay_exercise_3() -> tuple[bool, bool]:
    """Exercise 3, replayed: does MEMORY.md list the conflict (on disk, after a read)?

    The resolver's three writes are audit line → ``curated.json`` → ``MEMORY.md``. A crash
    right after the second write leaves the first two written and ``MEMORY.md`` as it was,
    so the replay resolves the conflict and then puts the old ``MEMORY.md`` bytes back —
    exactly the files such a crash leaves (the crash itself is shown in the chapter).
    """
    with tempfile.TemporaryDirectory(prefix="labmem-s10-ex-") as root:
        memory, _ = _replay(root, [
            {"content": v, "kind": "decision", "memory_key": EXERCISE_3_KEY,
             "evidence": [e], "recorded_at": T0 + timedelta(days=d)}
            for v, e, d in EXERCISE_3_FACTS])
        [case] = memory.list_conflicts()
        before = memory.memory_md_path.read_bytes()
        memory.resolve_conflict(case.conflict_id, "c1", expected_revision=case.base_revision,
                                actor="exercise", rationale="replay of exercise 3")
        memory.memory_md_path.write_bytes(before)  # the third write never happened
        on_disk = _lists_conflict(memory.memory_md_path.read_text(encoding="utf-8"))
        fresh = WorkspaceMemory(root, clock=FixedClock(AS_OF))
        return on_disk, _lists_conflict(fresh.read_memory_md())


def _lists_conflict(memory_md: str) -> bool:
    return "## Open conflicts" in memory_md and f"`{EXERCISE_3_KEY}`" in memory_md


def check_after_crash(answer: tuple[bool, bool] | None) -> Feedback:
    """Exercise 3: a resolver dies after writing ``curated.json``, before ``MEMORY.md``.
    (a) Does the ``MEMORY.md`` file, read straight from disk, still list the open conflict?
    (b) Does the text a fresh ``WorkspaceMemory``'s ``read_memory_md()`` returns list it?"""
    name = _("exercise 3 (a crash between two writes)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, (str, bool)) or not isinstance(answer, Sequence) or len(answer) != 2 \
            or not all(isinstance(a, bool) for a in answer):
        return Feedback(name, False, _("answer with a pair of booleans: (on disk, after a read)"))
    on_disk, after_read = answer
    expected_disk, expected_read = replay_exercise_3()
    if (on_disk, after_read) == (expected_disk, expected_read):
        return Feedback(name, True, _("the crash left the old projection on disk; the next "
                                      "read renders MEMORY.md again from curated.json, which "
                                      "already holds the decision"))
    if on_disk != expected_disk:
        return Feedback(name, False, _("(a): the process died before its third write — which "
                                       "version of MEMORY.md is still on disk?"))
    return Feedback(name, False, _("(b): MEMORY.md is never parsed back; what does a reader "
                                   "render it from, and does that file know the decision?"))


# -- build the layer yourself --------------------------------------------------------------

PIECES = ("is_promotable", "judge_rivals", "resolve")


def check_layer(*, is_promotable: Any = None, judge_rivals: Any = None,
                resolve: Any = None) -> ContractReport:
    """Put the learner's pieces into a fresh copy of the from-scratch module and run the
    workspace memory contract suite on it; the report names each broken contract's smallest
    case (or says a piece is not written yet). A piece left out (``None``) stays the
    chapter's own."""
    from labmem.exercises.suites.s10 import SUITE
    from labmem.scratch import s10

    pieces = {"is_promotable": is_promotable, "judge_rivals": judge_rivals,
              "resolve": resolve}
    return SUITE.run(assemble(s10, {k: f for k, f in pieces.items() if f is not None}))


# -- build one rule, checked on generated inputs -----------------------------------------------

_EVIDENCE = ("t:1", "t:2", "t:3", "t:4")
_VALUES = ("SQLite", "sqlite", "PostgreSQL", "DuckDB")


def _fact(i: int, content: str, importance: int, evidence: Sequence[str], day: int) -> Fact:
    return Fact(fact_id=f"f{i}", recorded_at=T0 + timedelta(days=day), kind="decision",
                content=content, importance=importance, memory_key="storage.engine",
                source=None, evidence=tuple(sorted(set(evidence))), line=i)


def _day(at: datetime) -> int:
    return (at - T0).days




#: Facts with no evidence are generated too: such a fact is one piece of evidence of its
#: own (``Fact.evidence_ids``), so a rule that reads ``Fact.evidence`` is caught.
_GROUP = st.lists(st.tuples(st.integers(1, 5),
                            st.lists(st.sampled_from(_EVIDENCE[:3]), min_size=1, max_size=2)
                            | st.just([])),
                  min_size=1, max_size=4).map(
    lambda rows: [_fact(i, "Pin Python 3.12", imp, ev, 0) for i, (imp, ev) in
                  enumerate(rows, start=1)])
_POLICY = st.builds(lambda imp, rep: DistillPolicy(minimum_importance=imp, repeat_threshold=rep),
                    st.integers(1, 5), st.integers(1, 4))


def _describe_group(args: tuple) -> str:
    facts, policy = args
    shown = "; ".join(f"{f.fact_id} importance {f.importance} evidence "
                      f"{','.join(f.evidence) or '(none)'}" for f in facts)
    return (f"facts [{shown}] with "
            f"minimum_importance={policy.minimum_importance}, "
            f"repeat_threshold={policy.repeat_threshold}")


_RIVALS = st.lists(st.tuples(st.sampled_from(_VALUES), st.integers(0, 5),
                             st.lists(st.sampled_from(_EVIDENCE), min_size=1, max_size=2)),
                   max_size=6).map(
    lambda rows: [_fact(i, value, 3, ev, day) for i, (value, day, ev) in
                  enumerate(rows, start=1)])


def _describe_rivals(args: tuple) -> str:
    rivals, newer_than, threshold = args
    shown = "; ".join(f"{f.fact_id} {f.content!r} day {_day(f.recorded_at)} evidence "
                      f"{','.join(f.evidence)}" for f in rivals)
    return f"rivals [{shown}], newer_than day {_day(newer_than)}, threshold {threshold}"


def _verdict(value: RivalVerdict) -> dict[str, Any]:
    """What is compared: the outcome, the values (normalized, any order), the stale ids."""
    return {"outcome": value.outcome,
            "values": tuple(sorted(normalize_text(v) for v in value.values)),
            "stale": tuple(sorted(value.stale))}


BUILD = (
    BuildExercise(
        chapter="s10", name="is_promotable", reference=is_promotable,
        inputs=st.tuples(_GROUP, _POLICY), describe=_describe_group,
        hint=N_("importance alone can promote a group; otherwise count independent evidence "
                "(distinct evidence ids), not lines")),
    BuildExercise(
        chapter="s10", name="judge_rivals", reference=judge_rivals,
        inputs=st.tuples(_RIVALS, st.integers(0, 4).map(lambda d: T0 + timedelta(days=d)),
                         st.integers(1, 3)),
        describe=_describe_rivals, project=_verdict,
        hint=N_("stale means not newer than newer_than, strength means distinct evidence ids "
                "per normalized value, and a tie at the top fails closed")),
)
