"""The s14 Context MMU exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import s14_mmu


@pytest.mark.parametrize("check", [s14_mmu.check_factor_score, s14_mmu.check_recency_age,
                                   s14_mmu.check_budget_fits, s14_mmu.check_needs_l2])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_factor_score():
    right = (0.35 * 0.5 + 0.15 * 0.8 + 0.1 * (0.5 + 0.5 + 0.25 + 0.5 + 1.0)) / 1.0
    assert s14_mmu.check_factor_score(right)
    assert not s14_mmu.check_factor_score(0.5)
    assert not s14_mmu.check_factor_score("0.57")


def test_recency_age():
    assert s14_mmu.check_recency_age(3)
    assert not s14_mmu.check_recency_age(8)  # not 1/8 of a day
    assert not s14_mmu.check_recency_age(True)


def test_budget_fits():
    assert s14_mmu.check_budget_fits((True, False, True))
    assert not s14_mmu.check_budget_fits((False, False, True))  # equal fits
    assert not s14_mmu.check_budget_fits("yes")


def test_needs_l2():
    assert s14_mmu.check_needs_l2({"negation", "number", "condition", "exception"})
    assert not s14_mmu.check_needs_l2({"negation", "number", "condition", "exception",
                                       "early-number"})
    assert not s14_mmu.check_needs_l2("negation")
