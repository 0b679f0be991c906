"""Benchmark: recall at 1k / 10k / 100k records — labmem's engines against real BM25 peers.

For each store size (default 1,000, 10,000 and 100,000 conversation records of one
user) this script

1. bulk-loads the same synthetic records once: a JSONL records file for
   :class:`~labmem.recall.store.RemoteMemoryStore` and, when ``labmem.recall.sqlite_store`` exists,
   a SQLite file through ``SqliteMemoryStore.append_many``;
2. measures every engine **in its own child process**, one after another, so that
   each reports its own memory: the child imports its library and reports its RSS
   ("import MiB": the interpreter baseline to subtract), loads or builds its index
   ("build s"), runs 5 warm-up queries, then times every query with
   ``time.perf_counter`` (p50 and p95 µs) and reports its peak RSS ("peak MiB",
   ``ru_maxrss``);
3. compares every engine's top 10 with ``labmem-jsonl/bm25`` ("∩ bm25": the mean
   share of the reference's hits that the engine also returns).

The engines:

* ``labmem-jsonl/<scorer>`` — ``RecallEngine(RemoteMemoryStore(...), scorer=...)`` for
  the teaching, bm25 and bm25_recency scorers; the first recall decodes the file and builds
  the term index, so "build s" is opening the store plus that first recall;
* ``labmem-sqlite/bm25`` — the same engine over ``SqliteMemoryStore``;
* ``rank_bm25`` — ``BM25Okapi`` (pure Python + numpy), top 10 of ``get_scores`` by
  ``numpy.argpartition``;
* ``bm25s`` — ``bm25s.BM25`` (sparse matrix of precomputed scores), ``retrieve(k=10)``;
* ``fts5`` — SQLite's full-text index, ``MATCH '"t1" OR "t2" …' ORDER BY bm25(fts)
  LIMIT 10``; built by the child (streaming the records, one transaction).

How to read it, so the ratios are not misread:

* **Tokenization is identical.** Every peer indexes labmem's own search terms
  (:func:`labmem.recall.pipeline.record_terms`: ASCII words plus CJK character bigrams, with
  repeats so term frequency counts; space-joined for FTS5, whose ``unicode61``
  tokenizer then keeps each term whole) and queries with
  :func:`labmem.core.text.extract_terms`. No built-in tokenizer of the peers makes CJK
  bigrams, so this is also what lets them answer the Chinese queries at all. Each
  peer's query time includes turning the query text into terms, as labmem's does.
* **Query semantics are identical:** any query term may match (OR); a record with
  none is never returned (peers' zero scores are dropped).
* **The BM25 flavours differ a little.** labmem's ``bm25`` and ``bm25s`` use the
  Lucene idf ``ln(1 + (N − df + ½)/(df + ½))`` with k1 = 1.2, b = 0.75 and should rank
  almost identically; ``rank_bm25`` (Okapi idf with an ε floor) and FTS5 (idf clamped
  near 0 for terms in more than half the records) weigh very common terms differently,
  and every engine breaks ties at the 10th place its own way. An overlap near 1 says
  "the same kind of ranking"; the teaching scorer (term coverage + recency) and
  bm25_recency (BM25 + recency) are *meant* to differ.
* **Memory:** ``ru_maxrss`` is a high-water mark that a child inherits from the
  process that starts it, so the parent stays small (records are generated and
  loaded by a loader child, pandas and matplotlib are imported only for the report).
  Subtract "import MiB" from "peak MiB" to get what the engine itself held.
* "÷ fts5" is an engine's p50 over FTS5's p50 at the same size, measured in the same
  run: compare ratios across machines, not microseconds.

The corpus is synthetic and deterministic (``--seed``): a 30,000-word vocabulary of
English-like pseudo-words drawn with Zipf frequencies (s = 1.07, so the commonest
words appear in nearly every record and idf matters), titles, summaries and contents
totalling ~30–80 words per record, a Chinese phrase (Zipf over 600 two-character
words) in ~10% of records, capture times spread over the year before ``as_of``. The
smaller corpora are prefixes of the larger ones. Queries (200 by default, identical at
every size) have 2–5 words, among them one rare word (rank > 2,000 — possibly absent
from a small store); ~15% carry a Chinese word. Half are *common*: they also have one of
the 100 commonest words, so most of the store is a candidate (as for a question asked
in plain language); half are *selective*: no top-100 word. The table gives p50 over
all queries and over each half — the ratio to FTS5 depends strongly on the mix.

**The cold start** (``--cold CACHE``, issue 17) is a second table: the data is generated
once into ``CACHE``; each engine builds its on-disk index in one child (labmem JSONL: the
first recall writes the sidecar; SQLite FTS5 and tantivy: their files), then a *new*
child opens it and answers one query ("open + first recall"), then times 200 queries
(steady p50/p95), and reports its own peak RSS (VmHWM). That timed child runs
``--rounds`` times (3), the engines in a rotated order each round, and the table shows the
medians: the machine drifts between processes, and one round's ratio to tantivy moved by
more than any code change did. ``labmem recall`` is timed end to
end beside ``python -c "import labmem.recall"``. Dense and fused recall (issue 36) are two
more engines there: their prepare process embeds every record and writes the vectors beside
the records, and a table of their own sets the vectors' size on disk, open + first recall,
steady p50 and peak RSS beside the contextual scorer's. The figures, every target of the issue
met or not, are in ``bench/results/recall_cold.md`` (the committed run, the other runs of
the same code beside it, and where a query's time goes) and in the README's headline; they
are not repeated here, where they would go stale. Two things to know when reading them:
between runs of identical code on a shared machine the p50 ratios move by ±30% (the
rounds narrow that, they do not remove it), so compare code versions in one process; and
the SQLite backend's file ratio is worst at small sizes, where empty 16 KiB pages and the
fixed cost of every distinct term dominate. The MMU open at 100k pages is bench/mmu.py's.

Run it::

    python bench/recall_scale.py                  # 1k, 10k, 100k; several minutes on 2 cores
    python bench/recall_scale.py --sizes 1000,10000 --queries 100
    python bench/recall_scale.py --quick --out /tmp/rs   # seconds; what the smoke test runs
    python bench/recall_scale.py --cold /tmp/labmem-recall-cache   # the cold-start table

It prints one table and writes ``recall_scale.md``, ``.json``, ``.png`` and ``.csv`` to
``--out`` (default ``bench/results``). Temporary files live in a temporary directory
(``--dir`` chooses the disk it is created on).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from itertools import accumulate
from pathlib import Path

from benchlib import (  # bench/ is on sys.path when this runs as a script; no pandas
    chinese_words,
    progress,
    pseudo_english_words,
)

from labmem.core.clock import FixedClock, format_timestamp
from labmem.core.provenance import MemorySource, scope_digest
from labmem.core.storage import encode_json_line
from labmem.core.text import extract_terms
from labmem.recall import MemoryKind, RecallEngine, RemoteMemoryStore, StoredMemory, record_terms
from labmem.recall.sidecar import sidecar_path, stamp_path

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results"
NAME = "recall_scale"

USER_ID = "bench"
NOW = "2026-08-01T12:00:00Z"  # every store's clock, and the as_of of every recall
AS_OF = FixedClock(NOW).now()
TOP_K = 10
WARMUP_QUERIES = 5
TARGET_RATIO = 2.0  # labmem's best p50 at the largest size ≤ 2 × FTS5's p50

ENGLISH_WORDS, CHINESE_WORDS = 30_000, 600
ENGLISH_ZIPF, CHINESE_ZIPF = 1.07, 1.0
TITLE_WORDS, SUMMARY_WORDS, CONTENT_WORDS = (3, 6), (6, 12), (20, 60)
CHINESE_RECORD_SHARE, CHINESE_PHRASE_WORDS = 0.10, (2, 5)
QUERY_WORDS, COMMON_RANKS, RARE_FROM_RANK = (2, 5), 100, 2_000
CHINESE_QUERY_SHARE = 0.15


LABMEM_SCORERS = ("teaching", "bm25", "bm25_recency")
REFERENCE = "labmem-jsonl/bm25"
ENGINES = (*(f"labmem-jsonl/{s}" for s in LABMEM_SCORERS), "labmem-sqlite/bm25",
           "rank_bm25", "bm25s", "fts5")
PEER_K1, PEER_B = 1.2, 0.75  # labmem's Bm25Scorer defaults, so the peers rank alike


# -- the corpus ----------------------------------------------------------------------


class Corpus:
    """Deterministic Zipf vocabulary, records and queries (everything depends on ``seed``)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(f"{seed}:vocabulary")
        self.seed = seed
        self.english = pseudo_english_words(rng, ENGLISH_WORDS, syllables=(1, 2, 2, 3, 3))
        self.chinese = chinese_words(rng, CHINESE_WORDS)
        self._english_cum = self._zipf_cumulative(len(self.english), ENGLISH_ZIPF)
        self._chinese_cum = self._zipf_cumulative(len(self.chinese), CHINESE_ZIPF)
        self.user_scope = scope_digest(USER_ID)

    @staticmethod
    def _zipf_cumulative(count: int, exponent: float) -> list[float]:
        """Cumulative weights 1/rank^s, for ``random.choices(cum_weights=...)``."""
        return list(accumulate(1.0 / rank ** exponent for rank in range(1, count + 1)))

    def _english(self, rng: random.Random, count: int) -> list[str]:
        return rng.choices(self.english, cum_weights=self._english_cum, k=count)

    def _chinese(self, rng: random.Random, count: int) -> list[str]:
        return rng.choices(self.chinese, cum_weights=self._chinese_cum, k=count)

    def draft(self, rng: random.Random, number: int) -> dict:
        """One record as ``append``'s keyword arguments (a draft for ``append_many``)."""
        title = " ".join(self._english(rng, rng.randint(*TITLE_WORDS))).title()
        summary = " ".join(self._english(rng, rng.randint(*SUMMARY_WORDS)))
        content = " ".join(self._english(rng, rng.randint(*CONTENT_WORDS))).capitalize() + "."
        if rng.random() < CHINESE_RECORD_SHARE:
            content += " " + "".join(self._chinese(rng, rng.randint(*CHINESE_PHRASE_WORDS)))
            content += "。"
        captured_at = AS_OF - timedelta(seconds=rng.randrange(365 * 86_400))
        return {
            "memory_id": f"m-{number:06d}",
            "kind": MemoryKind.CONVERSATION,
            "content": content,
            "summary": summary,
            "source": MemorySource(source_id=f"conv-{number:06d}",
                                   source_type="conversation", title=title,
                                   captured_at=captured_at),
        }

    def drafts(self, size: int) -> Iterator[dict]:
        """The first ``size`` records of one stream: smaller corpora are prefixes."""
        rng = random.Random(f"{self.seed}:records")
        return (self.draft(rng, n) for n in range(size))

    def stored(self, draft: dict) -> StoredMemory:
        """The record ``store.append(**draft)`` would store with the bench clock."""
        return StoredMemory(user_scope=self.user_scope, stored_at=AS_OF, **draft)

    def queries(self, count: int) -> list[dict[str, str]]:
        """2–5 words each, alternately "common" and "selective"; some carry a Chinese word.

        A common query has one of the 100 commonest words (as a question in plain
        language would: it matches most of the store), one rare word, the rest drawn by
        frequency. A selective query has one rare word and the rest drawn by frequency
        from below the top 100, so only the records that matter are candidates.
        """
        rng = random.Random(f"{self.seed}:queries")
        queries = []
        for number in range(count):
            kind = "common" if number % 2 == 0 else "selective"
            size = rng.randint(*QUERY_WORDS)
            words = [self.english[rng.randrange(RARE_FROM_RANK, len(self.english))]]
            if kind == "common":
                words.append(self.english[rng.randrange(COMMON_RANKS)])
            while len(words) < size:
                word = self._english(rng, 1)[0]
                if word not in words and (kind == "common"
                                          or self.english.index(word) >= COMMON_RANKS):
                    words.append(word)
            if rng.random() < CHINESE_QUERY_SHARE:
                words[-1] = self._chinese(rng, 1)[0]
            rng.shuffle(words)
            queries.append({"text": " ".join(words), "kind": kind})
        return queries


# -- what exists (the lead's and the SQLite helper's APIs land during the project) ------


def sqlite_store_class():
    """``SqliteMemoryStore`` if this labmem has the SQLite backend and can bulk-load, else None."""
    try:
        from labmem.recall import SqliteMemoryStore
    except ImportError:
        return None
    return SqliteMemoryStore if hasattr(SqliteMemoryStore, "append_many") else None


def engine_has_scorers() -> bool:
    return "scorer" in inspect.signature(RecallEngine).parameters


def fts5_available() -> bool:
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE x USING fts5(a)")
    except sqlite3.OperationalError:
        return False
    return True


def unavailable_reason(engine: str) -> str | None:
    """Why ``engine`` cannot run here, or None when it can."""
    if engine.startswith("labmem-sqlite") and sqlite_store_class() is None:
        return "labmem.recall.sqlite_store.SqliteMemoryStore.append_many not available"
    if engine.startswith("labmem") and not engine.endswith("/teaching") \
            and not engine_has_scorers():
        return "RecallEngine has no scorer= argument yet"
    if engine == "fts5" and not fts5_available():
        return "this Python's sqlite3 has no FTS5"
    for library in ("rank_bm25", "bm25s"):
        if engine == library:
            try:
                __import__(library)
            except ImportError:
                return f"{library} is not installed (pip install -e '.[bench]')"
    return None


# -- loader child: generate and bulk-load one size -----------------------------------


def load_main(size: int, seed: int, queries: int, folder: Path) -> dict:
    """Write ``records.jsonl`` (and ``records.sqlite``); return load times and corpus stats.

    The first loader also writes ``queries.json`` beside the size folders, so that the
    parent never holds the vocabulary.
    """
    corpus = Corpus(seed)
    queries_path = folder.parent / "queries.json"
    if not queries_path.exists():
        queries_path.write_text(json.dumps(corpus.queries(queries), ensure_ascii=False),
                                encoding="utf-8")
    drafts = list(corpus.drafts(size))
    stats: dict = {"records": size}

    start = time.perf_counter()
    jsonl = folder / "records.jsonl"
    if hasattr(RemoteMemoryStore, "append_many"):
        store = RemoteMemoryStore(jsonl, user_id=USER_ID, clock=FixedClock(NOW))
        store.append_many(drafts)
        stats["jsonl_loader"] = "RemoteMemoryStore.append_many"
    else:  # bulk-load by writing the store's own line format directly
        with open(jsonl, "wb") as handle:
            for draft in drafts:
                handle.write(encode_json_line(corpus.stored(draft).to_dict()))
        stats["jsonl_loader"] = "encode_json_line"
    stats["jsonl_load_s"] = time.perf_counter() - start

    store_class = sqlite_store_class()
    if store_class is not None:
        start = time.perf_counter()
        store = store_class(folder / "records.sqlite", user_id=USER_ID, clock=FixedClock(NOW))
        store.append_many(drafts)
        stats["sqlite_load_s"] = time.perf_counter() - start

    lengths, documents, cjk = [], Counter(), 0
    for draft in drafts:
        terms = record_terms(corpus.stored(draft))
        lengths.append(sum(terms.values()))
        documents.update(terms.keys())
        cjk += any(len(t) <= 2 and not t.isascii() for t in terms)
    stats |= {
        "terms_per_record_mean": sum(lengths) / size,
        "terms_per_record_min": min(lengths), "terms_per_record_max": max(lengths),
        "distinct_terms": len(documents), "records_with_cjk": cjk / size,
        "commonest_term_record_share": documents.most_common(1)[0][1] / size,
    }
    return stats


# -- engine child: build one engine, time every query --------------------------------


def peak_rss_mib() -> float:
    """This process's peak resident set size (Linux reports KiB, macOS bytes).

    Includes the high-water mark of the parent at the moment it started this child.
    """
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def own_peak_mib() -> float | None:
    """Linux only: the peak of this process's own memory (VmHWM), nothing inherited."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def iter_records(path: Path) -> Iterator[StoredMemory]:
    """Stream the JSONL records file one record at a time (peers never hold it all)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            yield StoredMemory.from_dict(json.loads(line))


def corpus_tokens(path: Path) -> tuple[list[str], list[list[str]]]:
    """Memory ids and each record's labmem terms, repeated as often as they occur."""
    ids, tokens = [], []
    for record in iter_records(path):
        ids.append(record.memory_id)
        tokens.append(list(record_terms(record).elements()))
    return ids, tokens


Search = Callable[[str], tuple[list[str], int | None]]  # query → (top ids, candidates)


def import_library(engine: str) -> None:
    """Import what the engine needs before the baseline RSS is read."""
    if engine.startswith("labmem"):
        if engine.startswith("labmem-sqlite"):
            import labmem.recall.sqlite_store  # noqa: F401
        import numpy  # noqa: F401  (labmem's scorers use it)
    elif engine in ("rank_bm25", "bm25s"):
        __import__(engine)
        import numpy  # noqa: F401


def open_labmem_store(backend: str, folder: Path):
    """The bench user's store in ``folder``: ``records.sqlite`` or ``records.jsonl``."""
    if backend == "sqlite":
        return sqlite_store_class()(folder / "records.sqlite", user_id=USER_ID,
                                    clock=FixedClock(NOW))
    return RemoteMemoryStore(folder / "records.jsonl", user_id=USER_ID, clock=FixedClock(NOW))


def open_labmem(engine: str, folder: Path) -> Search:
    backend, scorer = engine.removeprefix("labmem-").split("/")
    store = open_labmem_store(backend, folder)
    engine_ = (RecallEngine(store, scorer=scorer) if engine_has_scorers()
               else RecallEngine(store))

    def search(query: str) -> tuple[list[str], int | None]:
        result = engine_.recall(query, limit=TOP_K, as_of=AS_OF)
        return [hit.memory_id for hit in result.hits], result.candidate_records

    return search


def open_rank_bm25(folder: Path) -> Search:
    import numpy as np
    from rank_bm25 import BM25Okapi

    ids, tokens = corpus_tokens(folder / "records.jsonl")
    index = BM25Okapi(tokens, k1=PEER_K1, b=PEER_B)
    del tokens
    k = min(TOP_K, len(ids))

    def search(query: str) -> tuple[list[str], int | None]:
        scores = index.get_scores(list(extract_terms(query)))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [ids[i] for i in top if scores[i] > 0], None

    return search


def open_bm25s(folder: Path) -> Search:
    import bm25s

    ids, tokens = corpus_tokens(folder / "records.jsonl")
    index = bm25s.BM25(k1=PEER_K1, b=PEER_B, method="lucene")
    index.index(tokens, show_progress=False)
    del tokens
    k = min(TOP_K, len(ids))

    def search(query: str) -> tuple[list[str], int | None]:
        documents, scores = index.retrieve([list(extract_terms(query))], k=k,
                                           show_progress=False)
        return [ids[d] for d, s in zip(documents[0], scores[0], strict=True) if s > 0], None

    return search


FTS_QUERY = f"SELECT memory_id FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT {TOP_K}"


def match_expression(query: str) -> str:
    """``"t1" OR "t2"``: the query's labmem terms, quoted, any of them may match."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in extract_terms(query))


def open_fts5(folder: Path) -> Search:
    path = folder / "fts5.sqlite"
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")  # building is setup, not a durability test
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(memory_id UNINDEXED, terms, "
               "tokenize='unicode61')")
    db.execute("BEGIN")
    db.executemany("INSERT INTO fts (memory_id, terms) VALUES (?, ?)",
                   ((r.memory_id, " ".join(record_terms(r).elements()))
                    for r in iter_records(folder / "records.jsonl")))
    db.execute("COMMIT")

    def search(query: str) -> tuple[list[str], int | None]:
        return [row[0] for row in db.execute(FTS_QUERY, (match_expression(query),))], None

    return search


def open_engine(engine: str, folder: Path) -> Search:
    if engine.startswith("labmem"):
        return open_labmem(engine, folder)
    return {"rank_bm25": open_rank_bm25, "bm25s": open_bm25s, "fts5": open_fts5}[engine](folder)


def engine_main(engine: str, folder: Path, queries: Sequence[str]) -> dict:
    """Build ``engine`` over ``folder``'s records, warm it up, time every query.

    Returns the raw per-query seconds, top ids and candidate counts; the parent
    summarizes them (overall and per kind of query).
    """
    import_library(engine)
    import_rss, import_own = peak_rss_mib(), own_peak_mib()

    start = time.perf_counter()
    search = open_engine(engine, folder)
    search(queries[0])  # labmem builds its term index here; peers are ready already
    build_s = time.perf_counter() - start

    for query in queries[:WARMUP_QUERIES]:
        search(query)
    samples, tops, candidates = [], [], []
    for query in queries:
        start = time.perf_counter()
        ids, found = search(query)
        samples.append(time.perf_counter() - start)
        tops.append(ids)
        candidates.append(found)
    return {
        "engine": engine, "build_s": build_s,
        "import_rss_mib": import_rss, "peak_rss_mib": peak_rss_mib(),
        "import_vmhwm_mib": import_own, "peak_vmhwm_mib": own_peak_mib(),
        "seconds": samples, "top": tops, "candidates": candidates,
    }


# -- the parent ----------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    queries: int = 200
    seed: int = 7
    out: Path = DEFAULT_OUT
    workdir: Path | None = None
    command: str = "python bench/recall_scale.py"
    cold: Path | None = None
    rounds: int = 3  # --cold: each engine's timed process, this many times (rotated order)


def parse_args(argv: Sequence[str] | None) -> Settings | argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated store sizes (default 1000,10000,100000)")
    parser.add_argument("--queries", type=int, help="timed queries per engine and size (200)")
    parser.add_argument("--seed", type=int, default=Settings.seed)
    parser.add_argument("--dir", type=Path, help="create the temporary directory here")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="where recall_scale.{md,json,png,csv} go (bench/results)")
    parser.add_argument("--quick", action="store_true",
                        help="sizes 300,1000 and 20 queries (a smoke run, seconds)")
    # internal: the loader and engine children
    parser.add_argument("--cold", type=Path, metavar="CACHE",
                        help="the cold-start table instead: data generated once into CACHE "
                             "(kept), each engine's on-disk index opened by a new process")
    parser.add_argument("--rounds", type=int, default=Settings.rounds,
                        help="--cold: time each engine this many times, the engines in a "
                             "rotated order each round; the table shows the medians (3)")
    parser.add_argument("--load", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--prepare", help=argparse.SUPPRESS)
    parser.add_argument("--cold-engine", help=argparse.SUPPRESS)
    parser.add_argument("--cli", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if (args.load is not None or args.engine is not None or args.prepare is not None
            or args.cold_engine is not None or args.cli):
        return args

    sizes, queries = ((300, 1_000), 20) if args.quick else (Settings.sizes, Settings.queries)
    if args.sizes:
        try:
            sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
        except ValueError:
            parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    queries = args.queries if args.queries is not None else queries
    if not sizes or min(sizes) < TOP_K or queries < 1:
        parser.error(f"sizes must be ≥ {TOP_K} and --queries positive")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    shown = []  # the command line without machine-specific paths
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--dir", "--out"):
            skip = True
        elif not arg.startswith(("--dir=", "--out=")):
            shown.append(arg)
    shown = [a for a in shown if a != str(args.cold)]
    return Settings(sizes=tuple(sizes), queries=queries, seed=args.seed, out=args.out,
                    workdir=args.dir, command=" ".join([Settings.command, *shown]),
                    cold=args.cold, rounds=args.rounds)


def run_child(arguments: list[str], result: Path) -> dict:
    """Run this script as a child; it writes its answer as JSON to ``result``."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *arguments,
                           "--result", str(result)], capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["(no stderr)"]
        raise RuntimeError(f"child {' '.join(arguments[:2])} failed: {lines[-1]}")
    return json.loads(result.read_text())


def overlap(top: Sequence[str], reference: Sequence[str]) -> float | None:
    """Share of the reference's hits that ``top`` also has; None if the reference is empty."""
    return len(set(top) & set(reference)) / len(reference) if reference else None


Raw = dict[int, dict[str, dict]]  # size → engine → what the engine child returned


def run(settings: Settings) -> tuple[Raw, list[dict], list[dict], dict[str, str], list[str]]:
    """Every size: one loader child, then one child per available engine, in turn.

    Only raw answers are kept here; they are summarized after the last child, when
    importing pandas can no longer inflate a child's peak RSS.
    """
    skipped = {e: r for e in ENGINES if (r := unavailable_reason(e)) is not None}
    engines = [e for e in ENGINES if e not in skipped]
    raw: Raw = {}
    corpora, failures = [], []
    with tempfile.TemporaryDirectory(prefix="labmem-recall-scale-", dir=settings.workdir) as tmp:
        work = Path(tmp)
        for size in settings.sizes:
            folder = work / f"n{size}"
            folder.mkdir()
            progress(f"{size:>9,} records: generating and bulk-loading …")
            corpora.append(run_child(["--load", str(size), "--seed", str(settings.seed),
                                      "--queries", str(settings.queries),
                                      "--folder", str(folder)], folder / "load.json"))
            raw[size] = {}
            for engine in engines:
                progress(f"{size:>9,} records: {engine} …")
                try:
                    raw[size][engine] = run_child(
                        ["--engine", engine, "--folder", str(folder)],
                        folder / f"{engine.replace('/', '_')}.json")
                except RuntimeError as error:
                    failures.append(f"{size:,} records: {error}")
        queries = json.loads((work / "queries.json").read_text(encoding="utf-8"))
    return raw, queries, corpora, skipped, failures


def summarize(raw: Raw, queries: Sequence[dict]) -> list[dict]:
    """One row per size and engine: timings overall and per kind of query, ratios, overlap."""
    from benchlib import Timing  # bench/ is on sys.path when this runs as a script

    kinds = [query["kind"] for query in queries]
    rows = []
    for size, results in raw.items():
        reference = results.get(REFERENCE, {}).get("top")
        fts5 = Timing.of(results["fts5"]["seconds"]) if "fts5" in results else None
        fts5_selective = (Timing.of([t for t, k in zip(results["fts5"]["seconds"], kinds,
                                                       strict=True) if k == "selective"])
                          if fts5 else None)
        for engine, result in results.items():
            seconds = result["seconds"]
            overall = Timing.of(seconds)
            row = {"records": size, "engine": engine, "build_s": result["build_s"],
                   "p50_us": overall.p50, "p95_us": overall.p95, "mean_us": overall.mean}
            for kind in ("common", "selective"):
                mine = [t for t, k in zip(seconds, kinds, strict=True) if k == kind]
                row[f"p50_{kind}_us"] = Timing.of(mine).p50 if mine else None
                found = [c for c, k in zip(result["candidates"], kinds, strict=True)
                         if k == kind and c is not None]
                row[f"candidates_{kind}"] = sum(found) / len(found) if found else None
            row["x_fts5"] = overall.p50 / fts5.p50 if fts5 else None
            row["x_fts5_selective"] = (row["p50_selective_us"] / fts5_selective.p50
                                       if fts5 and row["p50_selective_us"] else None)
            row["overlap_bm25"] = None
            if reference is not None:
                shares = [s for mine, ref in zip(result["top"], reference, strict=True)
                          if (s := overlap(mine, ref)) is not None]
                row["overlap_bm25"] = sum(shares) / len(shares) if shares else None
            row |= {key: result[key] for key in ("import_rss_mib", "peak_rss_mib",
                                                 "import_vmhwm_mib", "peak_vmhwm_mib")}
            rows.append(row)
    return rows


# -- reporting -----------------------------------------------------------------------

# (label, key, format, markdown alignment)
COLUMNS = [
    ("records", "records", "{:,.0f}"), ("engine", "engine", "{}"),
    ("build s", "build_s", "{:,.2f}"), ("p50 µs", "p50_us", "{:,.0f}"),
    ("p95 µs", "p95_us", "{:,.0f}"), ("common p50", "p50_common_us", "{:,.0f}"),
    ("selective p50", "p50_selective_us", "{:,.0f}"),
    ("import MiB", "import_rss_mib", "{:,.0f}"), ("peak MiB", "peak_rss_mib", "{:,.0f}"),
    ("÷ fts5", "x_fts5", "{:.2f}"), ("sel ÷ fts5", "x_fts5_selective", "{:.2f}"),
    ("∩ bm25", "overlap_bm25", "{:.2f}"),
]


def cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else fmt.format(value)


def markdown_table(rows: Sequence[dict]) -> str:
    lines = ["| " + " | ".join(label for label, _, _ in COLUMNS) + " |",
             "|" + "|".join("---" if key == "engine" else "---:" for _, key, _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(row, key, fmt) for _, key, fmt in COLUMNS) + " |"
              for row in rows]
    return "\n".join(lines)


def target_line(rows: Sequence[dict], key: str = "p50_us", label: str = "target") -> str:
    """Is labmem's best engine within TARGET_RATIO × FTS5's p50 at the largest size?"""
    largest = max(row["records"] for row in rows)
    at_largest = [row for row in rows if row["records"] == largest and row[key]]
    labmem = [row for row in at_largest if row["engine"].startswith("labmem")]
    fts5 = [row for row in at_largest if row["engine"] == "fts5"]
    if not labmem or not fts5:
        return f"{label}: not measured (labmem or fts5 missing at the largest size)"
    best = min(labmem, key=lambda row: row[key])
    ratio = best[key] / fts5[0][key]
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    return (f"{label}: labmem best p50 at {largest:,} ({best['engine']}) ÷ fts5 p50 = "
            f"{ratio:.2f} (target ≤ {TARGET_RATIO:g}: {verdict})")


def library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version}
    for package in ("rank-bm25", "bm25s", "numpy"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def corpus_lines(corpora: Sequence[dict], rows: Sequence[dict]) -> list[str]:
    """Per size: what the records look like, how many candidates a query has, load times."""
    lines = []
    for c in corpora:
        size = c["records"]
        line = (f"- {size:,} records: {c['terms_per_record_mean']:.1f} terms per record "
                f"({c['terms_per_record_min']}–{c['terms_per_record_max']}), "
                f"{c['distinct_terms']:,} distinct terms, {c['records_with_cjk']:.0%} with "
                f"CJK bigrams, the commonest term in {c['commonest_term_record_share']:.0%} "
                "of records")
        counted = [r for r in rows if r["records"] == size and r["candidates_common"]]
        if counted:
            common, selective = counted[0]["candidates_common"], counted[0]["candidates_selective"]
            line += (f"; candidates per query: common {common:,.0f} ({common / size:.0%}), "
                     f"selective {selective:,.0f} ({selective / size:.1%})")
        line += f"; bulk load: JSONL {c['jsonl_load_s']:.2f} s ({c['jsonl_loader']})"
        if "sqlite_load_s" in c:
            line += f", SQLite {c['sqlite_load_s']:.2f} s (append_many)"
        lines.append(line)
    return lines


def plot(rows: Sequence[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for engine in dict.fromkeys(row["engine"] for row in rows):
        points = sorted((r["records"], r["p50_us"]) for r in rows if r["engine"] == engine)
        style = "-" if engine.startswith("labmem") else "--"
        axes.plot(*zip(*points, strict=True), style, marker="o", label=engine)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("records in the store")
    axes.set_ylabel("p50 recall latency (µs)")
    axes.set_title("Recall latency vs store size (top 10, one user)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def report(settings: Settings, rows: list[dict], corpora: list[dict],
           skipped: dict[str, str], failures: list[str], seconds: float) -> None:
    import pandas as pd
    from benchlib import render_table, write_csv  # bench/ is on sys.path as a script

    frame = pd.DataFrame(rows)
    shown = pd.DataFrame({key: [cell(row, key, fmt) for row in rows]
                          for _, key, fmt in COLUMNS})
    table = render_table(shown, [("", [(label, key, "{}") for label, key, _ in COLUMNS])])
    print(f"\nRecall: {settings.queries:,} queries per engine and size, top {TOP_K}, "
          f"after {WARMUP_QUERIES} warm-up queries; each engine in its own process")
    print("\n".join(table.splitlines()[1:]))  # the single group has no label
    for engine, reason in skipped.items():
        print(f"skipped {engine}: {reason}")
    for failure in failures:
        print(f"FAILED {failure}")
    selective = target_line(rows, "p50_selective_us", "selective queries only")
    target = target_line(rows)

    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    notes = [
        f"{settings.queries:,} queries (2–5 words, identical at every size, seed "
        f"{settings.seed}); top {TOP_K}; {WARMUP_QUERIES} warm-up queries; "
        "each engine in its own process.",
        "Half the queries are *common* (one of the 100 commonest words, which matches most "
        "of the store, as a question in plain language does), half *selective* (no top-100 "
        "word); `p50`/`p95` are over all queries, `common p50` and `selective p50` over each "
        "half. An engine whose two halves differ a lot (FTS5) has its all-query p50 "
        "between the two modes, where a few queries move it: read the halves.",
        "Compare ratios, not microseconds: `÷ fts5` is p50 over SQLite FTS5's p50 at the "
        "same size in the same run (`sel ÷ fts5`: selective queries only).",
        "All engines index labmem's own terms (ASCII words + CJK bigrams) and OR the "
        "query terms, so they search the same candidates.",
        "`∩ bm25`: mean share of labmem-jsonl/bm25's top 10 that the engine also returns "
        "(bm25s shares its idf and k1/b; rank_bm25 and FTS5 treat very common terms "
        "differently; teaching and bm25_recency are meant to differ).",
        "`peak MiB − import MiB` is the memory the engine itself held (ru_maxrss; both "
        "include the small parent's own peak, which a child inherits: the JSON also has "
        "Linux's VmHWM, which does not).",
        "`labmem-sqlite` keeps its term index in the database, built by `append_many` "
        "during the bulk load (timed below), so its `build s` is only opening it.",
        "`build s`: labmem = open the store + first recall (decode, term index); peers = "
        "read the records, make terms, build the index.",
    ]
    markdown = "\n".join([
        "# Recall at scale: labmem vs rank_bm25, bm25s and SQLite FTS5", "",
        "```", settings.command, "```", "",
        markdown_table(rows), "",
        f"**{target}**", "", f"{selective}", "",
        *[f"- {note}" for note in notes],
        *[f"- skipped {e}: {r}" for e, r in skipped.items()],
        *[f"- FAILED {f}" for f in failures], "",
        "Corpus (synthetic, Zipf word frequencies):", "",
        *corpus_lines(corpora, rows), "",
    ])
    (out / f"{NAME}.md").write_text(markdown, encoding="utf-8")
    document = {
        "command": settings.command,
        "settings": {k: v for k, v in asdict(settings).items()
                     if k not in ("out", "workdir", "command")},
        "as_of": format_timestamp(AS_OF), "top_k": TOP_K, "warmup_queries": WARMUP_QUERIES,
        "versions": library_versions(), "corpus": corpora, "results": rows,
        "skipped": skipped, "failures": failures, "target": target,
        "target_selective": selective,
        "run_seconds": round(seconds, 1),
    }
    (out / f"{NAME}.json").write_text(json.dumps(document, indent=2, ensure_ascii=False)
                                      + "\n", encoding="utf-8")
    plot(rows, out / f"{NAME}.png")
    write_csv(frame, out / f"{NAME}.csv")
    print(f"Wrote {NAME}.md, {NAME}.json and {NAME}.png beside it")
    print(f"Total run time: {seconds:.0f} s")
    print(selective)
    print(target)



# -- the cold start: every engine's persistent index, opened by a new process ----------

DENSE_ENGINES = ("labmem-jsonl/dense", "labmem-jsonl/fused")
COLD_ENGINES = ("labmem-jsonl/bm25", "labmem-jsonl/contextual", "labmem-jsonl/teaching",
                *DENSE_ENGINES, "labmem-jsonl/bm25 (no sidecar)", "labmem-sqlite/bm25", "fts5",
                "tantivy")
CLI_RUNS = 7


def prepare_main(engine: str, folder: Path) -> dict:
    """Build ``engine``'s on-disk index once (labmem: the first recall writes the sidecar)."""
    start = time.perf_counter()
    if engine == "fts5" and not (folder / "fts5.sqlite").exists():
        open_fts5(folder)
    elif engine == "tantivy" and not (folder / "tantivy").exists():
        build_tantivy(folder)
    elif engine.startswith("labmem-jsonl") and "no sidecar" not in engine:
        if engine == DENSE_ENGINES[0]:  # embed every record again: prepare_s is that cost
            for path in vector_files(folder):
                path.unlink()
        open_labmem(engine, folder)("warm the sidecar")  # dense, fused: and the vectors
    return {"engine": engine, "prepare_s": time.perf_counter() - start}


def build_tantivy(folder: Path) -> None:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("memory_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("terms", stored=False, tokenizer_name="whitespace")
    target = folder / "tantivy"
    target.mkdir()
    index = tantivy.Index(builder.build(), path=str(target))
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for record in iter_records(folder / "records.jsonl"):
        writer.add_document(tantivy.Document(memory_id=record.memory_id,
                                             terms=" ".join(record_terms(record).elements())))
    writer.commit()
    writer.wait_merging_threads()


def open_tantivy_file(folder: Path) -> Search:
    import tantivy

    index = tantivy.Index.open(str(folder / "tantivy"))
    searcher = index.searcher()

    def search(query: str) -> tuple[list[str], int | None]:
        parsed = index.parse_query(" OR ".join(extract_terms(query)), ["terms"])
        return [searcher.doc(address)["memory_id"][0]
                for _, address in searcher.search(parsed, TOP_K).hits], None

    return search


def open_fts5_file(folder: Path) -> Search:
    db = sqlite3.connect(folder / "fts5.sqlite", isolation_level=None)

    def search(query: str) -> tuple[list[str], int | None]:
        return [row[0] for row in db.execute(FTS_QUERY, (match_expression(query),))], None

    return search


def cold_main(engine: str, folder: Path, queries: Sequence[str]) -> dict:
    """In a new process: open the on-disk index, answer one query (timed together), then
    time every query; report the peak RSS (VmHWM: this process's own)."""
    if engine.startswith("labmem"):
        import labmem.recall  # noqa: F401  (what `python -c "import labmem.recall"` loads)
    elif engine == "tantivy":
        import tantivy  # noqa: F401
    import_own = own_peak_mib()
    start = time.perf_counter()
    status = None
    if engine == "fts5":
        search = open_fts5_file(folder)
    elif engine == "tantivy":
        search = open_tantivy_file(folder)
    else:
        name = engine.replace(" (no sidecar)", "")
        backend, scorer = name.removeprefix("labmem-").split("/")
        store = open_labmem_store(backend, folder)
        engine_ = RecallEngine(store, scorer=scorer)
        if "no sidecar" in engine:
            from labmem.recall.index import InMemoryTermIndex

            engine_.index = InMemoryTermIndex(store, sidecar=False)

        def search(query: str) -> tuple[list[str], int | None]:
            result = engine_.recall(query, limit=TOP_K, as_of=AS_OF)
            return [hit.memory_id for hit in result.hits], result.candidate_records
    first = search(queries[0])
    open_s = time.perf_counter() - start
    proof = vectors = None
    if engine.startswith("labmem-jsonl"):
        status = engine_.index.sidecar_status
        proof = engine_.index.sidecar_proof
    if engine in DENSE_ENGINES:
        from labmem.recall.vectors import store_vectors

        vectors = store_vectors(store).status
    for query in queries[:WARMUP_QUERIES]:
        search(query)
    samples, tops = [], []
    for query in queries:
        begin = time.perf_counter()
        ids, _ = search(query)
        samples.append(time.perf_counter() - begin)
        tops.append(ids)
    return {"engine": engine, "open_first_s": open_s, "first_hits": len(first[0]),
            "import_vmhwm_mib": import_own, "peak_vmhwm_mib": own_peak_mib(),
            "seconds": samples, "top": tops, "sidecar": status, "proof": proof,
            "vectors": vectors}


def cli_main(folder: Path, query: str) -> dict:
    """`labmem recall` end to end on this store vs `python -c "import labmem.recall"`."""
    import os
    import shutil
    import statistics

    home = folder / "cli-home"
    target = home / "remote-memory" / f"{scope_digest(USER_ID)}.jsonl"
    if not target.exists():
        target.parent.mkdir(parents=True)
        shutil.copy(folder / "records.jsonl", target)
    env = {**os.environ, "LABMEM_HOME": str(home), "LABMEM_USER_ID": USER_ID}
    script = Path(sys.executable).with_name("labmem")
    command = ([str(script)] if script.exists()
               else [sys.executable, "-m", "labmem.cli"]) + ["recall", query]
    floor = [sys.executable, "-c", "import labmem.recall"]

    def timed(argv: list[str]) -> float:
        begin = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        return time.perf_counter() - begin

    timed(command)  # the first run writes the sidecar; it is not timed
    recall, imports = [], []
    for _ in range(CLI_RUNS):  # interleaved, so load on the machine hits both alike
        recall.append(timed(command))
        imports.append(timed(floor))
    return {"cli_s": statistics.median(recall), "import_s": statistics.median(imports),
            "cli_runs": recall, "import_runs": imports}



def run_cold(settings: Settings, cache: Path) -> dict:
    """Per size: load once into ``cache`` (kept between runs), prepare every engine's
    index, then open each in a new process. Also `labmem recall` at 10,000 records."""
    from benchlib import Timing

    cache.mkdir(parents=True, exist_ok=True)
    out: dict = {"sizes": {}, "load": os.getloadavg() if hasattr(os, "getloadavg") else None}
    for size in settings.sizes:
        folder = cache / f"seed{settings.seed}" / f"n{size}"
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "load.json").exists():
            progress(f"{size:>9,} records: generating and bulk-loading into the cache …")
            run_child(["--load", str(size), "--seed", str(settings.seed), "--queries",
                       str(settings.queries), "--folder", str(folder)], folder / "load.json")
        corpus = json.loads((folder / "load.json").read_text())
        rows = {}
        for engine in COLD_ENGINES:
            tag = engine.replace("/", "_").replace(" ", "_")
            progress(f"{size:>9,} records: {engine}: prepare …")
            prepared = run_child(["--prepare", engine, "--folder", str(folder)],
                                 folder / f"prepare-{tag}.json")
            checked = None
            if engine.startswith("labmem-jsonl") and "no sidecar" not in engine:
                # first a process that checks both files in full (no stamp yet); once they
                # are settled that check leaves a stamp, which the timed processes then use
                records = folder / "records.jsonl"
                stamp_path(records).unlink(missing_ok=True)
                _wait_until_settled(records, sidecar_path(records))
                checked = run_child(["--cold-engine", engine, "--folder", str(folder),
                                     "--queries", "1"], folder / f"checked-{tag}.json")
            rows[engine] = {"prepare_s": prepared["prepare_s"],
                            "checked_open_first_s": checked and checked["open_first_s"],
                            "checked_proof": checked and checked.get("proof")}
        colds: dict[str, list[dict]] = {engine: [] for engine in COLD_ENGINES}
        for turn in range(settings.rounds):
            # the machine drifts between processes: each round starts one engine later
            start = turn % len(COLD_ENGINES)
            for engine in (*COLD_ENGINES[start:], *COLD_ENGINES[:start]):
                tag = engine.replace("/", "_").replace(" ", "_")
                progress(f"{size:>9,} records: {engine}: cold open, round {turn + 1} …")
                warm_page_cache(engine_files(engine, folder))
                colds[engine].append(run_child(
                    ["--cold-engine", engine, "--folder", str(folder), "--queries",
                     str(settings.queries)], folder / f"cold-{tag}.json"))
        for engine, runs in colds.items():
            timings = [Timing.of(cold["seconds"]) for cold in runs]
            rows[engine].update({
                "open_first_s": statistics.median(c["open_first_s"] for c in runs),
                "p50_us": statistics.median(t.p50 for t in timings),
                "p95_us": statistics.median(t.p95 for t in timings),
                "peak_mib": max(c["peak_vmhwm_mib"] for c in runs),
                "import_mib": max(c["import_vmhwm_mib"] for c in runs),
                "sidecar": runs[0]["sidecar"], "proof": runs[0].get("proof"),
                "vectors": runs[0].get("vectors"),
                "top": runs[0]["top"],
                "rounds": [{"open_first_s": c["open_first_s"], "p50_us": t.p50,
                            "p95_us": t.p95, "peak_mib": c["peak_vmhwm_mib"],
                            "proof": c.get("proof")} for c, t in zip(runs, timings,
                                                                     strict=True)]})
        sizes = {"jsonl_bytes": (folder / "records.jsonl").stat().st_size,
                 "sqlite_bytes": _sqlite_bytes(folder / "records.sqlite"),
                 "sidecar_bytes": (folder / "records.jsonl.recall-index").stat().st_size,
                 "fts5_bytes": (folder / "fts5.sqlite").stat().st_size,
                 "vectors_bytes": sum(p.stat().st_size for p in vector_files(folder))}
        entry = {"corpus": corpus, "engines": rows, "files": sizes}
        if size == 10_000 or size == min(settings.sizes):
            progress(f"{size:>9,} records: `labmem recall` end to end …")
            entry["cli"] = run_child(["--cli", "--folder", str(folder)], folder / "cli.json")
        out["sizes"][size] = entry
    out["load_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    return out


def engine_files(engine: str, folder: Path) -> list[Path]:
    """The files ``engine`` reads to answer: its index, and for labmem the records too
    (hits are decoded from their lines)."""
    if engine == "tantivy":
        return sorted(p for p in (folder / "tantivy").rglob("*") if p.is_file())
    if engine == "fts5":
        return [folder / "fts5.sqlite"]
    if engine.startswith("labmem-sqlite"):
        return [p for p in (folder / "records.sqlite", folder / "records.sqlite-wal")
                if p.exists()]
    records = folder / "records.jsonl"
    if "no sidecar" in engine:
        return [records]
    vectors = vector_files(folder) if engine in DENSE_ENGINES else []
    return [records, *sorted(folder.glob("records.jsonl.recall-index*")), *vectors]


def vector_files(folder: Path) -> list[Path]:
    """The stored vectors beside the records (one file per model and encoding)."""
    return sorted(folder.glob("records.jsonl.vectors-*"))


def warm_page_cache(paths: Sequence[Path]) -> None:
    """Read ``paths`` once, so the timed process finds them in the page cache. This
    machine does not keep file pages cached for long: reading a random record's line of
    the 100k file took 20 µs before the file was read whole, 2.9 µs after (measured
    minutes after other runs had read it). Every engine's files are read the same way
    just before its timed process: the bench measures the engines, not the disk."""
    for path in paths:
        with open(path, "rb") as handle:
            while handle.read(1 << 20):
                pass


def _wait_until_settled(*paths: Path) -> None:
    """Sleep until every file's modification time is older than the sidecar's SETTLED_NS
    (a stamp is only written for files that old; see labmem.recall.sidecar)."""
    import labmem.recall.sidecar as sidecar

    for path in paths:
        age = time.time_ns() - path.stat().st_mtime_ns
        if age < sidecar.SETTLED_NS + 100_000_000:
            time.sleep((sidecar.SETTLED_NS + 100_000_000 - age) / 1e9)


def _sqlite_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def rounds_table(result: dict) -> list[str]:
    """Each round's steady p50 per engine at each size, and its ratio to tantivy's p50 in
    the same round (the drift of the machine between rounds shows in both)."""
    rounds = max(len(row.get("rounds", ())) for entry in result["sizes"].values()
                 for row in entry["engines"].values())
    lines = ["Steady p50 µs in each round (÷ tantivy's in that round):", "",
             "| records | engine | " + " | ".join(f"round {n + 1}" for n in range(rounds))
             + " |", "|---:|---|" + "---:|" * rounds]
    for size, entry in result["sizes"].items():
        rows = entry["engines"]
        tantivy = [r["p50_us"] for r in rows["tantivy"].get("rounds", ())]
        for engine, row in rows.items():
            cells = []
            for n, turn in enumerate(row.get("rounds", ())):
                ratio = ("" if engine == "tantivy" or n >= len(tantivy)
                         else f" (×{turn['p50_us'] / tantivy[n]:.2f})")
                cells.append(f"{turn['p50_us']:,.0f}{ratio}")
            lines.append(f"| {int(size):,} | {engine} | " + " | ".join(cells) + " |")
    return lines


def dense_table(result: dict) -> list[str]:
    """Dense and fused recall beside the contextual scorer (issue 36): the vectors on disk,
    open + first recall, steady p50 and peak RSS, each with its ratio to the contextual
    scorer's in this run."""
    lines = ["Dense and fused beside the contextual scorer (issue 36), medians of this run; "
             "`prepare s`: for dense, the process that embedded every record and wrote the "
             "vectors (any vectors file of an earlier run removed first); fused's then finds "
             "them, and the contextual scorer's finds its sidecar; `× ctx` is the ratio to "
             "labmem-jsonl/contextual:", "",
             "| records | engine | vectors MiB | prepare s | open + first recall s | × ctx | "
             "checked in full s | steady p50 µs | × ctx | peak MiB | × ctx | vectors |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for size, entry in result["sizes"].items():
        rows, vectors = entry["engines"], entry["files"].get("vectors_bytes", 0) / 2**20
        base = rows["labmem-jsonl/contextual"]
        for engine in ("labmem-jsonl/contextual", *DENSE_ENGINES):
            row = rows[engine]
            checked = row.get("checked_open_first_s")
            lines.append(
                f"| {int(size):,} | {engine} | "
                f"{'—' if engine not in DENSE_ENGINES else f'{vectors:.1f}'} | "
                f"{row['prepare_s']:.2f} | {row['open_first_s']:.3f} | "
                f"×{row['open_first_s'] / base['open_first_s']:.2f} | "
                f"{'—' if checked is None else f'{checked:.3f}'} | {row['p50_us']:,.0f} | "
                f"×{row['p50_us'] / base['p50_us']:.2f} | {row['peak_mib']:.0f} | "
                f"×{row['peak_mib'] / base['peak_mib']:.2f} | {row.get('vectors') or '—'} |")
    return lines


def report_cold(settings: Settings, result: dict) -> str:
    lines = ["# Recall from a cold start: persistent indexes opened by a new process", "",
             "```", settings.command, "```", "",
             "Each engine's files are read once just before its timed process (they are "
             "then in the page cache, not on disk, for every engine alike). Every engine's "
             f"timed process ran {settings.rounds} times, the engines in a rotated order each "
             "round; the table shows the medians (peak MiB: the largest), the rounds are "
             "listed below it.", "",
             "| records | engine | open + first recall s | checked in full s | steady p50 µs | "
             "p95 µs | peak MiB | import MiB | sidecar |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    targets = []
    for size, entry in result["sizes"].items():
        rows = entry["engines"]
        for engine, row in rows.items():
            checked = row.get("checked_open_first_s")
            sidecar = row["sidecar"] or "—"
            if row.get("proof"):
                sidecar += f" ({row['proof']})"
            lines.append(f"| {int(size):,} | {engine} | {row['open_first_s']:.3f} | "
                         f"{'—' if checked is None else f'{checked:.3f}'} | "
                         f"{row['p50_us']:,.0f} | {row['p95_us']:,.0f} | "
                         f"{row['peak_mib']:.0f} | {row['import_mib']:.0f} | {sidecar} |")
        fts, tan = rows["fts5"], rows["tantivy"]
        files = entry["files"]

        def check(label, value, limit, size=size):
            targets.append(f"- {int(size):,}: {label} = {value:.2f} (target ≤ {limit:g}: "
                           f"{'met' if value <= limit else 'NOT met'})")

        for engine in ("labmem-jsonl/bm25", "labmem-jsonl/contextual", "labmem-jsonl/teaching"):
            check(f"{engine} open + first ÷ fts5's", rows[engine]["open_first_s"]
                  / fts["open_first_s"], 4)
            if rows[engine].get("checked_open_first_s"):
                check(f"{engine} open + first, both files checked in full, ÷ fts5's",
                      rows[engine]["checked_open_first_s"] / fts["open_first_s"], 4)
            check(f"{engine} peak RSS ÷ fts5's", rows[engine]["peak_mib"] / fts["peak_mib"], 2)
            check(f"{engine} steady p50 ÷ tantivy's", rows[engine]["p50_us"] / tan["p50_us"], 3)
        check("labmem-sqlite file ÷ JSONL file", files["sqlite_bytes"] / files["jsonl_bytes"],
              1.5)
        sqlite = rows["labmem-sqlite/bm25"]
        check("labmem-sqlite p95 ÷ its p50", sqlite["p95_us"] / sqlite["p50_us"], 3)
        if "cli" in entry:
            cli = entry["cli"]
            check(f"`labmem recall` ({cli['cli_s']:.3f} s) ÷ `python -c \"import "
                  f"labmem.recall\"` ({cli['import_s']:.3f} s)", cli["cli_s"] / cli["import_s"],
                  1.5)
        lines += ["", f"Files at {int(size):,}: JSONL {files['jsonl_bytes'] / 2**20:.1f} MiB, "
                  f"its sidecar {files['sidecar_bytes'] / 2**20:.1f} MiB, its vectors "
                  f"{files.get('vectors_bytes', 0) / 2**20:.1f} MiB, labmem SQLite "
                  f"{files['sqlite_bytes'] / 2**20:.1f} MiB, FTS5 "
                  f"{files['fts5_bytes'] / 2**20:.1f} MiB."]
    lines += ["", "Targets (issue 17), as ratios of the medians in this run:", "", *targets,
              "", *dense_table(result), "", *rounds_table(result), "",
              f"- Load average (1, 5, 15 min) before: {result['load']}, after: "
              f"{result['load_after']} — a 2-CPU machine shared with other work.",
              "- Each engine runs in two child processes: one builds its on-disk index "
              "(labmem: the first recall writes the sidecar; fts5 and tantivy: their files), "
              "then a new one opens it: `open + first recall` is timed after the imports "
              "(what `import MiB` measures), `peak MiB` is that process's own VmHWM.",
              "- `labmem-jsonl/dense` and `labmem-jsonl/fused`: the prepare process's first "
              "recall embeds every record (the packaged WordLlama model) and writes the "
              "vectors beside the records (`records.jsonl.vectors-…`, int8 with one scale "
              "per record); a new process loads them, checked against the records like the "
              "sidecar, and loads the model to embed the query: both are in `open + first "
              "recall`. `fused` also opens the contextual scorer's index.",
              "- `labmem-jsonl/bm25 (no sidecar)` is the previous behaviour: the whole file "
              "decoded, validated and tokenized by every new process.",
              "- `checked in full`: a new process with no stamp beside the sidecar, which "
              "reads both files whole to check their CRC-32s (what the first open after a "
              "write pays). `open + first recall`: the next process, which finds the stamp "
              "that check left (the two files' identity, size and modification time; "
              "labmem.recall.sidecar) and reads neither file whole.",
              "- The MMU's open (item 4) is not measured here: bench/mmu.py owns it."]
    return "\n".join(lines) + "\n"

def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    if isinstance(settings, argparse.Namespace):  # a child
        args = settings
        if args.load is not None:
            answer = load_main(args.load, args.seed, args.queries, args.folder)
        elif args.prepare is not None:
            answer = prepare_main(args.prepare, args.folder)
        elif args.cold_engine is not None:
            queries = json.loads((args.folder.parent / "queries.json").read_text("utf-8"))
            answer = cold_main(args.cold_engine, args.folder,
                               [q["text"] for q in queries][:args.queries])
        elif args.cli:
            queries = json.loads((args.folder.parent / "queries.json").read_text("utf-8"))
            answer = cli_main(args.folder, queries[0]["text"])
        else:
            queries = json.loads((args.folder.parent / "queries.json").read_text("utf-8"))
            answer = engine_main(args.engine, args.folder, [q["text"] for q in queries])
        args.result.write_text(json.dumps(answer, ensure_ascii=False), encoding="utf-8")
        return 0
    started = time.perf_counter()
    if settings.cold is not None:
        result = run_cold(settings, settings.cold)
        text = report_cold(settings, result)
        print(text)
        settings.out.mkdir(parents=True, exist_ok=True)
        (settings.out / "recall_cold.md").write_text(text, encoding="utf-8")
        for entry in result["sizes"].values():
            for row in entry["engines"].values():
                row.pop("top")
        (settings.out / "recall_cold.json").write_text(json.dumps(result, indent=1) + "\n",
                                                      encoding="utf-8")
        return 0
    raw, queries, corpora, skipped, failures = run(settings)
    rows = summarize(raw, queries)
    if not rows:
        print("no engine ran", *failures, sep="\n", file=sys.stderr)
        return 1
    report(settings, rows, corpora, skipped, failures, time.perf_counter() - started)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
