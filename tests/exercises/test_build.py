"""The build-it-yourself registry: every chapter has one, and every checker really judges."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from labmem.exercises import CHAPTER_MODULES, build_exercises
from labmem.exercises.build import MAX_EXAMPLES, BuildExercise

EXERCISES = build_exercises()
CHAPTERS = {"s09", "s10", "s11", "s12", "s12b", "s13", "s14 compaction", "s14 MMU",
            "walkthrough", "case study", "s15"}


#: chapters whose build exercise is the whole layer, judged by its contract suite
#: (labmem.exercises.suites) rather than by a single-function BuildExercise
LAYER_BUILDS = {"s09", "s11", "s12b", "s13", "s14 compaction", "s14 MMU", "case study", "s15"}


def test_every_chapter_has_a_build_exercise():
    assert {exercise.chapter for exercise in EXERCISES} | LAYER_BUILDS == CHAPTERS
    assert len(CHAPTER_MODULES) == len(CHAPTERS)


def test_names_are_unique():
    names = [exercise.title for exercise in EXERCISES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.title)
def test_the_reference_passes_its_own_checker(exercise):
    feedback = exercise.check(exercise.reference)
    assert feedback.ok, feedback.message
    assert f"{MAX_EXAMPLES} generated inputs" in feedback.message


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.title)
def test_a_constant_function_fails_with_a_hint(exercise):
    feedback = exercise.check(lambda *args: None)
    assert not feedback.ok
    assert feedback.message.startswith("on ") and "Hint:" in feedback.message
    assert "Traceback" not in feedback.message


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.title)
def test_a_stub_is_not_written_yet(exercise):
    def stub(*args):
        raise NotImplementedError

    feedback = exercise.check(stub)
    assert not feedback.ok and "not written yet" in feedback.message


# -- the framework itself, on a small exercise whose answers we know ------------------------

def _rank(scored):
    """Highest score first, ties by id ascending."""
    return [name for name, _ in sorted(scored, key=lambda pair: (-pair[1], pair[0]))]


TOY = BuildExercise(
    chapter="toy", name="rank", reference=_rank,
    inputs=st.tuples(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 2)),
                              unique_by=lambda pair: pair[0])),
    hint="break ties by id")


def test_the_counterexample_is_the_smallest_one():
    def no_tie_break(scored):
        return [name for name, _ in sorted(scored, key=lambda pair: -pair[1])]

    feedback = TOY.check(no_tie_break)
    assert not feedback.ok
    # two records with the same score in the wrong insertion order is the smallest failure
    assert feedback.message.startswith("on [('b', 0), ('a', 0)] yours returned ['b', 'a'], "
                                       "the library's returned ['a', 'b']")
    assert feedback.message.endswith("Hint: break ties by id")


def test_an_exception_in_the_learners_code_is_reported_not_raised():
    feedback = TOY.check(lambda scored: scored[0][0])
    assert not feedback.ok and "raised IndexError" in feedback.message


def test_the_verdict_is_the_same_every_time():
    def wrong(scored):
        return sorted(name for name, _ in scored)

    assert TOY.check(wrong) == TOY.check(wrong)


def test_passing_something_that_is_not_a_function():
    feedback = TOY.check(None)
    assert not feedback.ok and "pass your function" in feedback.message
