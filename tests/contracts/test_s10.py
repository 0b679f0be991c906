"""The s10 contract suite on every implementation, and on plausible wrong pieces."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.exercises.contracts import assemble
from labmem.exercises.suites import s10 as suite
from labmem.scratch import s10 as scratch

IMPLEMENTATIONS = {"scratch": suite.SCRATCH, "production": suite.PRODUCTION}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("contract", suite.SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_implementation_keeps_every_contract(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def failing(pieces: dict) -> list[str]:
    """The names of the contracts the from-scratch layer breaks with ``pieces`` in it."""
    return [r.contract for r in suite.SUITE.run(assemble(scratch, pieces)).failing]


PROMOTED = "a group is promoted when one fact is important enough or its distinct " \
           "evidence ids reach the repeat threshold"
OWN_EVIDENCE = "a fact that names no evidence is one piece of evidence of its own"
STALE = "rival evidence not newer than the active revision is stale and cannot roll the " \
        "key back"
SUPERSEDES = "a rival value with enough newer distinct evidence supersedes, and the chain " \
             "links both ways"
FAILS_CLOSED = "equally strong strongest rivals fail closed: a conflict, the key unchanged"
GUARDED = "a resolution names the conflict's base revision, and a settled conflict is not " \
          "reopened"
DATED = "a resolved revision is dated at the newest evidence of every candidate, so the " \
        "rivals the human saw are stale"


# -- is_promotable ------------------------------------------------------------------------

def promotable_evidence_field(facts, policy):  # f.evidence for f.evidence_ids
    if max(f.importance for f in facts) >= policy.minimum_importance:
        return True
    return len({e for f in facts for e in f.evidence}) >= policy.repeat_threshold


def promotable_strict(facts, policy):  # off by one: > instead of >=
    if max(f.importance for f in facts) > policy.minimum_importance:
        return True
    return len({e for f in facts for e in f.evidence_ids}) >= policy.repeat_threshold


def promotable_counts_lines(facts, policy):  # a repeat of one event counted twice
    if max(f.importance for f in facts) >= policy.minimum_importance:
        return True
    return len(facts) >= policy.repeat_threshold


def promotable_first_only(facts, policy):  # only the first fact's importance
    if facts[0].importance >= policy.minimum_importance:
        return True
    return len({e for f in facts for e in f.evidence_ids}) >= policy.repeat_threshold


def promotable_alternative(facts, policy):
    independent = set().union(*(set(f.evidence_ids) for f in facts))
    return any(f.importance >= policy.minimum_importance for f in facts) or \
        len(independent) >= policy.repeat_threshold


@pytest.mark.parametrize("wrong, breaks", [
    (promotable_evidence_field, OWN_EVIDENCE),
    (promotable_strict, PROMOTED),
    (promotable_counts_lines, PROMOTED),
    (promotable_first_only, PROMOTED),
])
def test_a_wrong_promotion_rule_is_rejected(wrong, breaks):
    assert breaks in failing({"is_promotable": wrong})


def test_a_promotion_rule_written_differently_is_accepted():
    assert failing({"is_promotable": promotable_alternative}) == []


# -- judge_rivals --------------------------------------------------------------------------

def judge_strict_stale(rivals, newer_than, threshold):  # off by one: < instead of <=
    stale = tuple(f.fact_id for f in rivals if f.recorded_at < newer_than)
    groups = scratch.by_value([f for f in rivals if f.recorded_at >= newer_than])
    qualified = {v: fs for v, fs in groups.items()
                 if len(scratch.evidence_ids(fs)) >= threshold}
    return scratch.Verdict(*scratch.strongest(qualified), stale)


def judge_first_wins_ties(rivals, newer_than, threshold):  # a tie goes to the first value
    stale = tuple(f.fact_id for f in rivals if f.recorded_at <= newer_than)
    groups = scratch.by_value([f for f in rivals if f.recorded_at > newer_than])
    qualified = {v: fs for v, fs in groups.items()
                 if len(scratch.evidence_ids(fs)) >= threshold}
    if not qualified:
        return scratch.Verdict("keep", (), stale)
    best = max(qualified, key=lambda v: len(scratch.evidence_ids(qualified[v])))
    return scratch.Verdict("supersede", (best,), stale)


def judge_counts_lines(rivals, newer_than, threshold):  # lines, not distinct evidence
    stale = tuple(f.fact_id for f in rivals if f.recorded_at <= newer_than)
    groups = scratch.by_value([f for f in rivals if f.recorded_at > newer_than])
    qualified = {v: fs for v, fs in groups.items() if len(fs) >= threshold}
    if not qualified:
        return scratch.Verdict("keep", (), stale)
    best = max(len(fs) for fs in qualified.values())
    top = tuple(sorted(v for v, fs in qualified.items() if len(fs) == best))
    return scratch.Verdict("supersede" if len(top) == 1 else "conflict", top, stale)


def judge_not_normalized(rivals, newer_than, threshold):  # "PostgreSQL" ≠ "postgresql"
    stale = tuple(f.fact_id for f in rivals if f.recorded_at <= newer_than)
    groups: dict = {}
    for f in rivals:
        if f.recorded_at > newer_than:
            groups.setdefault(f.content, []).append(f)
    qualified = {v: fs for v, fs in groups.items()
                 if len(scratch.evidence_ids(fs)) >= threshold}
    return scratch.Verdict(*scratch.strongest(qualified), stale)


def judge_alternative(rivals, newer_than, threshold):
    fresh, stale = {}, []
    for fact in sorted(rivals, key=lambda f: f.recorded_at):
        if fact.recorded_at > newer_than:
            fresh.setdefault(scratch.normalize(fact.content), set()).update(fact.evidence_ids)
        else:
            stale.append(fact.fact_id)
    strength = {v: len(ids) for v, ids in fresh.items() if len(ids) >= threshold}
    if not strength:
        return scratch.Verdict("keep", (), tuple(stale))
    top = sorted(v for v, n in strength.items() if n == max(strength.values()))
    return scratch.Verdict("conflict" if len(top) > 1 else "supersede", tuple(top),
                           tuple(stale))


@pytest.mark.parametrize("wrong, breaks", [
    (judge_strict_stale, STALE),
    (judge_first_wins_ties, FAILS_CLOSED),
    (judge_counts_lines, SUPERSEDES),
    (judge_not_normalized, SUPERSEDES),
])
def test_a_wrong_supersession_rule_is_rejected(wrong, breaks):
    assert breaks in failing({"judge_rivals": wrong})


def test_a_supersession_rule_written_differently_is_accepted():
    assert failing({"judge_rivals": judge_alternative}) == []


# -- resolve -------------------------------------------------------------------------------

def _settle(view, case, chosen, last):
    new = scratch.link(view, replace(chosen, resolved_by=f"resolution:{case.conflict_id}",
                                     last_recorded_at=last))
    view.conflicts[case.conflict_id] = replace(case, status="resolved", chosen=chosen.entry_id)
    return new


def resolve_own_date(view, conflict_id, candidate_id, expected_revision):
    """Dates the revision at the chosen candidate's own newest evidence."""
    case = view.conflicts[conflict_id]
    if case.status != "open":
        if case.chosen != candidate_id:
            raise ValueError("candidate_id: already resolved")
        return view.active(case.memory_key)
    if expected_revision != case.base_revision:
        raise ValueError("expected_revision: stale")
    chosen = next(c for c in case.candidates if c.entry_id == candidate_id)
    return _settle(view, case, chosen, chosen.last_recorded_at)


def resolve_unguarded(view, conflict_id, candidate_id, expected_revision):
    """Skips the expected_revision check."""
    case = view.conflicts[conflict_id]
    if case.status != "open":
        if case.chosen != candidate_id:
            raise ValueError("candidate_id: already resolved")
        return view.active(case.memory_key)
    chosen = next(c for c in case.candidates if c.entry_id == candidate_id)
    return _settle(view, case, chosen, max(c.last_recorded_at for c in case.candidates))


def resolve_reopens(view, conflict_id, candidate_id, expected_revision):
    """Lets a settled conflict be decided again."""
    case = view.conflicts[conflict_id]
    if expected_revision != case.base_revision:
        raise ValueError("expected_revision: stale")
    chosen = next(c for c in case.candidates if c.entry_id == candidate_id)
    return _settle(view, case, chosen, max(c.last_recorded_at for c in case.candidates))


def resolve_alternative(view, conflict_id, candidate_id, expected_revision):
    case = view.conflicts[conflict_id]
    if case.status == "resolved":
        if candidate_id == case.chosen:
            return view.active(case.memory_key)
        raise ValueError(f"candidate_id: {conflict_id} is settled with {case.chosen}")
    if case.base_revision != expected_revision:
        raise ValueError(f"expected_revision must be {case.base_revision}")
    newest = max(c.last_recorded_at for c in case.candidates)
    [chosen] = [c for c in case.candidates if c.entry_id == candidate_id]
    return _settle(view, case, chosen, newest)


@pytest.mark.parametrize("wrong, breaks", [
    (resolve_own_date, DATED),
    (resolve_unguarded, GUARDED),
    (resolve_reopens, GUARDED),
])
def test_a_wrong_resolution_is_rejected(wrong, breaks):
    assert breaks in failing({"resolve": wrong})


def test_a_resolution_written_differently_is_accepted():
    assert failing({"resolve": resolve_alternative}) == []


# -- production's distill cursors equal the from-scratch fold --------------------------------

_VALUES = ("SQLite", "sqlite", "PostgreSQL", "DuckDB")
_FACT = st.tuples(
    st.sampled_from(_VALUES), st.sampled_from((None, "db", "ci")),
    st.sampled_from(("decision", "pitfall", "outcome")), st.integers(1, 5),
    st.lists(st.sampled_from(("t:1", "t:2", "t:3", "t:4")), max_size=2),
    st.integers(0, 40))
_HISTORY = st.lists(st.tuples(st.lists(_FACT, max_size=6), st.integers(30, 75)),
                    min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_HISTORY)
def test_production_distill_equals_the_from_scratch_fold(history):
    """Appends and distills in turns (cutoffs moving both ways, conflicts resolved as they
    open): production, with its cursors and pending facts, holds the same view and reports
    the same counts as the from-scratch layer, which reads every fact each time (only
    ``scanned`` differs: production opens the daily files up to the cutoff day only)."""
    clock = FixedClock(suite.day(80))
    with tempfile.TemporaryDirectory() as root:
        ours = scratch.Workspace(Path(root) / "scratch", clock)
        theirs = suite.ProductionWorkspace(Path(root) / "production", clock)
        for batch, as_of in history:
            for value, key, kind, importance, evidence, day in batch:
                for ws in (ours, theirs):
                    ws.append(value, kind=kind, importance=importance, memory_key=key,
                              evidence=tuple(evidence),
                              recorded_at=suite.day(day) + timedelta(hours=len(evidence)))
            mine = ours.distill(scratch.DistillPolicy(), suite.day(as_of))
            report = theirs.distill(suite.PRODUCTION.DistillPolicy(), suite.day(as_of))
            # "scanned" differs by design: production reads only the days up to the cutoff
            assert {**mine, "scanned": None} == {**report, "scanned": None}
            assert ours.view() == theirs.view()
            for case in [c for c in ours.view().conflicts.values() if c.status == "open"][:1]:
                for ws in (ours, theirs):
                    ws.resolve(case.conflict_id, "c1", case.base_revision)
                assert ours.view() == theirs.view()
