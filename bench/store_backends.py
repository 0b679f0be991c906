"""Benchmark: the three store backends side by side — JSONL + lock, SQLite, PostgreSQL.

Two questions, one run, every backend measured in the same process tree so that the
ratios compare like with like:

1. **Append throughput with many writers.** For 1, 4 and 16 writer *processes*, each
   backend receives the same number of durable appends in total (``--appends``, split
   evenly between the writers, distinct ``memory_id``s, one user). The writers are
   started first, open their store and wait at a barrier; the clock runs from the
   barrier's release until the last writer is done. Records per second =
   appends ÷ that time; each figure is the median of ``--rounds`` (3) rounds, the backends
   in a rotated order each round, because a shared disk's ``fsync`` time drifts.

   * ``jsonl``: :class:`RemoteMemoryStore` on one records file: validate, take the
     cross-process file lock, catch up with the file, check the id, one ``os.write``,
     ``fsync``. Writers queue for the lock.
   * ``sqlite``: :class:`SqliteMemoryStore` on one database file, a connection per
     writer; SQLite lets one writer in at a time (its own database lock).
   * ``postgres``: :class:`PostgresMemoryStore` on a throwaway local server (Unix
     socket, ``fsync`` on, default ``synchronous_commit``), a connection per writer;
     the ``UNIQUE (user_scope, memory_id)`` index, not a lock, keeps ids unique, so
     writers commit side by side (group commit shares the ``fsync``).

2. **Recall p50 at 10k and 100k records** (``--sizes``): the synthetic corpus of
   ``bench/recall_scale.py`` (Zipf vocabulary, some Chinese, the same queries at every
   size) bulk-loaded with ``append_many`` into each backend, then
   ``RecallEngine(store, scorer="contextual", backend="fast")`` answers the same
   queries (top 10) after 5 warm-up queries; p50 and p95 over the timed ones, and the
   p50 of the same queries asked once more ("repeat"). The
   JSONL store keeps its term index in memory (built by the first recall: not timed
   here, reported as "open s"); SQLite and PostgreSQL read theirs from the database.

Everything is printed as a ratio to SQLite measured in the same run (``÷ sqlite``).

**The machine caveat.** These are wall-clock numbers from one small machine (the
committed run: 2 CPU cores shared with other work, a container's disk): 16 writer
processes on 2 cores measure contention as much as the storage engine, and the
server's processes compete with the writers for the same cores. A server on its own
machine, reached over a network, adds a round trip to every append and recall and
takes the server's CPU off the client. Compare the ratios, not the microseconds, and
re-run on your own hardware before deciding anything.

Run it::

    python bench/store_backends.py                  # 1/4/16 writers, 10k and 100k; minutes
    python bench/store_backends.py --sizes 10000 --appends 240
    python bench/store_backends.py --quick --out /tmp/sb   # seconds; what the smoke test runs

It prints two tables and writes ``store_backends.md``, ``.json`` and ``.png`` to
``--out`` (default ``bench/results``). Without PostgreSQL's server binaries the
``postgres`` rows are skipped, naming the install command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchlib import Timing, progress  # bench/ is on sys.path when this runs as a script
from recall_scale import NOW, TOP_K, USER_ID, Corpus

from labmem.core.clock import FixedClock
from labmem.core.provenance import MemorySource
from labmem.recall import MemoryKind, RecallEngine, RemoteMemoryStore, SqliteMemoryStore

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results"
NAME = "store_backends"

BACKENDS = ("jsonl", "sqlite", "postgres")
BASELINE = "sqlite"
SCORER = "contextual"
WARMUP_QUERIES = 5
_SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Settings:
    writers: tuple[int, ...] = (1, 4, 16)
    appends: int = 480          # per backend and writer count, split between the writers
    rounds: int = 3             # appends: each measurement this many times; the median
    sizes: tuple[int, ...] = (10_000, 100_000)
    queries: int = 100
    seed: int = 7
    out: Path = DEFAULT_OUT
    workdir: Path | None = None
    command: str = "python bench/store_backends.py"


# -- where each backend keeps one user's records ----------------------------------------


@dataclass(frozen=True)
class Place:
    """One backend's location: a file for JSONL and SQLite, a database URL for PostgreSQL.

    ``user_id`` differs per measurement, so PostgreSQL (one shared table) starts each
    one with an empty scope, as the files do.
    """

    backend: str
    target: str
    user_id: str = USER_ID

    def open(self):
        clock = FixedClock(NOW)
        if self.backend == "jsonl":
            return RemoteMemoryStore(self.target, user_id=self.user_id, clock=clock)
        if self.backend == "sqlite":
            return SqliteMemoryStore(self.target, user_id=self.user_id, clock=clock)
        from labmem.recall.postgres import PostgresMemoryStore

        return PostgresMemoryStore(self.target, user_id=self.user_id, clock=clock)


def close(store) -> None:
    closer = getattr(store, "close", None)
    if closer is not None:
        closer()


@contextlib.contextmanager
def postgres_url() -> Iterator[str | None]:
    """The app role's URL on a throwaway, initialized server; None without binaries."""
    from labmem.recall.postgres import APP_ROLE, LocalPostgres, init_database
    from labmem.recall.postgres.server import find_server_binaries

    if find_server_binaries() is None:
        yield None
        return
    with LocalPostgres() as server:
        init_database(server.url)
        yield server.url_for(user=APP_ROLE)


def postgres_skip_reason() -> str:
    from labmem.recall.postgres.server import INSTALL_HINT

    return f"no PostgreSQL server binaries (initdb, pg_ctl); install them with `{INSTALL_HINT}`"


# -- 1. append throughput ------------------------------------------------------------------


def _draft(writer: int, number: int) -> dict:
    return {"kind": MemoryKind.CONVERSATION, "memory_id": f"w{writer:02d}-{number:05d}",
            "summary": "Chose SQLite WAL for local persistence.",
            "content": f"Writer {writer} note {number}: persistence decision, checkpoint "
                       "on close, fsync on every commit.",
            "source": MemorySource(f"t-{writer}-{number}", "conversation_transcript",
                                   "persistence decision", NOW)}


def append_writer(place: Place, writer: int, count: int, start, results) -> None:
    """One writer process: open the store, wait for the others, append ``count`` records."""
    store = place.open()
    drafts = [_draft(writer, n) for n in range(count)]
    try:
        start.wait()
        for draft in drafts:
            store.append(**draft)
        results.put(("done", writer))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the run
        results.put(("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        close(store)


def measure_appends(place: Place, writers: int, total: int) -> float:
    """Seconds from the barrier's release until ``writers`` processes stored ``total``."""
    start, results = _SPAWN.Barrier(writers + 1), _SPAWN.Queue()
    per_writer = total // writers
    procs = [_SPAWN.Process(target=append_writer,
                            args=(place, w, per_writer, start, results))
             for w in range(writers)]
    for proc in procs:
        proc.start()
    try:
        start.wait(timeout=120)
        began = time.perf_counter()
        outcomes = [results.get(timeout=600) for _ in procs]
        elapsed = time.perf_counter() - began
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()
    failed = [detail for status, detail in outcomes if status != "done"]
    if failed:
        raise RuntimeError(f"{place.backend}, {writers} writers: {failed[0]}")
    check = place.open()
    stored = len(check.read_all())
    close(check)
    if stored != per_writer * writers:
        raise RuntimeError(f"{place.backend}, {writers} writers: {stored} records stored, "
                           f"expected {per_writer * writers}")
    return elapsed


def run_appends(settings: Settings, work: Path, pg_url: str | None) -> list[dict]:
    """Every writer count × backend, ``settings.rounds`` times, the backends in a rotated
    order each round (disk noise then hits each of them in turn); the median round."""
    seconds: dict[tuple[int, str], list[float]] = {}
    for round_ in range(settings.rounds):
        order = BACKENDS[round_ % len(BACKENDS):] + BACKENDS[:round_ % len(BACKENDS)]
        for writers in settings.writers:
            total = settings.appends - settings.appends % writers
            for backend in order:
                place = make_place(backend, work / f"appends-{round_}-{writers}", pg_url,
                                   user_id=f"{USER_ID}-appends-{round_}-{writers}")
                if place is None:
                    continue
                progress(f"appends, round {round_ + 1}: {backend}, {writers} writers, "
                         f"{total} records …")
                seconds.setdefault((writers, backend), []).append(
                    measure_appends(place, writers, total))
    rows = []
    for writers in settings.writers:
        total = settings.appends - settings.appends % writers
        for backend in BACKENDS:
            if (writers, backend) in seconds:
                median = statistics.median(seconds[writers, backend])
                rows.append({"writers": writers, "backend": backend, "appends": total,
                             "seconds": median, "records_per_s": total / median,
                             "rounds_records_per_s": [round(total / t, 1)
                                                      for t in seconds[writers, backend]]})
    for row in rows:
        base = next(r for r in rows if r["writers"] == row["writers"]
                    and r["backend"] == BASELINE)
        row["x_sqlite"] = row["records_per_s"] / base["records_per_s"]
    return rows


def make_place(backend: str, folder: Path, pg_url: str | None, *,
               user_id: str = USER_ID) -> Place | None:
    if backend == "postgres":
        return None if pg_url is None else Place(backend, pg_url, user_id)
    folder.mkdir(parents=True, exist_ok=True)
    name = "records.jsonl" if backend == "jsonl" else "records.sqlite"
    return Place(backend, str(folder / name), user_id)


# -- 2. recall p50 at each size -----------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def measure_recall(place: Place, corpus: Corpus, size: int,
                   queries: Sequence[str]) -> dict:
    """Bulk-load ``size`` records, open a fresh store, time every query; one row."""
    drafts = list(corpus.drafts(size))
    loader = place.open()
    load_s = timed(lambda: loader.append_many(drafts))
    close(loader)
    store = place.open()
    engine = RecallEngine(store, scorer=SCORER, backend="fast")
    open_s = timed(lambda: engine.recall(queries[0], limit=TOP_K))
    for text in queries[:WARMUP_QUERIES]:
        engine.recall(text, limit=TOP_K)
    seconds, hits = [], []
    for text in queries:
        began = time.perf_counter()
        result = engine.recall(text, limit=TOP_K)
        seconds.append(time.perf_counter() - began)
        hits.append([hit.memory_id for hit in result.hits])
    repeat = [timed(lambda text=text: engine.recall(text, limit=TOP_K)) for text in queries]
    close(store)
    timing = Timing.of(seconds)
    return {"records": size, "backend": place.backend, "load_s": load_s, "open_s": open_s,
            "p50_us": timing.p50, "p95_us": timing.p95,
            "repeat_p50_us": Timing.of(repeat).p50, "hits": hits}


def run_recalls(settings: Settings, work: Path, pg_url: str | None) -> list[dict]:
    corpus = Corpus(settings.seed)
    queries = [q["text"] for q in corpus.queries(settings.queries)]
    rows = []
    for size in settings.sizes:
        for backend in BACKENDS:
            place = make_place(backend, work / f"recall-{size}", pg_url,
                               user_id=f"{USER_ID}-recall-{size}")
            if place is None:
                continue
            progress(f"recall: {backend}, {size:,} records (load, then {len(queries)} "
                     "queries) …")
            rows.append(measure_recall(place, corpus, size, queries))
    for row in rows:
        base = next(r for r in rows if r["records"] == row["records"]
                    and r["backend"] == BASELINE)
        row["x_sqlite"] = row["p50_us"] / base["p50_us"]
        row["same_hits_as_sqlite"] = row["hits"] == base["hits"]
    for row in rows:
        row.pop("hits")
    return rows


# -- reporting -------------------------------------------------------------------------------

APPEND_COLUMNS = [("writers", "writers", "{:,d}"), ("backend", "backend", "{}"),
                  ("appends", "appends", "{:,d}"), ("records/s", "records_per_s", "{:,.0f}"),
                  ("÷ sqlite", "x_sqlite", "{:.2f}")]
RECALL_COLUMNS = [("records", "records", "{:,d}"), ("backend", "backend", "{}"),
                  ("load s", "load_s", "{:,.1f}"), ("open s", "open_s", "{:,.2f}"),
                  ("p50 µs", "p50_us", "{:,.0f}"), ("p95 µs", "p95_us", "{:,.0f}"),
                  ("repeat p50 µs", "repeat_p50_us", "{:,.0f}"),
                  ("÷ sqlite", "x_sqlite", "{:.2f}"),
                  ("same hits", "same_hits_as_sqlite", "{}")]


def text_table(rows: Sequence[dict], columns) -> str:
    cells = [[label] + [fmt.format(row[key]) for row in rows] for label, key, fmt in columns]
    widths = [max(map(len, column)) for column in cells]
    lines = []
    for i in range(len(rows) + 1):
        lines.append("  ".join(column[i].rjust(width) if j != 1 else column[i].ljust(width)
                               for j, (column, width) in enumerate(zip(cells, widths,
                                                                       strict=True))))
    return "\n".join(line.rstrip() for line in lines)


def markdown_table(rows: Sequence[dict], columns) -> str:
    lines = ["| " + " | ".join(label for label, _, _ in columns) + " |",
             "|" + "|".join("---" if key == "backend" else "---:" for _, key, _ in columns)
             + "|"]
    lines += ["| " + " | ".join(fmt.format(row[key]) for _, key, fmt in columns) + " |"
              for row in rows]
    return "\n".join(lines)


def summary_lines(appends: Sequence[dict], recalls: Sequence[dict]) -> list[str]:
    """The headline ratios, one line each: the most writers and the largest size."""
    lines = []
    if appends:
        most = max(row["writers"] for row in appends)
        shown = ", ".join(f"{row['backend']} {row['x_sqlite']:.2f}" for row in appends
                          if row["writers"] == most)
        lines.append(f"append throughput with {most} writers ÷ sqlite: {shown}")
    if recalls:
        largest = max(row["records"] for row in recalls)
        shown = ", ".join(f"{row['backend']} {row['x_sqlite']:.2f}" for row in recalls
                          if row["records"] == largest)
        lines.append(f"recall p50 at {largest:,} records ÷ sqlite: {shown}")
    return lines


def plot(appends: Sequence[dict], recalls: Sequence[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    draw_throughput(left, appends)
    draw_recall(right, recalls)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _grouped_bars(ax, groups: Sequence, rows: Sequence[dict], group_key: str,
                  value_key: str) -> None:
    backends = [b for b in BACKENDS if any(r["backend"] == b for r in rows)]
    width = 0.8 / max(1, len(backends))
    for i, backend in enumerate(backends):
        values = [next((r[value_key] for r in rows
                        if r[group_key] == g and r["backend"] == backend), 0) for g in groups]
        ax.bar([x + (i - (len(backends) - 1) / 2) * width for x in range(len(groups))],
               values, width, label=backend)
    ax.legend(fontsize=8)


def draw_throughput(ax, appends: Sequence[dict]) -> None:
    """Grouped bars: records/s per writer count, one bar per backend."""
    groups = sorted({row["writers"] for row in appends})
    _grouped_bars(ax, groups, appends, "writers", "records_per_s")
    ax.set_xticks(range(len(groups)), [f"{g} writer{'s' if g > 1 else ''}" for g in groups])
    ax.set_ylabel("durable appends per second")
    ax.set_title("Append throughput, one user, many writer processes", fontsize=10)


def draw_recall(ax, recalls: Sequence[dict]) -> None:
    """Grouped bars: recall p50 per store size, one bar per backend."""
    groups = sorted({row["records"] for row in recalls})
    _grouped_bars(ax, groups, recalls, "records", "p50_us")
    ax.set_xticks(range(len(groups)), [f"{g:,} records" for g in groups])
    ax.set_yscale("log")
    ax.set_ylabel("recall p50 (µs, log scale)")
    ax.set_title(f"Recall p50 ({SCORER} scorer, top {TOP_K})", fontsize=10)


def report(settings: Settings, appends: list[dict], recalls: list[dict],
           skipped: dict[str, str], seconds: float) -> None:
    print(f"\nAppend throughput: {settings.appends:,} durable appends per backend and "
          f"writer count, split between writer processes; median of {settings.rounds} rounds")
    print(text_table(appends, APPEND_COLUMNS))
    print(f"\nRecall: {settings.queries} queries per backend and size, top {TOP_K}, "
          f"{SCORER} scorer, fast backend, after {WARMUP_QUERIES} warm-up queries")
    print(text_table(recalls, RECALL_COLUMNS))
    for backend, reason in skipped.items():
        print(f"skipped {backend}: {reason}")
    headline = summary_lines(appends, recalls)
    notes = [
        "Ratios are to SQLite measured in the same run (`÷ sqlite`): above 1 is more "
        "appends per second in the first table, a slower recall in the second.",
        "Appends: every writer process opens its own store (connection) before a barrier; "
        "the time runs from the barrier's release to the last writer's last durable append; "
        f"each measurement is the median of {settings.rounds} rounds, the backends in a "
        "rotated order each round (every round is in the JSON). "
        "All three backends `fsync` every append (SQLite `synchronous=FULL`, PostgreSQL "
        "commit with `fsync` on).",
        "Recall: the corpus and queries of `bench/recall_scale.py` (seed "
        f"{settings.seed}); `load s` is `append_many` of the whole store; `open s` is a "
        "fresh store's first recall (the JSONL store decodes the file and builds its "
        "in-memory term index there; SQLite and PostgreSQL read the index they keep). "
        "`same hits`: the top 10 of every query equals SQLite's. `repeat p50`: the same "
        "queries asked a second time by the same store, so every term's postings have been "
        "read once (the PostgreSQL store keeps the postings it has read; the others keep "
        "nothing per query).",
        "Machine caveat: one small machine (2 CPU cores shared with other work); 16 writers "
        "on 2 cores measure contention as much as the engines, and the local server shares "
        "the cores with its clients. A server on another machine adds a network round trip "
        "per call. Compare ratios, and re-run on your own hardware.",
    ]
    markdown = "\n".join([
        "# Store backends: JSONL + lock, SQLite and PostgreSQL", "",
        "```", settings.command, "```", "",
        "## Append throughput", "", markdown_table(appends, APPEND_COLUMNS), "",
        "## Recall p50", "", markdown_table(recalls, RECALL_COLUMNS), "",
        *[f"**{line}**  " for line in headline], "",
        *[f"- {note}" for note in notes],
        *[f"- skipped {b}: {r}" for b, r in skipped.items()], "",
    ])
    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.md").write_text(markdown, encoding="utf-8")
    document = {
        "command": settings.command,
        "settings": {k: v for k, v in asdict(settings).items()
                     if k not in ("out", "workdir", "command")},
        "scorer": SCORER, "top_k": TOP_K, "warmup_queries": WARMUP_QUERIES,
        "versions": versions(), "appends": appends, "recall": recalls,
        "skipped": skipped, "headline": headline, "run_seconds": round(seconds, 1),
    }
    (out / f"{NAME}.json").write_text(json.dumps(document, indent=2, ensure_ascii=False)
                                      + "\n", encoding="utf-8")
    plot(appends, recalls, out / f"{NAME}.png")
    print(f"Wrote {NAME}.md, {NAME}.json and {NAME}.png")
    print(f"Total run time: {seconds:.0f} s")
    for line in headline:
        print(line)


def versions() -> dict[str, str]:
    import sqlite3
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version}
    try:
        found["psycopg"] = version("psycopg")
    except PackageNotFoundError:
        found["psycopg"] = "not installed"
    from labmem.recall.postgres.server import find_server_binaries

    binaries = find_server_binaries()
    found["postgresql"] = binaries.parent.name if binaries is not None else "not found"
    return found


# -- the command line --------------------------------------------------------------------------


def _ints(text: str, parser: argparse.ArgumentParser, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(part.replace("_", "")) for part in text.split(",")
                               if part.strip()}))
    except ValueError:
        parser.error(f"{flag} must be comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        parser.error(f"{flag} must name at least one positive number, got {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", help="comma-separated writer counts (1,4,16)")
    parser.add_argument("--appends", type=int, help="appends per backend and writer count (480)")
    parser.add_argument("--sizes", help="comma-separated store sizes for recall (10000,100000)")
    parser.add_argument("--queries", type=int, help="timed queries per backend and size (100)")
    parser.add_argument("--rounds", type=int, help="append rounds; the median is kept (3)")
    parser.add_argument("--seed", type=int, default=Settings.seed)
    parser.add_argument("--dir", type=Path, help="create the temporary directory here")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="where store_backends.{md,json,png} go (bench/results)")
    parser.add_argument("--quick", action="store_true",
                        help="writers 1,4; 32 appends; 300 records; 12 queries (seconds)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    quick = Settings(writers=(1, 4), appends=32, rounds=1, sizes=(300,), queries=12)
    base = quick if args.quick else Settings()
    writers = _ints(args.writers, parser, "--writers") if args.writers else base.writers
    sizes = _ints(args.sizes, parser, "--sizes") if args.sizes else base.sizes
    appends = args.appends if args.appends is not None else base.appends
    queries = args.queries if args.queries is not None else base.queries
    rounds = args.rounds if args.rounds is not None else base.rounds
    if appends < max(writers) or queries <= WARMUP_QUERIES or rounds < 1:
        parser.error(f"--appends must be at least the largest writer count, --queries "
                     f"more than {WARMUP_QUERIES} and --rounds at least 1")
    shown, skip = [], False   # the command line without machine-specific paths
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--dir", "--out"):
            skip = True
        elif not arg.startswith(("--dir=", "--out=")):
            shown.append(arg)
    return Settings(writers=writers, appends=appends, rounds=rounds, sizes=sizes,
                    queries=queries,
                    seed=args.seed, out=args.out, workdir=args.dir,
                    command=" ".join([Settings.command, *shown]))


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    started = time.perf_counter()
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="labmem-store-backends-",
                                     dir=settings.workdir) as tmp, postgres_url() as pg_url:
        if pg_url is None:
            skipped["postgres"] = postgres_skip_reason()
        work = Path(tmp)
        appends = run_appends(settings, work, pg_url)
        recalls = run_recalls(settings, work, pg_url)
    report(settings, appends, recalls, skipped, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
