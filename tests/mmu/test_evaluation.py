"""s14 evaluation: recall@k / precision@k on the labeled set; the information-loss set (10)."""

from datetime import datetime, timezone
from pathlib import Path

import pytest

from labmem.core.clock import SteppingClock
from labmem.core.errors import InvalidInputError
from labmem.mmu import ContextMMU, FileMemoryService, MmuValidationError
from labmem.mmu.evaluation import (
    LabeledQuery,
    evaluate,
    information_loss,
    load_json,
    precision_at_k,
    recall_at_k,
    remember_rows,
)
from labmem.mmu.pages import needs_full_text

DATA = Path(__file__).resolve().parents[2] / "data" / "mmu"


def test_recall_and_precision_at_k():
    loaded = ["a", "x", "b", "y"]
    assert recall_at_k(loaded, ["a", "b"], 1) == 0.5
    assert recall_at_k(loaded, ["a", "b"], 3) == 1.0
    assert precision_at_k(loaded, ["a", "b"], 2) == 0.5
    assert precision_at_k([], ["a"], 3) == 0.0
    assert precision_at_k(["a"], ["a"], 3) == pytest.approx(1 / 3)  # divided by k
    for bad, field in ((([], 3), "gold"), ((["a"], 0), "k")):  # the one rule: refused
        with pytest.raises(InvalidInputError) as err:
            recall_at_k(loaded, *bad)
        assert err.value.field == field


def test_a_labeled_query_needs_a_relevant_record():
    with pytest.raises(MmuValidationError) as err:
        LabeledQuery("q", "alice", (), (), datetime(2026, 3, 1, tzinfo=timezone.utc))
    assert err.value.field == "relevant"


def load_labeled(tmp_path):
    data = load_json(DATA / "labeled_queries.json")
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-03-01T00:00:00Z"))
    ids = remember_rows(svc, data["records"])
    ids |= remember_rows(svc, data["updates"])
    return data, svc, ids


def test_labeled_set_is_loaded_with_useful_recall_and_nothing_it_must_not(tmp_path):
    data, svc, ids = load_labeled(tmp_path)
    queries = [LabeledQuery.from_row(q, ids) for q in data["queries"]]
    # every kind of must-not-load is in the set: superseded, conflicting, expired, other scope
    statuses = {svc.recall_key(i, scope=r["scope"]).status
                for r in data["records"] + data["updates"] for i in [ids[r["key"]]]
                if any(i in q.must_not_load for q in queries)}
    assert statuses == {"superseded", "conflicted", "provisional"}
    assert any(svc.recall_key(i, scope="alice").expired(q.at) for q in queries
               for i in q.must_not_load if i == ids["freeze-notice"])
    report = evaluate(ContextMMU(svc, token_budget=400), queries)
    for q, row in zip(queries, report.rows, strict=True):
        assert not set(row.loaded) & set(q.must_not_load), q.query
        other = "bob" if q.scope == "alice" else "alice"
        assert not {ids[r["key"]] for r in data["records"] if r["scope"] == other} & set(
            row.loaded)
    summary = report.summary()
    assert summary["mean recall@3"] >= 0.75 and summary["stale hits"] == 0
    assert summary["queries"] == len(queries)


def test_the_report_counts_l2_refusals_stale_hits_and_rehits(tmp_path):
    data, svc, ids = load_labeled(tmp_path)
    queries = [LabeledQuery.from_row(q, ids) for q in data["queries"]]
    report = evaluate(ContextMMU(svc, token_budget=150), queries)
    db = next(r for r in report.rows if r.query == "where is the billing database")
    assert db.refused_relevant == (ids["db-host-moved"],) and db.recall == 0.0
    rows = report.rows
    for row in rows:
        assert row.at_l2 <= len(row.loaded) and 0.0 <= row.l2_share <= 1.0
    assert report.summary()["relevant refused for budget"] == 1
    assert report.summary()["re-hits of evicted pages"] == sum(len(r.rehits) for r in rows) >= 1
    # a must-not-load page that *is* loaded counts as a stale hit
    trap = LabeledQuery("which port does the test environment use", "alice",
                        (ids["port-test"],), (ids["port-test"],), queries[0].at)
    [row] = evaluate(ContextMMU(svc, token_budget=400), [trap]).rows
    assert row.stale_hits == (ids["port-test"],)
    with pytest.raises(MmuValidationError, match="queries"):
        evaluate(ContextMMU(svc, token_budget=400), [data["queries"][0]])


def test_information_loss_cases_are_promoted_to_l2_by_rule(tmp_path):
    cases = load_json(DATA / "information_loss.json")["cases"]
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    records = {c["case_id"]: svc.remember(
        "semantic", scope="alice", title=c["title"], text=c["text"], outcome="succeeded",
        evidence=["e"], source_kind="user_stated", origin_key=c["case_id"]) for c in cases}
    rows = {r.case_id: r for r in information_loss(
        [(c["case_id"], c["kind"], c["fact"], records[c["case_id"]]) for c in cases])}
    for case_id, record in records.items():
        assert needs_full_text(record) == rows[case_id].needs_l2, case_id
    # l2_top_k=0: no page goes HOT by rank, only by the rule
    mmu = ContextMMU(svc, token_budget=10_000, l2_top_k=0, warm_top_k=10)
    for c in cases:
        trace = mmu.recall(c["title"], scope="alice")
        level = {x.record_id: x.level for x in trace.candidates}[records[c["case_id"]].record_id]
        assert level == ("L2" if rows[c["case_id"]].needs_l2 else "L1"), c["case_id"]


def test_information_loss_set_needs_l2_for_late_details(tmp_path):
    cases = load_json(DATA / "information_loss.json")["cases"]
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    rows = information_loss([
        (c["case_id"], c["kind"], c["fact"],
         svc.remember("semantic", scope="alice", title=c["title"], text=c["text"],
                      outcome="succeeded", evidence=["e"], source_kind="user_stated",
                      origin_key=c["case_id"])) for c in cases])
    by_case = {r.case_id: r for r in rows}
    assert {r.kind for r in rows} >= {"negation", "number", "condition", "exception"}
    for case in ("negation", "number", "condition", "exception"):
        assert by_case[case].needs_l2 and by_case[case].in_l2 and not by_case[case].in_l1
    assert by_case["early-number"].in_l1 and not by_case["early-number"].needs_l2
