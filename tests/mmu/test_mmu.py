"""s14 Context MMU: recall, budget, ledger, anti-thrash, trace, lifecycle (contracts 5–9)."""

import json
import tempfile
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.mmu import (
    ContextMMU,
    FileMemoryService,
    Level,
    MmuValidationError,
    RecordNotFoundError,
    Residency,
)
from labmem.mmu.evaluation import churn
from labmem.mmu.mmu import REASON_NO_ROOM, REASON_TOO_LARGE
from labmem.mmu.pages import derive_l1, tokens_of

T0 = datetime(2026, 1, 2, tzinfo=timezone.utc)
WORDS = ["port", "deploy", "cache", "billing", "audit", "release"]


def service(root):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"))


def remember(svc, text, key, scope="alice", **kw):
    return svc.remember("semantic", scope=scope, title=f"note {key}", text=text,
                        outcome="succeeded", evidence=["ev"], source_kind="user_stated",
                        origin_key=key, **kw)


def corpus(svc, n=12, words=100):
    ids = []
    for i in range(n):
        topic = WORDS[i % len(WORDS)]
        ids.append(remember(svc, f"{topic} fact {i}. " + "detail " * words, f"k{i}").record_id)
    return ids


# -- contract 5: recall ------------------------------------------------------------------
def test_recall_promotes_warm_then_top_k_hot_within_budget(tmp_path):
    svc = service(tmp_path)
    corpus(svc)
    mmu = ContextMMU(svc, token_budget=100_000, l2_top_k=1, warm_top_k=2)
    trace = mmu.recall("port fact", scope="alice", now=T0)
    levels = [c.level for c in trace.candidates]
    assert levels[:2] == ["L2", "L1"] and set(levels[2:]) == {"L0"}
    assert trace.budget_used == mmu.token_used == mmu.ledger().recomputed
    assert (trace.hot, trace.warm) == (1, 1)


def test_recall_scores_only_candidates_not_every_page(tmp_path):
    svc = service(tmp_path)
    corpus(svc, n=30)
    remember(svc, "zebra unicorn", "rare")
    mmu = ContextMMU(svc, token_budget=10_000, candidate_limit=4)
    trace = mmu.recall("zebra", scope="alice", now=T0)
    assert mmu.scored == 1 and [c.record_id for c in trace.candidates] == ["alice:m-000031"]
    trace = mmu.recall("fact", scope="alice", now=T0)
    assert mmu.scored == 31 and len(trace.candidates) == 4  # scored 30 more, kept 4


def test_rejected_l2_leaves_the_page_warm_with_its_l1_charge(tmp_path):
    svc = service(tmp_path)
    record_id = corpus(svc, n=1, words=400)[0]
    l1 = tokens_of(derive_l1(svc.recall_key(record_id, scope="alice")))
    mmu = ContextMMU(svc, token_budget=l1 + 10)
    trace = mmu.recall("port", scope="alice", now=T0)
    page = mmu.pages[record_id]
    assert page.residency is Residency.WARM and mmu.token_used == page.charged == l1
    assert [(r.level, r.reason) for r in trace.rejected] == [("L2", REASON_TOO_LARGE)]
    assert len(mmu.cache) == 1  # the L2 text was released with the refusal
    assert mmu.rejections[REASON_TOO_LARGE] == 1


def test_promotion_evicts_lower_keep_score_pages_but_never_pinned(tmp_path):
    svc = service(tmp_path)
    ids = corpus(svc, n=6, words=60)
    one = tokens_of(svc.recall_key(ids[0], scope="alice").text)
    mmu = ContextMMU(svc, token_budget=one + one // 2, l2_top_k=1, warm_top_k=1)
    mmu.pin(ids[0], scope="alice")
    trace = mmu.recall("deploy", scope="alice", now=T0)
    assert mmu.pages[ids[0]].residency is Residency.HOT  # pinned stays
    assert trace.rejected and trace.rejected[0].reason == REASON_NO_ROOM
    mmu.unpin(ids[0], scope="alice")
    trace = mmu.recall("deploy", scope="alice", now=T0 + timedelta(seconds=1))
    assert ids[0] in trace.evicted and mmu.pages[ids[1]].residency is not Residency.COLD


# -- contract 6: the ledger and the budget boundary ----------------------------------------
@pytest.mark.parametrize("slack, loads", [(0, True), (1, True), (-1, False)])
def test_l1_budget_boundary(tmp_path, slack, loads):
    svc = service(tmp_path)
    record_id = corpus(svc, n=1)[0]
    l1 = tokens_of(derive_l1(svc.recall_key(record_id, scope="alice")))
    mmu = ContextMMU(svc, token_budget=l1 + slack)
    assert mmu.load(record_id, scope="alice", level=Level.L1) is loads
    assert mmu.token_used == (l1 if loads else 0)
    assert mmu.pages[record_id].residency is (Residency.WARM if loads else Residency.COLD)
    assert len(mmu.cache) == (1 if loads else 0)
    mmu.check_ledger()


@pytest.mark.parametrize("slack, loads", [(0, True), (1, True), (-1, False)])
def test_l2_budget_boundary(tmp_path, slack, loads):
    svc = service(tmp_path)
    record_id = corpus(svc, n=1)[0]
    l2 = tokens_of(svc.recall_key(record_id, scope="alice").text)
    mmu = ContextMMU(svc, token_budget=l2 + slack)
    assert mmu.fits(l2) is loads
    assert mmu.load(record_id, scope="alice", level=Level.L2) is loads
    assert mmu.token_used == (l2 if loads else 0)


def test_pin_overflow_is_reported_not_hidden(tmp_path):
    svc = service(tmp_path)
    ids = corpus(svc, n=3)
    mmu = ContextMMU(svc, token_budget=10)
    ledger = mmu.pin(ids[0], scope="alice")
    assert ledger.pin_overflow and ledger.ok and ledger.token_used > ledger.budget
    trace = mmu.recall("deploy", scope="alice", now=T0)
    assert trace.pin_overflow and mmu.token_used == ledger.pinned_tokens
    assert not mmu.unpin(ids[0], scope="alice").pin_overflow and mmu.token_used == 0


OPS = st.lists(st.one_of(
    st.tuples(st.just("recall"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
              st.sampled_from(["alice", "bob"])),
    st.tuples(st.just("budget"), st.integers(0, 600)),
    st.tuples(st.sampled_from(["pin", "unpin", "evict", "load", "edit", "forget"]),
              st.integers(0, 7)),
), max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, budget=st.integers(0, 600), top_k=st.integers(0, 3))
def test_ledger_holds_after_every_operation(ops, budget, top_k):
    with tempfile.TemporaryDirectory() as root:
        svc = service(root)
        ids = [remember(svc, f"{WORDS[i % 6]} {WORDS[(i * 5) % 6]} " + "x " * (10 * i),
                        f"k{i}", scope="alice" if i % 4 else "bob").record_id
               for i in range(8)]
        mmu = ContextMMU(svc, token_budget=budget, l2_top_k=top_k, warm_top_k=4)
        for step, op in enumerate(ops):
            kind = op[0]
            if kind == "recall":
                mmu.recall(" ".join(op[1]), scope=op[2], now=T0 + timedelta(minutes=step))
            elif kind == "budget":
                mmu.set_budget(op[1])
            else:
                record_id = ids[op[1]]
                scope = "alice" if op[1] % 4 else "bob"
                if record_id not in mmu.pages:
                    continue
                if kind == "pin":
                    mmu.pin(record_id, scope=scope)
                elif kind == "unpin":
                    mmu.unpin(record_id, scope=scope)
                elif kind == "evict" and not mmu.pages[record_id].pinned:
                    mmu.evict(record_id, scope=scope)
                elif kind == "load":
                    mmu.load(record_id, scope=scope)
                elif kind == "edit":
                    svc.revise(record_id, scope=scope, text=f"edited {step} port",
                               evidence=[f"e{step}"])
                    mmu.sync()
                elif kind == "forget":
                    svc.forget(record_id, scope=scope)
                    mmu.sync()
            ledger = mmu.check_ledger()
            pages = [p for p in mmu.pages.values() if p.residency is not Residency.COLD]
            assert mmu.token_used == sum(p.charged for p in pages)
            for page in pages:
                text = mmu.cache.get(page.loaded_key)
                assert tokens_of(text) == page.charged
            assert mmu.token_used <= mmu.token_budget or ledger.pin_overflow
            assert len(mmu.cache) == len(pages)  # no derived text outside the book


# -- contract 7: anti-thrash ---------------------------------------------------------------
def thrash_rows(tmp_path, min_residency):
    svc = service(tmp_path)
    corpus(svc, n=6, words=60)
    one = tokens_of(svc.recall_key("alice:m-000001", scope="alice").text)
    mmu = ContextMMU(svc, token_budget=2 * one, l2_top_k=1, warm_top_k=1,
                     min_residency=min_residency)
    queries = ["port", "deploy", "cache"] * 4
    return churn(mmu, queries, scope="alice", start=T0, step=timedelta(minutes=1))


def test_hysteresis_reduces_promote_evict_churn(tmp_path):
    plain = thrash_rows(tmp_path / "plain", 0)
    sticky = thrash_rows(tmp_path / "sticky", 3)
    plain_evictions = sum(r["evictions"] for r in plain)
    sticky_evictions = sum(r["evictions"] for r in sticky)
    assert plain_evictions >= 9
    assert sticky_evictions < plain_evictions
    assert sum(r["promotions"] for r in sticky) < sum(r["promotions"] for r in plain)


# -- contract 8: the trace -------------------------------------------------------------------
def test_trace_explains_the_recall_without_record_text(tmp_path):
    svc = service(tmp_path)
    secret = "the vault passphrase is swordfish"
    remember(svc, secret + " port", "secret")
    corpus(svc, n=4)
    mmu = ContextMMU(svc, token_budget=10_000)
    trace = mmu.recall("port passphrase", scope="alice", now=T0)
    doc = trace.to_dict()
    dumped = json.dumps(doc)
    assert "swordfish" not in dumped and "passphrase" not in dumped
    assert doc["query_hash"].startswith("q-") and doc["budget_limit"] == 10_000
    first = doc["candidates"][0]
    assert set(first) == {"record_id", "relevance", "importance", "confidence", "utility",
                          "recency", "salience", "scope", "score", "level", "version",
                          "content_hash"}
    assert doc["budget_used"] == mmu.token_used


# -- contract 9: lifecycle ---------------------------------------------------------------------
def test_lifecycle_create_edit_forget_rebuild(tmp_path):
    svc = service(tmp_path)
    record = remember(svc, "The test port is 18000.", "port")
    mmu = ContextMMU(svc, token_budget=1000)
    assert svc.recall_key(record.record_id, scope="alice").text.endswith("18000.")
    mmu.recall("test port", scope="alice", now=T0)
    old_key = mmu.pages[record.record_id].loaded_key
    svc.revise(record.record_id, scope="alice", text="The test port is 18300.",
               evidence=["ev-2"])
    trace = mmu.recall("test port", scope="alice", now=T0 + timedelta(minutes=1))
    assert mmu.cache.get(old_key) is None
    assert mmu.text(record.record_id, scope="alice").endswith("18300.")
    assert trace.loaded == (record.record_id,)
    svc.forget(record.record_id, scope="alice")
    with pytest.raises(RecordNotFoundError):
        svc.recall_key(record.record_id, scope="alice")
    trace = mmu.recall("test port", scope="alice", now=T0 + timedelta(minutes=2))
    assert trace.candidates == () and mmu.token_used == 0
    mmu.rebuild()
    assert record.record_id not in mmu.pages
    assert mmu.recall("test port", scope="alice", now=T0).candidates == ()
    fresh = ContextMMU(service(tmp_path), token_budget=1000)
    assert fresh.recall("test port", scope="alice", now=T0).candidates == ()


def test_mmu_inputs_are_validated(tmp_path):
    svc = service(tmp_path)
    with pytest.raises(MmuValidationError, match="token_budget"):
        ContextMMU(svc, token_budget=-1)
    mmu = ContextMMU(svc, token_budget=10)
    with pytest.raises(MmuValidationError, match="query"):
        mmu.recall("  ", scope="alice")
    with pytest.raises(MmuValidationError, match="now"):
        mmu.recall("port", scope="alice", now=datetime(2026, 1, 1))
    with pytest.raises(MmuValidationError, match="record_id"):
        mmu.pin("m-999999", scope="alice")
