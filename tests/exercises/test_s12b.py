"""s12b exercise checkers: right answers pass, typical wrong ones get a hint."""

import math
from collections import defaultdict

import pytest

from labmem.exercises import s12b
from labmem.exercises.build import BuildExercise
from labmem.recall import FusedRank, fuse_rankings


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
    assert expected <= {"teaching", "bm25", "bm25_recency", "contextual"}
    assert s12b.check_winners(expected)
    assert s12b.check_winners(list(expected))
    wrong = {"teaching", "bm25", "bm25_recency", "contextual"} - expected or {"teaching"}
    assert not s12b.check_winners(wrong)
    assert "unknown" in s12b.check_winners({"tfidf"}).message
    assert not s12b.check_winners(3)


def test_winners_without_header():
    """Dropping "header" from q02 loses every scorer that counts the question words; the
    contextual scorer's analyzer drops them, so it keeps the right record first."""
    assert s12b.scorers_with_gold_first() == ("contextual",)
    assert s12b.scorers_with_gold_first("what did we decide about the Idempotency-Key header",
                                        "api-idempotency") == ("bm25", "bm25_recency",
                                                               "contextual")
    right = s12b.check_winners({"contextual"})
    assert right and "analyzer drops them" in right.message
    hinted = s12b.check_winners({"bm25", "bm25_recency"})
    assert not hinted and "analyzer" in hinted.message
    hinted = s12b.check_winners(set())
    assert not hinted and "analyzer" in hinted.message
    hinted = s12b.check_winners({"bm25", "bm25_recency", "contextual"})
    assert not hinted and "header" in hinted.message


# -- the layer build --------------------------------------------------------------------


def test_the_layer_pieces_are_named():
    """The layer build is judged by the layer's suite (tests/contracts/test_s12b.py rejects
    wrong pieces there); BUILD holds the fusion rule, below."""
    assert s12b.PIECES == ("Analyzer.term", "build_index", "bm25_term_weight")


def test_exercise_1_states_and_keeps_its_tolerance():
    exact = math.log1p(37.5 / 3.5)
    assert s12b.IDF_TOLERANCE == 1e-4
    assert s12b.check_idf(exact + 0.00009) and s12b.check_idf(exact - 0.00009)
    assert not s12b.check_idf(exact + 0.0002)


# -- build one function: the fusion rule ---------------------------------------------------

(FUSION,) = s12b.BUILD


def test_the_fusion_exercise_is_registered_with_the_library_rule():
    assert isinstance(FUSION, BuildExercise) and FUSION.chapter == "s12b"
    assert FUSION.reference is fuse_rankings
    assert FUSION.title == "s12b build: the fusion rule"


def _fused(lexical, dense, k, weight, *, start=1, first=True, scale=True, both=False,
           by_id=True):
    """The rule with one knob turned at a time: each wrong version below is one turn."""
    def ranks(ids):
        found = {}
        for rank, memory_id in enumerate(ids, start=start):
            if first:
                found.setdefault(memory_id, rank)
            else:
                found[memory_id] = rank
        return found

    lex, den = ranks(lexical), ranks(dense)
    top = (k + 1) if scale else 1
    ids = [m for m in lex if m in den] if both else list({**lex, **den})
    rows = []
    for memory_id in ids:
        lp = round((1 - weight) * top / (k + lex[memory_id]), 6) if memory_id in lex else 0.0
        dp = round(weight * top / (k + den[memory_id]), 6) if memory_id in den else 0.0
        rows.append(FusedRank(memory_id, round(lp + dp, 6), lp, dp, lex.get(memory_id),
                              den.get(memory_id)))
    key = (lambda f: (-f.total, f.memory_id)) if by_id else (lambda f: -f.total)
    return sorted(rows, key=key)


MISTAKES = {
    "ranks counted from 0": ({"start": 0}, "dense ['m1']", "None, 0)"),
    "a repeated id at its last rank": ({"first": False}, "dense ['m1', 'm1']", "None, 2)"),
    "plain 1/(k + rank), not scaled so that rank 1 scores 1":
        ({"scale": False}, "dense ['m1']", "0.25"),
    "ids in both lists only": ({"both": True}, "dense ['m1']", "yours returned []"),
    "equal totals in input order": ({"by_id": False}, "lexical ['m2'], dense ['m1']",
                                    "[('m2', 0.5"),
}


@pytest.mark.parametrize("mistake", MISTAKES, ids=list(MISTAKES))
def test_a_wrong_fusion_rule_is_rejected_with_the_smallest_case(mistake):
    knobs, case, shown = MISTAKES[mistake]

    def wrong(lexical, dense, *, k, dense_weight):
        return _fused(lexical, dense, k, dense_weight, **knobs)

    feedback = s12b.check_fusion(wrong)
    assert not feedback
    assert feedback.message.startswith("on ") and case in feedback.message
    assert shown in feedback.message and "Hint:" in feedback.message


def test_a_fusion_rule_written_differently_is_accepted():
    """Positional k and weight, sums accumulated per id, tuples instead of FusedRank."""
    def mine(lexical, dense, k, dense_weight):
        parts = defaultdict(lambda: [0.0, 0.0, None, None])
        for side, ranking, weight in ((0, lexical, 1 - dense_weight), (1, dense, dense_weight)):
            for position, memory_id in enumerate(ranking):
                row = parts[memory_id]
                if row[2 + side] is None:
                    row[2 + side] = position + 1
                    row[side] = round(weight * (k + 1) / (k + position + 1), 6)
        rows = [(m, round(lp + dp, 6), lp, dp, lr, dr) for m, (lp, dp, lr, dr) in parts.items()]
        return sorted(rows, key=lambda row: (-row[1], row[0]))

    feedback = s12b.check_fusion(mine)
    assert feedback, feedback.message
    assert "300 generated inputs" in feedback.message


def test_the_fusion_checker_says_when_nothing_is_written():
    def stub(lexical, dense, *, k, dense_weight):
        raise NotImplementedError

    assert "not written yet" in s12b.check_fusion(stub).message
    assert "pass your function" in s12b.check_fusion(None).message
