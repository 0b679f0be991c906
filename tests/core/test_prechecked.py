"""`prechecked`: a frozen dataclass built from checked values equals the constructor's."""

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from labmem.core.provenance import MemorySource
from labmem.core.validation import prechecked
from labmem.recall.pipeline import RecallHit, RecallScope
from labmem.recall.scorers import RecallScoreBreakdown
from labmem.recall.store import MemoryKind


@dataclass(frozen=True)
class _Pair:
    left: int
    right: str = "r"
    extra: dict = field(default_factory=dict)


def test_equals_the_constructor_and_stays_frozen():
    made = prechecked(_Pair, left=1, right="x", extra={})
    assert made == _Pair(1, "x", {}) and hash(prechecked(_Pair, left=1, right="x",
                                                         extra=None)) == hash(_Pair(1, "x", None))
    with pytest.raises(AttributeError):
        made.left = 2  # type: ignore[misc]


def test_every_field_is_required_even_one_with_a_default():
    with pytest.raises(TypeError, match="exactly the fields"):
        prechecked(_Pair, left=1, right="x")
    with pytest.raises(TypeError, match="exactly the fields"):
        prechecked(_Pair, left=1, right="x", extra={}, more=2)
    misspelt = prechecked(_Pair, left=1, right="x", extar={})  # counted, not named:
    assert not hasattr(misspelt, "extra")  # it fails on first read


def test_a_class_that_checks_its_fields_is_refused():
    @dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="call it instead"):
        prechecked(Checked, value=-1)


def test_recall_records_built_both_ways_are_equal():
    breakdown = dict(matched_terms=("a",), query_term_count=2, lexical_coverage=0.5,
                     recency=0.25, lexical_contribution=0.4, recency_contribution=0.1,
                     total=0.5, age_days=3.0, scorer="bm25", weights={"bm25": 1.0},
                     contributions={"bm25": 0.5}, term_contributions={"a": 0.5})
    assert prechecked(RecallScoreBreakdown, **breakdown) == RecallScoreBreakdown(**breakdown)
    source = MemorySource("s-1", "conversation", "A title",
                          datetime(2026, 1, 2, tzinfo=UTC))
    hit = dict(query_id="q", memory_id="m", rank=1, snippet="text",
               scope=RecallScope("scope", MemoryKind.CONVERSATION), provenance=source,
               score_breakdown=RecallScoreBreakdown(**breakdown))
    built = prechecked(RecallHit, **hit)
    assert built == RecallHit(**hit) and built.to_dict() == RecallHit(**hit).to_dict()
