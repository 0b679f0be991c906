"""The s10 exercise checkers accept the right answer and reject wrong ones."""

from collections import defaultdict

import pytest

from labmem.core.text import normalize_text
from labmem.exercises import s10
from labmem.workspace import RivalVerdict, is_promotable, judge_rivals

PROMOTED = ["Pin Python 3.12", "Run ruff before commit"]


@pytest.mark.parametrize("check", [s10.check_promoted, s10.check_active_and_stale,
                                   s10.check_after_crash])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_replays_match_the_hand_computed_answers():
    contents, report = s10.replay_exercise_1()
    assert list(contents) == PROMOTED
    assert (report.scanned, report.eligible, report.created, report.skipped) == (6, 5, 2, 2)
    assert s10.replay_exercise_2() == ("PostgreSQL", 2)
    assert s10.replay_exercise_3() == (True, False)


def test_s10_promoted():
    assert s10.check_promoted(PROMOTED)
    assert s10.check_promoted(tuple(PROMOTED))
    assert not s10.check_promoted([*PROMOTED, "The CI cache is flaky"])  # same evidence twice
    assert not s10.check_promoted(["Deploy took 3 minutes", *PROMOTED])  # outcome
    assert not s10.check_promoted([*PROMOTED, "Vendor the fonts"])  # too young
    assert not s10.check_promoted(PROMOTED[::-1])  # unsorted
    assert not s10.check_promoted(["Pin Python 3.12"])  # the repeat merges and counts
    assert not s10.check_promoted("Pin Python 3.12")


def test_s10_active_and_stale():
    assert s10.check_active_and_stale(("PostgreSQL", 2))
    assert s10.check_active_and_stale(["PostgreSQL", 2])
    assert not s10.check_active_and_stale(("SQLite", 0))  # t:11 twice is one piece
    assert not s10.check_active_and_stale(("PostgreSQL", 0))
    assert not s10.check_active_and_stale(("PostgreSQL", 3))
    assert not s10.check_active_and_stale("PostgreSQL")


def test_s10_after_crash():
    assert s10.check_after_crash((True, False))
    assert s10.check_after_crash([True, False])
    wrong_disk = s10.check_after_crash((False, False))  # "the projection was written too"
    assert not wrong_disk and wrong_disk.message.startswith("(a)")
    wrong_read = s10.check_after_crash((True, True))  # "a reader trusts MEMORY.md"
    assert not wrong_read and wrong_read.message.startswith("(b)")
    assert not s10.check_after_crash("resolved")
    assert not s10.check_after_crash((1, 0))


# -- build it yourself ------------------------------------------------------------------

PROMOTABLE, JUDGE = s10.BUILD


def stub(*args):
    raise NotImplementedError


def test_the_build_exercises_use_the_library_rules():
    assert PROMOTABLE.reference is is_promotable and JUDGE.reference is judge_rivals
    assert all(exercise.chapter == "s10" for exercise in s10.BUILD)


@pytest.mark.parametrize("exercise", s10.BUILD, ids=lambda e: e.name)
def test_the_reference_passes_and_a_stub_is_not_written_yet(exercise):
    assert exercise.check(exercise.reference)
    feedback = exercise.check(stub)
    assert not feedback and "not written yet" in feedback.message


def test_promotion_near_misses_fail_with_a_counterexample():
    def counts_lines(facts, policy):  # a repeat = two lines, even from one event
        return (max(f.importance for f in facts) >= policy.minimum_importance
                or len(facts) >= policy.repeat_threshold)

    def strictly_above(facts, policy):  # "at least" read as "more than"
        return (max(f.importance for f in facts) > policy.minimum_importance
                or len({e for f in facts for e in f.evidence_ids}) >= policy.repeat_threshold)

    for wrong in (lambda facts, policy: True, counts_lines, strictly_above):
        feedback = PROMOTABLE.check(wrong)
        assert not feedback
        assert feedback.message.startswith("on facts [f1 importance ")
        assert "the library's returned" in feedback.message and "Hint:" in feedback.message


def _judge(rivals, newer_than, threshold, *, stale_if=lambda at, t: at <= t,
           strength=lambda fs: len({e for f in fs for e in f.evidence_ids}), tie_wins=False):
    """A learner's judge_rivals, with one knob per plausible mistake."""
    stale = tuple(f.fact_id for f in rivals if stale_if(f.recorded_at, newer_than))
    groups = defaultdict(list)
    for fact in rivals:
        if fact.fact_id not in stale:
            groups[normalize_text(fact.content)].append(fact)
    qualified = {v: strength(fs) for v, fs in groups.items() if strength(fs) >= threshold}
    if not qualified:
        return RivalVerdict("keep", (), stale)
    top = sorted(v for v, s in qualified.items() if s == max(qualified.values()))
    if len(top) == 1 or tie_wins:
        return RivalVerdict("supersede", (top[0],), stale)
    return RivalVerdict("conflict", tuple(top), stale)


def test_a_careful_learner_passes_judge_rivals():
    assert JUDGE.check(_judge)


@pytest.mark.parametrize("mistake", [
    {"stale_if": lambda at, t: at < t},  # evidence from the same instant is not newer
    {"strength": len},  # counting lines, not distinct evidence ids
    {"tie_wins": True},  # a tie picks the first value instead of failing closed
    {"stale_if": lambda at, t: False},  # forgetting staleness altogether
], ids=["stale-boundary", "lines-not-evidence", "tie-picks-one", "no-staleness"])
def test_judge_rivals_near_misses_fail_with_a_counterexample(mistake):
    def wrong(rivals, newer_than, threshold):
        return _judge(rivals, newer_than, threshold, **mistake)

    feedback = JUDGE.check(wrong)
    assert not feedback and feedback.message.startswith("on rivals [f1 ")
    assert "newer_than day" in feedback.message and "Hint:" in feedback.message


def test_judge_rivals_constant_and_wrong_types_fail_without_a_traceback():
    for wrong in (lambda r, n, t: RivalVerdict("keep"), lambda r, n, t: ("keep", ())):
        feedback = JUDGE.check(wrong)
        assert not feedback and "Traceback" not in feedback.message


def test_forgetting_to_normalize_is_shown_as_two_groups_of_one_value():
    def raw_text(rivals, newer_than, threshold):
        stale = tuple(f.fact_id for f in rivals if f.recorded_at <= newer_than)
        groups = defaultdict(set)
        for fact in rivals:
            if fact.fact_id not in stale:
                groups[fact.content].update(fact.evidence_ids)
        qualified = {v: len(ids) for v, ids in groups.items() if len(ids) >= threshold}
        if not qualified:
            return RivalVerdict("keep", (), stale)
        top = sorted(v for v, s in qualified.items() if s == max(qualified.values()))
        return RivalVerdict("supersede" if len(top) == 1 else "conflict", tuple(top), stale)

    feedback = JUDGE.check(raw_text)
    assert not feedback and "'SQLite'" in feedback.message and "'sqlite'" in feedback.message


def test_reading_evidence_for_evidence_ids_is_caught():
    """A fact that names no evidence is one piece of evidence of its own: the generated
    groups include such facts, so ``f.evidence`` in place of ``f.evidence_ids`` fails."""
    def reads_evidence(facts, policy):
        return (max(f.importance for f in facts) >= policy.minimum_importance
                or len({e for f in facts for e in f.evidence}) >= policy.repeat_threshold)

    feedback = PROMOTABLE.check(reads_evidence)
    assert not feedback and "evidence (none)" in feedback.message


def test_check_layer_reports_stubs_and_passes_the_chapter_pieces():
    from labmem.scratch import s10 as scratch

    def stub(*args):
        raise NotImplementedError

    report = s10.check_layer(is_promotable=stub, judge_rivals=stub, resolve=stub)
    assert report.passed == 4 and len(report.results) == 14
    assert repr(report).startswith("✗ your workspace memory passes 4 of 14 contracts; "
                                   "failing:\n")
    assert "not written yet (stub() raises NotImplementedError)" in repr(report)
    whole = s10.check_layer(is_promotable=scratch.is_promotable,
                            judge_rivals=scratch.judge_rivals, resolve=scratch.resolve)
    assert repr(whole) == "✓ your workspace memory passes all 14 contracts"
