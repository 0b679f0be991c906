"""Checkers for the s14 Context MMU exercises."""

from __future__ import annotations

from datetime import timedelta

from labmem.exercises import Feedback, not_answered
from labmem.mmu import Factors, FactorWeights, factor_score, recency

# Exercise 1: a page with these factors, under the default weights.
EXERCISE_1_FACTORS = dict(relevance=0.5, importance=0.8, confidence=0.5, utility=0.5,
                          recency=0.25, salience=0.5, scope=1.0)


def _number(answer: object) -> bool:
    return not isinstance(answer, bool) and isinstance(answer, (int, float))


def check_factor_score(answer: float | None) -> Feedback:
    """Exercise 1: the default-weight score of :data:`EXERCISE_1_FACTORS`."""
    name = "exercise 1 (factor score)"
    if answer is None:
        return not_answered(name)
    expected = factor_score(Factors(**EXERCISE_1_FACTORS), FactorWeights())
    if not _number(answer):
        return Feedback(name, False, f"expected a number, got {type(answer).__name__}")
    if abs(answer - expected) <= 1e-6:
        return Feedback(name, True, f"{expected:.4f}: Σ weight·factor / Σ weight")
    return Feedback(name, False, "multiply each factor by its weight (relevance 0.35, "
                                 "importance 0.15, the rest 0.10) and divide by their sum")


def check_recency_age(answer: float | None) -> Feedback:
    """Exercise 2: after how many days (half-life one day) is recency 0.125?"""
    name = "exercise 2 (recency)"
    if answer is None:
        return not_answered(name)
    if not _number(answer):
        return Feedback(name, False, f"expected a number of days, got {type(answer).__name__}")
    if abs(recency(timedelta(days=answer)) - 0.125) <= 1e-9:
        return Feedback(name, True, "three half-lives: 1 → 0.5 → 0.25 → 0.125")
    return Feedback(name, False, "recency halves every half-life; count the halvings to 1/8")


def check_budget_fits(answer: tuple[bool, bool, bool] | None) -> Feedback:
    """Exercise 3: budget 100, used 60. Does a promotion needing 40, 41, 39 tokens fit?"""
    name = "exercise 3 (budget boundary)"
    if answer is None:
        return not_answered(name)
    expected = (True, False, True)
    if isinstance(answer, (tuple, list)) and tuple(answer) == expected:
        return Feedback(name, True, "exactly equal fits; one over is rejected")
    return Feedback(name, False, "the check is need <= budget and used <= budget - need")


def check_needs_l2(answer: set[str] | None, expected: set[str] | None = None) -> Feedback:
    """Exercise 4: which information-loss cases must be loaded at L2 before a decision?"""
    name = "exercise 4 (information loss)"
    if answer is None:
        return not_answered(name)
    expected = expected if expected is not None else {"negation", "number", "condition",
                                                      "exception"}
    got = set(answer) if isinstance(answer, (set, list, tuple, frozenset)) else None
    if got == expected:
        return Feedback(name, True, "their decisive detail lies past the L1 excerpt")
    return Feedback(name, False, "look at the in_L1 column: a detail the overview lost "
                                 "needs the full text")
