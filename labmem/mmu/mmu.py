"""The Context MMU: what to *load* this time, under a token budget.

One recall (:meth:`ContextMMU.recall`)::

    query ─▶ candidates (service's index ∩ caller's scopes)  ← scope filters, never just scores
          ─▶ factor score each candidate, keep the best      ← heapq.nsmallest, not a full sort
          ─▶ COLD → WARM (derive L1) for the top warm_top_k   ← each promotion checks the budget
          ─▶ re-rank the survivors, WARM → HOT (L2) top l2_top_k
          ─▶ evict to budget by keep score (never pinned)    ← ledger checked after every op

Work per recall grows with the candidates and the resident pages (both bounded by the
query and the budget), not with every page in memory. The original C design scored and
insertion-sorted every page on every recall; ``bench/mmu.py`` measures the difference.

Which pages leave is one pure rule, :func:`choose_evictions`, used both to make room for a
promotion and to get back under a lowered budget.

Ledger invariant (checked after every operation, :meth:`check_ledger`): ``token_used`` equals
the tokens of the loaded representations recomputed from the pages (HOT charges L2, WARM
charges L1), and is ≤ budget unless pinned pages alone exceed it — a *pin overflow*,
reported in :meth:`ledger` and every trace.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from labmem.core.clock import Clock, parse_timestamp, resolve_clock
from labmem.core.errors import validated_as
from labmem.core.storage import paused_gc
from labmem.core.text import extract_terms
from labmem.core.validation import require_int, require_text
from labmem.mmu.errors import LedgerError, MmuValidationError, RecordNotFoundError
from labmem.mmu.pages import (
    Level,
    Page,
    PageTable,
    RepresentationCache,
    Residency,
    needs_full_text,
    tokens_of,
)
from labmem.mmu.records import CURRENT_STATUSES, MemoryRecord, claim_key, exclusion_reason
from labmem.mmu.request import RequestLedger
from labmem.mmu.scoring import (
    DEFAULT_HALF_LIFE,
    Factors,
    FactorWeights,
    clamp01,
    factor_score,
    page_rank_key,
    recency,
    relevance,
)
from labmem.mmu.trace import (
    CandidateTrace,
    Exclusion,
    RecallTrace,
    Rejection,
    ReplayCheck,
    ReplayRow,
    StaleHit,
    query_hash,
)

#: The ``before_promotion`` extension point: given the chosen candidate ids, best first.
PromotionHook = Callable[[tuple[str, ...]], None]

GLOBAL_SCOPE = "global"
REASON_TOO_LARGE = "larger than the whole budget"
REASON_NO_ROOM = "no evictable room (pinned, protected or too young)"


@dataclass(frozen=True)
class Ledger:
    """The budget book, recomputed from the pages themselves."""

    token_used: int
    recomputed: int
    budget: int
    hot: int
    warm: int
    cold: int
    pinned_tokens: int
    hot_tokens: int = 0  # charged by HOT pages (their L2 text)
    warm_tokens: int = 0  # charged by WARM pages (their L1 overview)

    @property
    def pin_overflow(self) -> bool:
        return self.pinned_tokens > self.budget

    @property
    def ok(self) -> bool:
        return self.token_used == self.recomputed and (
            self.token_used <= self.budget or self.token_used == self.pinned_tokens)


@dataclass(frozen=True)
class ResidentPage:
    """A loaded page as the eviction choice sees it: a snapshot, built for each decision.

    ``tokens`` is what evicting it gives back (its charge); ``protected`` marks a page the
    recall in progress has just chosen; ``age`` is the number of recalls since it was loaded.
    """

    record_id: str
    keep_score: float
    last_access: datetime
    tokens: int
    pinned: bool = False
    protected: bool = False
    age: int = 0


def choose_evictions(pages: Sequence[ResidentPage], tokens_to_free: int,
                     min_residency: int = 0) -> tuple[str, ...]:
    """The record ids to evict, in eviction order, to give back ``tokens_to_free`` tokens.

    * Only pages that are not pinned, not protected and at least ``min_residency`` recalls
      old may go (a pin is a promise; the age rule is the anti-thrash hysteresis).
    * Lowest keep score first; ties go to the least recently accessed page, then to the
      smaller record id — so equal scores always pick the same victims.
    * Stop as soon as enough is freed: every extra eviction is a page lost for nothing.
    * All or nothing: if the evictable pages together hold less than asked, evict none —
      emptying the context for a promotion that would still not fit only loses pages.
    """
    if tokens_to_free <= 0:
        return ()
    evictable = [(page.keep_score, page.last_access, page.record_id, page.tokens)
                 for page in pages
                 if not page.pinned and not page.protected and page.age >= min_residency]
    if sum(row[3] for row in evictable) < tokens_to_free:
        return ()
    heapq.heapify(evictable)  # pop only as many as needed, no full sort
    chosen, freed = [], 0
    while freed < tokens_to_free:
        _, _, record_id, tokens = heapq.heappop(evictable)
        chosen.append(record_id)
        freed += tokens
    return tuple(chosen)


def _require_count(value: object, field: str, minimum: int) -> int:
    return validated_as(MmuValidationError, require_int, value, field, minimum=minimum)


class ContextMMU:
    """Pages derived from a memory service's records, loaded within ``token_budget``.

    ``service`` is any object with ``changed_since(cursor)``, ``recall_key(id, scope=)``
    and ``match_counts(terms)`` (the default :class:`~labmem.mmu.service.FileMemoryService`
    has all three): the MMU keeps no term index of its own, it searches the service's.
    A service that also has ``open_pages(cursor)`` (the file service does) hands over the
    page table itself, so opening the MMU reads no record: pages are made when first
    looked at.
    ``min_residency`` is the anti-thrash option: a page loaded at recall *n* is not evicted
    to make room before recall *n + min_residency* (the budget itself still wins).

    **Extension point** — ``before_promotion``: a callable given the chosen candidate ids
    (best first), called once per recall after candidate selection and before any page is
    promoted; ``None`` (the default) calls nothing. It is the moment between choosing and
    loading, where a concurrent write can land: an observer may log the choice, and a test
    or a demonstration may make a forget or revise land there to show that the recall
    reports it as a stale hit instead of loading text its page does not describe. Pass it
    to the constructor, or set or clear the attribute between recalls; what it returns is
    ignored, and what it raises ends the recall before anything is loaded.
    """

    def __init__(self, service, *, token_budget: int, l2_top_k: int = 3, warm_top_k: int = 6,
                 candidate_limit: int = 32, weights: FactorWeights | None = None,
                 half_life: timedelta = DEFAULT_HALF_LIFE,
                 shared_scopes: tuple[str, ...] = (GLOBAL_SCOPE,),
                 shared_scope_factor: float = 0.5, min_residency: int = 0,
                 clock: Clock | None = None,
                 before_promotion: PromotionHook | None = None) -> None:
        self.service = service
        self.token_budget = _require_count(token_budget, "token_budget", 0)
        self.l2_top_k = _require_count(l2_top_k, "l2_top_k", 0)
        self.warm_top_k = _require_count(warm_top_k, "warm_top_k", 0)
        self.candidate_limit = _require_count(candidate_limit, "candidate_limit", 1)
        self.min_residency = _require_count(min_residency, "min_residency", 0)
        self.weights = weights if weights is not None else FactorWeights()
        if not isinstance(self.weights, FactorWeights):
            raise MmuValidationError("weights", "must be a FactorWeights")
        if not isinstance(half_life, timedelta) or half_life <= timedelta(0):
            raise MmuValidationError("half_life", f"must be a positive timedelta, got "
                                                  f"{half_life!r}")
        self.half_life = half_life
        if isinstance(shared_scopes, str) or not isinstance(shared_scopes, (tuple, list)):
            raise MmuValidationError("shared_scopes", "must be a tuple of scope strings, got "
                                     f"{type(shared_scopes).__name__}",
                                     "pass e.g. ('global',), or () for none")
        self.shared_scopes = tuple(
            validated_as(MmuValidationError, require_text, scope, f"shared_scopes[{i}]")
            for i, scope in enumerate(shared_scopes))
        self.shared_scope_factor = clamp01(shared_scope_factor)
        self.clock = resolve_clock(clock)
        self.cache = RepresentationCache()
        self.pages = PageTable()
        self.token_used = 0
        self.recalls = 0
        self.promotions = 0
        self.evictions = 0
        self.rejections: Counter[str] = Counter()
        self.scored = 0  # instrumentation: pages scored so far (proves: only candidates)
        self._resident: set[str] = set()
        self._cursor = 0
        self._excluded: list[Exclusion] = []  # filled by admit() during one recall
        self.stale_hits = 0
        if before_promotion is not None and not callable(before_promotion):
            raise MmuValidationError("before_promotion", "must be a callable or None, got "
                                     f"{type(before_promotion).__name__}")
        #: the extension point (see the class docstring): called with the chosen ids
        self.before_promotion: PromotionHook | None = before_promotion
        self.sync()

    # -- pages follow the canonical records ----------------------------------------------
    def sync(self) -> None:
        """Apply records changed since the last sync: new pages, edits, forgets."""
        if not self.pages and hasattr(self.service, "open_pages"):
            # opening (or rebuilding): the service hands over a page table whose pages are
            # made when first looked at, from records it has not read yet; nothing is read
            self.pages, self._cursor = self.service.open_pages(self._cursor)
            return
        records, self._cursor = self.service.changed_since(self._cursor)
        with paused_gc():  # one page per record, no cycles: nothing for the collector
            if not self.pages:
                self.pages.seed({r.record_id: r for r in records if r.visible})
                return
            for record in records:
                self._apply(record)

    def rebuild(self) -> None:
        """Drop every page and derived text, and page in again from the canonical records."""
        self.pages.clear()
        self._resident.clear()
        self.cache.clear()
        self.token_used = 0
        self._cursor = 0
        self.sync()
        self.check_ledger()

    def _apply(self, record: MemoryRecord) -> None:
        page = self.pages.get(record.record_id)
        if page is not None and (not record.visible or page.content_hash != record.content_hash):
            self._drop(page)  # forgotten, or edited: its derived texts are now unusable
            page = None
        if not record.visible:
            return
        if page is None:
            page = Page.from_record(record)
            self.pages[record.record_id] = page
        else:  # same text: refresh the factor inputs and the claim fields
            page.refresh(record)
        if page.residency is not Residency.COLD and page.status not in CURRENT_STATUSES:
            self._release(page)  # superseded or in conflict: no longer loaded as current

    def _drop(self, page: Page) -> None:
        self._release(page)
        del self.pages[page.record_id]

    # -- the budget book ---------------------------------------------------------------
    def fits(self, need: int) -> bool:
        """``used + need <= budget``, written as a subtraction so that it cannot overflow."""
        return need <= self.token_budget and self.token_used <= self.token_budget - need

    def _release(self, page: Page) -> None:
        if page.residency is not Residency.COLD:
            self.token_used -= page.charged
            self._resident.discard(page.record_id)
        self.cache.release(page.loaded_key)
        page.loaded_key, page.charged, page.residency = None, 0, Residency.COLD

    def _evict(self, page: Page) -> None:
        self._release(page)
        self.evictions += 1

    def ledger(self) -> Ledger:
        resident = [self.pages[i] for i in self._resident]
        recomputed = 0
        for page in resident:
            text = self.cache.get(page.loaded_key)
            recomputed += tokens_of(text) if text is not None else 0
        return Ledger(
            token_used=self.token_used, recomputed=recomputed, budget=self.token_budget,
            hot=sum(p.residency is Residency.HOT for p in resident),
            warm=sum(p.residency is Residency.WARM for p in resident),
            cold=len(self.pages) - len(resident),
            pinned_tokens=sum(p.charged for p in resident if p.pinned),
            hot_tokens=sum(p.charged for p in resident if p.residency is Residency.HOT),
            warm_tokens=sum(p.charged for p in resident if p.residency is Residency.WARM))

    def check_ledger(self) -> Ledger:
        ledger = self.ledger()
        if not ledger.ok:
            raise LedgerError(f"token_used={ledger.token_used} but the loaded pages sum to "
                              f"{ledger.recomputed} (budget {ledger.budget}); this is a bug")
        return ledger

    def _resident_pages(self, protect: frozenset[str] | set[str] = frozenset()
                        ) -> list[ResidentPage]:
        return [ResidentPage(p.record_id, p.keep_score, p.last_access, p.charged,
                             pinned=p.pinned, protected=p.record_id in protect,
                             age=self.recalls - p.loaded_at_recall)
                for p in (self.pages[i] for i in self._resident)]

    def _evict_all(self, record_ids: Sequence[str]) -> None:
        for record_id in record_ids:
            self._evict(self.pages[record_id])

    def evict_to_budget(self) -> tuple[str, ...]:
        """Evict lowest keep score first until within budget; pinned pages never go."""
        excess = self.token_used - self.token_budget
        if excess <= 0:
            return ()
        residents = self._resident_pages()
        # Pins may overflow the budget: ask for no more than the unpinned pages hold.
        unpinned = sum(page.tokens for page in residents if not page.pinned)
        evicted = choose_evictions(residents, min(excess, unpinned))
        self._evict_all(evicted)
        return evicted

    def fit_request(self, ledger: RequestLedger) -> RequestLedger:
        """Give memory what the request leaves (``ledger.memory_allowance``), evicting to
        it, and return the ledger with the memory now loaded."""
        if not isinstance(ledger, RequestLedger):
            raise MmuValidationError("ledger", "must be a RequestLedger (plan_request)")
        self.set_budget(ledger.memory_allowance)
        return ledger.with_memory(self.token_used)

    def set_budget(self, token_budget: int) -> tuple[str, ...]:
        self.token_budget = _require_count(token_budget, "token_budget", 0)
        evicted = self.evict_to_budget()
        self.check_ledger()
        return evicted

    def _make_room(self, need: int, protect: set[str]) -> list[str]:
        """Evict just enough unprotected pages for ``need``; evict nothing if that can't work."""
        if need > self.token_budget:
            return []
        evicted = choose_evictions(self._resident_pages(protect),
                                   self.token_used + need - self.token_budget,
                                   self.min_residency)
        self._evict_all(evicted)
        return list(evicted)

    def _fresh_record(self, page: Page, now: datetime,
                      stale: list[StaleHit]) -> MemoryRecord | None:
        """The page's record if it is still the version the page describes, else ``None``
        (and a :class:`StaleHit`): a forget or revise may land after candidate selection."""
        try:
            record = self.service.recall_key(page.record_id, scope=page.scope)
        except RecordNotFoundError:
            record = None
        if record is not None and record.content_hash == page.content_hash \
                and exclusion_reason(record, now) is None:
            return record
        reason = ("forgotten" if record is None
                  else "revised" if record.content_hash != page.content_hash
                  else exclusion_reason(record, now) or "changed")
        stale.append(StaleHit(page.record_id, reason, page.content_hash,
                              None if record is None else record.content_hash))
        self.stale_hits += 1
        return None

    def _promote(self, page: Page, level: Level, protect: set[str],
                 rejected: list[Rejection], evicted: list[str], *, force: bool = False,
                 stale: list[StaleHit] | None = None, now: datetime | None = None) -> bool:
        record = self._fresh_record(page, self.clock.now() if now is None else now,
                                    [] if stale is None else stale)
        if record is None:
            return False
        if page.needs_l2 is None:
            page.needs_l2 = needs_full_text(record)
        key, text = self.cache.get_or_derive(record, level)
        whole = tokens_of(text)  # what the page will be charged once loaded at ``level``
        need = whole - page.charged
        if not self.fits(need) and not force and whole <= self.token_budget:
            evicted.extend(self._make_room(need, protect))
        if not self.fits(need) and not force:
            if key != page.loaded_key:
                self.cache.release(key)  # the derived text goes with the refusal
            # a WARM page going HOT needs only L2 − L1 more, but L2 alone may not fit
            reason = REASON_TOO_LARGE if whole > self.token_budget else REASON_NO_ROOM
            self.rejections[reason] += 1
            free = max(0, self.token_budget - self.token_used)
            rejected.append(Rejection(page.record_id, level.value, reason, need, free))
            return False
        if page.loaded_key != key:
            self.cache.release(page.loaded_key)
        self.token_used += need
        page.loaded_key, page.charged = key, need + page.charged
        page.residency = Residency.HOT if level is Level.L2 else Residency.WARM
        page.loaded_at_recall = self.recalls
        self._resident.add(page.record_id)
        self.promotions += 1
        return True

    # -- recall ------------------------------------------------------------------------
    def _scopes(self, scope: str) -> frozenset[str]:
        validated_as(MmuValidationError, require_text, scope, "scope")
        return frozenset((scope, *self.shared_scopes))

    def factors(self, page: Page, query_terms: frozenset[str], matched: int, scope: str,
                now: datetime) -> Factors:
        """``matched``: how many of ``query_terms`` the page's record holds (the service's
        index counts them, :meth:`FileMemoryService.match_counts`)."""
        return Factors(
            relevance=relevance(query_terms, matched), importance=page.importance,
            confidence=page.confidence, utility=page.utility,
            recency=recency(now - page.last_access, self.half_life),
            salience=page.salience,
            scope=1.0 if page.scope == scope else self.shared_scope_factor)

    def admit(self, page: Page, now: datetime) -> bool:
        """Is ``page`` current at ``now``? If not, record why (in this recall's trace)."""
        reason = exclusion_reason(page, now)
        if reason is None:
            return True
        self._excluded.append(Exclusion(page.record_id, page.status, reason, page.version))
        return False

    def one_claim_per_origin(self, scored: list[tuple[tuple[float, str], Factors]]
                             ) -> list[tuple[tuple[float, str], Factors]]:
        """Keep one current claim per ``(scope, origin_key)``: the best by source rank, then
        the newest (:func:`~labmem.mmu.records.claim_key`) — the service's supersession
        rule, enforced here too for a backend that left two current claims."""
        best: dict[tuple[str, str], tuple[tuple[float, str], Factors]] = {}
        for row in scored:
            page = self.pages[row[0][1]]
            key = (page.scope, page.origin_key)
            rival = best.get(key)
            if rival is None:
                best[key] = row
                continue
            loser, best[key] = sorted((rival, row), key=lambda r: claim_key(self.pages[r[0][1]]))
            lost = self.pages[loser[0][1]]
            self._excluded.append(Exclusion(lost.record_id, lost.status,
                                            f"outranked by {best[key][0][1]} (same origin)",
                                            lost.version))
        return list(best.values())

    def select_candidates(self, query_terms: frozenset[str], allowed: frozenset[str],
                          scope: str, now: datetime) -> list[tuple[tuple[float, str], Factors]]:
        """The best ``candidate_limit`` current pages, best first, as ``(rank key, factors)``.

        Only pages sharing a term with the query (found through the service's term index,
        the one index both search: ``service.match_counts``), inside
        the caller's scopes and current (:meth:`admit`) are scored, one per origin;
        ``heapq.nsmallest`` keeps the best without sorting the rest. Cost: O(c log k) for
        c candidates, whatever the number of pages.
        """
        matches = self.service.match_counts(query_terms)
        scored = []
        for record_id, matched in matches.items():
            page = self.pages.get(record_id)
            if page is None:
                continue  # written after this recall's sync: the next recall pages it in
            if page.scope not in allowed:
                continue  # scope is a filter before ranking, not a factor only
            if not self.admit(page, now):
                continue  # status is a filter too: stale claims are never candidates
            factors = self.factors(page, query_terms, matched, scope, now)
            score = factor_score(factors, self.weights)
            scored.append((page_rank_key(score, record_id), factors))
        self.scored += len(scored)
        scored = self.one_claim_per_origin(scored)
        return heapq.nsmallest(self.candidate_limit, scored, key=lambda row: row[0])

    def _release_expired(self, now: datetime) -> None:
        """A loaded page whose claim expired since it was loaded goes back to COLD."""
        for record_id in sorted(self._resident):
            page = self.pages[record_id]
            if not page.pinned and exclusion_reason(page, now) is not None:
                self._release(page)

    def recall(self, query: str, *, scope: str, now: datetime | str | None = None) -> RecallTrace:
        """Load the best pages for ``query`` within the budget and return the trace.

        The warm set (the best ``warm_top_k``) goes COLD → WARM; of the survivors, the
        best ``l2_top_k`` go on to HOT, and so does every survivor whose overview cut a
        decisive detail (:func:`~labmem.mmu.pages.needs_full_text`) — by rule, budget
        permitting. A record forgotten or revised after selection is skipped, counted as a
        stale hit, and never loaded with text that no longer matches its page.
        """
        validated_as(MmuValidationError, require_text, query, "query", max_chars=2_000)
        allowed = self._scopes(scope)
        now = (self.clock.now() if now is None
               else validated_as(MmuValidationError, parse_timestamp, now, field="now"))
        self.sync()
        self.recalls += 1
        self._excluded = []
        self._release_expired(now)
        query_terms = frozenset(extract_terms(query))
        best = self.select_candidates(query_terms, allowed, scope, now)
        excluded = tuple(sorted(self._excluded))
        versions = {key[1]: (self.pages[key[1]].version, self.pages[key[1]].content_hash)
                    for key, _ in best}
        if self.before_promotion is not None:
            self.before_promotion(tuple(key[1] for key, _ in best))
        rejected: list[Rejection] = []
        evicted: list[str] = []
        stale: list[StaleHit] = []
        warm_set = best[: self.warm_top_k]
        protect = {key[1] for key, _ in warm_set}
        for key, _ in warm_set:
            page = self.pages[key[1]]
            page.keep_score = -key[0]
            if page.residency is Residency.COLD:
                self._promote(page, Level.L1, protect, rejected, evicted, stale=stale, now=now)
        survivors = [key[1] for key, _ in warm_set
                     if self.pages[key[1]].residency is not Residency.COLD]
        for rank, record_id in enumerate(survivors):  # re-ranked: only pages that fit
            page = self.pages[record_id]
            if page.residency is Residency.WARM and (rank < self.l2_top_k or page.needs_l2):
                self._promote(page, Level.L2, protect, rejected, evicted, stale=stale, now=now)
        evicted.extend(self.evict_to_budget())
        for record_id in survivors:
            if self.pages[record_id].residency is not Residency.COLD:
                self.pages[record_id].last_access = now
        ledger = self.check_ledger()
        candidates = tuple(
            CandidateTrace(key[1], factors.to_dict(), -key[0], self.pages[key[1]].level.value,
                           *versions[key[1]]) for key, factors in best)
        return RecallTrace(
            recall_no=self.recalls, query_hash=query_hash(query), scope=scope, at=now,
            candidates=candidates, rejected=tuple(rejected), evicted=tuple(evicted),
            budget_used=self.token_used, budget_limit=self.token_budget,
            pin_overflow=ledger.pin_overflow, hot=ledger.hot, warm=ledger.warm,
            excluded=excluded, stale=tuple(stale))

    def check_replay(self, trace: RecallTrace) -> ReplayCheck:
        """Compare each candidate's traced version with the record as it is now: a replay
        of the recall sees the same snapshot only if none changed (or went)."""
        if not isinstance(trace, RecallTrace):
            raise MmuValidationError("trace", "must be a RecallTrace from recall()")
        rows = []
        for candidate in trace.candidates:
            page = self.pages.get(candidate.record_id)
            try:
                record = self.service.recall_key(candidate.record_id,
                                                 scope=page.scope if page else trace.scope)
            except RecordNotFoundError:
                rows.append(ReplayRow(candidate.record_id, candidate.version, None, "gone"))
                continue
            same = (record.content_hash == candidate.content_hash
                    and record.version == candidate.version)
            rows.append(ReplayRow(candidate.record_id, candidate.version, record.version,
                                  "same" if same else "changed"))
        return ReplayCheck(trace.query_hash, tuple(rows))

    # -- explicit loads, pins, reads ---------------------------------------------------
    def _page(self, record_id: str, scope: str) -> Page:
        validated_as(MmuValidationError, require_text, record_id, "record_id")
        allowed = self._scopes(scope)
        self.sync()
        page = self.pages.get(record_id)
        if page is None or page.scope not in allowed:
            raise MmuValidationError("record_id", f"{record_id!r} is not a visible page in "
                                                  "this scope", "recall or remember it first")
        return page

    def load(self, record_id: str, *, scope: str, level: Level = Level.L2) -> bool:
        """Promote one page explicitly (same budget rules as recall); False if rejected."""
        if not isinstance(level, Level):
            raise MmuValidationError("level", f"must be a Level, got {level!r}",
                                     "pass Level.L0, Level.L1 or Level.L2")
        page = self._page(record_id, scope)
        if page.residency is Residency.HOT or (page.residency is Residency.WARM
                                               and level is not Level.L2):
            return True
        ok = self._promote(page, level, {record_id}, [], [])
        self.check_ledger()
        return ok

    def pin(self, record_id: str, *, scope: str) -> Ledger:
        """Load at L2 and promise never to evict it; a pin may overflow the budget (reported)."""
        page = self._page(record_id, scope)
        if page.residency is not Residency.HOT:
            stale: list[StaleHit] = []
            if not self._promote(page, Level.L2, {record_id}, [], [], force=True, stale=stale):
                self.sync()
                raise MmuValidationError("record_id", f"{record_id!r} is {stale[0].reason} "
                                                      "(it changed while being pinned)",
                                         "recall it again, then pin the current version")
        page.pinned = True
        self.evict_to_budget()
        return self.check_ledger()

    def unpin(self, record_id: str, *, scope: str) -> Ledger:
        page = self._page(record_id, scope)
        page.pinned = False
        self.evict_to_budget()
        return self.check_ledger()

    def evict(self, record_id: str, *, scope: str) -> None:
        """Release a page to COLD by hand (refused for a pinned page)."""
        page = self._page(record_id, scope)
        if page.pinned:
            raise MmuValidationError("record_id", f"{record_id!r} is pinned", "unpin it first")
        if page.residency is not Residency.COLD:
            self._evict(page)
        self.check_ledger()

    def text(self, record_id: str, *, scope: str) -> str | None:
        """The loaded representation (L2 or L1) of a page, or None when it is COLD."""
        page = self._page(record_id, scope)
        return self.cache.get(page.loaded_key)
