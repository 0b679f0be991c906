"""The shared retrieval metrics: one definition for s12b, LoCoMo and the Context MMU."""

import pytest

from labmem.core import metrics
from labmem.core.errors import InvalidInputError
from labmem.mmu import evaluation
from labmem.recall import evaluation as recall_eval

RANKED = ["a", "x", "b", "y"]


def test_definitions():
    assert metrics.recall_at_k(RANKED, {"a", "b"}, 1) == 0.5
    assert metrics.recall_at_k(RANKED, {"a", "b"}, 3) == 1.0
    assert metrics.precision_at_k(RANKED, {"a", "b"}, 2) == 0.5
    assert metrics.precision_at_k([], {"a"}, 3) == 0.0
    # divided by k, not by what came back: one right answer of one returned, asked for 5
    assert metrics.precision_at_k(["a"], {"a"}, 5) == 0.2
    assert metrics.precision_at_k(["a", "x"], {"a"}, 5) == 0.2
    assert metrics.any_hit_at_k(RANKED, {"b", "q"}, 2) == 0.0
    assert metrics.any_hit_at_k(RANKED, {"b", "q"}, 3) == 1.0
    assert metrics.full_hit_at_k(RANKED, {"a", "b"}, 2) == 0.0
    assert metrics.full_hit_at_k(RANKED, {"a", "b"}, 3) == 1.0
    assert metrics.reciprocal_rank(RANKED, {"b"}) == pytest.approx(1 / 3)


def test_every_chapter_uses_the_same_functions():
    assert recall_eval.recall_at_k is metrics.recall_at_k
    assert recall_eval.reciprocal_rank is metrics.reciprocal_rank
    assert evaluation.recall_at_k is metrics.recall_at_k  # the MMU too: one empty-gold rule
    assert evaluation.precision_at_k is metrics.precision_at_k


@pytest.mark.parametrize("metric", [metrics.recall_at_k, metrics.precision_at_k,
                                    metrics.any_hit_at_k, metrics.full_hit_at_k])
def test_bad_k_and_empty_gold_name_the_field(metric):
    for gold, k, field in (([], 3, "gold"), (["a"], 0, "k"), (["a"], True, "k")):
        with pytest.raises(InvalidInputError) as err:
            metric(RANKED, gold, k)
        assert err.value.field == field
