"""Checkers for the s12 exercises (remote memory and recall)."""

from __future__ import annotations

from collections.abc import Sequence

from labmem.core.text import extract_terms
from labmem.exercises import Feedback, not_answered
from labmem.recall import LEXICAL_WEIGHT, RECENCY_WEIGHT, SCORE_DECIMALS, recency_weight

EXERCISE_1_QUERY = "Agent  MEMORY：分层记忆!"


def check_terms(answer: Sequence[str] | None) -> Feedback:
    """Exercise 1: the terms of :data:`EXERCISE_1_QUERY`, in the order recall keeps them."""
    name = "exercise 1 (terms)"
    if answer is None:
        return not_answered(name)
    expected = extract_terms(EXERCISE_1_QUERY)
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, f"{len(expected)} terms, sorted and unique")
    if sorted(set(got)) == list(expected):
        return Feedback(name, False, "right terms, but recall keeps them sorted and unique")
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    return Feedback(name, False, f"missing {missing}, unexpected {extra} — remember NFKC, "
                                 "casefold, and CJK bigrams")


def expected_total(matched: int, query_terms: int, age_days: float) -> float:
    """The teaching scorer's total, computed the way the breakdown shows it."""
    coverage = round(matched / query_terms, SCORE_DECIMALS)
    lexical = round(LEXICAL_WEIGHT * coverage, SCORE_DECIMALS)
    recency = round(RECENCY_WEIGHT * round(recency_weight(age_days), SCORE_DECIMALS),
                    SCORE_DECIMALS)
    return round(lexical + recency, SCORE_DECIMALS)


def check_score_by_hand(answer: float | None) -> Feedback:
    """Exercise 2: total for 2 of 3 query terms matched, captured 10 days before ``as_of``."""
    name = "exercise 2 (score by hand)"
    if answer is None:
        return not_answered(name)
    expected = expected_total(2, 3, 10.0)
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return Feedback(name, False, f"expected a number, got {type(answer).__name__}")
    if abs(answer - expected) <= 1e-6:
        return Feedback(name, True, f"{expected:.6f} = 0.85·coverage + 0.15·recency")
    if abs(answer - round(LEXICAL_WEIGHT * 2 / 3, SCORE_DECIMALS)) <= 1e-6:
        return Feedback(name, False, "that is only the lexical contribution; add recency")
    return Feedback(name, False, "coverage = 2/3, recency = 1/(1 + 10/30); "
                                 "weights 0.85 and 0.15")


def check_tie_break(answer: str | None) -> Feedback:
    """Exercise 3: which of two equal-score records (captured at the same instant) ranks first."""
    name = "exercise 3 (tie-break)"
    if answer is None:
        return not_answered(name)
    if answer == "memory-a17":
        return Feedback(name, True, "same total, coverage and capture time: memory_id ascending")
    if answer == "memory-b02":
        return Feedback(name, False, "insertion order never decides; the last key is "
                                     "memory_id ascending")
    return Feedback(name, False, "answer with one of the two memory ids")
