"""The s14 Context MMU contract suite: pages, the budget, the keep score, eviction, and
what is current — contract by contract.

``SUITE`` runs on any implementation offering the operations the chapter builds:
``open_store()`` (an object with ``remember(scope=, origin_key=, title=, text=,
source_kind=)`` and ``get(record_id)``), ``MMU(store, token_budget=, warm_top_k=,
l2_top_k=)`` with ``recall(query, scope=)``, ``resident(mmu)`` (``{record_id: "HOT" |
"WARM"}``), ``used(mmu)``, ``render(record, level)``, ``charge(record, residency)``,
``tokens_of(text)``, ``keep_score(factors, weights)``, ``ResidentPage`` and
``choose_evictions(pages, tokens_to_free, min_residency)``.

``SCRATCH`` is the chapter's module (:mod:`labmem.scratch.s14_mmu`) behind a thin adapter;
``PRODUCTION`` is :mod:`labmem.mmu` (``FileMemoryService`` in a throw-away directory,
``ContextMMU``, ``factor_score``) behind another.
"""

from __future__ import annotations

import atexit
import math
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from labmem import mmu as production
from labmem.core.clock import SteppingClock
from labmem.core.i18n import N_
from labmem.core.text import estimate_tokens
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite
from labmem.scratch import s14_mmu as scratch_module

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
_ROOT = Path(tempfile.mkdtemp(prefix="labmem-s14-mmu-contract-"))
atexit.register(shutil.rmtree, _ROOT, True)


class _Scratch:
    """The chapter's module under the names the contracts use (``module`` may be an
    assembled copy with the learner's pieces)."""

    def __init__(self, module: Any) -> None:
        self.module = module
        for name in ("render", "charge", "tokens_of", "keep_score", "ResidentPage",
                     "choose_evictions"):
            setattr(self, name, getattr(module, name))

    def open_store(self) -> Any:
        return self.module.MemoryStore()

    def MMU(self, store: Any, **options: int) -> Any:  # noqa: N802 — a constructor
        return self.module.ContextMMU(store, **options)

    @staticmethod
    def resident(mmu: Any) -> dict[str, str]:
        return {i: p.residency for i, p in mmu.pages.items() if p.residency != "COLD"}

    @staticmethod
    def used(mmu: Any) -> int:
        return mmu.token_used

    def __repr__(self) -> str:
        return "labmem.scratch.s14_mmu"


class _ProductionStore:
    """A ``FileMemoryService`` in a fresh directory, written to as the contracts write."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        self.writes = 0
        self.service = production.FileMemoryService(
            _ROOT / f"store-{self.made}", clock=SteppingClock(T0, step=timedelta(minutes=1)))

    def remember(self, *, scope: str, origin_key: str, title: str, text: str,
                 source_kind: str, **attributes: Any) -> Any:
        self.writes += 1
        n = self.writes
        return self.service.remember(
            attributes.pop("memory_type", "semantic"), scope=scope, title=title, text=text,
            outcome="succeeded", evidence=[f"ev:{origin_key}:{n}:{len(text)}"],
            source_kind=source_kind, origin_key=origin_key, **attributes)

    def get(self, record_id: str) -> Any:
        return self.service.recall_key(record_id, scope=record_id.split(":")[0])


class _Production:
    """:mod:`labmem.mmu` under the names the contracts use."""

    ResidentPage = production.ResidentPage
    choose_evictions = staticmethod(production.choose_evictions)
    tokens_of = staticmethod(estimate_tokens)

    @staticmethod
    def render(record: Any, level: str) -> str:
        return production.pages.DERIVE[production.Level(level)](record)

    @staticmethod
    def charge(record: Any, residency: str) -> int:
        return production.charge(record, production.Residency(residency))

    @staticmethod
    def keep_score(factors: dict[str, float], weights: dict[str, float]) -> float:
        return production.factor_score(production.Factors(**factors),
                                       production.FactorWeights(**weights))

    @staticmethod
    def open_store() -> _ProductionStore:
        return _ProductionStore()

    @staticmethod
    def MMU(store: _ProductionStore, **options: int) -> Any:  # noqa: N802
        return production.ContextMMU(store.service, clock=SteppingClock(
            T0 + timedelta(days=1), step=timedelta(minutes=1)), **options)

    @staticmethod
    def resident(mmu: Any) -> dict[str, str]:
        return {i: p.residency.value for i, p in mmu.pages.items()
                if p.residency is not production.Residency.COLD}

    @staticmethod
    def used(mmu: Any) -> int:
        return mmu.ledger().token_used

    def __repr__(self) -> str:
        return "labmem.mmu"


SCRATCH = _Scratch(scratch_module)
PRODUCTION = _Production()


def adapt(impl: Any) -> Any:
    """A module (the scratch module, or an assembled copy of it) behind its adapter."""
    return _Scratch(impl) if hasattr(impl, "MemoryStore") else impl


def _broken(case: str, expected: Any, got: Any) -> ContractBroken:
    return ContractBroken(f"smallest case: {case} — expected {expected!r}, got {got!r}")


def _record(impl: Any, text: str, title: str = "Test port", source: str = "user_stated",
            scope: str = "alice", key: str = "k") -> Any:
    return impl.open_store().remember(scope=scope, origin_key=key, title=title, text=text,
                                      source_kind=source)


SHORT = "The test environment listens on port 18080."
LONG = ("Deploying billing: run the migrations, build the image, push it to the registry, "
        "roll the canary to one pod, watch the error rate for ten minutes, then roll out "
        "the rest unless the error rate rose above 2 percent.")


# -- pages: three representations, charged by residency -------------------------------------

def l2_is_the_text(impl: Any) -> None:
    impl = adapt(impl)
    for text in ("x", SHORT, LONG, "two  spaces\nand a line break"):
        got = impl.render(_record(impl, text), "L2")
        if got != text:
            raise _broken(f"L2 of {text[:30]!r}", text, got)


def l1_is_a_bounded_overview(impl: Any) -> None:
    impl = adapt(impl)
    for text in (SHORT, LONG):
        l1 = impl.render(_record(impl, text), "L1")
        excerpt = l1.splitlines()[-1] if l1 else ""
        if "Test port" not in l1:
            raise _broken(f"L1 of {text[:30]!r}", "the title in it", l1)
        if len(text) <= 160 and excerpt != text:
            raise _broken(f"L1 of a {len(text)}-character text", text, excerpt)
        if len(text) > 160 and not (excerpt.endswith("…") and len(excerpt) <= 161
                                    and text.startswith(excerpt[:-1].rstrip())):
            raise _broken(f"L1 of a {len(text)}-character text",
                          "a prefix of at most 160 characters ending with …", excerpt)


def l0_is_one_short_line(impl: Any) -> None:
    impl = adapt(impl)
    for title in ("Test port", "A very long title " * 8):
        l0 = impl.render(_record(impl, SHORT, title=title), "L0")
        if "\n" in l0 or len(l0) > 80 or not l0.startswith("[semantic] A" if title[0] == "A"
                                                           else "[semantic] Test port"):
            raise _broken(f"L0 for title {title[:20]!r}…", "one line '[semantic] <title>' of "
                          "at most 80 characters", l0)


def residency_decides_the_charge(impl: Any) -> None:
    impl = adapt(impl)
    for text in (SHORT, LONG):
        record = _record(impl, text)
        expected = {"COLD": 0, "WARM": impl.tokens_of(impl.render(record, "L1")),
                    "HOT": impl.tokens_of(text)}
        got = {r: impl.charge(record, r) for r in expected}
        if got != expected:
            raise _broken(f"the charges of a {len(text)}-character record", expected, got)


# -- the keep score -------------------------------------------------------------------------

NAMES = ("relevance", "importance", "confidence", "utility", "recency", "salience", "scope")
EVEN = dict.fromkeys(NAMES, 1.0)
DEFAULT = {"relevance": 0.35, "importance": 0.15, "confidence": 0.1, "utility": 0.1,
           "recency": 0.1, "salience": 0.1, "scope": 0.1}


def _factors(**given: float) -> dict[str, float]:
    return {**dict.fromkeys(NAMES, 0.0), **given}


def keep_score_is_the_weighted_mean(impl: Any) -> None:
    impl = adapt(impl)
    cases = [(_factors(relevance=1.0), EVEN, 1 / 7), (_factors(relevance=1.0), DEFAULT, 0.35),
             (dict.fromkeys(NAMES, 1.0), {**DEFAULT, "relevance": 2.0}, 1.0),
             (_factors(relevance=0.5, importance=0.8, recency=0.25), DEFAULT, 0.32),
             (_factors(scope=1.0), {**dict.fromkeys(NAMES, 0.0), "scope": 3.0}, 1.0)]
    for factors, weights, expected in cases:
        got = impl.keep_score(factors, weights)
        if not isinstance(got, float) or abs(got - expected) > 1e-6:
            shown = {k: v for k, v in factors.items() if v}
            raise _broken(f"factors {shown}, weights {weights}", round(expected, 6), got)


def keep_score_bounds_its_inputs(impl: Any) -> None:
    impl = adapt(impl)
    cases = [("relevance 1.5", _factors(relevance=1.5), DEFAULT, 0.35),
             ("relevance -1", _factors(relevance=-1.0, scope=1.0), DEFAULT, 0.1),
             ("relevance NaN", _factors(relevance=math.nan, scope=1.0), DEFAULT, 0.1),
             ("every weight 0", dict.fromkeys(NAMES, 1.0), dict.fromkeys(NAMES, 0.0), 0.0)]
    for case, factors, weights, expected in cases:
        try:
            got = impl.keep_score(factors, weights)
        except ZeroDivisionError:
            got = "ZeroDivisionError"
        if not isinstance(got, float) or abs(got - expected) > 1e-6:
            raise _broken(case, expected, got)


# -- eviction -------------------------------------------------------------------------------

def _page(impl: Any, n: int, keep: float, minute: int, tokens: int, **flags: Any) -> Any:
    return impl.ResidentPage(f"m-{n:06d}", keep, T0 + timedelta(minutes=minute), tokens,
                             **flags)


def _evict_cases(impl: Any, cases: list) -> None:
    for case, pages, amount, minimum, expected in cases:
        got = tuple(impl.choose_evictions(tuple(pages), amount, minimum))
        if got != expected:
            raise _broken(f"{case}, free {amount}, min_residency {minimum}", expected, got)


def eviction_spares_pinned_protected_and_young(impl: Any) -> None:
    impl = adapt(impl)
    _evict_cases(impl, [
        ("m1 pinned (keep 0.1), m2 (keep 0.9)", [_page(impl, 1, 0.1, 0, 10, pinned=True),
                                                 _page(impl, 2, 0.9, 0, 10)], 5, 0,
         ("m-000002",)),
        ("m1 protected (keep 0.1), m2 (keep 0.9)", [_page(impl, 1, 0.1, 0, 10, protected=True),
                                                    _page(impl, 2, 0.9, 0, 10)], 5, 0,
         ("m-000002",)),
        ("m1 age 0 (keep 0.1), m2 age 2 (keep 0.9)", [_page(impl, 1, 0.1, 0, 10, age=0),
                                                      _page(impl, 2, 0.9, 0, 10, age=2)], 5, 1,
         ("m-000002",)),
    ])


def eviction_takes_the_lowest_keep_score_first(impl: Any) -> None:
    impl = adapt(impl)
    _evict_cases(impl, [
        ("m1 keep 0.9, m2 keep 0.1", [_page(impl, 1, 0.9, 0, 10), _page(impl, 2, 0.1, 0, 10)],
         5, 0, ("m-000002",)),
        ("tie at 0.5: m1 used at minute 3, m2 at minute 1",
         [_page(impl, 1, 0.5, 3, 10), _page(impl, 2, 0.5, 1, 10)], 5, 0, ("m-000002",)),
        ("tie at 0.5, both used at minute 1: m2, m1",
         [_page(impl, 2, 0.5, 1, 10), _page(impl, 1, 0.5, 1, 10)], 5, 0, ("m-000001",)),
    ])


def eviction_stops_when_enough_is_freed(impl: Any) -> None:
    impl = adapt(impl)
    three = [_page(impl, 1, 0.1, 0, 10), _page(impl, 2, 0.2, 0, 10), _page(impl, 3, 0.3, 0, 10)]
    _evict_cases(impl, [("three pages of 10 tokens", three, 10, 0, ("m-000001",)),
                        ("three pages of 10 tokens", three, 11, 0, ("m-000001", "m-000002")),
                        ("three pages of 10 tokens", three, 0, 0, ())])


def eviction_is_all_or_nothing(impl: Any) -> None:
    impl = adapt(impl)
    _evict_cases(impl, [
        ("one page of 10 tokens", [_page(impl, 1, 0.1, 0, 10)], 11, 0, ()),
        ("m1 10 tokens, m2 pinned 50", [_page(impl, 1, 0.1, 0, 10),
                                        _page(impl, 2, 0.2, 0, 50, pinned=True)], 30, 0, ()),
    ])


# -- what is current ------------------------------------------------------------------------

def _claims(impl: Any, sources: tuple[str, ...]) -> list[Any]:
    store = impl.open_store()
    records = [store.remember(scope="alice", origin_key="ttl", title="Cache TTL",
                              text=f"The cache TTL is {n + 1}00 seconds.", source_kind=source)
               for n, source in enumerate(sources)]
    return [store.get(r.record_id) for r in records]


def _statuses(impl: Any, sources: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(r.status for r in _claims(impl, sources))


def equal_or_higher_rank_supersedes(impl: Any) -> None:
    impl = adapt(impl)
    for sources in (("tool_observed", "tool_observed"), ("model_inferred", "user_stated"),
                    ("tool_observed", "user_stated", "user_stated")):
        expected = ("superseded",) * (len(sources) - 1) + ("provisional",)
        got = _statuses(impl, sources)
        if got != expected:
            raise _broken(f"claims from {' then '.join(sources)}", expected, got)


def lower_rank_waits_as_a_conflict(impl: Any) -> None:
    impl = adapt(impl)
    for sources, expected in ((("tool_observed", "model_inferred"),
                               ("provisional", "conflicted")),
                              (("user_stated", "tool_observed", "model_inferred"),
                               ("provisional", "conflicted", "conflicted")),
                              (("tool_observed", "model_inferred", "user_stated"),
                               ("superseded", "conflicted", "provisional"))):
        got = _statuses(impl, sources)
        if got != expected:
            raise _broken(f"claims from {' then '.join(sources)}", expected, got)


def the_same_claim_again_is_the_same_record(impl: Any) -> None:
    impl = adapt(impl)
    store = impl.open_store()
    first = store.remember(scope="alice", origin_key="port", title="Test port", text=SHORT,
                           source_kind="tool_observed")
    again = store.remember(scope="alice", origin_key="port", title="Test port", text=SHORT,
                           source_kind="tool_observed")
    got = (again.record_id, store.get(first.record_id).status in ("provisional", "trusted"))
    if got != (first.record_id, True):
        raise _broken("the same port claim written twice", (first.record_id, True), got)


# -- a recall -------------------------------------------------------------------------------

TOPICS = (("port", "Test port", SHORT), ("deploy", "Deploy billing", LONG),
          ("db", "Database host", "The database host is db-2.internal, port 5432."),
          ("cache", "Cache TTL", "The billing cache keeps entries for 300 seconds."))
QUERIES = ("which port does the test environment use", "how do I deploy billing",
           "database host port", "billing cache entries", "port")


def _filled(impl: Any) -> tuple[Any, dict[str, Any]]:
    store = impl.open_store()
    ids = {key: store.remember(scope="alice", origin_key=key, title=title, text=text,
                               source_kind="tool_observed") for key, title, text in TOPICS}
    return store, ids


def a_recall_stays_within_the_budget(impl: Any) -> None:
    impl = adapt(impl)
    for budget in (0, 15, 30, 60, 120):
        store, _ = _filled(impl)
        mmu = impl.MMU(store, token_budget=budget, warm_top_k=3, l2_top_k=1)
        for query in QUERIES:
            mmu.recall(query, scope="alice")
            charged = sum(impl.charge(store.get(i), r) for i, r in impl.resident(mmu).items())
            if not impl.used(mmu) == charged <= budget:
                raise _broken(f"budget {budget}, after the recall {query!r}",
                              f"used == charged <= {budget}", (impl.used(mmu), charged))


def the_best_page_is_loaded_in_full(impl: Any) -> None:
    impl = adapt(impl)
    store, ids = _filled(impl)
    mmu = impl.MMU(store, token_budget=500, warm_top_k=2, l2_top_k=1)
    mmu.recall("which port does the test environment use", scope="alice")
    got = impl.resident(mmu).get(ids["port"].record_id, "COLD")
    if got != "HOT":
        raise _broken("budget 500, the port query", "the port page HOT", got)


def only_current_claims_of_the_scope_are_loaded(impl: Any) -> None:
    impl = adapt(impl)
    store, ids = _filled(impl)
    for scope, key, text, source in (
            ("alice", "port", "The test port is probably 8080.", "model_inferred"),
            ("bob", "port", "Bob's test environment listens on port 9090.", "user_stated")):
        store.remember(scope=scope, origin_key=key, title="Test port", text=text,
                       source_kind=source)
    mmu = impl.MMU(store, token_budget=500, warm_top_k=6, l2_top_k=6)
    mmu.recall("which port does the test environment use", scope="alice")
    got = sorted(impl.resident(mmu))
    allowed = {r.record_id for r in ids.values()}
    if not got or not set(got) <= allowed:
        raise _broken("a conflicted claim in alice's scope and a claim in bob's",
                      f"some of {sorted(allowed)} and nothing else", got)


def a_superseded_page_leaves_at_the_next_recall(impl: Any) -> None:
    impl = adapt(impl)
    store, ids = _filled(impl)
    mmu = impl.MMU(store, token_budget=500, warm_top_k=2, l2_top_k=1)
    mmu.recall("which port does the test environment use", scope="alice")
    moved = store.remember(scope="alice", origin_key="port", title="Test port",
                           text="The test environment now listens on port 18400.",
                           source_kind="user_stated")
    mmu.recall("which port does the test environment use", scope="alice")
    got = impl.resident(mmu)
    old = ids["port"].record_id
    if old in got or got.get(moved.record_id) != "HOT":
        raise _broken("the port claim replaced between two recalls",
                      f"{old} gone, {moved.record_id} HOT", got)


SUITE = ContractSuite(N_("context MMU"), [
    Contract(N_("L2 is the record's text, unchanged"), l2_is_the_text),
    Contract(N_("L1 is the title and the text, cut before 160 characters with …"),
             l1_is_a_bounded_overview),
    Contract(N_("L0 is one line '[type] title' of at most 80 characters"), l0_is_one_short_line),
    Contract(N_("a page is charged by residency: COLD 0, WARM its L1, HOT its L2"),
             residency_decides_the_charge),
    Contract(N_("the keep score is Σ weight·factor / Σ weight"), keep_score_is_the_weighted_mean),
    Contract(N_("a factor counts as clamped to [0, 1] (NaN as 0); all-zero weights score 0"),
             keep_score_bounds_its_inputs),
    Contract(N_("eviction never takes a pinned, protected or too young page"),
             eviction_spares_pinned_protected_and_young),
    Contract(N_("eviction takes the lowest keep score first, then the least recently used, "
                "then the smaller id"), eviction_takes_the_lowest_keep_score_first),
    Contract(N_("eviction stops as soon as enough tokens are freed"),
             eviction_stops_when_enough_is_freed),
    Contract(N_("eviction is all or nothing"), eviction_is_all_or_nothing),
    Contract(N_("a claim from an equal or higher source rank supersedes the current one"),
             equal_or_higher_rank_supersedes),
    Contract(N_("a lower-ranked claim waits as conflicted; the current one stays"),
             lower_rank_waits_as_a_conflict),
    Contract(N_("the same claim again is the same record"),
             the_same_claim_again_is_the_same_record),
    Contract(N_("a recall never charges more than the budget"), a_recall_stays_within_the_budget),
    Contract(N_("the best page is loaded in full (HOT) when it fits"),
             the_best_page_is_loaded_in_full),
    Contract(N_("a recall loads only current claims of the caller's scope"),
             only_current_claims_of_the_scope_are_loaded),
    Contract(N_("a page whose claim was superseded leaves at the next recall"),
             a_superseded_page_leaves_at_the_next_recall),
])
