"""Every rendered breakdown lists every part of the score, and the parts add up.

The contextual scorer adds a thread bonus beside its term weights; a block that showed only
``lexical_contribution`` and ``recency_contribution`` would hide it (5.37 + 0 ≠ 7.75).
"""

import json
import re

import pytest

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.recall import (
    SCORER_NAMES,
    RecallEngine,
    RemoteMemoryStore,
    add_teaching_records,
    render_recalled_context,
)
from labmem.recall.pipeline import score_contributions

QUERIES = ["SQLite persistence", "layered memory design", "分层记忆", "测试策略",
           "token estimate CJK", "s14 after s13 planning"]
TOLERANCE = 5e-6  # each part is rounded to 6 decimals, and so is the total


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    clock = FixedClock("2026-08-01T12:00:00Z")
    store = RemoteMemoryStore(tmp_path_factory.mktemp("parts") / "r.jsonl", user_id="alice",
                              clock=clock)
    add_teaching_records(store)
    return store


@pytest.mark.parametrize("scorer", SCORER_NAMES)
def test_xml_and_json_list_every_part_and_the_parts_add_up(store, scorer):
    engine = RecallEngine(store, scorer=scorer, clock=FixedClock("2026-08-01T12:00:00Z"))
    seen = 0
    for query in QUERIES:
        result = engine.recall(query, limit=10)
        for hit, score_line in zip(result.hits, re.findall(
                r"<score [^>]*/>", render_recalled_context(result)), strict=True):
            attributes = dict(re.findall(r'(\w+)="([^"]*)"', score_line))
            parts = {k: float(v) for k, v in attributes.items() if k.endswith("_contribution")}
            assert parts, score_line
            assert sum(parts.values()) == pytest.approx(float(attributes["total"]),
                                                        abs=TOLERANCE * len(parts))
            assert set(parts) == {f"{name}_contribution"
                                  for name in hit.score_breakdown.contributions}
            breakdown = json.loads(result.to_json())["hits"][hit.rank - 1]["score_breakdown"]
            assert sum(breakdown["contributions"].values()) == pytest.approx(
                breakdown["total"], abs=TOLERANCE * len(parts))
            seen += 1
    assert seen >= len(QUERIES)  # the check ran on real hits


def test_the_contextual_thread_bonus_is_shown(store):
    result = RecallEngine(store, scorer="contextual").recall("SQLite persistence", limit=1)
    line = render_recalled_context(result).splitlines()[2]
    assert 'terms_contribution="' in line and 'thread_contribution="' in line


def test_a_part_name_that_is_not_a_plain_name_is_refused(store):
    from dataclasses import replace

    result = RecallEngine(store).recall("SQLite persistence", limit=1)
    breakdown = replace(result.hits[0].score_breakdown,
                        contributions={'x" total="99': 1.0})
    with pytest.raises(InvalidInputError, match="contribution name"):
        score_contributions(breakdown)
