"""s14 Context MMU: one contract suite, run on the from-scratch module and on the library.

Every contract of the layer is parametrized over both implementations; then the
exercise's checker is shown to reject plausible wrong pieces (naming the contract each
breaks) and to accept correct pieces written differently from the chapter's.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

import pytest

from labmem.exercises import s14_mmu as exercises
from labmem.exercises.suites.s14_mmu import PRODUCTION, SCRATCH, SUITE
from labmem.scratch import s14_mmu as scratch

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}
NAMES = SUITE.names()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=str)
@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_contract_holds_on_every_implementation(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def test_the_suite_runs_on_the_module_and_the_library():
    assert 8 <= len(SUITE.contracts) <= 17
    assert len(set(NAMES)) == len(NAMES)
    assert repr(SUITE.run(scratch, who="the from-scratch")) == (
        f"✓ the from-scratch context MMU passes all {len(NAMES)} contracts")
    assert SUITE.run(PRODUCTION).ok


# -- the exercise: the learner's pieces in the module, judged by the suite ----------------

def stub(*args):
    raise NotImplementedError



def test_stubs_are_reported_as_not_written_yet():
    report = exercises.check_layer(keep_score=stub, choose_evictions=stub, settle_claim=stub)
    assert report.passed == 5
    text = repr(report)
    assert text.startswith(f"✗ your context MMU passes 5 of {len(NAMES)} contracts; failing:")
    assert "not written yet (stub() raises NotImplementedError)" in text


def test_the_chapters_pieces_pass_and_unknown_pieces_are_refused():
    pieces = {name: getattr(scratch, name) for name in exercises.PIECES}
    assert repr(exercises.check_layer(**pieces)) == (
        f"✓ your context MMU passes all {len(NAMES)} contracts")
    with pytest.raises(TypeError, match="'keep_scores'"):
        exercises.check_layer(keep_scores=stub)


WEIGHTED_MEAN, BOUNDED = NAMES[4], NAMES[5]
SPARES, ORDER, STOPS, ALL_OR_NOTHING = NAMES[6], NAMES[7], NAMES[8], NAMES[9]
SUPERSEDES, CONFLICT = NAMES[10], NAMES[11]


# keep_score ---------------------------------------------------------------------------------

def keep_score_unweighted(factors, weights):
    """The plain mean: every factor counts the same."""
    return sum(min(1.0, max(0.0, factors[n])) for n in scratch.FACTOR_NAMES) / 7


def keep_score_not_divided(factors, weights):
    """Σ weight·factor, without dividing by Σ weight."""
    return float(sum(weights[n] * min(1.0, max(0.0, factors[n])) for n in scratch.FACTOR_NAMES))


def keep_score_unclamped(factors, weights):
    """Trusts its inputs: 1.5 stays 1.5, NaN stays NaN."""
    total = sum(weights.values())
    return sum(weights[n] * factors[n] for n in scratch.FACTOR_NAMES) / total if total else 0.0


def keep_score_dividing_by_zero(factors, weights):
    """Forgets the all-zero weights: a ZeroDivisionError."""
    total = sum(weights[n] for n in scratch.FACTOR_NAMES)
    return sum(weights[n] * scratch.clamp01(factors[n]) for n in scratch.FACTOR_NAMES) / total


def keep_score_written_differently(factors, weights):
    """Normalizes the weights first, with math.fsum."""
    total = math.fsum(weights[n] for n in scratch.FACTOR_NAMES)
    if not total:
        return 0.0
    share = {n: weights[n] / total for n in scratch.FACTOR_NAMES}
    value = math.fsum(share[n] * (0.0 if factors[n] != factors[n] else
                                  sorted((0.0, factors[n], 1.0))[1])
                      for n in scratch.FACTOR_NAMES)
    return float(value)


@pytest.mark.parametrize("wrong, broken", [
    (keep_score_unweighted, WEIGHTED_MEAN),
    (keep_score_not_divided, WEIGHTED_MEAN),
    (keep_score_unclamped, BOUNDED),
    (keep_score_dividing_by_zero, BOUNDED),
])
def test_wrong_keep_score_is_rejected(wrong, broken):
    report = exercises.check_layer(keep_score=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_keep_score_written_differently_is_accepted():
    assert exercises.check_layer(keep_score=keep_score_written_differently).ok


# choose_evictions ---------------------------------------------------------------------------

def _take(ordered, tokens_to_free):
    chosen, freed = [], 0
    for page in ordered:
        if freed >= tokens_to_free:
            break
        chosen.append(page.record_id)
        freed += page.tokens
    return tuple(chosen)


def evicting_pinned_pages(pages, tokens_to_free, min_residency):
    """Forgets that a pin is a promise."""
    may_go = [p for p in pages if not p.protected and p.age >= min_residency]
    if tokens_to_free <= 0 or sum(p.tokens for p in may_go) < tokens_to_free:
        return ()
    return _take(sorted(may_go, key=lambda p: (p.keep_score, p.last_access, p.record_id)),
                 tokens_to_free)


def ties_in_input_order(pages, tokens_to_free, min_residency):
    """Sorts by keep score alone."""
    may_go = [p for p in pages if not p.pinned and not p.protected and p.age >= min_residency]
    if tokens_to_free <= 0 or sum(p.tokens for p in may_go) < tokens_to_free:
        return ()
    return _take(sorted(may_go, key=lambda p: p.keep_score), tokens_to_free)


def evicting_everything_evictable(pages, tokens_to_free, min_residency):
    """Never stops early."""
    may_go = [p for p in pages if not p.pinned and not p.protected and p.age >= min_residency]
    if tokens_to_free <= 0 or sum(p.tokens for p in may_go) < tokens_to_free:
        return ()
    return tuple(p.record_id for p in sorted(
        may_go, key=lambda p: (p.keep_score, p.last_access, p.record_id)))


def evicting_as_much_as_possible(pages, tokens_to_free, min_residency):
    """Frees what it can even when that is not enough."""
    may_go = [p for p in pages if not p.pinned and not p.protected and p.age >= min_residency]
    if tokens_to_free <= 0:
        return ()
    return _take(sorted(may_go, key=lambda p: (p.keep_score, p.last_access, p.record_id)),
                 tokens_to_free)


def evictions_with_a_heap(pages, tokens_to_free, min_residency):
    """Pops from a heap only as many pages as needed."""
    heap = [(p.keep_score, p.last_access, p.record_id, p.tokens) for p in pages
            if not (p.pinned or p.protected) and p.age >= min_residency]
    if tokens_to_free <= 0 or sum(row[3] for row in heap) < tokens_to_free:
        return ()
    heapq.heapify(heap)
    chosen, freed = [], 0
    while freed < tokens_to_free:
        _, _, record_id, tokens = heapq.heappop(heap)
        chosen.append(record_id)
        freed += tokens
    return chosen


@pytest.mark.parametrize("wrong, broken", [
    (evicting_pinned_pages, SPARES),
    (ties_in_input_order, ORDER),
    (evicting_everything_evictable, STOPS),
    (evicting_as_much_as_possible, ALL_OR_NOTHING),
])
def test_wrong_choose_evictions_is_rejected(wrong, broken):
    report = exercises.check_layer(choose_evictions=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_choose_evictions_written_differently_is_accepted():
    assert exercises.check_layer(choose_evictions=evictions_with_a_heap).ok


# settle_claim -------------------------------------------------------------------------------

def newest_wins(current, incoming):
    """The latest claim always replaces the current one."""
    if current is None:
        return incoming, None
    return incoming, replace(current, status="superseded", superseded_by=incoming.record_id)


def strictly_higher_rank(current, incoming):
    """Off by one: an equal rank does not replace."""
    if current is None:
        return incoming, None
    if scratch.SOURCE_RANK[incoming.source_kind] > scratch.SOURCE_RANK[current.source_kind]:
        return incoming, replace(current, status="superseded", superseded_by=incoming.record_id)
    return replace(incoming, status="conflicted", conflicts_with=current.record_id), current


def ranks_reversed(current, incoming):
    """Reads the ranks upside down (1 as the strongest)."""
    if current is None:
        return incoming, None
    if scratch.SOURCE_RANK[incoming.source_kind] <= scratch.SOURCE_RANK[current.source_kind]:
        return incoming, replace(current, status="superseded", superseded_by=incoming.record_id)
    return replace(incoming, status="conflicted", conflicts_with=current.record_id), current


def settle_claim_written_differently(current, incoming):
    """Looks the order up in a tuple instead of the rank table."""
    order = ("model_inferred", "tool_observed", "user_stated")
    if current is not None and order.index(incoming.source_kind) < order.index(
            current.source_kind):
        return replace(incoming, status="conflicted", conflicts_with=current.record_id), current
    if current is None:
        return incoming, None
    return incoming, replace(current, status="superseded", superseded_by=incoming.record_id)


@pytest.mark.parametrize("wrong, broken", [
    (newest_wins, CONFLICT),
    (strictly_higher_rank, SUPERSEDES),
    (ranks_reversed, SUPERSEDES),
])
def test_wrong_settle_claim_is_rejected(wrong, broken):
    report = exercises.check_layer(settle_claim=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_settle_claim_written_differently_is_accepted():
    assert exercises.check_layer(settle_claim=settle_claim_written_differently).ok


# the measured table -------------------------------------------------------------------------

def test_the_measured_work_is_the_same_run_numbers():
    rows = {row["implementation"]: row for row in exercises.measure_work(records=200,
                                                                          recalls=4)}
    scratch_row, library = rows["from scratch"], rows["library"]
    assert scratch_row["records scored per recall"] == library["records scored per recall"] == 5
    assert scratch_row["records read per recall"] == 200
    assert library["records read per recall"] == 5
    assert (scratch_row["records after a restart"], library["records after a restart"]) == (0, 200)
