"""Checkers for the s12b exercises (engineering a ranker).

Three predict exercises (an idf by hand, saturation, which of the four scorers survive a
shorter question) and one build exercise: the learner writes one BM25 term weight and the checker
compares it with :func:`labmem.recall.bm25_term_weight` — the function both the exact
``explain`` and the vectorized ``estimate`` of the BM25 scorers use — on generated inputs.
"""

from __future__ import annotations

import math
import tempfile

from hypothesis import strategies as st

from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.recall import (
    BM25_B,
    BM25_K1,
    SCORE_DECIMALS,
    SCORER_NAMES,
    Bm25Scorer,
    bm25_idf,
    bm25_term_weight,
)

EXERCISE_1 = {"searched_records": 40, "document_frequency": 3}
EXERCISE_2_SHARE = 0.9
EXERCISE_3_QUERY = "what did we decide about the Idempotency-Key"  # q02 without "header"
EXERCISE_3_GOLD = "api-idempotency"


def _number(answer) -> bool:
    return isinstance(answer, int | float) and not isinstance(answer, bool)


def check_idf(answer: float | None) -> Feedback:
    """Exercise 1: BM25's idf of a term found in 3 of 40 records."""
    name = "exercise 1 (idf by hand)"
    if answer is None:
        return not_answered(name)
    if not _number(answer):
        return Feedback(name, False, f"expected a number, got {type(answer).__name__}")
    n, df = EXERCISE_1["searched_records"], EXERCISE_1["document_frequency"]
    expected = bm25_idf(df, n)
    if abs(answer - expected) <= 1e-4:
        return Feedback(name, True, f"ln(1 + (40 − 3 + 0.5) / (3 + 0.5)) = {expected:.4f}")
    if abs(answer - math.log(n / df)) <= 1e-4:
        return Feedback(name, False, "that is the textbook ln(N/df); BM25's idf adds ½ "
                                     "to both counts and 1 inside the log")
    return Feedback(name, False, "idf = ln(1 + (N − df + 0.5) / (df + 0.5)) with N = 40, df = 3")


def saturation_count(share: float = EXERCISE_2_SHARE, k1: float = Bm25Scorer.k1) -> int:
    """Smallest term count whose BM25 part reaches ``share`` of its ceiling (average length)."""
    count = 1
    while count / (count + k1) < share:  # tf·(k1+1)/(tf+k1) ÷ (k1+1)
        count += 1
    return count


def check_saturation(answer: int | None) -> Feedback:
    """Exercise 2: how many repeats reach 90% of a term's maximum contribution (k1 = 1.2)."""
    name = "exercise 2 (saturation)"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, int) or isinstance(answer, bool):
        return Feedback(name, False, "answer with a whole number of occurrences")
    expected = saturation_count()
    if answer == expected:
        return Feedback(name, True, f"{expected}/(11 + 1.2) ≥ 0.9 but 10/(10 + 1.2) < 0.9: "
                                    "the 11th repeat is worth ~1% of the first")
    direction = "more" if answer < expected else "fewer"
    return Feedback(name, False, f"not quite — {direction}; at average length the part is "
                                 "idf · tf·(k1+1)/(tf+k1), so solve tf/(tf+1.2) ≥ 0.9")


def scorers_with_gold_first(text: str = EXERCISE_3_QUERY,
                            gold: str = EXERCISE_3_GOLD) -> tuple[str, ...]:
    """Which of the scorers (:data:`~labmem.recall.SCORER_NAMES`) rank ``gold`` first for
    ``text`` (computed, never stored)."""
    from labmem.recall import load_into_store, load_labeled_set, scorer_engines

    labeled = load_labeled_set()
    with tempfile.TemporaryDirectory() as tmp:
        store = load_into_store(labeled, tmp)
        return tuple(name for name, engine in scorer_engines(store, SCORER_NAMES).items()
                     if [h.memory_id for h in engine.recall(text, limit=1,
                                                            as_of=labeled.as_of).hits]
                     == [gold])


def check_winners(answer) -> Feedback:
    """Exercise 3: the set of scorers that still rank api-idempotency first without "header"."""
    name = "exercise 3 (who still wins)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        answer = {answer}
    try:
        got = set(answer)
    except TypeError:
        return Feedback(name, False, "answer with a set of scorer names, e.g. {'bm25'}, "
                                     "or set() for none")
    unknown = got - set(SCORER_NAMES)
    if unknown:
        return Feedback(name, False, f"unknown scorer(s) {sorted(unknown)}; "
                                     f"use {', '.join(map(repr, SCORER_NAMES))}")
    expected = set(scorers_with_gold_first())
    if got == expected:
        if expected == {"contextual"}:
            return Feedback(name, True, "only contextual — for bm25 and the hybrid idf makes "
                                        "the question words cheap, not free, and five of them "
                                        "in one chat outweigh 'idempotency' and 'key'; the "
                                        "english analyzer drops them, so they add nothing")
        return Feedback(name, True, f"{sorted(expected)}")
    if "contextual" in expected and "contextual" not in got:
        return Feedback(name, False, "look at the contextual rows: which of the question's "
                                     "words does its analyzer keep?")
    return Feedback(name, False, f"add up {EXERCISE_3_GOLD}'s BM25 parts without 'header' "
                                 "(the per-term table) and compare them with the total of "
                                 "the record that came second for the full question")


# -- build exercise: one BM25 term weight ------------------------------------------------


@st.composite
def term_weight_arguments(draw) -> tuple:
    """(count, document_frequency, searched_records, length, average_length, k1, b), as a
    real collection could produce them: 1 ≤ df ≤ N, count ≤ length, average length > 0."""
    searched = draw(st.integers(1, 60))
    document_frequency = draw(st.integers(1, searched))
    count = draw(st.integers(1, 12))
    length = draw(st.integers(count, count + 80))
    average_length = draw(st.integers(4, 400)) / 4
    k1 = draw(st.sampled_from((BM25_K1, 0.0, 0.5, 2.0)))  # defaults first: they shrink there
    b = draw(st.sampled_from((BM25_B, 0.0, 0.5, 1.0)))
    return (count, document_frequency, searched, length, average_length, k1, b)


_ARGUMENT_NAMES = ("count", "document_frequency", "searched_records", "length",
                   "average_length", "k1", "b")


def _describe_weight_arguments(args: tuple) -> str:
    return ", ".join(f"{name}={value}" for name, value in zip(_ARGUMENT_NAMES, args, strict=True))


def _as_shown(value) -> float:
    """A weight as the breakdown shows it: a float rounded to SCORE_DECIMALS places."""
    return round(float(value), SCORE_DECIMALS)


BUILD = (
    BuildExercise(
        chapter="s12b",
        name="one BM25 term weight",
        reference=bm25_term_weight,
        inputs=term_weight_arguments(),
        hint="compare each factor with the chapter's 'BM25, one term at a time' formula: "
             "the idf's ½s and 1 +, the (k1 + 1) on top, and |d|/avgdl scaled by b below",
        project=_as_shown,
        describe=_describe_weight_arguments,
    ),
)
