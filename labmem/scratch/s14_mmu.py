# Generated from notebooks/s14_context_mmu.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""s14 from scratch: a Context MMU — what is kept, and what is loaded for one query.

A ``MemoryStore`` keeps records and settles, as each claim is written, which claim about a
thing is current (status, then source rank). A ``ContextMMU`` holds one page per record
with three representations (L0 a one-line abstract, L1 a bounded overview, L2 the full
text) and loads the best pages for a query as WARM (L1) or HOT (L2), keeping the tokens
they are charged within a budget by evicting the pages with the lowest keep score.
Standard library only; everything lives in memory.
"""

import math
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

L0_MAX_CHARS = 80
L1_EXCERPT_CHARS = 160
ELLIPSIS = "…"
#: which source may replace which: a claim replaces only claims of equal or lower rank
SOURCE_RANK = {"user_stated": 3, "tool_observed": 2, "model_inferred": 1}
CURRENT_STATUSES = ("provisional", "trusted")
FACTOR_NAMES = ("relevance", "importance", "confidence", "utility", "recency",
                "salience", "scope")
DEFAULT_WEIGHTS = {"relevance": 0.35, "importance": 0.15, "confidence": 0.10,
                   "utility": 0.10, "recency": 0.10, "salience": 0.10, "scope": 0.10}
HALF_LIFE = timedelta(days=1)
START = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Record:
    """One kept claim about one thing, ``(scope, origin_key)``, and why it is believed."""

    record_id: str
    scope: str
    origin_key: str
    title: str
    text: str
    source_kind: str
    status: str = "provisional"
    memory_type: str = "semantic"
    importance: float = 0.5
    confidence: float = 0.5
    utility: float = 0.5
    salience: float = 0.5
    superseded_by: str | None = None
    conflicts_with: str | None = None


@dataclass
class Page:
    """What the MMU holds for one record: its residency and what that costs right now."""

    record_id: str
    residency: str = "COLD"  # HOT = L2 loaded, WARM = L1 loaded, COLD = nothing loaded
    charged: int = 0
    keep_score: float = 0.0
    last_access: datetime = START
    loaded_at: int = 0  # the recall that loaded it (the age rule counts from here)


@dataclass(frozen=True)
class ResidentPage:
    """A loaded page as the eviction choice sees it: a snapshot made for one decision."""

    record_id: str
    keep_score: float
    last_access: datetime
    tokens: int
    pinned: bool = False
    protected: bool = False
    age: int = 0


def settle_claim(current: "Record | None", incoming: Record) -> "tuple[Record, Record | None]":
    """``(incoming, current)`` with their statuses after ``incoming`` arrives.

    A claim replaces the current one (which becomes ``superseded``) only if its source
    ranks at least as high; a lower-ranked claim is kept as ``conflicted`` — written down,
    never loaded — and the current claim stays current.
    """
    if current is None:
        return incoming, None
    if SOURCE_RANK[incoming.source_kind] >= SOURCE_RANK[current.source_kind]:
        return incoming, replace(current, status="superseded", superseded_by=incoming.record_id)
    return replace(incoming, status="conflicted", conflicts_with=current.record_id), current


class MemoryStore:
    """The records, and which one is current for each ``(scope, origin_key)``."""

    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self.current: dict[tuple[str, str], str] = {}
        self.written: dict[str, int] = {}  # records written per scope: the ids' numbers

    def remember(self, *, scope: str, origin_key: str, title: str, text: str,
                 source_kind: str, **attributes) -> Record:
        """Write a claim; the same text as the current claim again changes nothing."""
        key = (scope, origin_key)
        current = self.records.get(self.current.get(key, ""))
        if current is not None and current.text == text:
            return current
        self.written[scope] = self.written.get(scope, 0) + 1
        incoming = Record(f"{scope}:m-{self.written[scope]:06d}", scope, origin_key,
                          title, text, source_kind, **attributes)
        new, old = (incoming, None) if current is None else settle_claim(current, incoming)
        for record in (old, new):
            if record is not None:
                self.records[record.record_id] = record
        if new.status in CURRENT_STATUSES:
            self.current[key] = new.record_id
        return new

    def get(self, record_id: str) -> Record:
        return self.records[record_id]

    def visible(self, scope: str) -> list[Record]:
        """The current records of one scope: the only ones a recall may load."""
        return [self.records[i] for (s, _), i in sorted(self.current.items()) if s == scope]


def tokens_of(text: str) -> int:
    """About four characters a token: the series' estimator, for text without CJK."""
    return math.ceil(len(text) / 4)


def cut_excerpt(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at the last space in the final quarter; ``…``
    marks a cut."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    if space >= limit * 3 // 4:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def render(record: Record, level: str) -> str:
    """L0: type and title on one line. L1: title, attributes, a bounded excerpt. L2: the
    text itself, unchanged."""
    if level == "L0":
        return cut_excerpt(f"[{record.memory_type}] {record.title}", L0_MAX_CHARS)
    if level == "L1":
        return "\n".join([
            " ".join(record.title.split()),
            f"type={record.memory_type} status={record.status} "
            f"importance={record.importance:.2f} confidence={record.confidence:.2f} "
            f"source={record.source_kind}",
            cut_excerpt(record.text, L1_EXCERPT_CHARS)])
    return record.text


LEVEL_OF = {"HOT": "L2", "WARM": "L1", "COLD": "L0"}


def charge(record: Record, residency: str) -> int:
    """What a page costs the budget: the tokens of what it has loaded (COLD loads none)."""
    if residency == "COLD":
        return 0
    return tokens_of(render(record, LEVEL_OF[residency]))


def clamp01(value: float) -> float:
    """NaN and negatives count as 0.0, anything above 1.0 as 1.0."""
    return 0.0 if math.isnan(value) else min(1.0, max(0.0, value))


def keep_score(factors: dict[str, float], weights: dict[str, float]) -> float:
    """The weighted mean ``Σ weight·factor / Σ weight`` of the clamped factors; 0.0 when
    every weight is zero."""
    total = sum(weights[name] for name in FACTOR_NAMES)
    if total == 0:
        return 0.0
    return sum(weights[name] * clamp01(factors[name]) for name in FACTOR_NAMES) / total


def recency(age: timedelta, half_life: timedelta = HALF_LIFE) -> float:
    """``2 ** (-age / half_life)``: 1.0 now, 0.5 after one half-life."""
    return 1.0 if age <= timedelta(0) else 2.0 ** (-(age / half_life))


def terms(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", text.lower()))


def choose_evictions(pages: "tuple[ResidentPage, ...]", tokens_to_free: int,
                     min_residency: int = 0) -> tuple[str, ...]:
    """The record ids to evict, in order, to give back ``tokens_to_free`` tokens.

    Only pages neither pinned, nor protected, nor younger than ``min_residency`` recalls
    may go; the lowest keep score goes first, ties to the least recently accessed, then
    the smaller id; stop as soon as enough is freed; and if all of them together hold
    less than asked, evict none.
    """
    if tokens_to_free <= 0:
        return ()
    evictable = sorted((p for p in pages if not p.pinned and not p.protected
                        and p.age >= min_residency),
                       key=lambda p: (p.keep_score, p.last_access, p.record_id))
    if sum(p.tokens for p in evictable) < tokens_to_free:
        return ()
    chosen, freed = [], 0
    for page in evictable:
        if freed >= tokens_to_free:
            break
        chosen.append(page.record_id)
        freed += page.tokens
    return tuple(chosen)


@dataclass(frozen=True)
class Recall:
    """What one recall did: the pages it loaded (best first), rejected and evicted."""

    loaded: tuple[str, ...]
    rejected: tuple[str, ...]
    evicted: tuple[str, ...]
    token_used: int


class ContextMMU:
    """Pages of a store's records, loaded for each query within ``token_budget``."""

    def __init__(self, store: MemoryStore, *, token_budget: int, warm_top_k: int = 4,
                 l2_top_k: int = 2, min_residency: int = 0,
                 weights: "dict[str, float] | None" = None) -> None:
        self.store, self.token_budget = store, token_budget
        self.warm_top_k, self.l2_top_k, self.min_residency = warm_top_k, l2_top_k, min_residency
        self.weights = weights or DEFAULT_WEIGHTS
        self.pages: dict[str, Page] = {}
        self.token_used = 0
        self.recalls = 0

    def score(self, record: Record, query_terms: frozenset[str], now: datetime) -> float:
        page = self.pages.setdefault(record.record_id, Page(record.record_id))
        held = len(query_terms & terms(f"{record.title} {record.text}"))
        factors = {"relevance": held / len(query_terms), "importance": record.importance,
                   "confidence": record.confidence, "utility": record.utility,
                   "recency": recency(now - page.last_access), "salience": record.salience,
                   "scope": 1.0}
        return keep_score(factors, self.weights)

    def evict(self, record_id: str) -> None:
        page = self.pages[record_id]
        self.token_used -= page.charged
        page.residency, page.charged = "COLD", 0

    def make_room(self, need: int, protect: set[str]) -> "list[str] | None":
        """Evict until ``need`` more tokens fit; ``None`` (and nothing evicted) if they cannot."""
        free = self.token_budget - self.token_used
        if need <= free:
            return []
        resident = tuple(ResidentPage(p.record_id, p.keep_score, p.last_access, p.charged,
                                      protected=p.record_id in protect,
                                      age=self.recalls - p.loaded_at)
                         for p in self.pages.values() if p.residency != "COLD")
        victims = choose_evictions(resident, need - free, self.min_residency)
        if not victims:
            return None
        for record_id in victims:
            self.evict(record_id)
        return list(victims)

    def promote(self, record: Record, residency: str, protect: set[str],
                evicted: list[str]) -> bool:
        page = self.pages[record.record_id]
        need = charge(record, residency) - page.charged
        room = None if need > self.token_budget else self.make_room(need, protect)
        if room is None:
            return False
        evicted.extend(room)
        if page.residency == "COLD":
            page.loaded_at = self.recalls
        page.residency, page.charged = residency, page.charged + need
        self.token_used += need
        return True

    def recall(self, query: str, *, scope: str, now: "datetime | None" = None) -> Recall:
        """Load the best ``warm_top_k`` current pages of ``scope`` at L1, then the best
        ``l2_top_k`` of those that fit at L2."""
        self.recalls += 1
        now = now or START + timedelta(minutes=self.recalls)
        for record_id, page in self.pages.items():  # a claim no longer current leaves
            if page.residency != "COLD" and self.store.get(record_id).status \
                    not in CURRENT_STATUSES:
                self.evict(record_id)
        query_terms = terms(query)
        scored = sorted(((self.score(r, query_terms, now), r) for r in self.store.visible(scope)
                         if query_terms & terms(f"{r.title} {r.text}")),
                        key=lambda pair: (-pair[0], pair[1].record_id))[: self.warm_top_k]
        protect = {record.record_id for _, record in scored}
        rejected, evicted = [], []
        for score, record in scored:
            self.pages[record.record_id].keep_score = score
            if self.pages[record.record_id].residency == "COLD" and not self.promote(
                    record, "WARM", protect, evicted):
                rejected.append(record.record_id)
        loaded = [r for _, r in scored if self.pages[r.record_id].residency != "COLD"]
        for rank, record in enumerate(loaded):
            if rank < self.l2_top_k and self.pages[record.record_id].residency == "WARM":
                self.promote(record, "HOT", protect, evicted)
            self.pages[record.record_id].last_access = now
        return Recall(tuple(r.record_id for r in loaded), tuple(rejected), tuple(evicted),
                      self.token_used)
