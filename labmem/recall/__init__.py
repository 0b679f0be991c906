"""s12 and s12b: remote memory and recall.

Modules, in the order the data flows::

    store         RemoteMemoryStore: scoped, source-bearing records in one JSONL log
    sqlite_store  SqliteMemoryStore: the same contract over SQLite, postings in one transaction
    postgres      PostgresMemoryStore: the same contract on a PostgreSQL server (row-level
                  security, a GIN index over labmem's terms; imported on first use)
    pipeline      the five stages: normalize → candidate → score → stable rank → render,
                  and RecallEngine, which runs stage 1 and hands stages 2–4 to a backend:
    reference       the reference backend: every record read, one candidate at a time
    packed          the fast backend: packed postings, every candidate estimated at once
    index         the inverted index the fast backend reads (in memory for JSONL, SQLite's
                  own table)
    protocols     what an index or a scorer may offer the fast backend, one trick each
    pruning       MaxScore: skip the terms that cannot change the top (fast backend only)
    sidecar       the JSONL index persisted beside its records file, validated before use
    scorers       teaching, BM25 and BM25-with-recency scorers, each with an exact ``explain``
    analyzers     plain terms, or English stop words + Snowball stems, over the same index
    fields        a record's thread, neighbours, title and date words (in memory)
    contextual    the contextual BM25: weighted fields, neighbours, a thread score; its
                  formula also written plainly, one record at a time (the reference)
    embedding     text → unit vector: the packaged WordLlama model, or a larger one's files
    vectors       every record's vector, computed once, kept beside the index (int8)
    dense         the dense (cosine) scorer and the fused one (reciprocal-rank fusion)
    evaluation    a labeled recall set, recall@k / MRR, tune and test splits
    tool          the ``recall_history`` tool an agent calls, and the default store

Importing this package does no I/O.
"""

from labmem.recall.analyzers import (
    ANALYZERS,
    AnalyzedIndex,
    Analyzer,
    EnglishAnalyzer,
    PlainAnalyzer,
    QueryWord,
    english_stop_words,
    resolve_analyzer,
)
from labmem.recall.contextual import (
    ContextualBreakdown,
    ContextualScorer,
    ContextualTermPart,
    ThreadBonus,
    ablation_ladder,
)
from labmem.recall.dense import (
    DenseBreakdown,
    DenseScorer,
    FusedBreakdown,
    FusedRank,
    FusedScorer,
    fuse_rankings,
)
from labmem.recall.evaluation import (
    DEFAULT_KS,
    LabeledQuery,
    LabeledRecallSet,
    LabeledRecord,
    QueryOutcome,
    default_labeled_set_path,
    describe_set,
    disagreements,
    evaluate,
    load_into_store,
    load_labeled_set,
    outcomes_frame,
    parse_labeled_set,
    scorer_engines,
    summarize,
    summarize_by,
)
from labmem.recall.fields import date_words, thread_of
from labmem.recall.index import (
    InMemoryTermIndex,
    Postings,
    TermIndex,
    merge_postings,
    open_term_index,
    record_terms,
)
from labmem.recall.pipeline import (
    MAX_QUERY_TERMS,
    RecallCandidate,
    RecallEngine,
    RecallHit,
    RecallQuery,
    RecallQueryError,
    RecallResult,
    RecallScope,
    RecallScoreBreakdown,
    assemble_result,
    build_recall_candidates,
    corpus_stats,
    count_searched_records,
    normalize_recall_query,
    rank_key,
    recency_weight,
    render_recalled_context,
    render_remote_profile,
    score_recall_candidate,
    stable_rank_recall_candidates,
)
from labmem.recall.scorers import (
    BM25_B,
    BM25_K1,
    LEXICAL_WEIGHT,
    RECENCY_SCALE_DAYS,
    RECENCY_WEIGHT,
    SCORE_DECIMALS,
    SCORERS,
    Bm25RecencyScorer,
    Bm25Scorer,
    CorpusStats,
    HybridScorer,
    Scorer,
    TeachingScorer,
    bm25_idf,
    bm25_term_weight,
    resolve_scorer,
)
from labmem.recall.sqlite_store import SqliteMemoryStore
from labmem.recall.store import (
    MEMORY_ID_PATTERN,
    MemoryKind,
    MemorySource,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStore,
    RemoteMemoryValidationError,
    StoredMemory,
    derive_memory_id,
)
from labmem.recall.tool import (
    DEFAULT_SCORER,
    DEMOS,
    ENV_DATABASE_URL,
    RECALL_HISTORY_TOOL,
    TEACHING_RECORDS,
    RemoteRuntime,
    SchemaChange,
    add_teaching_records,
    check_database_url,
    default_runtime,
    given_database_url,
    manage_database,
    masked_url,
    open_database_store,
    recall_history,
)

# every name RecallEngine(store, scorer=...) and `labmem recall --scorer` accept
SCORER_NAMES: tuple[str, ...] = tuple(SCORERS)

__all__ = [
    # store and backends
    "MEMORY_ID_PATTERN", "MemoryKind", "MemorySource", "StoredMemory", "RemoteMemoryStore",
    "SqliteMemoryStore", "derive_memory_id",
    "RemoteMemoryError", "RemoteMemoryValidationError", "RemoteMemoryDuplicateError",
    "RemoteMemoryScopeError", "RemoteMemoryCorruptionError",
    # index and scorers
    "Postings", "TermIndex", "InMemoryTermIndex", "open_term_index", "record_terms",
    "merge_postings", "Scorer", "CorpusStats", "TeachingScorer", "Bm25Scorer", "Bm25RecencyScorer",
    "HybridScorer",
    "SCORERS", "resolve_scorer", "bm25_idf", "bm25_term_weight", "BM25_K1", "BM25_B",
    "LEXICAL_WEIGHT", "RECENCY_WEIGHT", "RECENCY_SCALE_DAYS", "SCORE_DECIMALS",
    "SCORER_NAMES",
    # analyzers and the contextual scorer
    "Analyzer", "PlainAnalyzer", "EnglishAnalyzer", "QueryWord", "ANALYZERS",
    "resolve_analyzer", "english_stop_words", "AnalyzedIndex", "ContextualScorer",
    "ContextualBreakdown", "ContextualTermPart", "ThreadBonus", "ablation_ladder", "thread_of",
    "date_words",
    # dense and fused recall
    "DenseScorer", "FusedScorer", "DenseBreakdown", "FusedBreakdown", "FusedRank",
    "fuse_rankings",
    # the five stages and the engine
    "RecallQuery", "RecallCandidate", "RecallScoreBreakdown", "RecallScope", "RecallHit",
    "RecallResult", "RecallQueryError", "RecallEngine", "MAX_QUERY_TERMS", "normalize_recall_query",
    "build_recall_candidates", "score_recall_candidate", "stable_rank_recall_candidates",
    "render_recalled_context", "render_remote_profile", "recency_weight", "corpus_stats",
    "rank_key", "assemble_result", "count_searched_records",
    # evaluation
    "DEFAULT_KS", "LabeledRecord", "LabeledQuery", "LabeledRecallSet", "QueryOutcome",
    "default_labeled_set_path", "load_labeled_set", "parse_labeled_set", "load_into_store",
    "scorer_engines", "evaluate", "summarize", "summarize_by", "disagreements",
    "outcomes_frame", "describe_set",
    # the agent-facing tool
    "RECALL_HISTORY_TOOL", "TEACHING_RECORDS", "DEMOS", "DEFAULT_SCORER", "RemoteRuntime",
    "default_runtime",
    "recall_history", "add_teaching_records",
    # the store on a database server (--database-url, $LABMEM_DATABASE_URL, labmem db)
    "ENV_DATABASE_URL", "given_database_url", "check_database_url", "masked_url",
    "open_database_store", "SchemaChange", "manage_database",
    # the PostgreSQL store itself (the postgres extra: imported on first use, see below)
    "PostgresMemoryStore", "LocalPostgres", "init_database", "upgrade_database",
    "schema_version",
]

# needs psycopg (the postgres extra): imported when first asked for, so that importing
# labmem.recall never requires it
_ON_POSTGRES = frozenset({"PostgresMemoryStore", "LocalPostgres", "init_database",
                          "upgrade_database", "schema_version"})


def __getattr__(name: str):
    if name in _ON_POSTGRES:
        from labmem.recall import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
