"""s14 pages: L0/L1/L2 × HOT/WARM/COLD, the cache key, full recovery (contract 3)."""

import hashlib

from labmem.core.clock import SteppingClock
from labmem.mmu import LEVEL_OF, ContextMMU, FileMemoryService, Level, Residency, charge
from labmem.mmu.pages import (
    L1_EXCERPT_CHARS,
    REPRESENTATION_VERSION,
    RepresentationCache,
    cut_excerpt,
    derive_l0,
    derive_l1,
    derive_l2,
    tokens_of,
)

LONG = ("记忆与上下文分开管理。" * 40) + " The port is 18300, not 18000. " + "end " * 50
#: long too, but nothing decisive past the excerpt: the MMU may keep it at L1
PLAIN_LONG = ("记忆与上下文分开管理。" * 40) + " the port notes end here " + "end " * 50


def service(root):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"))


def remember(svc, text=LONG, key="doc", scope="alice"):
    return svc.remember("semantic", scope=scope, title=f"About {key}", text=text,
                        outcome="succeeded", evidence=["ev-1"], source_kind="tool_observed",
                        origin_key=key)


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_levels_are_deterministic_and_bounded(tmp_path):
    record = remember(service(tmp_path))
    assert derive_l1(record) == derive_l1(record)
    assert "\n" not in derive_l0(record) and derive_l0(record).startswith("[semantic]")
    excerpt = derive_l1(record).split("\n")[2]
    assert len(excerpt) <= L1_EXCERPT_CHARS + 1 and excerpt.endswith("…")
    assert excerpt[:-1] in LONG  # a prefix on a character boundary, never a broken char
    assert derive_l1(record).startswith("About doc\ntype=semantic status=provisional")
    assert derive_l2(record) == LONG


def test_cut_excerpt_prefers_a_space_and_keeps_short_text():
    assert cut_excerpt("short text", 20) == "short text"
    assert cut_excerpt("aaaa bbbb cccc dddd", 17) == "aaaa bbbb cccc…"
    assert cut_excerpt("汉字" * 20, 5) == "汉字汉字汉…"


def test_residency_and_level_are_independent_axes(tmp_path):
    svc = service(tmp_path)
    record = remember(svc)
    mmu = ContextMMU(svc, token_budget=10_000)
    page = mmu.pages[record.record_id]
    assert (page.residency, page.level, page.charged) == (Residency.COLD, Level.L0, 0)
    assert mmu.load(record.record_id, scope="alice", level=Level.L1)
    assert (page.residency, page.level) == (Residency.WARM, Level.L1)
    assert mmu.load(record.record_id, scope="alice", level=Level.L2)
    assert (page.residency, page.level) == (Residency.HOT, Level.L2)
    assert mmu.token_used == page.charged == mmu.ledger().recomputed


def test_each_residency_loads_one_level_and_is_charged_its_tokens(tmp_path):
    assert {r: LEVEL_OF[r] for r in Residency} == {
        Residency.HOT: Level.L2, Residency.WARM: Level.L1, Residency.COLD: Level.L0}
    svc = service(tmp_path)
    short = remember(svc, "The test port is 18300.", key="short")
    assert charge(short, Residency.COLD) == 0
    assert charge(short, Residency.WARM) == tokens_of(derive_l1(short))
    assert charge(short, Residency.HOT) == tokens_of(derive_l2(short))
    assert charge(short, Residency.WARM) > charge(short, Residency.HOT)  # short: L1 costs more
    long = remember(svc, PLAIN_LONG, key="long")
    assert charge(long, Residency.HOT) > charge(long, Residency.WARM)
    mmu = ContextMMU(svc, token_budget=10_000, l2_top_k=1, warm_top_k=2)
    mmu.recall("test port 18300", scope="alice")
    residencies = set()
    for record in (short, long):
        page = mmu.pages[record.record_id]
        residencies.add(page.residency)
        assert page.level is LEVEL_OF[page.residency]
        assert page.charged == charge(record, page.residency)
    assert residencies == {Residency.HOT, Residency.WARM}
    ledger = mmu.ledger()
    assert ledger.hot_tokens + ledger.warm_tokens == ledger.token_used
    assert ledger.hot_tokens == charge(mmu.service.recall_key(
        next(p.record_id for p in mmu.pages.values() if p.residency is Residency.HOT),
        scope="alice"), Residency.HOT)


def test_cache_key_includes_scope_id_hash_level_and_version(tmp_path):
    svc = service(tmp_path)
    record = remember(svc)
    cache = RepresentationCache()
    key, text = cache.get_or_derive(record, Level.L1)
    assert key == ("alice", record.record_id, sha(LONG), "L1", REPRESENTATION_VERSION)
    assert cache.get_or_derive(record, Level.L1) == (key, text) and cache.derivations == 1
    edited = svc.revise(record.record_id, scope="alice", text=LONG + " Updated.",
                        evidence=["ev-2"])
    new_key, new_text = cache.get_or_derive(edited, Level.L2)
    assert new_key[2] != key[2] and new_text.endswith("Updated.")


def test_editing_a_record_makes_its_loaded_representation_unusable(tmp_path):
    svc = service(tmp_path)
    record = remember(svc)
    mmu = ContextMMU(svc, token_budget=10_000)
    mmu.load(record.record_id, scope="alice")
    old_key = mmu.pages[record.record_id].loaded_key
    svc.revise(record.record_id, scope="alice", text="The port is 18300.", evidence=["ev-2"])
    mmu.sync()
    assert mmu.cache.get(old_key) is None
    assert mmu.pages[record.record_id].residency is Residency.COLD and mmu.token_used == 0
    mmu.load(record.record_id, scope="alice")
    assert mmu.text(record.record_id, scope="alice") == "The port is 18300."


def test_full_recovery_after_eviction_and_after_reopening(tmp_path):
    svc = service(tmp_path)
    texts = {remember(svc, LONG + f" #{i}", key=f"k{i}").record_id: LONG + f" #{i}"
             for i in range(3)}
    mmu = ContextMMU(svc, token_budget=100_000)
    for record_id, text in texts.items():
        mmu.load(record_id, scope="alice")
        assert mmu.text(record_id, scope="alice") == text
    mmu.set_budget(0)  # evict everything: active text released
    assert mmu.token_used == 0 and len(mmu.cache) == 0
    mmu.set_budget(100_000)
    for record_id, text in texts.items():
        mmu.load(record_id, scope="alice", level=Level.L1)
        assert len(mmu.text(record_id, scope="alice")) < len(text)  # lossy overview
        mmu.load(record_id, scope="alice", level=Level.L2)
        again = mmu.text(record_id, scope="alice")
        assert (len(again), sha(again)) == (len(text), sha(text))
    svc.close()
    reopened = ContextMMU(service(tmp_path), token_budget=100_000)  # fresh objects from disk
    for record_id, text in texts.items():
        reopened.load(record_id, scope="alice")
        again = reopened.text(record_id, scope="alice")
        assert (len(again), sha(again)) == (len(text), sha(text))
