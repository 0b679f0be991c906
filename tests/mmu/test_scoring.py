"""s14 factor score: weights, half-life, bad inputs, ties, scope as a filter (contract 4)."""

import math
from datetime import timedelta

import pytest

from labmem.core.clock import SteppingClock
from labmem.mmu import ContextMMU, Factors, FactorWeights, FileMemoryService, MmuValidationError
from labmem.mmu.scoring import (
    FACTOR_NAMES,
    clamp01,
    contributions,
    factor_score,
    recency,
    relevance,
)

ONES = dict(relevance=1, importance=1, confidence=1, utility=1, recency=1, salience=1, scope=1)


def test_default_weights_lead_with_relevance_and_sum_to_one():
    weights = FactorWeights()
    assert (weights.relevance, weights.importance) == (0.35, 0.15)
    assert {weights.confidence, weights.utility, weights.recency, weights.salience,
            weights.scope} == {0.10}
    assert weights.total == pytest.approx(1.0)
    assert list(weights.to_dict()) == list(FACTOR_NAMES)  # the chapter's weights table
    assert weights.to_dict()["relevance"] == 0.35


def test_contributions_add_up_to_the_score():
    factors = Factors(relevance=4 / 7, importance=0.8, confidence=0.5, utility=0.5,
                      recency=0.5, salience=0.5, scope=1.0)
    for weights in (FactorWeights(), FactorWeights(2, 1, 0, 0, 1, 0, 3)):
        parts = contributions(factors, weights)
        assert list(parts) == list(FACTOR_NAMES)
        assert sum(parts.values()) == pytest.approx(factor_score(factors, weights), abs=1e-6)
    default = contributions(factors, FactorWeights())
    assert default["relevance"] == pytest.approx(0.35 * 4 / 7)
    assert default["scope"] == pytest.approx(0.10)
    assert set(contributions(factors, FactorWeights(0, 0, 0, 0, 0, 0, 0)).values()) == {0.0}


def test_score_is_the_weighted_mean():
    factors = Factors(**{**ONES, "relevance": 0.5, "importance": 0.0})
    expected = (0.35 * 0.5 + 0.15 * 0 + 0.5) / 1.0
    assert factor_score(factors, FactorWeights()) == pytest.approx(expected)
    only_relevance = FactorWeights(0.7, 0, 0, 0, 0, 0, 0)
    assert factor_score(factors, only_relevance) == 0.5


def test_recency_halves_every_half_life():
    day = timedelta(days=1)
    assert recency(timedelta(0)) == 1.0
    assert recency(day) == 0.5
    assert recency(3 * day) == 0.125
    assert recency(timedelta(hours=6), timedelta(hours=6)) == 0.5
    assert recency(-day) == 1.0  # an access "in the future" is not fresher than now
    with pytest.raises(MmuValidationError, match="half_life"):
        recency(day, timedelta(0))


def test_bad_factor_values_have_documented_results():
    assert clamp01(math.nan) == 0.0 and clamp01(-0.3) == 0.0 and clamp01(7) == 1.0
    factors = Factors(**{**ONES, "relevance": math.nan, "importance": -1, "utility": 3})
    assert (factors.relevance, factors.importance, factors.utility) == (0.0, 0.0, 1.0)
    assert 0.0 <= factor_score(factors, FactorWeights()) <= 1.0


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "0.3", True])
def test_bad_weights_are_refused_naming_the_field(bad):
    with pytest.raises(MmuValidationError, match="weights.salience"):
        FactorWeights(salience=bad)


def test_all_zero_weights_score_zero_and_the_tie_break_decides(tmp_path):
    zero = FactorWeights(0, 0, 0, 0, 0, 0, 0)
    assert factor_score(Factors(**ONES), zero) == 0.0
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    for key in ("c", "a", "b"):
        svc.remember("semantic", scope="alice", title=key, text=f"port note {key}",
                     outcome="succeeded", evidence=["e"], source_kind="user_stated",
                     origin_key=key, importance={"a": 0.1, "b": 0.9, "c": 0.5}[key])
    mmu = ContextMMU(svc, token_budget=1000, weights=zero)
    trace = mmu.recall("port", scope="alice", now="2026-01-02T00:00:00Z")
    assert [c.record_id for c in trace.candidates] == [
        f"alice:m-00000{n}" for n in (1, 2, 3)]
    assert {c.score for c in trace.candidates} == {0.0}


def test_relevance_is_query_term_coverage():
    assert relevance(frozenset({"port", "test"}), frozenset({"port", "x"})) == 0.5
    assert relevance(frozenset(), frozenset({"port"})) == 0.0


def test_scope_filters_before_ranking_and_shared_scope_scores_lower(tmp_path):
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    for scope in ("alice", "bob", "global"):
        svc.remember("semantic", scope=scope, title="port", text="test port note",
                     outcome="succeeded", evidence=["e"], source_kind="user_stated",
                     origin_key="port", importance=1.0 if scope == "bob" else 0.5)
    mmu = ContextMMU(svc, token_budget=1000, shared_scope_factor=0.25)
    trace = mmu.recall("test port", scope="alice", now="2026-01-01T00:00:10Z")
    by_id = {c.record_id: c for c in trace.candidates}
    assert set(by_id) == {"alice:m-000001", "global:m-000001"}  # bob's is never a candidate
    assert by_id["alice:m-000001"].factors["scope"] == 1.0
    assert by_id["global:m-000001"].factors["scope"] == 0.25
    assert trace.candidates[0].record_id == "alice:m-000001"
