"""s14 evaluation: recall@k / precision@k on the labeled set; the information-loss set (10)."""

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from labmem.core.clock import SteppingClock
from labmem.mmu import ContextMMU, FileMemoryService, MmuValidationError
from labmem.mmu.evaluation import information_loss, load_json, precision_at_k, recall_at_k

DATA = Path(__file__).resolve().parents[2] / "data" / "mmu"
T0 = datetime(2026, 1, 2, tzinfo=timezone.utc)


def test_recall_and_precision_at_k():
    loaded = ["a", "x", "b", "y"]
    assert recall_at_k(loaded, ["a", "b"], 1) == 0.5
    assert recall_at_k(loaded, ["a", "b"], 3) == 1.0
    assert precision_at_k(loaded, ["a", "b"], 2) == 0.5
    assert precision_at_k([], ["a"], 3) == 0.0
    assert precision_at_k(["a"], ["a"], 3) == pytest.approx(1 / 3)  # divided by k
    assert recall_at_k(loaded, [], 3) == 1.0
    with pytest.raises(MmuValidationError, match="k"):
        recall_at_k(loaded, ["a"], 0)


def load_labeled(tmp_path):
    data = load_json(DATA / "labeled_queries.json")
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    ids = {}
    for row in data["records"]:
        ids[row["key"]] = svc.remember(
            row["type"], scope=row["scope"], title=row["title"], text=row["text"],
            outcome="succeeded", evidence=[f"ev:{row['key']}"], source_kind=row["source_kind"],
            origin_key=row["key"], importance=row["importance"]).record_id
    return data, svc, ids


def test_labeled_set_is_loaded_with_useful_recall(tmp_path):
    data, svc, ids = load_labeled(tmp_path)
    mmu = ContextMMU(svc, token_budget=400)
    recalls = []
    for i, query in enumerate(data["queries"]):
        trace = mmu.recall(query["query"], scope=query["scope"], now=T0 + timedelta(minutes=i))
        relevant = [ids[key] for key in query["relevant"]]
        recalls.append(recall_at_k(trace.loaded, relevant, 3))
        other = "bob" if query["scope"] == "alice" else "alice"
        assert not {ids[r["key"]] for r in data["records"] if r["scope"] == other} & set(
            trace.loaded)
    assert sum(recalls) / len(recalls) >= 0.75


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
