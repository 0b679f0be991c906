"""s14 (part 2): long-term memory answers "what to keep"; the Context MMU, "what to load now".

The package is two groups of sibling modules. The **mechanism** is what the chapter
teaches, and works on plain in-memory objects: :mod:`~labmem.mmu.records` (the record,
the write gate, the rule for what is current), :mod:`~labmem.mmu.pages` (L0/L1/L2
representations, HOT/WARM/COLD residency, the representation cache, the page table),
:mod:`~labmem.mmu.scoring` (the seven-factor score), :mod:`~labmem.mmu.mmu` (the
:class:`ContextMMU`: recall, promotion, eviction, the budget ledger),
:mod:`~labmem.mmu.request` (one model call's window) and :mod:`~labmem.mmu.trace` /
:mod:`~labmem.mmu.evaluation` (explain and measure a recall). The **persistence** keeps
records across processes and never changes what the mechanism decides:
:mod:`~labmem.mmu.service` (the :class:`MemoryService` contract and its file backend),
:mod:`~labmem.mmu.logline` (the CRC'd log line and reading it back),
:mod:`~labmem.mmu.snapshot` (the fold snapshot beside the log, so an open decodes no
line), :mod:`~labmem.mmu.lazy` (records and page tables filled from snapshot rows on first
use) and :mod:`~labmem.mmu.index` (the one term index the service owns and the MMU
searches). Persistence imports the mechanism, never the other way round; the MMU reaches
its store only through the service's methods.

* :mod:`labmem.mmu.records` — canonical records and the write gate.
* :mod:`labmem.mmu.service` — the :class:`MemoryService` contract and its file backend;
  :mod:`labmem.mmu.logline` its checksummed log line, :mod:`labmem.mmu.index` the one term
  index it owns and the Context MMU searches, :mod:`labmem.mmu.snapshot` the fold snapshot
  beside the log that lets it open without decoding the log (:mod:`labmem.core.arrayfile`
  its file format), :mod:`labmem.mmu.lazy` the records and pages it hands out unread.
* :mod:`labmem.mmu.pages` — L0/L1/L2 representations, HOT/WARM/COLD residency, the cache.
* :mod:`labmem.mmu.scoring` — the seven-factor score.
* :mod:`labmem.mmu.mmu` — :class:`ContextMMU`: recall, promotion, eviction, the ledger;
  :func:`choose_evictions`, the eviction choice as one pure rule; ``before_promotion``,
  its documented extension point between choosing candidates and loading them.
* :mod:`labmem.mmu.request` — :class:`RequestLedger`: one model call's window (system,
  tools, history, memory, output reserve); memory gets what is left.
* :mod:`labmem.mmu.trace` / :mod:`labmem.mmu.evaluation` — explain and measure a recall.
"""

from labmem.mmu.errors import (
    LedgerError,
    MemoryCorruptionError,
    MemoryScopeError,
    MemoryServiceError,
    MemoryValidationError,
    MmuError,
    MmuValidationError,
    RecordNotFoundError,
    ServiceClosedError,
    UnsupportedOperationError,
    WriteGateError,
)
from labmem.mmu.evaluation import (
    EvaluationReport,
    LabeledQuery,
    LossRow,
    QueryScore,
    churn,
    evaluate,
    information_loss,
    load_json,
    precision_at_k,
    recall_at_k,
    remember_rows,
)
from labmem.mmu.index import KeyedTermIndex
from labmem.mmu.logline import encode_line
from labmem.mmu.mmu import (
    GLOBAL_SCOPE,
    REASON_NO_ROOM,
    REASON_TOO_LARGE,
    ContextMMU,
    Ledger,
    ResidentPage,
    choose_evictions,
)
from labmem.mmu.pages import (
    LEVEL_OF,
    Level,
    Page,
    RepresentationCache,
    Residency,
    charge,
    derive_l0,
    derive_l1,
    derive_l2,
    needs_full_text,
    tokens_of,
)
from labmem.mmu.records import (
    CURRENT_STATUSES,
    MEMORY_TYPES,
    SOURCE_KINDS,
    SOURCE_RANK,
    STATUSES,
    MemoryRecord,
    Tombstone,
    content_hash,
    exclusion_reason,
    record_id_of,
)
from labmem.mmu.request import PARTS, RequestLedger, plan_request, tool_tokens
from labmem.mmu.scoring import (
    FACTOR_NAMES,
    Factors,
    FactorWeights,
    contributions,
    factor_score,
    page_rank_key,
    recency,
    relevance,
)
from labmem.mmu.service import FileMemoryService, MemoryService, QueryExplanation, ServiceHit
from labmem.mmu.trace import (
    Exclusion,
    RecallTrace,
    ReplayCheck,
    ReplayRow,
    StaleHit,
    query_hash,
)

__all__ = [
    "GLOBAL_SCOPE", "MEMORY_TYPES", "SOURCE_KINDS", "STATUSES",
    "ContextMMU", "FactorWeights", "Factors", "FileMemoryService", "Ledger", "LedgerError",
    "Level", "MemoryCorruptionError", "MemoryRecord", "MemoryScopeError", "MemoryService",
    "MemoryServiceError", "MemoryValidationError", "MmuError", "MmuValidationError", "Page",
    "ServiceHit", "RecallTrace", "RecordNotFoundError", "RepresentationCache", "Residency",
    "ServiceClosedError", "UnsupportedOperationError", "WriteGateError", "content_hash",
    "factor_score", "query_hash", "page_rank_key", "recency", "relevance",
    "LossRow", "churn", "information_loss", "load_json", "precision_at_k", "recall_at_k",
    "REASON_NO_ROOM", "REASON_TOO_LARGE", "derive_l0", "derive_l1", "derive_l2", "tokens_of",
    "ResidentPage", "choose_evictions",
    "FACTOR_NAMES", "LEVEL_OF", "charge", "contributions",
    "CURRENT_STATUSES", "SOURCE_RANK", "Tombstone", "exclusion_reason", "QueryExplanation",
    "Exclusion", "ReplayCheck", "ReplayRow", "StaleHit",
    "PARTS", "RequestLedger", "plan_request", "tool_tokens",
    "needs_full_text", "EvaluationReport", "LabeledQuery", "QueryScore", "evaluate",
    "remember_rows", "KeyedTermIndex", "encode_line", "record_id_of",
]
