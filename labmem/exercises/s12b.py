"""Checkers for the s12b exercises (choosing a ranker)."""

from __future__ import annotations

import math
import tempfile

from labmem.exercises import Feedback, not_answered
from labmem.recall import Bm25Scorer, bm25_idf

EXERCISE_1 = {"searched_records": 40, "document_frequency": 3}
EXERCISE_2_SHARE = 0.9
EXERCISE_3_QUERY_ID = "q02"


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


def scorers_with_gold_first(query_id: str = EXERCISE_3_QUERY_ID) -> tuple[str, ...]:
    """Which of teaching / bm25 / hybrid put a gold record first for ``query_id`` (computed)."""
    from labmem.recall import evaluate, load_into_store, load_labeled_set, scorer_engines

    labeled = load_labeled_set()
    [query] = [q for q in labeled.queries if q.query_id == query_id]
    with tempfile.TemporaryDirectory() as tmp:
        store = load_into_store(labeled, tmp)
        outcomes = evaluate(scorer_engines(store), [query], as_of=labeled.as_of)
    return tuple(o.engine for o in outcomes if o.hits and o.hits[0].memory_id in query.gold)


def check_winners(answer) -> Feedback:
    """Exercise 3: the set of scorers that rank a gold record first for query q02."""
    name = "exercise 3 (who wins q02)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        answer = {answer}
    try:
        got = set(answer)
    except TypeError:
        return Feedback(name, False, "answer with a set of scorer names, e.g. {'bm25'}")
    expected = set(scorers_with_gold_first())
    if got == expected:
        return Feedback(name, True, f"{sorted(expected)} — the rare term carries the "
                                    "query only when it is weighted by idf")
    unknown = got - {"teaching", "bm25", "hybrid"}
    if unknown:
        return Feedback(name, False, f"unknown scorer(s) {sorted(unknown)}; "
                                     "use 'teaching', 'bm25', 'hybrid'")
    return Feedback(name, False, "look at the per-term table for q02: which scorers give "
                                 "the rare term more than the question words?")
