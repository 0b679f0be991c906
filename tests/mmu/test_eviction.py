"""The eviction choice as a pure rule (``choose_evictions``), and the MMU really using it."""

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.mmu import ResidentPage, choose_evictions

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def page(record_id, keep=0.5, minutes=0, tokens=10, **flags):
    return ResidentPage(record_id, keep, T0 + timedelta(minutes=minutes), tokens, **flags)


def test_lowest_keep_score_goes_first_and_eviction_stops_when_enough_is_freed():
    pages = [page("a", keep=0.9), page("b", keep=0.1), page("c", keep=0.5)]
    assert choose_evictions(pages, 10) == ("b",)
    assert choose_evictions(pages, 11) == ("b", "c")
    assert choose_evictions(pages, 30) == ("b", "c", "a")


def test_ties_go_to_the_least_recently_accessed_then_the_smaller_id():
    pages = [page("z", minutes=1), page("y", minutes=0), page("x", minutes=1)]
    assert choose_evictions(pages, 30) == ("y", "x", "z")


def test_pinned_protected_and_young_pages_stay():
    pages = [page("pinned", keep=0.0, pinned=True), page("wanted", keep=0.0, protected=True),
             page("young", keep=0.0, age=1), page("old", keep=0.9, age=2)]
    assert choose_evictions(pages, 10, min_residency=2) == ("old",)
    assert choose_evictions(pages, 10, min_residency=1) == ("young",)


def test_all_or_nothing_when_the_evictable_pages_are_not_enough():
    pages = [page("a", tokens=10), page("b", tokens=10), page("p", tokens=50, pinned=True)]
    assert choose_evictions(pages, 20) == ("a", "b")
    assert choose_evictions(pages, 21) == ()


def test_nothing_to_free_evicts_nothing():
    assert choose_evictions([page("a")], 0) == ()
    assert choose_evictions([page("a")], -5) == ()
    assert choose_evictions([], 1) == ()


PAGES = st.lists(st.builds(
    page, st.sampled_from("abcdefgh"), keep=st.sampled_from((0.1, 0.5, 0.9)),
    minutes=st.integers(0, 3), tokens=st.integers(1, 40), pinned=st.booleans(),
    protected=st.booleans(), age=st.integers(0, 3)), unique_by=lambda p: p.record_id,
    max_size=7)


@settings(max_examples=200, deadline=None)
@given(pages=PAGES, amount=st.integers(0, 120), min_residency=st.integers(0, 3))
def test_the_choice_is_minimal_ordered_and_safe(pages, amount, min_residency):
    chosen = choose_evictions(pages, amount, min_residency)
    by_id = {p.record_id: p for p in pages}
    victims = [by_id[i] for i in chosen]
    assert len(set(chosen)) == len(chosen)
    assert all(not v.pinned and not v.protected and v.age >= min_residency for v in victims)
    keys = [(v.keep_score, v.last_access, v.record_id) for v in victims]
    assert keys == sorted(keys)
    freed = sum(v.tokens for v in victims)
    if chosen:
        assert freed >= amount > freed - victims[-1].tokens  # enough, and not one page more
        evictable = [p for p in pages if not p.pinned and not p.protected
                     and p.age >= min_residency]
        kept = [p for p in evictable if p.record_id not in chosen]
        assert all((p.keep_score, p.last_access, p.record_id) > keys[-1] for p in kept)
    else:
        evictable = sum(p.tokens for p in pages if not p.pinned and not p.protected
                        and p.age >= min_residency)
        assert amount <= 0 or evictable < amount


def test_the_mmu_evicts_exactly_what_the_rule_chooses(tmp_path, monkeypatch):
    from labmem.core.clock import SteppingClock
    from labmem.mmu import ContextMMU, FileMemoryService
    from labmem.mmu import mmu as mmu_module

    chosen_by_rule = []
    real = mmu_module.choose_evictions

    def spy(pages, tokens_to_free, min_residency=0):
        chosen = real(pages, tokens_to_free, min_residency)
        chosen_by_rule.extend(chosen)
        return chosen

    monkeypatch.setattr(mmu_module, "choose_evictions", spy)
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    for i, topic in enumerate(["port", "deploy", "cache"] * 2):
        svc.remember("semantic", scope="alice", title=f"{topic} {i}",
                     text=f"{topic} fact {i}. " + "detail " * 60, outcome="succeeded",
                     evidence=["ev"], source_kind="user_stated", origin_key=f"k{i}")
    mmu = ContextMMU(svc, token_budget=200, l2_top_k=1, warm_top_k=1)
    evicted = []
    for n, query in enumerate(["port", "deploy", "cache", "port"]):
        evicted += mmu.recall(query, scope="alice", now=T0 + timedelta(minutes=n)).evicted
    evicted += mmu.set_budget(10)
    assert evicted and evicted == chosen_by_rule
    assert mmu.token_used == 0 and mmu.check_ledger().ok
