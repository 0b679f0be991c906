"""Bounded work (hardening item 6): a recall query's cost is bounded, and linear in its terms.

A BM25 query of 2,000 terms over 2,000 records took 12-15 s: nothing bounded the terms,
and pruning (MaxScore) tried to rule the rest out after *every* term taken, each try
looking every query term up — work growing with the square of the terms. Now stage 1
refuses more than :data:`~labmem.recall.pipeline.MAX_QUERY_TERMS` distinct terms, and
pruning tries a bounded number of times, so the work grows linearly.

Work is measured by counting function calls (deterministic, whatever the machine's load),
never by a wall-clock threshold.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from labmem.core.clock import FixedClock

NOW = "2026-08-01T12:00:00Z"
SCORERS = ("teaching", "bm25", "bm25_recency", "contextual")
VOCABULARY = [f"w{i}" for i in range(300)]  # small: every term has long postings


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from labmem.recall import RemoteMemoryStore

    rng = random.Random(7)
    store = RemoteMemoryStore(tmp_path_factory.mktemp("bounded") / "r.jsonl",
                              user_id="alice", clock=FixedClock(NOW))
    store.append_many([
        {"kind": "conversation", "content": " ".join(rng.choices(VOCABULARY, k=30)),
         "summary": "", "source": {"source_id": f"s{i % 50}", "source_type": "chat",
                                   "title": f"t {rng.choice(VOCABULARY)}",
                                   "captured_at": f"2026-07-{1 + i % 28:02d}T00:00:00Z"}}
        for i in range(2_000)])
    return store


def query_of(terms: int, seed: int = 1) -> str:
    return " ".join(random.Random(seed).sample(VOCABULARY, terms))


def calls_during(action) -> int:
    """How many Python and C functions ``action()`` calls: a count of work that does not
    depend on the machine or its load."""
    count = 0

    def hook(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(hook)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


# -- the bound on terms -------------------------------------------------------------------

def test_the_bound_is_a_documented_constant():
    from labmem.recall import pipeline

    assert pipeline.MAX_QUERY_TERMS == 64
    assert "MAX_QUERY_TERMS" in pipeline.__all__


@pytest.mark.parametrize("scorer", SCORERS)
def test_more_distinct_terms_than_the_bound_is_refused_naming_text(store, scorer):
    from labmem.recall import RecallEngine, RecallQueryError
    from labmem.recall.pipeline import MAX_QUERY_TERMS

    engine = RecallEngine(store, scorer=scorer)
    assert engine.recall(query_of(MAX_QUERY_TERMS)).hits  # the bound itself is fine
    for terms in (MAX_QUERY_TERMS + 1, 300):
        with pytest.raises(RecallQueryError) as caught:
            engine.recall(query_of(terms))
        assert caught.value.field == "text"
        assert f"{terms:,} distinct search terms" in caught.value.problem
        assert str(MAX_QUERY_TERMS) in caught.value.problem and caught.value.fix
    # repeated words count once: 100 copies of one word is one term
    assert engine.recall(" ".join(["w1"] * 100)).query.terms == ("w1",)


def test_labmem_recall_refuses_a_long_query_in_one_line(tmp_path, monkeypatch, capsys):
    from labmem.cli import main

    monkeypatch.setenv("LABMEM_HOME", str(tmp_path))
    assert main(["recall", "--with-examples", query_of(200)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "distinct search terms" in err


def test_the_mcp_recall_tool_names_the_bound_and_refuses_past_it(tmp_path):
    pytest.importorskip("jsonschema")
    from labmem.agents.toolbox import MemoryToolbox
    from labmem.core.errors import LabmemError
    from labmem.recall.pipeline import MAX_QUERY_TERMS

    box = MemoryToolbox(tmp_path, user_id="alice", workspace_id="w", clock=FixedClock(NOW))
    schema = box.specs["recall_history"].input_schema["properties"]["query"]
    assert f"at most {MAX_QUERY_TERMS} distinct words" in schema["description"]
    with pytest.raises(LabmemError, match="distinct search terms"):
        box.call("recall_history", {"query": query_of(200)})


# -- linear work ----------------------------------------------------------------------------

@pytest.mark.parametrize("scorer", SCORERS)
def test_a_query_twice_as_long_costs_about_twice_as_much(store, scorer):
    """Calls at 64 terms over calls at 32 (both past where pruning starts trying, with every
    term's postings long). Linear work gives about 2; the old try-after-every-term pruning
    gave 5.6-6.3."""
    from labmem.recall import RecallEngine

    engine = RecallEngine(store, scorer=scorer)
    short, long = query_of(32), query_of(64)
    engine.recall(short), engine.recall(long)  # caches warm: count the steady cost
    ratio = calls_during(lambda: engine.recall(long)) / calls_during(lambda: engine.recall(short))
    assert ratio < 3.0, f"{scorer}: x{ratio:.2f} the calls for twice the terms"


def test_pruning_tries_a_bounded_number_of_times_whatever_the_terms(monkeypatch):
    """Straight at MaxScore, past the query bound: 1,000 terms, each in most records."""
    from labmem.recall import pruning
    from labmem.recall.scorers import CorpusStats, TeachingScorer

    rng = np.random.default_rng(3)
    records, terms = 2_000, tuple(f"t{i:04d}" for i in range(1_000))
    lists = {}
    for term in terms:
        positions = np.sort(rng.choice(records, size=int(rng.integers(50, 400)), replace=False))
        lists[term] = (positions.astype(np.int64), np.ones(len(positions), dtype=np.int64))
    lengths = np.full(records, 30, dtype=np.int64)
    captured = np.full(records, 1.78e9)
    stats = CorpusStats(records, 30 * records,
                        {t: len(p) for t, (p, _) in lists.items()})
    tries = []
    score = pruning.score_candidates
    monkeypatch.setattr(pruning, "score_candidates",
                        lambda *a, **k: tries.append(1) or score(*a, **k))

    def extremes(term):
        positions, counts = lists[term]
        return pruning.term_extremes(positions, counts, lengths)

    pruning.prune_estimate(TeachingScorer(), terms, lists, 5, lengths, captured,
                           as_of_seconds=1.79e9, stats=stats, tolerance=1e-3,
                           extremes=extremes, min_skipped=0)
    assert 0 < len(tries) <= getattr(pruning, "MAX_TRIES", 12)
