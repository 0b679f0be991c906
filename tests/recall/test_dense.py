"""The dense and fused scorers: the fusion rule, breakdowns whose parts add up to the
total, the two backends equal on generated stores, and the deprecated 'hybrid' name."""

import warnings
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.errors import InvalidInputError
from labmem.recall import (
    SCORER_NAMES,
    Bm25RecencyScorer,
    ContextualScorer,
    DenseScorer,
    FusedScorer,
    HybridScorer,
    MemoryKind,
    RecallEngine,
    fuse_rankings,
    render_recalled_context,
    resolve_scorer,
)
from labmem.recall.dense import DenseBreakdown, FusedBreakdown, FusedRank
from tests.recall.test_contextual import NOW, add, make_store

# -- the fusion rule ------------------------------------------------------------------------


def test_fusion_is_weighted_reciprocal_rank_normalized_to_one():
    fused = fuse_rankings(["a", "b", "c"], ["c", "a", "d"], k=60, dense_weight=0.5)
    by_id = {f.memory_id: f for f in fused}
    assert by_id["a"] == FusedRank("a", round(0.5 + 0.5 * 61 / 62, 6), 0.5,
                                   round(0.5 * 61 / 62, 6), 1, 2)
    assert by_id["d"] == FusedRank("d", round(0.5 * 61 / 63, 6), 0.0, round(0.5 * 61 / 63, 6),
                                   None, 3)
    assert [f.memory_id for f in fused] == ["a", "c", "b", "d"]
    assert fuse_rankings(["x"], ["x"])[0].total == 1.0  # rank 1 in both


def test_fusion_ties_go_to_the_smaller_memory_id_and_repeats_count_once():
    fused = fuse_rankings(["b"], ["a"], k=10, dense_weight=0.5)
    assert [f.memory_id for f in fused] == ["a", "b"] and fused[0].total == fused[1].total
    assert fuse_rankings(["a", "a", "b"], [], k=1, dense_weight=0)[1] == FusedRank(
        "b", round(2 / 4, 6), round(2 / 4, 6), 0.0, 3, None)  # b is third: (1+1)/(1+3)
    assert fuse_rankings([], []) == []


@given(st.lists(st.sampled_from("abcdefg"), max_size=6),
       st.lists(st.sampled_from("abcdefg"), max_size=6),
       st.sampled_from([1.0, 10.0, 60.0]), st.sampled_from([0.0, 0.3, 0.5, 1.0]))
def test_fused_parts_add_up_and_the_order_is_total(lexical, dense, k, weight):
    fused = fuse_rankings(lexical, dense, k=k, dense_weight=weight)
    assert {f.memory_id for f in fused} == set(lexical) | set(dense)
    for f in fused:
        assert f.total == round(f.lexical_part + f.dense_part, 6)
        assert 0 <= f.total <= 1
    keys = [(-f.total, f.memory_id) for f in fused]
    assert keys == sorted(keys)


# -- the engine: breakdowns and the two backends ------------------------------------------

VOCABULARY = ["dog", "puppy", "shelter", "adopted", "painted", "kitchen", "blue", "May",
              "Berlin", "sister", "记忆", "系统", "the", "2023"]
records_strategy = st.lists(
    st.tuples(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=7),
              st.sampled_from(["chat:s1", "chat:s2"]), st.integers(0, 30), st.booleans()),
    min_size=0, max_size=10)


def fill(store, specs, start=0):
    for n, (words, thread, days, is_profile) in enumerate(specs, start=start):
        add(store, f"m{n:02d}", " ".join(words), thread=thread, at=NOW - timedelta(days=days),
            kind=MemoryKind.PROFILE if is_profile else MemoryKind.CONVERSATION)


def check_sums(hit):
    b = hit.score_breakdown
    assert b.total == pytest.approx(sum(b.contributions.values()), abs=1e-6)
    if isinstance(b, DenseBreakdown):
        assert set(b.contributions) == {"dense"} and b.cosine == b.total
        if b.word_contributions:
            assert sum(b.word_contributions.values()) == pytest.approx(b.cosine, abs=1e-3)
    else:
        assert isinstance(b, FusedBreakdown) and set(b.contributions) == {"lexical", "dense"}
        assert b.lexical_contribution == b.contributions["lexical"]
        assert (b.lexical_rank is None) == (b.contributions["lexical"] == 0)
        assert (b.dense_rank is None) == (b.contributions["dense"] == 0)
        assert (b.cosine is None) == (b.dense_rank is None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records_strategy,
       query=st.lists(st.sampled_from(VOCABULARY + ["absent"]), min_size=1, max_size=4),
       scorer=st.sampled_from([DenseScorer(), DenseScorer(encoding="float16"), FusedScorer(),
                               FusedScorer(k=5, dense_weight=0.7, depth=3)]),
       split=st.integers(0, 10))
def test_both_backends_and_both_stores_agree_and_breakdowns_add_up(
        specs, query, scorer, split, tmp_path_factory):
    text = " ".join(query)
    directory = tmp_path_factory.mktemp("dense")
    stores = [make_store(directory, "jsonl"), make_store(directory, "sqlite")]
    for store in stores:
        fill(store, specs[:split])
        RecallEngine(store, scorer=scorer).recall("dog", as_of=NOW)  # vectors of a prefix
        fill(store, specs[split:], start=split)  # the rest get theirs at the next query
    results = [RecallEngine(store, scorer=scorer, backend=backend).recall(
        text, limit=5, as_of=NOW) for store in stores for backend in ("fast", "reference")]
    first = results[0].to_dict()
    for other in results[1:]:
        assert other.to_dict() == first
    conversations = sum(1 for s in specs if not s[3])
    if isinstance(scorer, DenseScorer):  # every conversation record is a candidate
        assert len(results[0].hits) == min(5, conversations)
    else:  # the union of two lists, each cut to the depth
        assert len(results[0].hits) == min(5, results[0].candidate_records)
        assert results[0].candidate_records <= min(conversations, 2 * scorer.depth)
    for hit in results[0].hits:
        check_sums(hit)
    render_recalled_context(results[0])  # every part is a renderable contribution


# -- what dense finds and what it misses (the chapter's point, in small) -----------------

def test_dense_finds_a_paraphrase_that_shares_no_word(tmp_path):
    store = make_store(tmp_path)
    add(store, "pet", "We adopted a puppy from the animal shelter")
    add(store, "paint", "We painted the kitchen blue last weekend")
    add(store, "trip", "My sister flew to Berlin in May 2023")
    lexical = RecallEngine(store, scorer=ContextualScorer()).recall("dog", as_of=NOW)
    dense = RecallEngine(store, scorer="dense").recall("dog", as_of=NOW)
    assert lexical.hits == () and dense.hits[0].memory_id == "pet"
    assert dense.hits[0].score_breakdown.top_words == ("dog",)
    fused = RecallEngine(store, scorer="fused").recall("dog", as_of=NOW)
    assert fused.hits[0].memory_id == "pet"
    assert fused.hits[0].score_breakdown.lexical_rank is None


def test_the_new_scorers_are_scorer_names_and_refuse_one_candidate_explain(tmp_path):
    assert {"dense", "fused", "bm25_recency"} <= set(SCORER_NAMES)
    assert "hybrid" not in SCORER_NAMES
    for name in ("dense", "fused"):
        with pytest.raises(InvalidInputError) as err:
            resolve_scorer(name).explain((), {}, 0, NOW, as_of=NOW, stats=None)
        assert err.value.field == "scorer" and f"scorer='{name}'" in str(err.value)


@pytest.mark.parametrize("make, field", [
    (lambda: FusedScorer(k=0), "k"),
    (lambda: FusedScorer(k=-1), "k"),
    (lambda: FusedScorer(dense_weight=1.5), "dense_weight"),
    (lambda: FusedScorer(depth=0), "depth"),
    (lambda: FusedScorer(depth=2.5), "depth"),
    (lambda: FusedScorer(lexical="bm25"), "lexical"),
    (lambda: FusedScorer(dense=ContextualScorer()), "dense"),
    (lambda: DenseScorer(embedder="wordllama"), "embedder"),
])
def test_fused_settings_are_checked(make, field):
    with pytest.raises(InvalidInputError) as err:
        make()
    assert err.value.field == field


def test_an_empty_store_gives_an_empty_result_with_a_reason(tmp_path):
    store = make_store(tmp_path)
    for scorer in ("dense", "fused"):
        for backend in ("fast", "reference"):
            result = RecallEngine(store, scorer=scorer, backend=backend).recall("dog", as_of=NOW)
            assert result.hits == () and result.empty_reason == "no_records"


# -- the deprecated name --------------------------------------------------------------------

def test_hybrid_is_a_deprecated_name_of_bm25_recency(tmp_path):
    with pytest.warns(DeprecationWarning, match="'bm25_recency'"):
        scorer = resolve_scorer("hybrid")
    assert type(scorer) is Bm25RecencyScorer and scorer.key == "bm25_recency"
    with pytest.warns(DeprecationWarning, match="Bm25RecencyScorer"):
        old = HybridScorer(recency_weight=0.3)
    assert isinstance(old, Bm25RecencyScorer) and old.name == "bm25_recency"
    store = make_store(tmp_path)
    add(store, "a", "wal budget")
    with pytest.warns(DeprecationWarning):
        old_engine = RecallEngine(store, scorer="hybrid")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new_engine = RecallEngine(store, scorer="bm25_recency")
    assert old_engine.recall("wal", as_of=NOW) == new_engine.recall("wal", as_of=NOW)


def test_the_fused_defaults_are_the_recorded_tuning():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    chosen = json.loads((root / "bench/results/tune_fused.json").read_text())["chosen"]
    default = FusedScorer()
    assert chosen["rule"] == "rrf"
    assert (chosen["k"], chosen["dense_weight"], chosen["depth"]) == (
        default.k, default.dense_weight, default.depth)
