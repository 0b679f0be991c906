"""Pages: what the Context MMU holds for a record, on two independent axes.

* **Level** — how much of the record a representation carries:
  L0 one-line abstract, L1 deterministic overview (title, attributes, bounded excerpt),
  L2 the full text.
* **Residency** — what is loaded into the context right now (and charged to the budget):
  HOT = L2 loaded, WARM = L1 loaded, COLD = metadata only (identity, factor inputs, L0).

A page is derived from a canonical :class:`MemoryRecord`, never the other way round.
Derived texts live in a :class:`RepresentationCache` keyed by
``(scope, record_id, content_hash, level, REPRESENTATION_VERSION)``: editing a record
changes its hash, so an old overview can never be served for the new text.

L0 and L1 have a shape (a ``[type]`` head; a title line, an attribute line and an excerpt
line), so the stored title and text are printed through :data:`PAGE_FORMAT`
(:mod:`labmem.core.render`): a title holding a newline cannot forge the attribute line, and
no control or bidirectional-override character reaches the context raw. L2 is the record's
text itself, byte for byte (the pages' recovery checks its length and SHA-256).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from types import MappingProxyType

from labmem.core.render import BlockFormat, fixed, join_lines
from labmem.core.text import collapse_whitespace, estimate_tokens, extract_terms
from labmem.mmu.records import MemoryRecord

REPRESENTATION_VERSION = 1
L0_MAX_CHARS = 80
L1_EXCERPT_CHARS = 160
ELLIPSIS = "…"
#: L0 / L1 are positional (which line, which head), so no character is reserved: line
#: breaks, controls and format characters are escaped, ordinary text is printed as it is.
PAGE_FORMAT = BlockFormat("mmu_page")


class Level(Enum):
    L0 = "L0"
    L1 = "L1"
    L2 = "L2"


class Residency(Enum):
    HOT = "HOT"
    WARM = "WARM"
    COLD = "COLD"


#: The level a page's residency loads: HOT holds the full text (L2), WARM the overview
#: (L1), COLD only the metadata with its one-line abstract (L0). :attr:`Page.level` and
#: :func:`charge` read this one table.
LEVEL_OF: Mapping[Residency, Level] = MappingProxyType(
    {Residency.HOT: Level.L2, Residency.WARM: Level.L1, Residency.COLD: Level.L0})


def cut_excerpt(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, cut on a character (never a byte) boundary,
    preferring the last space in the final quarter; ``…`` marks a cut."""
    flat = collapse_whitespace(text)
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    if space >= limit * 3 // 4:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


#: What makes a detail decisive: a number, a negation, a condition or an exception.
DECISIVE_DETAIL = re.compile(
    r"\d|\b(?:not|never|no|none|nothing|without|cannot|can't|don't|doesn't|won't|must|"
    r"only|if|unless|except|until|before|after)\b|不|没|別|别|除非|只有|如果|必须",
    re.IGNORECASE)


def needs_full_text(record: MemoryRecord) -> bool:
    """The L1 excerpt cut the text, and the part it cut holds a decisive detail.

    The rule the MMU uses to load such a page at L2 whenever it is in the warm set: a
    decision must never rest on an overview that dropped "not", "250" or "unless".
    """
    flat = collapse_whitespace(record.text)
    excerpt = cut_excerpt(record.text, L1_EXCERPT_CHARS)
    if excerpt == flat:
        return False
    kept = len(excerpt) - len(ELLIPSIS)
    return DECISIVE_DETAIL.search(flat[kept:]) is not None


def derive_l0(record: MemoryRecord) -> str:
    """One line: type and title."""
    return _abstract(record.memory_type, record.title)


def _abstract(memory_type: str, title: str) -> str:
    return PAGE_FORMAT.text(cut_excerpt(f"[{memory_type}] {title}", L0_MAX_CHARS), "title")


def derive_l1(record: MemoryRecord) -> str:
    """A deterministic overview — no model call, so the same record always gives the same text.

    Three lines: the title, the attributes, a bounded excerpt of the text. Lossy on
    purpose: a negation, number or exception past the excerpt is *gone*.
    """
    return join_lines([
        PAGE_FORMAT.text(record.title, "title"),
        f"type={record.memory_type} status={record.status} "
        f"importance={fixed(record.importance, 'importance', 2)} "
        f"confidence={fixed(record.confidence, 'confidence', 2)} "
        f"source={record.source_kind} v{record.version}",
        PAGE_FORMAT.text(cut_excerpt(record.text, L1_EXCERPT_CHARS), "text"),
    ], "mmu_page")


def derive_l2(record: MemoryRecord) -> str:
    """The full canonical text, unchanged (recovery is checked by length and SHA-256)."""
    return record.text


DERIVE = {Level.L0: derive_l0, Level.L1: derive_l1, Level.L2: derive_l2}

CacheKey = tuple[str, str, str, str, int]


class RepresentationCache:
    """Derived texts by ``(scope, record_id, content_hash, level, version)``.

    The MMU stores only the representations it has loaded and removes them when it
    releases a page, so the cache is inside the budget, not a side copy around it.
    """

    def __init__(self) -> None:
        self._texts: dict[CacheKey, str] = {}
        self.derivations = 0

    @staticmethod
    def key(record: MemoryRecord, level: Level) -> CacheKey:
        return (record.scope, record.record_id, record.content_hash, level.value,
                REPRESENTATION_VERSION)

    def get_or_derive(self, record: MemoryRecord, level: Level) -> tuple[CacheKey, str]:
        key = self.key(record, level)
        text = self._texts.get(key)
        if text is None:
            text = DERIVE[level](record)
            self.derivations += 1
            self._texts[key] = text
        return key, text

    def get(self, key: CacheKey) -> str | None:
        return self._texts.get(key)

    def release(self, key: CacheKey | None) -> None:
        if key is not None:
            self._texts.pop(key, None)

    def __len__(self) -> int:
        return len(self._texts)

    def clear(self) -> None:
        self._texts.clear()


@dataclass
class Page:
    """The MMU's working state for one record: identity, factor inputs, what is loaded.

    Mutable on purpose (it is bookkeeping, not evidence); never written to disk.
    ``charged`` is the tokens of the loaded representation (L2 when HOT, L1 when WARM, 0
    when COLD); the ledger invariant is ``token_used == Σ charged``.

    The record's own fields (identity, factor inputs, the claim fields that
    :func:`~labmem.mmu.records.exclusion_reason` reads, the version a trace names) are
    read through :attr:`record`, the service's frozen record itself: a page copies
    nothing, and opening an MMU costs one small object per record. ``origin_key`` is the
    one copy: the claim a page competes in (a test may re-assign it to stage a rival).
    """

    record: MemoryRecord
    last_access: datetime
    origin_key: str = ""
    residency: Residency = Residency.COLD
    charged: int = 0
    loaded_key: object = None
    pinned: bool = False
    loaded_at_recall: int = -1
    keep_score: float = 0.0
    #: :func:`needs_full_text` of the record, worked out when the page is first loaded
    #: (``None`` before): opening an MMU stays the cost of reading metadata
    needs_l2: bool | None = None

    @classmethod
    def from_record(cls, record: MemoryRecord) -> Page:
        return cls(record, record.updated_at, record.origin_key)

    def refresh(self, record: MemoryRecord) -> None:
        """Take the record's factor inputs and claim fields (same text: same derived texts)."""
        self.record, self.origin_key = record, record.origin_key

    record_id = property(lambda self: self.record.record_id)
    scope = property(lambda self: self.record.scope)
    memory_type = property(lambda self: self.record.memory_type)
    title = property(lambda self: self.record.title)
    content_hash = property(lambda self: self.record.content_hash)
    importance = property(lambda self: self.record.importance)
    confidence = property(lambda self: self.record.confidence)
    utility = property(lambda self: self.record.utility)
    salience = property(lambda self: self.record.salience)
    status = property(lambda self: self.record.status)
    source_kind = property(lambda self: self.record.source_kind)
    version = property(lambda self: self.record.version)
    updated_at = property(lambda self: self.record.updated_at)
    valid_until = property(lambda self: self.record.valid_until)
    superseded_by = property(lambda self: self.record.superseded_by)
    conflicts_with = property(lambda self: self.record.conflicts_with)

    @property
    def terms(self) -> frozenset[str]:
        """The record's search terms (the service's index holds them for searching; this
        is for showing which of a query's terms a page holds)."""
        return frozenset(extract_terms(self.record.title + "\n" + self.record.text))

    @property
    def abstract(self) -> str:
        """The L0 one-liner, derived when asked (opening an MMU derives nothing)."""
        return _abstract(self.memory_type, self.title)

    @property
    def level(self) -> Level:
        return LEVEL_OF[self.residency]


class PageTable(MutableMapping[str, Page]):
    """The MMU's pages by record id, each made when first looked at.

    Opening an MMU gives every visible record a page; making 100,000 :class:`Page`
    objects (and reading each record's ``updated_at`` and ``origin_key`` for them) is most
    of an open that needs none of them yet. So :meth:`seed` keeps each record, and its page
    is made from that very record on first access: a record changed since gets the same
    page an eager open would have made and then updated. Order, length and membership are
    those of one plain dict. (A store that can hand over records not read yet seeds a
    subclass that overrides :meth:`record_of`: :class:`labmem.mmu.lazy.RowPageTable`.)
    """

    def __init__(self) -> None:
        self._slots: dict[str, Page | MemoryRecord] = {}  # a record: no page made yet

    def seed(self, records: Mapping[str, MemoryRecord]) -> None:
        """A page for each of ``records`` from now on, made when first asked for; only
        into an empty table."""
        if self._slots:
            raise ValueError("seed() fills an empty page table")
        self._slots.update(records)

    def record_of(self, slot: MemoryRecord) -> MemoryRecord:
        """The record a seeded slot stands for (here: the slot is the record)."""
        return slot

    def _make(self, record_id: str, slot: MemoryRecord) -> Page:
        page = self._slots[record_id] = Page.from_record(self.record_of(slot))
        return page

    def __getitem__(self, record_id: str) -> Page:
        slot = self._slots[record_id]
        return slot if type(slot) is Page else self._make(record_id, slot)

    def get(self, record_id: str, default: Page | None = None) -> Page | None:
        slot = self._slots.get(record_id)
        if slot is None:
            return default
        return slot if type(slot) is Page else self._make(record_id, slot)

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._slots

    def __setitem__(self, record_id: str, page: Page) -> None:
        self._slots[record_id] = page

    def __delitem__(self, record_id: str) -> None:
        del self._slots[record_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def clear(self) -> None:
        self._slots.clear()

    @property
    def made(self) -> int:
        """Instrumentation: pages made so far (the others are still just their seed)."""
        return sum(type(slot) is Page for slot in self._slots.values())


def tokens_of(text: str) -> int:
    """The one project estimator (``labmem.core.text.estimate_tokens``)."""
    return estimate_tokens(text)


def charge(record: MemoryRecord, residency: Residency) -> int:
    """The tokens a page of ``record`` costs the budget at ``residency``.

    HOT is charged the tokens of the full text (L2), WARM those of the overview (L1). COLD
    is charged nothing: its L0 abstract is bookkeeping, never loaded into the context.
    An L1 overview repeats the title and adds an attribute line, so for a short record it
    costs *more* than the full text.
    """
    if residency is Residency.COLD:
        return 0
    return tokens_of(DERIVE[LEVEL_OF[residency]](record))
