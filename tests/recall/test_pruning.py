"""MaxScore pruning (labmem.recall.pruning): the same results as exhaustive scoring, for
every scorer and both backends, while the postings of low-weight terms go unscanned."""

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.provenance import MemorySource
from labmem.recall import SCORER_NAMES, pruning
from labmem.recall.index import InMemoryTermIndex, Postings
from labmem.recall.pipeline import RecallEngine
from labmem.recall.pruning import prune_estimate, score_candidates, term_extremes
from labmem.recall.scorers import CorpusStats, Scorer, resolve_scorer
from labmem.recall.sqlite_store import SqliteMemoryStore
from labmem.recall.store import MemoryKind, RemoteMemoryStore

UTC = timezone.utc
NOW = datetime(2026, 8, 1, 12, tzinfo=UTC)
# a Zipf-like vocabulary: "common" in most records, "rare…" words in few
WORDS = ["common", "common", "common", "usual", "usual", "often", "mid", "mid2",
         "rare1", "rare2", "rare3", "记忆"]

corpus = st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=10),
                            st.integers(0, 90), st.booleans()),
                  min_size=1, max_size=60)
query = st.lists(st.sampled_from(sorted(set(WORDS)) + ["absent"]), min_size=1, max_size=5)


def make_store(directory, backend):
    if backend == "sqlite":
        return SqliteMemoryStore(Path(directory) / "r.sqlite", user_id="alice",
                                 clock=FixedClock(NOW))
    return RemoteMemoryStore(Path(directory) / "r.jsonl", user_id="alice",
                             clock=FixedClock(NOW))


def fill(store, specs, start=0):
    for n, (words, days, profile) in enumerate(specs, start):
        store.append(kind=MemoryKind.PROFILE if profile and n % 5 == 0 else
                     MemoryKind.CONVERSATION, content=" ".join(words), summary="",
                     memory_id=f"m-{n:03d}",
                     source=MemorySource(f"s-{n}", "chat", "notes",
                                         NOW - timedelta(days=days)))


def engines(store, scorer, backend):
    pruned = RecallEngine(store, scorer=scorer)
    pruned.fast.pruner.min_skipped = 0  # try at every step: these corpora are small
    exhaustive = RecallEngine(store, scorer=scorer)
    exhaustive.fast.pruner.enabled = False
    if backend == "jsonl":  # the sidecar-backed index: base views plus a tail
        for engine in (pruned, exhaustive):
            engine.index = InMemoryTermIndex(store, sidecar_min_records=1)
    return pruned, exhaustive


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
@pytest.mark.parametrize("scorer", SCORER_NAMES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=corpus, more=corpus, queries=st.lists(query, min_size=1, max_size=4),
       limit=st.integers(1, 4))
def test_pruned_results_equal_exhaustive_results(backend, scorer, first, more, queries, limit):
    """Byte-identical results (hits, breakdowns, counts) with and without pruning,
    before and after more records are appended (a sidecar base, then a tail)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(tmp, backend)
        fill(store, first)
        for specs in (None, more):
            if specs:
                RecallEngine(store).recall("warm")  # write the sidecar, then grow the tail
                fill(store, specs, start=len(first))
            pruned, exhaustive = engines(store, scorer, backend)
            for words in queries:
                text = " ".join(words)
                got = pruned.recall(text, limit=limit, as_of=NOW).to_dict()
                want = exhaustive.recall(text, limit=limit, as_of=NOW).to_dict()
                assert got == want, text
        if hasattr(store, "close"):
            store.close()


def skewed_store(directory, backend="jsonl"):
    """200 records hold "common"; three hold "rare" as well: a query for both needs
    only the rare term's postings scanned, under BM25."""
    store = make_store(directory, backend)
    fill(store, [(["common", "filler"] + (["rare"] if n % 70 == 0 else []), n % 30, False)
                 for n in range(200)])
    return store


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_a_common_term_is_skipped_when_it_cannot_reach_the_top(tmp_path, backend):
    store = skewed_store(tmp_path, backend)
    engine = RecallEngine(store, scorer="bm25")
    engine.fast.pruner.min_skipped = 0
    result = engine.recall("common rare", limit=3, as_of=NOW)
    assert engine.fast.pruner.last_skipped_terms == ("common",)
    assert result.candidate_records == 200  # still the exhaustive count
    assert {h.memory_id for h in result.hits} == {"m-000", "m-070", "m-140"}
    engine.fast.pruner.enabled = False
    assert engine.recall("common rare", limit=3, as_of=NOW) == result
    assert engine.fast.pruner.last_skipped_terms == ()


def test_the_teaching_scorer_skips_only_what_coverage_cannot_overtake(tmp_path):
    """Coverage counts every term alike: a record with "common" alone scores at most
    0.85/2 + 0.15 < 0.85, so it cannot beat the 3 records with both terms — but a 4th
    hit must be one of them, and then "common" is scanned."""
    store = skewed_store(tmp_path)
    engine = RecallEngine(store, scorer="teaching")
    engine.fast.pruner.min_skipped = 0
    engine.recall("common rare", limit=3, as_of=NOW)
    assert engine.fast.pruner.last_skipped_terms == ("common",)
    engine.recall("common rare", limit=4, as_of=NOW)
    assert engine.fast.pruner.last_skipped_terms == ()


def test_estimates_of_looked_up_candidates_are_the_exhaustive_ones_bit_for_bit(tmp_path):
    store = skewed_store(tmp_path)
    for name in ("teaching", "bm25", "bm25_recency"):
        engine = RecallEngine(store, scorer=name)
        engine.index.refresh()
        terms = ("common", "filler", "rare")
        postings, stats = engine.fast.postings(type("Q", (), {"terms": terms})())
        positions, estimates = engine.scorer.estimate(terms, postings,
                                                      as_of_seconds=NOW.timestamp(),
                                                      stats=stats)
        lists = {t: engine.index.term_postings(t) for t in terms}
        lengths, captured = engine.index.record_columns()
        picked = positions[::7]
        again = score_candidates(engine.scorer, terms, lists, picked, lengths, captured,
                                 as_of_seconds=NOW.timestamp(), stats=stats)
        assert again.tolist() == estimates[::7].tolist()  # ==, not approx
        # with the terms' bits (a scorer that weighs every posting alike reads them)
        by_bits = score_candidates(engine.scorer, terms, lists, picked, lengths, captured,
                                   as_of_seconds=NOW.timestamp(), stats=stats,
                                   bits=lambda t, lists=lists: pruning.term_bits(lists[t][0]))
        assert by_bits.tolist() == estimates[::7].tolist()


@pytest.mark.parametrize("name", ["teaching", "bm25", "bm25_recency"])
def test_a_scorer_that_weighs_postings_alike_gives_each_the_weight_one(name):
    """``weighs_postings = False`` lets pruning read bits instead of postings and take the
    matched counts as the lexical sums: true only if every posting weighs exactly 1.0."""
    scorer = resolve_scorer(name)
    postings = Postings(np.array([0, 3, 5]), np.array([1, 4, 2]), np.array([2, 9, 5]),
                        np.zeros(3))
    weights = scorer.posting_weights(["a"], [3], postings,
                                     CorpusStats(6, 30, {"a": 3}))
    assert (weights.tolist() == [1.0, 1.0, 1.0]) == (not scorer.weighs_postings)


def test_a_scorer_without_bounds_is_scored_exhaustively():
    class Unbounded(Scorer):
        term_weights = resolve_scorer("bm25").term_weights

    lists = {"a": (np.array([0, 1, 2]), np.array([1, 1, 1])), "b": (np.array([2]),
                                                                     np.array([1]))}
    stats = CorpusStats(3, 9, {"a": 3, "b": 1})
    got = prune_estimate(Unbounded(), ("a", "b"), lists, 1, np.array([3, 3, 3]),
                         np.zeros(3), as_of_seconds=0.0, stats=stats, tolerance=1e-5,
                         extremes=lambda t: term_extremes(*lists[t], np.array([3, 3, 3])))
    assert got is None


def test_the_contextual_scorer_scores_exhaustively(tmp_path):
    """Its score reads neighbours and threads, not per-term sums: it has no bounds, and the
    engine's switch changes nothing for it."""
    scorer = resolve_scorer("contextual")
    assert scorer.term_bound("x", 1, 1, CorpusStats(1, 1, {"x": 1})) is None
    store = skewed_store(tmp_path)
    engine = RecallEngine(store, scorer="contextual")
    engine.fast.pruner.min_skipped = 0
    pruned = engine.recall("common rare", limit=3, as_of=NOW)
    assert engine.fast.pruner.last_skipped_terms == ()
    engine.fast.pruner.enabled = False
    assert engine.recall("common rare", limit=3, as_of=NOW) == pruned


def test_the_default_engine_prunes_a_long_common_term(tmp_path):
    """With the default threshold (MIN_SKIPPED postings), at 5,000 records."""
    store = make_store(tmp_path, "jsonl")
    store.append_many([{"kind": "conversation", "summary": "", "memory_id": f"r-{n}",
                        "content": "common words" + (" rare" if n % 400 == 0 else ""),
                        "source": MemorySource(f"s-{n}", "chat", "notes",
                                               NOW - timedelta(days=n % 50))}
                       for n in range(5000)])
    engine = RecallEngine(store, scorer="bm25")
    result = engine.recall("common rare", limit=5, as_of=NOW)
    assert engine.fast.pruner.last_skipped_terms == ("common",) and result.candidate_records == 5000
    engine.fast.pruner.enabled = False
    assert engine.recall("common rare", limit=5, as_of=NOW) == result


@settings(max_examples=200)
@given(st.sets(st.integers(0, 500)), st.lists(st.integers(0, 520)),
       st.sampled_from([np.uint32, np.int64]), st.sampled_from([0, 8, 10**9]))
def test_lookup_postings_finds_exactly_the_shared_records(posted, wanted, dtype, ratio):
    """Both ways of looking candidates up (binary search; a slot per record, never
    cleared) find the candidates that hold the term, and where in its postings; the
    candidates in any order, repeated or not, the postings possibly empty."""
    positions = np.array(sorted(posted), dtype=dtype)
    candidates = np.array(wanted, dtype=np.int64)
    saved, pruning.SEARCH_RATIO = pruning.SEARCH_RATIO, ratio
    try:
        hit, at = pruning.lookup_postings(positions, candidates)
    finally:
        pruning.SEARCH_RATIO = saved
    index_of = {int(p): i for i, p in enumerate(positions)}
    assert hit.tolist() == [int(c) in index_of for c in candidates]
    assert at.tolist() == [index_of[int(c)] for c in candidates if int(c) in index_of]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10), st.integers(0, 40), st.sampled_from([0, 16, 10**9]),
       st.data())
def test_kth_largest_is_the_full_partitions_answer(k, extra, sampled_from, data):
    """Sampling first (from ``SAMPLED_KTH_MIN`` values on) or not, the ``k``-th largest is
    what a partition of every value gives: with ties, repeated values, negative zero and
    NaN (which sorts last)."""
    size = k * 64 + extra
    pool = st.sampled_from([0.0, -0.0, 1.0, 0.5, 2.0, float("nan"), -3.0, 1e-9])
    values = np.array(data.draw(st.lists(st.one_of(pool, st.floats(-5, 5)),
                                         min_size=size, max_size=size)), dtype=np.float64)
    expected = np.partition(values, size - k)[size - k]
    saved, pruning.SAMPLED_KTH_MIN = pruning.SAMPLED_KTH_MIN, sampled_from
    try:
        found = pruning.kth_largest(values, k)
    finally:
        pruning.SAMPLED_KTH_MIN = saved
    assert (np.isnan(found) and np.isnan(expected)) or found == expected


def test_kth_largest_partitions_only_what_passes_the_samples_floor(monkeypatch):
    """On 100,000 values the full array is never partitioned: only the sample and the
    values at or above its k-th largest, about √(100,000 × 10) = 1,000 each."""
    values = np.random.default_rng(3).random(100_000)
    sizes = []
    real = np.partition

    def counting(array, kth):
        sizes.append(len(array))
        return real(array, kth)

    monkeypatch.setattr(pruning.np, "partition", counting)
    assert pruning.kth_largest(values, 10) == np.sort(values)[-10]
    assert len(sizes) == 2 and max(sizes) < 3_000, sizes
