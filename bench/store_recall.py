"""Benchmark: labmem's remote store and recall engine against real peers.

For each store size (default 1,000, 10,000 and 100,000 records) this script

1. bulk-loads the same synthetic records into three places: labmem's JSONL records
   file, a SQLite table with a PRIMARY KEY on ``memory_id``, and a SQLite FTS5 index;
2. opens a fresh :class:`RemoteMemoryStore` on the file and times its first read
   (decode every line, build the id index) — the "open" column;
3. times 1,000 recalls, the same queries for both engines: labmem's
   :class:`RecallEngine` against an FTS5 ``MATCH`` query ranked by ``bm25``;
4. times a *new* store instance's first append, before any read ("first append, new
   instance"), beside a new SQLite connection's first durable ``INSERT``: the recalls
   left the recall sidecar beside the file, and the append takes the ids it vouches for
   instead of decoding every line (what "open ms" costs);
5. times 1,000 appends of new records, interleaved record by record across three
   writers so that disk noise hits all of them alike:

   * ``labmem``  — ``store.append``: validate, take the cross-process file lock, catch
     up with the file, check the id is new, ``os.write`` one line on an ``O_APPEND``
     descriptor, ``fsync``;
   * ``bare``    — the same line bytes written with ``os.write`` + ``os.fsync`` on one
     descriptor kept open: no lock, no checks, no encoding — the physical limit of
     this disk for one durable line;
   * ``sqlite``  — one ``INSERT`` + ``COMMIT`` per record with ``journal_mode=DELETE``
     and ``synchronous=FULL`` (durable like labmem), into a table whose PRIMARY KEY
     plays the part of labmem's duplicate check.

The claim under test: **per-append cost stays flat as the store grows**, because an
append reads only the bytes appended since its last read (the "bytes read /append"
column, 0 for a single writer), never the whole file.

About the peers, so the ratios are read correctly:

* FTS5 uses the ``unicode61`` tokenizer over labmem's own search terms (ASCII words
  and CJK character bigrams, from :func:`labmem.recall.pipeline.record_terms`), written as
  space-separated tokens. Neither built-in tokenizer makes CJK bigrams (``unicode61``
  keeps a run of ideographs as one token, ``trigram`` needs three characters), so
  feeding both engines the same terms is what makes their candidate sets identical
  — the script checks that they are. The FTS5 timing includes turning the query into
  terms and a ``MATCH`` expression (``"t1" OR "t2"``), as labmem's does; its
  "build ms" (load time) includes computing those terms, as labmem's first query does.
* The two rankers differ: labmem scores term coverage plus recency in Python,
  FTS5 computes ``bm25`` in C. Both must visit every candidate, so both slow down as
  candidate sets grow with the store.

The corpus is synthetic and deterministic (``--seed``): English-like pseudo-words
from syllables (a real word list is not something we can ship), drawn uniformly so
that no word is a stop word, plus short Chinese phrases in some records. Queries are
1–3 words, some Chinese, and identical at every size.

Run it (``make bench`` does the first)::

    python bench/store_recall.py                      # 1k, 10k, 100k; about a minute on 2 cores
    python bench/store_recall.py --sizes 1000,10000 --appends 500 --recalls 500
    python bench/store_recall.py --quick              # seconds; what the smoke test runs

It prints two tables (appends, recalls) and writes every column to
``bench/results/store_recall.csv``. All files live in a temporary directory
(``--dir`` chooses the disk it is created on). Timings use ``time.perf_counter``;
they are wall-clock numbers for this machine only — compare the ratios, not the µs.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
from benchlib import (  # bench/ is on sys.path when this runs as a script
    COUNT,
    MS,
    RATIO,
    US,
    Columns,
    Timing,
    chinese_words,
    progress,
    pseudo_english_words,
    render_table,
    seconds_since,
    write_csv,
)

from labmem.core.clock import UTC, FixedClock
from labmem.core.provenance import MemorySource, scope_digest
from labmem.core.storage import encode_json_line
from labmem.core.text import extract_terms
from labmem.recall import MemoryKind, RecallEngine, RemoteMemoryStore, StoredMemory, record_terms

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DEFAULT_CSV = BENCH_DIR / "results" / "store_recall.csv"

USER_ID = "bench"
NOW = "2026-08-01T12:00:00Z"  # the FixedClock every store runs on
CAPTURE_START = datetime(2025, 8, 1, tzinfo=UTC)  # captured_at spans one year
RECALL_LIMIT = 5
FLAT_THRESHOLD = 1.5  # "flat": median append at the largest size < 1.5 × the smallest

ENGLISH_WORDS = 3_000
CHINESE_WORDS = 400
CHINESE_RECORD_SHARE = 0.3  # records with a Chinese phrase
CHINESE_QUERY_SHARE = 0.2  # queries with a Chinese word
CONTENT_CHARS, SUMMARY_CHARS = 200, 60



# -- settings ------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What to run: store sizes, how many timed operations per size, where to write."""

    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    appends: int = 1_000
    recalls: int = 1_000
    seed: int = 12
    csv_path: Path | None = DEFAULT_CSV
    workdir: Path | None = None  # None: the system's temporary directory


def parse_args(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated store sizes (default 1000,10000,100000)")
    parser.add_argument("--appends", type=int, help="timed appends per size (default 1000)")
    parser.add_argument("--recalls", type=int, help="timed recalls per size (default 1000)")
    parser.add_argument("--quick", action="store_true",
                        help="sizes 200,1000 with 50 appends and 50 recalls (a smoke run)")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="where to write the CSV")
    parser.add_argument("--no-csv", action="store_true", help="print only")
    parser.add_argument("--dir", type=Path, help="create the temporary directory here")
    args = parser.parse_args(argv)

    if args.quick:
        sizes, appends, recalls = (200, 1_000), 50, 50
    else:
        sizes, appends, recalls = Settings.sizes, Settings.appends, Settings.recalls
    if args.sizes:
        try:
            sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
        except ValueError:
            parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    settings = Settings(
        sizes=tuple(sizes),
        appends=args.appends if args.appends is not None else appends,
        recalls=args.recalls if args.recalls is not None else recalls,
        seed=args.seed,
        csv_path=None if args.no_csv else args.csv,
        workdir=args.dir,
    )
    if not settings.sizes or min(settings.sizes) < 1 or settings.appends < 1 \
            or settings.recalls < 1:
        parser.error("sizes, --appends and --recalls must be positive")
    return settings


class Corpus:
    """Deterministic vocabulary, records and queries (everything depends on ``seed``)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.seed = seed
        self.english = pseudo_english_words(rng, ENGLISH_WORDS)
        self.chinese = chinese_words(rng, CHINESE_WORDS)
        self.user_scope = scope_digest(USER_ID)
        self.stored_at = FixedClock(NOW).now()

    # text pieces

    def _words_until(self, rng: random.Random, min_chars: int) -> str:
        words: list[str] = []
        length = 0
        while length < min_chars:
            word = rng.choice(self.english)
            words.append(word)
            length += len(word) + 1
        return " ".join(words)

    def _chinese_phrase(self, rng: random.Random) -> str:
        return "".join(rng.choices(self.chinese, k=rng.randint(2, 4)))

    def memory(self, rng: random.Random, memory_id: str, number: int) -> StoredMemory:
        """One conversation record, built exactly as ``store.append`` would build it."""
        content = self._words_until(rng, CONTENT_CHARS).capitalize() + "."
        if rng.random() < CHINESE_RECORD_SHARE:
            content += " " + self._chinese_phrase(rng) + "。"
        captured_at = CAPTURE_START + timedelta(seconds=rng.randrange(365 * 86_400))
        return StoredMemory(
            memory_id=memory_id,
            user_scope=self.user_scope,
            kind=MemoryKind.CONVERSATION,
            content=content,
            summary=self._words_until(rng, SUMMARY_CHARS),
            source=MemorySource(
                source_id=f"conv-{number:06d}",
                source_type="conversation",
                title=" ".join(rng.choice(self.english) for _ in range(3)).title(),
                captured_at=captured_at,
            ),
            stored_at=self.stored_at,
        )

    def memories(self, size: int, prefix: str, salt: str) -> list[StoredMemory]:
        """``size`` records with ids ``{prefix}-000000`` …; ``salt`` picks the random stream."""
        rng = random.Random(f"{self.seed}:{salt}")
        return [self.memory(rng, f"{prefix}-{n:06d}", n) for n in range(size)]

    def queries(self, count: int) -> list[str]:
        """``count`` recall queries: 1–3 English words, or a Chinese word (alone or mixed)."""
        rng = random.Random(f"{self.seed}:queries")
        queries = []
        for _ in range(count):
            if rng.random() < CHINESE_QUERY_SHARE:
                words = [rng.choice(self.chinese)]
                if rng.random() < 0.5:
                    words.append(rng.choice(self.english))
            else:
                words = rng.sample(self.english, rng.randint(1, 3))
            queries.append(" ".join(words))
        return queries


# -- the three stores ----------------------------------------------------------------

SQLITE_COLUMNS = ("memory_id", "user_scope", "kind", "content", "summary", "source_id",
                  "source_type", "title", "captured_at", "stored_at")
SQLITE_INSERT = (f"INSERT INTO memories ({', '.join(SQLITE_COLUMNS)}) "
                 f"VALUES ({', '.join('?' * len(SQLITE_COLUMNS))})")
FTS_QUERY = ("SELECT memory_id, bm25(fts) FROM fts WHERE fts MATCH ? "
             f"ORDER BY bm25(fts) LIMIT {RECALL_LIMIT}")


def write_jsonl(path: Path, records: Iterable[StoredMemory]) -> None:
    """Bulk-load: write the records file directly, in the store's own line format."""
    with open(path, "wb") as handle:
        for record in records:
            handle.write(encode_json_line(record.to_dict()))


def sqlite_row(record: StoredMemory) -> tuple[str, ...]:
    """The record as a row of the ``memories`` table (the same strings labmem stores)."""
    d = record.to_dict()
    source = d["source"]
    return (d["memory_id"], d["user_scope"], d["kind"], d["content"], d["summary"],
            source["source_id"], source["source_type"], source["title"],
            source["captured_at"], d["stored_at"])


def create_sqlite(path: Path, records: Sequence[StoredMemory]) -> sqlite3.Connection:
    """Bulk-load the append peer in one transaction, then switch it to durable commits."""
    db = sqlite3.connect(path, isolation_level=None)  # autocommit: we write BEGIN/COMMIT
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("PRAGMA synchronous=OFF")  # loading is setup, not measured
    db.execute("CREATE TABLE memories (memory_id TEXT PRIMARY KEY, user_scope TEXT, "
               "kind TEXT, content TEXT, summary TEXT, source_id TEXT, source_type TEXT, "
               "title TEXT, captured_at TEXT, stored_at TEXT)")
    db.execute("BEGIN")
    db.executemany(SQLITE_INSERT, (sqlite_row(r) for r in records))
    db.execute("COMMIT")
    db.execute("PRAGMA synchronous=FULL")
    return db


def fts5_available() -> bool:
    """Some Python builds ship a sqlite3 without FTS5; then the fts5 columns are skipped."""
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE x USING fts5(a)")
    except sqlite3.OperationalError:
        return False
    return True


def fts_document(record: StoredMemory) -> str:
    """The record's labmem search terms (with repeats, so bm25 sees term frequency)."""
    return " ".join(record_terms(record).elements())


def match_expression(query: str) -> str:
    """``"t1" OR "t2"``: the query's labmem terms, quoted, any of them may match."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in extract_terms(query))


def create_fts(path: Path, records: Sequence[StoredMemory]) -> sqlite3.Connection:
    """Build the recall peer: an FTS5 table over the same records' terms."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(memory_id UNINDEXED, terms, "
               "tokenize='unicode61')")
    db.execute("BEGIN")
    db.executemany("INSERT INTO fts (memory_id, terms) VALUES (?, ?)",
                   ((r.memory_id, fts_document(r)) for r in records))
    db.execute("COMMIT")
    db.close()
    return sqlite3.connect(path)  # a fresh connection, so its first query is a cold one


# -- measuring -----------------------------------------------------------------------


def time_recalls(engine: RecallEngine, fts: sqlite3.Connection | None,
                 queries: Sequence[str]) -> dict[str, float]:
    """Warm-up (first query) and steady-state timings of both recall engines."""
    start = time.perf_counter()
    engine.recall(queries[0], limit=RECALL_LIMIT)  # builds the term index over the store
    row = {"labmem_index_ms": seconds_since(start) * 1e3}

    samples, candidates = [], 0
    for query in queries:
        start = time.perf_counter()
        result = engine.recall(query, limit=RECALL_LIMIT)
        samples.append(seconds_since(start))
        candidates += result.candidate_records
    labmem = Timing.of(samples)
    row |= {"recall_mean_us": labmem.mean, "recall_p95_us": labmem.p95,
            "avg_candidates": candidates / len(queries)}
    if fts is None:
        return row

    start = time.perf_counter()
    fts.execute(FTS_QUERY, (match_expression(queries[0]),)).fetchall()
    row["fts5_first_ms"] = seconds_since(start) * 1e3
    samples = []
    for query in queries:
        start = time.perf_counter()
        fts.execute(FTS_QUERY, (match_expression(query),)).fetchall()
        samples.append(seconds_since(start))
    peer = Timing.of(samples)
    row |= {"fts5_mean_us": peer.mean, "fts5_p95_us": peer.p95,
            "recall_x_fts5": labmem.mean / peer.mean}
    return row


def check_same_candidates(engine: RecallEngine, fts: sqlite3.Connection,
                          queries: Sequence[str]) -> None:
    """Both engines must find the same candidate records, or the comparison is unfair."""
    for query in queries:
        ours = engine.recall(query, limit=RECALL_LIMIT).candidate_records
        (theirs,) = fts.execute("SELECT count(*) FROM fts WHERE fts MATCH ?",
                                (match_expression(query),)).fetchone()
        if ours != theirs:
            raise RuntimeError(f"query {query!r}: labmem found {ours} candidates, "
                               f"FTS5 found {theirs}")


def time_appends(store: RemoteMemoryStore, bare_path: Path, db: sqlite3.Connection,
                 records: Sequence[StoredMemory]) -> dict[str, float]:
    """Append every record with all three writers, interleaved, one record at a time."""
    labmem, bare, sqlite = [], [], []
    lines = [encode_json_line(r.to_dict()) for r in records]
    rows = [sqlite_row(r) for r in records]
    read_before = store.bytes_read
    fd = os.open(bare_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for record, line, row in zip(records, lines, rows, strict=True):
            start = time.perf_counter()
            store.append(kind=record.kind, content=record.content, summary=record.summary,
                         source=record.source, memory_id=record.memory_id)
            labmem.append(seconds_since(start))

            start = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            bare.append(seconds_since(start))

            start = time.perf_counter()
            db.execute("BEGIN")
            db.execute(SQLITE_INSERT, row)
            db.execute("COMMIT")
            sqlite.append(seconds_since(start))
    finally:
        os.close(fd)
    bytes_read = store.bytes_read - read_before
    check_same_bytes(store.path, bare_path)

    ours, floor, peer = Timing.of(labmem), Timing.of(bare), Timing.of(sqlite)
    return {
        "append_mean_us": ours.mean, "append_p50_us": ours.p50, "append_p95_us": ours.p95,
        "bare_mean_us": floor.mean, "bare_p95_us": floor.p95,
        "sqlite_mean_us": peer.mean, "sqlite_p95_us": peer.p95,
        "append_x_bare": ours.mean / floor.mean, "append_x_sqlite": ours.mean / peer.mean,
        "bytes_read_per_append": bytes_read / len(records),
    }


def check_same_bytes(records_path: Path, bare_path: Path) -> None:
    """The bare loop must have written exactly the bytes labmem appended."""
    bare = bare_path.read_bytes()
    with open(records_path, "rb") as handle:
        handle.seek(-len(bare), os.SEEK_END)
        if handle.read() != bare:
            raise RuntimeError("the bare loop wrote different bytes than labmem appended")


def bench_size(size: int, settings: Settings, corpus: Corpus, queries: Sequence[str],
               folder: Path, with_fts: bool) -> dict[str, float]:
    """One row of the results: load, open, recall and append at one store size."""
    folder.mkdir()
    progress(f"{size:>9,} records: generating and bulk-loading …")
    records = corpus.memories(size, prefix=f"m{size}", salt=f"bulk:{size}")
    new_records = corpus.memories(settings.appends, prefix=f"new{size}", salt=f"new:{size}")

    write_jsonl(folder / "records.jsonl", records)
    db = create_sqlite(folder / "peer.sqlite", records)
    fts = None
    row: dict[str, float] = {"records": size}
    if with_fts:
        start = time.perf_counter()
        fts = create_fts(folder / "fts.sqlite", records)
        row["fts5_build_ms"] = seconds_since(start) * 1e3

    progress(f"{size:>9,} records: opening the store …")
    start = time.perf_counter()
    store = RemoteMemoryStore(folder / "records.jsonl", user_id=USER_ID, clock=FixedClock(NOW))
    loaded = len(store)  # the first read decodes every line and builds the id index
    row["open_ms"] = seconds_since(start) * 1e3
    if loaded != size:
        raise RuntimeError(f"the store holds {loaded} records, expected {size}")

    progress(f"{size:>9,} records: {len(queries):,} recalls …")
    engine = RecallEngine(store)
    row |= time_recalls(engine, fts, queries)
    if fts is not None:
        check_same_candidates(engine, fts, queries[:25])
        fts.close()

    progress(f"{size:>9,} records: a new instance's first append …")
    row |= time_first_append(folder, corpus.memories(1, prefix=f"first{size}",
                                                     salt=f"first:{size}")[0])

    progress(f"{size:>9,} records: {len(new_records):,} appends × 3 writers …")
    row |= time_appends(store, folder / "bare.jsonl", db, new_records)
    (total,) = db.execute("SELECT count(*) FROM memories").fetchone()
    db.close()
    if len(store) != size + 1 + len(new_records) or total != len(store):
        raise RuntimeError("an append went missing")
    return row


def time_first_append(folder: Path, record: StoredMemory) -> dict[str, float]:
    """A new store instance's first append, before any read, beside a new SQLite
    connection's first durable INSERT. The recalls before it left the recall sidecar (at
    1,000 records or more), whose ids the append takes instead of decoding every line."""
    start = time.perf_counter()
    fresh = RemoteMemoryStore(folder / "records.jsonl", user_id=USER_ID, clock=FixedClock(NOW))
    fresh.append(kind=record.kind, content=record.content, summary=record.summary,
                 source=record.source, memory_id=record.memory_id)
    ours = seconds_since(start)
    read = fresh.bytes_read
    start = time.perf_counter()
    db = sqlite3.connect(folder / "peer.sqlite", isolation_level=None)
    db.execute("PRAGMA synchronous=FULL")
    db.execute("BEGIN")
    db.execute(SQLITE_INSERT, sqlite_row(record))
    db.execute("COMMIT")
    db.close()
    peer = seconds_since(start)
    return {"first_append_ms": ours * 1e3, "first_append_bytes_read": read,
            "sqlite_first_insert_ms": peer * 1e3}


# -- reporting -----------------------------------------------------------------------

APPEND_TABLE: Columns = [
    ("store", [("records", "records", COUNT), ("open ms", "open_ms", MS)]),
    ("first append, new instance", [("ms", "first_append_ms", MS),
                                    ("bytes read", "first_append_bytes_read", COUNT),
                                    ("sqlite ms", "sqlite_first_insert_ms", MS)]),
    ("labmem append", [("mean", "append_mean_us", US), ("p50", "append_p50_us", US),
                       ("p95", "append_p95_us", US)]),
    ("bare O_APPEND", [("mean", "bare_mean_us", US), ("p95", "bare_p95_us", US)]),
    ("sqlite FULL", [("mean", "sqlite_mean_us", US), ("p95", "sqlite_p95_us", US)]),
    ("labmem ÷", [("bare", "append_x_bare", RATIO), ("sqlite", "append_x_sqlite", RATIO)]),
    ("bytes read", [("/append", "bytes_read_per_append", COUNT)]),
]
RECALL_TABLE: Columns = [
    ("store", [("records", "records", COUNT), ("candidates", "avg_candidates", COUNT)]),
    ("first query ms", [("labmem", "labmem_index_ms", MS), ("fts5", "fts5_first_ms", MS)]),
    ("labmem recall", [("mean", "recall_mean_us", US), ("p95", "recall_p95_us", US)]),
    ("fts5 bm25", [("mean", "fts5_mean_us", US), ("p95", "fts5_p95_us", US)]),
    ("labmem ÷", [("fts5", "recall_x_fts5", RATIO)]),
    ("build ms", [("fts5", "fts5_build_ms", MS)]),
]


def flatness_line(results: pd.DataFrame) -> str:
    """Did the append cost stay flat from the smallest store to the largest?

    Uses the median, which a few fsync stalls cannot move, and also reports the cost
    relative to the bare write loop measured alongside, which cancels disk noise.
    """
    small, large = results.iloc[0], results.iloc[-1]
    ratio = large["append_p50_us"] / small["append_p50_us"]
    verdict = "stayed flat" if ratio < FLAT_THRESHOLD else "did NOT stay flat"
    return (f"Per-append cost {verdict}: median {large['append_p50_us']:,.0f} µs at "
            f"{large['records']:,.0f} records vs {small['append_p50_us']:,.0f} µs at "
            f"{small['records']:,.0f} (×{ratio:.2f}; flat means < ×{FLAT_THRESHOLD}); "
            f"relative to the bare write loop ×{small['append_x_bare']:.2f} → "
            f"×{large['append_x_bare']:.2f}.")


def report(results: pd.DataFrame, settings: Settings, with_fts: bool) -> None:
    print(f"\nAppends: {settings.appends:,} new records per size, one durable write each "
          "(mean, p50 and p95 µs per record)")
    print(render_table(results, APPEND_TABLE))
    print(f"\nRecalls: {settings.recalls:,} queries per size, top {RECALL_LIMIT} "
          "(mean and p95 µs per query; the first labmem query builds its term index)")
    if not with_fts:
        print("(SQLite FTS5 is unavailable in this Python's sqlite3: fts5 columns skipped)")
    print(render_table(results, RECALL_TABLE))
    print()
    if len(results) > 1:
        print(flatness_line(results))


# -- main ----------------------------------------------------------------------------


def run(settings: Settings) -> pd.DataFrame:
    """Every size in turn, each in its own folder of one temporary directory."""
    corpus = Corpus(settings.seed)
    queries = corpus.queries(settings.recalls)
    with_fts = fts5_available()
    rows = []
    with tempfile.TemporaryDirectory(prefix="labmem-bench-", dir=settings.workdir) as tmp:
        for size in settings.sizes:
            rows.append(bench_size(size, settings, corpus, queries, Path(tmp) / f"n{size}",
                                   with_fts))
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    started = time.perf_counter()
    results = run(settings)
    report(results, settings, with_fts="fts5_mean_us" in results)
    if settings.csv_path is not None:
        write_csv(results, settings.csv_path)
    print(f"Total run time: {seconds_since(started):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
