"""The from-scratch BM25 and the library's are one function: same ranked ids, scores and
breakdowns on generated stores and queries.

:mod:`labmem.scratch.s12b` builds its inverted index by reading every record and scores
every candidate term by term; the fast engine reads packed postings, estimates with arrays
and may skip terms (MaxScore). Whatever the store, the two must agree exactly, scores to
the library's 6 decimals included; and ``RecallEngine(..., backend="reference")``, which
runs the from-scratch module, must return the fast backend's result object for object.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labmem.scratch.s12b as scratch
from labmem.core.clock import FixedClock
from labmem.recall import (
    Bm25Scorer,
    EnglishAnalyzer,
    MemorySource,
    RecallEngine,
    RemoteMemoryStore,
    ablation_ladder,
    english_stop_words,
)

AS_OF = datetime(2026, 7, 1, tzinfo=UTC)
WORDS = ("the", "a", "cat", "cats", "crash", "crashes", "crashed", "xdist", "pool", "size",
         "we", "what", "deploy", "deploys", "缓存", "过期时间")
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
records = st.lists(st.tuples(texts, st.sampled_from(("Chat", "Crash notes", "Pool")),
                             st.integers(0, 90)), min_size=1, max_size=14)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)


def store_of(directory: str, items) -> RemoteMemoryStore:
    store = RemoteMemoryStore(Path(directory) / "records.jsonl", user_id="lin",
                              clock=FixedClock(AS_OF))
    store.append_many([
        {"kind": "conversation", "content": text, "summary": "", "memory_id": f"r{i:02d}",
         "source": MemorySource(f"chat:r{i:02d}", "conversation", title,
                                AS_OF - timedelta(days=day))}
        for i, (text, title, day) in enumerate(items)])
    return store


def shown(result) -> list[tuple]:
    return [(h.memory_id, h.rank, h.score_breakdown.total,
             dict(h.score_breakdown.term_contributions), h.score_breakdown.matched_terms,
             h.score_breakdown.lexical_coverage, h.score_breakdown.age_days)
            for h in result.hits]


@SETTINGS
@given(records, queries, st.integers(1, 10),
       st.sampled_from(((1.2, 0.75), (1.5, 0.0), (0.5, 1.0))))
def test_scratch_bm25_equals_the_fast_engine(items, text, limit, knobs):
    k1, b = knobs
    with tempfile.TemporaryDirectory() as directory:
        store = store_of(directory, items)
        fast = RecallEngine(store, scorer=Bm25Scorer(k1, b)).recall(text, limit=limit,
                                                                      as_of=AS_OF)
        index = scratch.build_index(store.read_all(), store.user_scope)
        mine = scratch.rank_bm25(fast.query, index, as_of=AS_OF, k1=k1, b=b)
    assert shown(mine) == shown(fast)
    assert (mine.searched_records, mine.candidate_records, mine.empty_reason) == (
        fast.searched_records, fast.candidate_records, fast.empty_reason)


@SETTINGS
@given(records, queries, st.integers(1, 10))
def test_the_reference_backend_returns_the_fast_result(items, text, limit):
    with tempfile.TemporaryDirectory() as directory:
        store = store_of(directory, items)
        fast = RecallEngine(store, scorer="bm25").recall(text, limit=limit, as_of=AS_OF)
        reference = RecallEngine(store, scorer="bm25", backend="reference").recall(
            text, limit=limit, as_of=AS_OF)
    assert reference == fast


def snowball(word: str) -> str:
    return EnglishAnalyzer(stop_words=frozenset()).term(word) or word


@SETTINGS
@given(records, queries, st.integers(1, 10))
def test_with_the_english_analyzer_it_is_the_ladders_analyzer_step(items, text, limit):
    """Stop words and Snowball stems on both sides: ablation step 1 of the contextual
    scorer (own text and title at weight 1, plain BM25's k1 and b)."""
    name, step = ablation_ladder()[1]
    assert name == "+ stop words and Snowball stemming"
    analyzer = scratch.Analyzer(english_stop_words(), snowball)
    with tempfile.TemporaryDirectory() as directory:
        store = store_of(directory, items)
        library = RecallEngine(store, scorer=step).recall(text, limit=limit, as_of=AS_OF)
        index = scratch.build_index(store.read_all(), store.user_scope, analyzer)
        mine = scratch.rank_bm25(library.query, index, as_of=AS_OF)
    assert [(h.memory_id, h.score_breakdown.total, dict(h.score_breakdown.term_contributions))
            for h in mine.hits] == [
        (h.memory_id, h.score_breakdown.total, dict(h.score_breakdown.term_contributions))
        for h in library.hits]
    assert mine.empty_reason == library.empty_reason
