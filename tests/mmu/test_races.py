"""s14 a forget or revise landing mid-recall, and versioned traces (issue items 4–5).

``before_promotion`` is the MMU's documented extension point (a constructor argument): it
runs after candidate selection and before any page is promoted, so a test makes a forget or
revise land exactly there."""

import pytest

from labmem.core.clock import SteppingClock
from labmem.mmu import ContextMMU, FileMemoryService, MmuValidationError, content_hash


def store(tmp_path):
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    records = [svc.remember("semantic", scope="alice", title=f"port note {i}",
                            text=f"The port of service {i} is {18000 + i}.",
                            outcome="succeeded", evidence=[f"ev{i}"],
                            source_kind="tool_observed", origin_key=f"svc{i}")
               for i in range(3)]
    return svc, records


def mmu_of(svc, budget=2_000, before_promotion=None):
    return ContextMMU(svc, token_budget=budget, l2_top_k=3, warm_top_k=3,
                      before_promotion=before_promotion)


def setup(tmp_path, budget=2_000):
    svc, records = store(tmp_path)
    return svc, mmu_of(svc, budget), records


def test_the_hook_sees_the_chosen_ids_best_first_and_only_a_callable_is_taken(tmp_path):
    svc, records = store(tmp_path)
    seen = []
    mmu = mmu_of(svc, before_promotion=seen.append)
    trace = mmu.recall("port service", scope="alice")
    assert seen == [tuple(c.record_id for c in trace.candidates)]
    assert set(seen[0]) == {r.record_id for r in records}
    assert ContextMMU(svc, token_budget=100).before_promotion is None  # default: no call
    with pytest.raises(MmuValidationError, match="before_promotion"):
        ContextMMU(svc, token_budget=100, before_promotion="forget")


def test_a_forget_between_selection_and_promotion_is_a_stale_hit_not_an_abort(tmp_path):
    svc, (a, b, c) = store(tmp_path)
    mmu = mmu_of(svc, before_promotion=lambda ids: svc.forget(b.record_id, scope="alice"))
    trace = mmu.recall("port service", scope="alice")  # does not raise RecordNotFoundError
    assert b.record_id in [x.record_id for x in trace.candidates]
    assert [(s.record_id, s.reason, s.found_hash) for s in trace.stale] == [
        (b.record_id, "forgotten", None)]
    assert set(trace.loaded) == {a.record_id, c.record_id}
    assert mmu.stale_hits == 1
    mmu.check_ledger()
    mmu.before_promotion = None  # cleared between recalls, as documented
    mmu.recall("port service", scope="alice")
    assert b.record_id not in mmu.pages  # the next sync applied the forget


def test_a_revise_mid_recall_never_loads_text_the_page_does_not_describe(tmp_path):
    svc, (a, b, c) = store(tmp_path)
    revised_text = "The port of service 1 is 19001 now."
    mmu = mmu_of(svc, before_promotion=lambda ids: svc.revise(
        b.record_id, scope="alice", text=revised_text, evidence=["ev-fix"]))
    trace = mmu.recall("port service", scope="alice")
    [stale] = trace.stale
    assert (stale.record_id, stale.reason) == (b.record_id, "revised")
    assert stale.expected_hash == b.content_hash and stale.found_hash == content_hash(
        revised_text)
    assert mmu.pages[b.record_id].charged == 0 and mmu.text(b.record_id, scope="alice") is None
    for record_id in trace.loaded:  # every loaded text is the text its page describes
        page = mmu.pages[record_id]
        assert content_hash(mmu.text(record_id, scope="alice")) == page.content_hash
    mmu.before_promotion = None
    again = mmu.recall("port service", scope="alice")
    assert b.record_id in again.loaded and mmu.text(b.record_id, scope="alice") == revised_text


def test_a_supersession_mid_recall_is_a_stale_hit_too(tmp_path):
    svc, (a, b, c) = store(tmp_path)

    def supersede(ids):
        svc.remember("semantic", scope="alice", title="port note 0", text="Service 0 moved.",
                     outcome="succeeded", evidence=["ev-move"], source_kind="user_stated",
                     origin_key="svc0")

    mmu = mmu_of(svc, before_promotion=supersede)
    trace = mmu.recall("port service", scope="alice")
    assert [(s.record_id, s.reason) for s in trace.stale] == [
        (a.record_id, "superseded by alice:m-000004")]
    assert a.record_id not in trace.loaded


def test_traces_carry_versions_and_a_replay_says_what_changed(tmp_path):
    svc, mmu, (a, b, c) = setup(tmp_path)
    trace = mmu.recall("port service", scope="alice")
    versions = {x.record_id: (x.version, x.content_hash) for x in trace.candidates}
    assert versions == {r.record_id: (1, r.content_hash) for r in (a, b, c)}
    check = mmu.check_replay(trace)
    assert check.same_snapshot and check.changed == ()
    svc.revise(a.record_id, scope="alice", text="The port of service 0 is 17000.",
               evidence=["ev-x"])
    svc.forget(c.record_id, scope="alice")
    check = mmu.check_replay(trace)
    assert not check.same_snapshot
    assert [(r.record_id, r.traced_version, r.current_version, r.state) for r in check.rows
            ] == sorted([(a.record_id, 1, 2, "changed"), (b.record_id, 1, 1, "same"),
                         (c.record_id, 1, None, "gone")],
                        key=lambda row: [x.record_id for x in trace.candidates].index(row[0]))
    doc = trace.to_dict()
    assert doc["candidates"][0]["content_hash"] == versions[doc["candidates"][0]["record_id"]][1]
    with pytest.raises(MmuValidationError, match="trace"):
        mmu.check_replay(doc)


def test_a_forget_between_page_lookup_and_pin_is_refused_clearly(tmp_path):
    svc, mmu, (a, b, c) = setup(tmp_path)
    real = svc.recall_key

    def forget_first(record_id, *, scope):
        svc.recall_key = real
        svc.forget(record_id, scope=scope)
        return real(record_id, scope=scope)

    svc.recall_key = forget_first
    with pytest.raises(MmuValidationError, match="forgotten"):
        mmu.pin(a.record_id, scope="alice")
    assert not mmu.pages.get(a.record_id, None) or not mmu.pages[a.record_id].pinned
    mmu.check_ledger()
