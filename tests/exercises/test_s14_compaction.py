"""The s14 compaction exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.context import LAYERS, close_tool_pairs
from labmem.exercises import s14_compaction as ex

TRUNCATE, DEDUP, PRUNE, SUMMARY = LAYERS
APPLIED = {8_000: (), 1_000: (TRUNCATE, DEDUP), 500: (TRUNCATE, DEDUP, PRUNE),
           100: (TRUNCATE, DEDUP, PRUNE, SUMMARY)}
STATUSES = {"edited": "corrupt", "symlink": "denied", "other_digest": "corrupt"}


@pytest.mark.parametrize("check", [ex.check_applied_layers, ex.check_statuses,
                                   ex.check_runs_at_threshold])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_the_answers_are_computed_by_the_library():
    assert {t: ex.applied_layers(t) for t in ex.EXERCISE_1_THRESHOLDS} == APPLIED
    assert ex.resolved_statuses() == STATUSES
    assert ex.runs_at_threshold() is True


def test_applied_layers():
    assert ex.check_applied_layers(APPLIED)
    assert ex.check_applied_layers({t: list(v) for t, v in APPLIED.items()})
    one_too_many = {**APPLIED, 1_000: (TRUNCATE, DEDUP, PRUNE)}
    assert "stops" in ex.check_applied_layers(one_too_many).message
    one_too_few = {**APPLIED, 500: (TRUNCATE, DEDUP)}
    assert "at or above" in ex.check_applied_layers(one_too_few).message
    reordered = {**APPLIED, 1_000: (DEDUP, TRUNCATE)}
    assert "order" in ex.check_applied_layers(reordered).message
    assert "not a layer" in ex.check_applied_layers({**APPLIED, 100: ("summary",)}).message
    assert "tuple" in ex.check_applied_layers({**APPLIED, 100: SUMMARY}).message
    assert "one entry per threshold" in ex.check_applied_layers({1_000: ()}).message


def test_statuses():
    assert ex.check_statuses(STATUSES)
    assert "available" in ex.check_statuses({**STATUSES, "symlink": "available"}).message
    assert "where the path leads" in ex.check_statuses({**STATUSES,
                                                        "symlink": "corrupt"}).message
    assert not ex.check_statuses({**STATUSES, "edited": "missing"})
    assert "keys" in ex.check_statuses({"edited": "corrupt"}).message


def test_runs_at_threshold():
    assert ex.check_runs_at_threshold(True)
    assert not ex.check_runs_at_threshold(False)
    assert "True or False" in ex.check_runs_at_threshold("yes").message


# -- build it yourself: close_tool_pairs ------------------------------------------------

EXERCISE = ex.BUILD[0]


def _positions(messages):
    use_at, result_at = {}, {}
    for i, message in enumerate(messages):
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block["type"] == "tool_use":
                use_at[block["id"]] = i
            elif block["type"] == "tool_result":
                result_at[block["tool_use_id"]] = i
    return use_at, result_at


def one_pass(messages, keep):
    """A near miss: adds the partners of the kept messages once, without repeating."""
    use_at, result_at = _positions(messages)
    kept = set(keep)
    for call, i in use_at.items():
        if i in keep or result_at[call] in keep:
            kept |= {i, result_at[call]}
    return kept


def results_follow_calls_only(messages, keep):
    """A near miss: a kept call brings its result, but a kept result not its call."""
    use_at, result_at = _positions(messages)
    return set(keep) | {result_at[call] for call, i in use_at.items() if i in keep}


def test_the_library_passes_its_own_exercise():
    feedback = EXERCISE.check(close_tool_pairs)
    assert feedback.ok and "300 generated inputs" in feedback.message


def test_a_stub_is_not_written_yet():
    def stub(messages, keep):
        raise NotImplementedError

    feedback = EXERCISE.check(stub)
    assert not feedback.ok and "not written yet" in feedback.message


@pytest.mark.parametrize("wrong", [lambda messages, keep: None,
                                   lambda messages, keep: set(keep), one_pass,
                                   results_follow_calls_only])
def test_wrong_rules_get_a_counterexample_and_the_hint(wrong):
    feedback = EXERCISE.check(wrong)
    assert not feedback.ok
    assert feedback.message.startswith("on messages 0: user 'start'")
    assert "keep=[" in feedback.message and "the library's returned [" in feedback.message
    assert "Hint:" in feedback.message


def test_one_pass_is_caught_on_a_chain():
    feedback = EXERCISE.check(one_pass)
    # two calls answered in one message: the smallest chain
    assert "assistant [tool_use t1]" in feedback.message
    assert "user [tool_result t1, tool_result t2]" in feedback.message


def test_a_set_list_or_tuple_answer_is_accepted():
    assert EXERCISE.check(lambda m, k: sorted(close_tool_pairs(m, k)))
    assert EXERCISE.check(lambda m, k: tuple(close_tool_pairs(m, k)))


def test_the_outline_of_a_counterexample():
    messages = [{"role": "user", "content": "start"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
                                                   "name": "bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                              "content": "ok"}, {"type": "text", "text": "?"}]}]
    assert ex.describe_pairs((messages, frozenset({2}))) == (
        "messages 0: user 'start' | 1: assistant [tool_use t1] | "
        "2: user [tool_result t1, text]; keep=[2]")


def test_cleared_tool_results_in_one_long_task():
    from labmem.exercises import s14_compaction as ex

    assert ex.cleared_results() == ex.EXERCISE_5_ROUNDS - 5 == 7
    assert ex.check_cleared(7)
    assert not ex.check_cleared(None)
    zero = ex.check_cleared(0)
    assert not zero and "tool rounds" in zero.message
    assert not ex.check_cleared(12) and not ex.check_cleared(5) and not ex.check_cleared(True)
