"""s14 the request ledger: one model call's window, memory gets what is left (issue item 6);
and the refusal reason at the budget boundary (item 9)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.core.text import estimate_tokens
from labmem.mmu import (
    PARTS,
    REASON_NO_ROOM,
    REASON_TOO_LARGE,
    ContextMMU,
    FileMemoryService,
    Level,
    MmuValidationError,
    RequestLedger,
    charge,
    plan_request,
    tool_tokens,
)
from labmem.mmu.pages import Residency

TOOL = {"name": "read_file", "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


def test_memory_gets_what_the_fixed_parts_leave():
    ledger = plan_request(10_000, system="You are helpful. " * 50, tools=[TOOL],
                          history_tokens=6_000, output_reserve=1_000)
    assert ledger.system == estimate_tokens("You are helpful. " * 50)
    assert ledger.tools == tool_tokens([TOOL]) > 0
    assert ledger.memory_allowance == 10_000 - ledger.system - ledger.tools - 6_000 - 1_000
    full = ledger.with_memory(ledger.memory_allowance)
    assert full.fits and full.free == 0
    assert not full.with_memory(ledger.memory_allowance + 1).fits
    rows = full.rows()
    assert [r["part"] for r in rows] == [*PARTS, "total"]
    assert rows[-1]["tokens"] == 10_000 and rows[-1]["share"] == 1.0


def test_history_that_crowds_out_memory_asks_for_compaction():
    ledger = plan_request(8_000, system="s", history_tokens=6_500, output_reserve=1_000)
    assert ledger.history_allowance(1_000) == 8_000 - ledger.system - 1_000 - 1_000
    assert ledger.needs_compaction(1_000)
    assert not ledger.with_history(ledger.history_allowance(1_000)).needs_compaction(1_000)
    assert plan_request(8_000, system="s", history_tokens=9_000,
                        output_reserve=1_000).memory_allowance == 0


def test_the_estimate_is_compared_with_the_reported_usage():
    ledger = plan_request(1_000, system="abcd" * 10, history_tokens=100, memory_tokens=50,
                          output_reserve=100)
    assert ledger.estimate_error is None
    reported = ledger.with_actual(180)
    assert reported.estimate_error == ledger.estimated_input - 180 == 10 + 100 + 50 - 180


@given(st.integers(1, 10**6), st.integers(0, 10**5), st.integers(0, 10**5),
       st.integers(0, 10**6), st.integers(0, 10**5), st.data())
def test_segments_always_sum_to_the_window_when_the_request_fits(limit, system, tools, history,
                                                                memory, data):
    reserve = data.draw(st.integers(0, limit - 1))
    ledger = RequestLedger(limit, system, tools, history, memory, reserve)
    total = sum(ledger.segments().values())
    assert (total == limit) == ledger.fits  # the parts fill the window exactly when it fits
    assert ledger.fits or total == ledger.estimated_input + reserve > limit
    assert ledger.fits == (ledger.estimated_input + reserve <= limit)
    assert ledger.memory_allowance == max(0, limit - system - tools - history - reserve)


@pytest.mark.parametrize("kwargs, field", [
    ({"context_limit": 0}, "context_limit"), ({"history": -1}, "history"),
    ({"output_reserve": 100}, "output_reserve"), ({"memory": 2.5}, "memory"),
    ({"actual_input": True}, "actual_input")])
def test_bad_figures_are_refused_naming_the_field(kwargs, field):
    base = {"context_limit": 100, "system": 1, "tools": 1, "history": 1, "memory": 0,
            "output_reserve": 10}
    with pytest.raises(MmuValidationError, match=field):
        RequestLedger(**(base | kwargs))


def test_plan_request_refuses_a_bad_tool_list():
    with pytest.raises(MmuValidationError, match="tools"):
        plan_request(100, system="s", tools="read_file")


def remember(svc, text, key):
    return svc.remember("semantic", scope="alice", title=f"note {key}", text=text,
                        outcome="succeeded", evidence=["ev"], source_kind="user_stated",
                        origin_key=key)


def test_the_mmu_takes_the_memory_allowance_as_its_budget(tmp_path):
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    for i in range(4):
        remember(svc, f"port fact {i}. " + "detail " * 40, f"k{i}")
    mmu = ContextMMU(svc, token_budget=10_000, warm_top_k=4, l2_top_k=4)
    mmu.recall("port fact", scope="alice")
    assert mmu.token_used > 200
    ledger = plan_request(2_000, system="s" * 400, history_tokens=1_500, output_reserve=200)
    fitted = mmu.fit_request(ledger)
    assert mmu.token_budget == ledger.memory_allowance
    assert fitted.memory == mmu.token_used <= ledger.memory_allowance and fitted.fits
    mmu.check_ledger()
    with pytest.raises(MmuValidationError, match="ledger"):
        mmu.fit_request({"memory": 1})


def test_a_page_whose_full_text_exceeds_the_budget_says_so_even_from_warm(tmp_path):
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    text = "word " * 201 + "end"  # 1008 characters: 252 tokens at L2
    record = remember(svc, text, "big")
    assert charge(record, Residency.HOT) == 252
    mmu = ContextMMU(svc, token_budget=251)
    assert mmu.load(record.record_id, scope="alice", level=Level.L1)
    rejected = []
    page = mmu.pages[record.record_id]
    assert not mmu._promote(page, Level.L2, {record.record_id}, rejected, [])
    assert [(r.reason, r.need) for r in rejected] == [
        (REASON_TOO_LARGE, 252 - charge(record, Residency.WARM))]
    trace = mmu.recall("word", scope="alice")
    assert [r.reason for r in trace.rejected] == [REASON_TOO_LARGE]
    assert REASON_NO_ROOM not in {r.reason for r in trace.rejected}
    assert mmu.set_budget(252) == () and mmu.load(record.record_id, scope="alice")
