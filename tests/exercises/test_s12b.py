"""s12b exercise checkers: right answers pass, typical wrong ones get a hint."""

import math

import pytest
from hypothesis import find
from hypothesis.errors import NoSuchExample

from labmem.exercises import s12b
from labmem.exercises.build import BuildExercise
from labmem.recall import bm25_term_weight


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


# -- build: one BM25 term weight ----------------------------------------------------------

EXERCISE = s12b.BUILD[0]


def written_out(count, document_frequency, searched_records, length, average_length, k1, b):
    idf = math.log(1 + (searched_records - document_frequency + 0.5)
                   / (document_frequency + 0.5))
    normalizer = 1 - b + b * length / average_length
    return idf * (count * (k1 + 1)) / (count + k1 * normalizer)


def textbook_idf(count, df, n, length, avg, k1, b):
    return math.log(n / df) * count * (k1 + 1) / (count + k1 * (1 - b + b * length / avg))


def no_length_normalization(count, df, n, length, avg, k1, b):
    return written_out(count, df, n, avg, avg, k1, b)


def no_k1_plus_one(count, df, n, length, avg, k1, b):
    return written_out(count, df, n, length, avg, k1, b) / (k1 + 1)


def inverted_length_ratio(count, df, n, length, avg, k1, b):
    return written_out(count, df, n, avg * avg / length, avg, k1, b)


def test_the_build_exercise_is_registered_with_the_library_function():
    assert isinstance(EXERCISE, BuildExercise) and EXERCISE.chapter == "s12b"
    assert EXERCISE.reference is bm25_term_weight


def test_the_library_function_and_a_written_out_one_pass():
    assert EXERCISE.check(bm25_term_weight)
    feedback = EXERCISE.check(written_out)
    assert feedback and "300 generated inputs" in feedback.message


@pytest.mark.parametrize("wrong", [lambda *args: 1.0, textbook_idf, no_length_normalization,
                                   no_k1_plus_one, inverted_length_ratio,
                                   lambda *args: "0.29"])
def test_wrong_weights_get_a_counterexample(wrong):
    feedback = EXERCISE.check(wrong)
    assert not feedback
    assert "on count=" in feedback.message and "average_length=" in feedback.message
    assert "the library's returned" in feedback.message and "Hint:" in feedback.message


def test_textbook_idf_shrinks_to_one_record():
    message = EXERCISE.check(textbook_idf).message
    assert ("on count=1, document_frequency=1, searched_records=1, length=1, "
            "average_length=1.0, k1=1.2, b=0.75 yours returned 0.0, the library's returned "
            "0.287682") in message


def test_a_stub_is_not_written_yet():
    def bm25_stub(*args):
        raise NotImplementedError

    feedback = EXERCISE.check(bm25_stub)
    assert not feedback.ok and "not written yet" in feedback.message


def test_generated_arguments_are_a_possible_collection():
    def impossible(args):
        count, df, n, length, avg, k1, b = args
        return not (1 <= df <= n and 1 <= count <= length and avg > 0
                    and 0 <= b <= 1 and k1 >= 0)

    with pytest.raises(NoSuchExample):
        find(s12b.term_weight_arguments(), impossible)
