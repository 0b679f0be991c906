"""s12b exercise checkers: right answers pass, typical wrong ones get a hint."""

import math

import pytest

from labmem.exercises import s12b


@pytest.mark.parametrize("check", [s12b.check_idf, s12b.check_saturation, s12b.check_winners])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_idf():
    assert s12b.check_idf(math.log1p(37.5 / 3.5))
    assert s12b.check_idf(2.4608)
    textbook = s12b.check_idf(math.log(40 / 3))
    assert not textbook and "textbook" in textbook.message
    assert not s12b.check_idf("2.46") and not s12b.check_idf(True)


def test_saturation():
    assert s12b.saturation_count() == 11
    assert s12b.saturation_count(0.5, 1.2) == 2  # 1/2.2 < 0.5 ≤ 2/3.2
    assert s12b.check_saturation(11)
    assert "more" in s12b.check_saturation(10).message
    assert "fewer" in s12b.check_saturation(12).message
    assert not s12b.check_saturation(11.0)


def test_winners_are_computed_not_stored():
    expected = set(s12b.scorers_with_gold_first())
    assert expected <= {"teaching", "bm25", "hybrid", "contextual"}
    assert s12b.check_winners(expected)
    assert s12b.check_winners(list(expected))
    wrong = {"teaching", "bm25", "hybrid", "contextual"} - expected or {"teaching"}
    assert not s12b.check_winners(wrong)
    assert "unknown" in s12b.check_winners({"tfidf"}).message
    assert not s12b.check_winners(3)


def test_winners_without_header():
    """Dropping "header" from q02 loses every scorer that counts the question words; the
    contextual scorer's analyzer drops them, so it keeps the right record first."""
    assert s12b.scorers_with_gold_first() == ("contextual",)
    assert s12b.scorers_with_gold_first("what did we decide about the Idempotency-Key header",
                                        "api-idempotency") == ("bm25", "hybrid", "contextual")
    right = s12b.check_winners({"contextual"})
    assert right and "analyzer drops them" in right.message
    hinted = s12b.check_winners({"bm25", "hybrid"})
    assert not hinted and "analyzer" in hinted.message
    hinted = s12b.check_winners(set())
    assert not hinted and "analyzer" in hinted.message
    hinted = s12b.check_winners({"bm25", "hybrid", "contextual"})
    assert not hinted and "header" in hinted.message


# -- the layer build --------------------------------------------------------------------


def test_the_build_exercise_is_the_layer_suite():
    """The single-function term-weight checker became a contract of the layer's suite
    (tests/contracts/test_s12b.py rejects wrong pieces there)."""
    assert s12b.BUILD == ()
    assert s12b.PIECES == ("Analyzer.term", "build_index", "bm25_term_weight")


def test_exercise_1_states_and_keeps_its_tolerance():
    exact = math.log1p(37.5 / 3.5)
    assert s12b.IDF_TOLERANCE == 1e-4
    assert s12b.check_idf(exact + 0.00009) and s12b.check_idf(exact - 0.00009)
    assert not s12b.check_idf(exact + 0.0002)
