"""s12 exercise checkers: right answers pass, typical wrong ones get a hint that helps."""

from itertools import pairwise

import pytest

from labmem.exercises import s12
from labmem.exercises.build import BuildExercise
from labmem.recall import rank_key


@pytest.mark.parametrize("check", [s12.check_terms, s12.check_score_by_hand,
                                   s12.check_rank_order])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_terms():
    assert s12.check_terms(("agent", "memory", "分层", "层记", "记忆"))
    assert not s12.check_terms(["memory", "agent", "分层", "层记", "记忆"])  # unsorted
    assert not s12.check_terms(("agent", "memory", "分层记忆"))  # no bigrams
    assert not s12.check_terms(("Agent", "MEMORY", "分层", "层记", "记忆"))  # no casefold


def test_score_by_hand():
    assert s12.check_score_by_hand(0.679167)
    assert not s12.check_score_by_hand(0.566667)  # lexical part only
    assert not s12.check_score_by_hand(0.6)
    assert not s12.check_score_by_hand("0.679167")


# -- exercise 3: a ranking with ties -----------------------------------------------------

RIGHT = ["memory-k40", "memory-m11", "memory-a02", "memory-t33", "memory-c05"]


def test_rank_order_is_computed_by_the_library():
    assert s12.ranked_ids() == tuple(RIGHT)
    pairs = [s12.scored_pair(row) for row in s12.EXERCISE_3_ROWS]
    by_library = sorted(pairs, key=lambda pair: rank_key(*pair))
    assert [c.record.memory_id for c, _ in by_library] == RIGHT
    assert s12.check_rank_order(RIGHT) and s12.check_rank_order(tuple(RIGHT))


def test_rank_order_rows_need_every_key():
    """Each of the four keys decides at least one neighbouring pair of the answer."""
    rows = {row.memory_id: row for row in s12.EXERCISE_3_ROWS}
    reasons = {s12._why_first(rows[a], rows[b]) for a, b in pairwise(RIGHT)}
    assert len(reasons) == 4
    stored_order = [row.memory_id for row in s12.EXERCISE_3_ROWS]
    assert stored_order != RIGHT  # the table does not show the answer


@pytest.mark.parametrize("answer, words", [
    (["memory-k40", "memory-m11", "memory-t33", "memory-a02", "memory-c05"], "memory_id"),
    (["memory-k40", "memory-m11", "memory-c05", "memory-a02", "memory-t33"], "newer capture"),
    (["memory-m11", "memory-k40", "memory-a02", "memory-t33", "memory-c05"], "total"),
    (["memory-k40", "memory-a02", "memory-t33", "memory-c05", "memory-m11"], "coverage"),
])
def test_rank_order_names_the_key_that_was_missed(answer, words):
    feedback = s12.check_rank_order(answer)
    assert not feedback and words in feedback.message


@pytest.mark.parametrize("answer", ["memory-k40", ["memory-k40"], RIGHT + ["memory-k40"], 5])
def test_rank_order_wants_every_id_once(answer):
    assert not s12.check_rank_order(answer)


# -- build: the stable rank key ----------------------------------------------------------

EXERCISE = s12.BUILD[0]


def test_the_build_exercise_is_registered_with_the_library_key():
    assert isinstance(EXERCISE, BuildExercise) and EXERCISE.chapter == "s12"
    assert EXERCISE.reference is rank_key


def test_the_library_key_and_a_written_out_key_pass():
    assert EXERCISE.check(rank_key)

    def mine(candidate, breakdown):
        return (-breakdown.total, -breakdown.lexical_coverage,
                -candidate.captured_at.timestamp(), candidate.record.memory_id)

    feedback = EXERCISE.check(mine)
    assert feedback and "300 generated inputs" in feedback.message


@pytest.mark.parametrize("wrong", [
    lambda c, b: 0,  # a constant: insertion order
    lambda c, b: (-b.total, -b.lexical_coverage, -c.captured_at.timestamp()),  # no id
    lambda c, b: (-b.total, -b.lexical_coverage, c.captured_at.timestamp(),
                  c.record.memory_id),  # oldest first
    lambda c, b: (-b.total, -c.captured_at.timestamp(), c.record.memory_id),  # no coverage
    lambda c, b: (b.total, b.lexical_coverage, c.captured_at, c.record.memory_id),  # ascending
    lambda c, b: (-b.total, -b.lexical_coverage, -c.captured_at, c.record.memory_id),  # raises
])
def test_wrong_keys_get_a_counterexample(wrong):
    feedback = EXERCISE.check(wrong)
    assert not feedback
    assert "sorting [memory-" in feedback.message and "the library's returned" in feedback.message
    assert "Hint:" in feedback.message


def test_forgetting_the_tie_break_shows_two_full_ties():
    feedback = EXERCISE.check(lambda c, b: (-b.total, -b.lexical_coverage,
                                            -c.captured_at.timestamp()))
    assert ("sorting [memory-b (total 0.5, coverage 0.5, captured 2026-07-01T09:00:00Z); "
            "memory-a (total 0.5, coverage 0.5, captured 2026-07-01T09:00:00Z)]"
            in feedback.message)
    assert "yours returned ('memory-b', 'memory-a')" in feedback.message


def test_a_stub_is_not_written_yet():
    def rank_key_stub(candidate, breakdown):
        raise NotImplementedError

    feedback = EXERCISE.check(rank_key_stub)
    assert not feedback.ok and "not written yet" in feedback.message


def test_passing_something_else_than_a_function():
    assert "pass your function" in EXERCISE.check(None).message


def test_generated_lists_have_unique_ids_and_ties():
    from hypothesis import find

    def ids(args):
        return [c.record.memory_id for c, _ in args[0]]

    def full_tie(args):
        keys = [(b.total, b.lexical_coverage, c.captured_at) for c, b in args[0]]
        return len(set(keys)) < len(keys)

    assert len(set(ids(find(s12.TIED_SCORED_LISTS, lambda a: len(a[0]) == 5)))) == 5
    assert full_tie(find(s12.TIED_SCORED_LISTS, full_tie))
