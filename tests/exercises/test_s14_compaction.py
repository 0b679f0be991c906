"""The s14 compaction exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.context import LAYERS
from labmem.exercises import s14_compaction as ex

TRUNCATE, DEDUP, PRUNE, SUMMARY = LAYERS
APPLIED = {8_000: (), 1_000: (TRUNCATE, DEDUP), 500: (TRUNCATE, DEDUP, PRUNE),
           100: (TRUNCATE, DEDUP, PRUNE, SUMMARY)}
STATUSES = {"edited": "corrupt", "symlink": "denied", "other_digest": "corrupt"}


@pytest.mark.parametrize("check", [ex.check_applied_layers, ex.check_statuses,
                                   ex.check_runs_at_threshold])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_the_answers_are_computed_by_the_library():
    assert {t: ex.applied_layers(t) for t in ex.EXERCISE_1_THRESHOLDS} == APPLIED
    assert ex.resolved_statuses() == STATUSES
    assert ex.runs_at_threshold() is True


def test_applied_layers():
    assert ex.check_applied_layers(APPLIED)
    assert ex.check_applied_layers({t: list(v) for t, v in APPLIED.items()})
    one_too_many = {**APPLIED, 1_000: (TRUNCATE, DEDUP, PRUNE)}
    assert "stops" in ex.check_applied_layers(one_too_many).message
    one_too_few = {**APPLIED, 500: (TRUNCATE, DEDUP)}
    assert "at or above" in ex.check_applied_layers(one_too_few).message
    reordered = {**APPLIED, 1_000: (DEDUP, TRUNCATE)}
    assert "order" in ex.check_applied_layers(reordered).message
    assert "not a layer" in ex.check_applied_layers({**APPLIED, 100: ("summary",)}).message
    assert "tuple" in ex.check_applied_layers({**APPLIED, 100: SUMMARY}).message
    assert "one entry per threshold" in ex.check_applied_layers({1_000: ()}).message


def test_statuses():
    assert ex.check_statuses(STATUSES)
    assert "available" in ex.check_statuses({**STATUSES, "symlink": "available"}).message
    assert "where the path leads" in ex.check_statuses({**STATUSES,
                                                        "symlink": "corrupt"}).message
    assert not ex.check_statuses({**STATUSES, "edited": "missing"})
    assert "keys" in ex.check_statuses({"edited": "corrupt"}).message


def test_runs_at_threshold():
    assert ex.check_runs_at_threshold(True)
    assert not ex.check_runs_at_threshold(False)
    assert "True or False" in ex.check_runs_at_threshold("yes").message


# -- build the layer: the pieces and the checker ----------------------------------------

def test_the_build_is_the_whole_layer():
    assert ex.BUILD == ()
    assert ex.PIECES == ("close_tool_pairs", "clear_old_tool_results", "summarize_rounds")
    report = ex.check_layer(close_tool_pairs=None)
    assert report.ok and repr(report).startswith("✓ your compaction passes all")


def test_cleared_tool_results_in_one_long_task():
    from labmem.exercises import s14_compaction as ex

    assert ex.cleared_results() == ex.EXERCISE_5_ROUNDS - 5 == 7
    assert ex.check_cleared(7)
    assert not ex.check_cleared(None)
    zero = ex.check_cleared(0)
    assert not zero and "tool rounds" in zero.message
    assert not ex.check_cleared(12) and not ex.check_cleared(5) and not ex.check_cleared(True)
