"""labmem.recall.evaluation: metrics on hand-computed cases, loader errors, the labeled set."""

from __future__ import annotations

import json

import pytest

from labmem.core.errors import InvalidInputError
from labmem.recall.evaluation import (
    any_hit_at_k,
    default_labeled_set_path,
    describe_set,
    disagreements,
    evaluate,
    full_hit_at_k,
    load_into_store,
    load_labeled_set,
    parse_labeled_set,
    recall_at_k,
    reciprocal_rank,
    scorer_engines,
    summarize,
    summarize_by,
)

RANKED = ["a", "b", "c", "d", "e"]


# -- metrics -----------------------------------------------------------------------


def test_recall_at_k_is_the_share_of_gold_in_the_top_k():
    gold = {"c", "x"}
    assert recall_at_k(RANKED, gold, 1) == 0.0
    assert recall_at_k(RANKED, gold, 2) == 0.0
    assert recall_at_k(RANKED, gold, 3) == 0.5
    assert recall_at_k(RANKED, {"a", "e"}, 5) == 1.0
    assert recall_at_k(RANKED, {"a", "e", "y", "z"}, 10) == 0.5


def test_any_hit_and_full_hit_differ_when_part_of_the_gold_is_found():
    gold = ["b", "e"]
    assert any_hit_at_k(RANKED, gold, 1) == 0.0
    assert any_hit_at_k(RANKED, gold, 2) == 1.0
    assert full_hit_at_k(RANKED, gold, 2) == 0.0
    assert full_hit_at_k(RANKED, gold, 4) == 0.0
    assert full_hit_at_k(RANKED, gold, 5) == 1.0
    assert any_hit_at_k(RANKED, ["zz"], 5) == 0.0


def test_reciprocal_rank_uses_the_first_gold_id():
    assert reciprocal_rank(RANKED, {"c", "e"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(RANKED, {"a"}) == 1.0
    assert reciprocal_rank(RANKED, {"q"}) == 0.0
    assert reciprocal_rank([], {"q"}) == 0.0


@pytest.mark.parametrize("metric", [recall_at_k, any_hit_at_k, full_hit_at_k])
def test_metrics_refuse_empty_gold_and_bad_k(metric):
    with pytest.raises(InvalidInputError) as err:
        metric(RANKED, [], 3)
    assert err.value.field == "gold"
    with pytest.raises(InvalidInputError) as err:
        metric(RANKED, ["a"], 0)
    assert err.value.field == "k"


# -- loader errors -----------------------------------------------------------------


def small_doc() -> dict:
    return {
        "user_id": "u1",
        "as_of": "2026-07-01T00:00:00Z",
        "records": [
            {"memory_id": "r1", "title": "Chat: db", "summary": "Postgres chosen.",
             "content": "We chose Postgres.", "captured_at": "2026-01-01T00:00:00Z"},
            {"memory_id": "r2", "title": "对话：缓存", "summary": "",
             "content": "缓存过期时间三十分钟。", "captured_at": "2026-02-01T00:00:00Z"},
        ],
        "queries": [
            {"query_id": "q1", "text": "which database", "gold": ["r1"], "language": "en",
             "kind": "plain", "split": "tune"},
            {"query_id": "q2", "text": "缓存过期", "gold": ["r2"], "language": "zh",
             "kind": "cjk_bigram", "split": "test"},
        ],
    }


def test_a_valid_small_document_parses():
    labeled = parse_labeled_set(small_doc())
    assert [r.memory_id for r in labeled.records] == ["r1", "r2"]
    assert [q.query_id for q in labeled.queries_in("test")] == ["q2"]


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d.pop("as_of"), "labeled_set.as_of"),
    (lambda d: d.update(as_of="2026-07-01T00:00:00"), "labeled_set.as_of"),
    (lambda d: d.update(records=[]), "labeled_set.records"),
    (lambda d: d["records"][1].pop("content"), "records[1].content"),
    (lambda d: d["records"][0].update(memory_id="has space"), "records[0].memory_id"),
    (lambda d: d["records"][1].update(memory_id="r1"), "records.memory_id"),
    (lambda d: d["queries"][0].update(gold=["nope"]), "queries[0].gold"),
    (lambda d: d["queries"][1].update(gold=[]), "queries[1].gold"),
    (lambda d: d["queries"][1].update(language="fr"), "queries[1].language"),
    (lambda d: d["queries"][0].update(split="train"), "queries[0].split"),
    (lambda d: d["queries"][1].update(query_id="q1"), "queries.query_id"),
    (lambda d: d["queries"][0].update(text="  "), "queries[0].text"),
])
def test_a_malformed_document_names_the_field(mutate, field):
    doc = small_doc()
    mutate(doc)
    with pytest.raises(InvalidInputError) as err:
        parse_labeled_set(doc)
    assert err.value.field == field


def test_missing_and_broken_files_are_refused_by_name(tmp_path):
    with pytest.raises(InvalidInputError, match="absent.json does not exist"):
        load_labeled_set(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"records": [', encoding="utf-8")
    with pytest.raises(InvalidInputError, match="broken.json is not JSON"):
        load_labeled_set(broken)


def test_split_must_be_known():
    with pytest.raises(InvalidInputError) as err:
        parse_labeled_set(small_doc()).queries_in("train")
    assert err.value.field == "split"


# -- the project's labeled set -----------------------------------------------------


@pytest.fixture(scope="module")
def labeled():
    return load_labeled_set()


def test_labeled_set_integrity(labeled):
    raw = json.loads(default_labeled_set_path().read_text(encoding="utf-8"))
    ids = {r["memory_id"] for r in raw["records"]}
    assert all(g in ids for q in raw["queries"] for g in q["gold"])
    facts = describe_set(labeled)
    assert 80 <= facts["records"] <= 120
    assert 36 <= facts["queries"] <= 48
    assert set(facts["language"]) == {"en", "zh"}
    assert set(facts["split"]) == {"tune", "test"}
    assert abs(facts["split"]["tune"] - facts["split"]["test"]) <= 2
    cjk_records = [r for r in labeled.records if any("\u4e00" <= c <= "\u9fff" for c in r.content)]
    assert len(cjk_records) >= 20


def test_every_probe_kind_is_in_both_splits(labeled):
    for kind in ("rare_term", "length_norm", "tf_saturation", "recency", "cjk_bigram",
                 "mixed_language", "plain"):
        splits = {q.split for q in labeled.queries if q.kind == kind}
        assert splits == {"tune", "test"}, kind


def test_recency_queries_have_an_older_superseded_record(labeled):
    by_id = {r.memory_id: r for r in labeled.records}
    for query in labeled.queries:
        if query.kind == "recency":
            newest = by_id[query.gold[0]].captured_at
            assert newest <= labeled.as_of
            assert any(r.captured_at < newest for r in labeled.records)


# -- evaluation end to end, with the real engines ------------------------------------


@pytest.fixture(scope="module")
def outcomes(labeled, tmp_path_factory):
    store = load_into_store(labeled, tmp_path_factory.mktemp("labeled"))
    assert len(store) == len(labeled.records)
    engines = scorer_engines(store, ("teaching", "bm25"))
    return evaluate(engines, labeled.queries, as_of=labeled.as_of)


def test_evaluate_gives_one_outcome_per_engine_and_query(labeled, outcomes):
    assert len(outcomes) == 2 * len(labeled.queries)
    for outcome in outcomes:
        assert len(outcome.hits) <= 10
        assert [h.rank for h in outcome.hits] == list(range(1, len(outcome.hits) + 1))
        ranked = list(outcome.ranked_ids)
        assert outcome.recall[3] == recall_at_k(ranked, outcome.gold, 3)
        assert outcome.reciprocal_rank == reciprocal_rank(ranked, outcome.gold)


def test_bm25_beats_coverage_on_rare_terms(outcomes):
    table = summarize_by([o for o in outcomes if o.kind == "rare_term"], ("engine",))
    hit3 = dict(zip(table["engine"], table["hit@3"], strict=True))
    assert hit3["bm25"] > hit3["teaching"]
    assert list(summarize(outcomes)["engine"]) == ["teaching", "bm25"]


def test_disagreements_show_each_engines_top_hits_and_terms(outcomes):
    found = {d.query_id: d for d in disagreements(outcomes, k=1)}
    pgbouncer = found["q09"]  # short focused record vs long weekly notes
    assert pgbouncer.winners() == ("bm25",)
    assert pgbouncer.tops["teaching"][0].memory_id == "db-weekly-long"
    rows = pgbouncer.to_rows()
    bm25_row = next(r for r in rows if r["engine"] == "bm25")
    assert bm25_row["gold"] and "pgbouncer=" in bm25_row["terms"]
    agreed = [o.query_id for o in outcomes if o.engine == "bm25" and o.query_id not in found]
    assert "q24" in agreed  # both find the code-review record from a Chinese question


def test_evaluate_refuses_cutoffs_beyond_recall_limit(labeled, tmp_path):
    store = load_into_store(labeled, tmp_path)
    with pytest.raises(InvalidInputError) as err:
        evaluate(scorer_engines(store, ("bm25",)), labeled.queries[:1], as_of=labeled.as_of,
                 ks=(1, 20))
    assert err.value.field == "ks"
