"""Benchmark: the Context MMU's recall cost and memory, beside the seed's naive approach.

For each page count (default 1,000, 10,000 and 100,000) this script bulk-writes that many
synthetic canonical records (the service's own JSONL format, one write), opens a
:class:`FileMemoryService` on them and builds two Context MMUs over the same service:

* ``labmem`` — :class:`ContextMMU`: a term index finds the candidates, only they are
  scored, ``heapq.nsmallest`` keeps the best ``candidate_limit``;
* ``naive``  — the seed's C approach in Python: score *every* page in scope and sort
  them all, then take the best (``sorted`` is Timsort, in C: a generous stand-in for the
  seed's insertion sort, which would be O(n²) — measured as ``insertion`` at ≤ 2,000 pages).

Both then run the identical promotion / eviction path, and the script checks that both
select the same candidates for every query. Recalls alternate over a fixed query list.

Open table (issue 17): how long opening a service and a Context MMU on that log takes, beside
the floor — a bare ``json.loads`` of every line of the same file, in the same process,
interleaved, best of ``--repeats``:

* ``mmu_open`` — with the fold snapshot beside the log (``records.jsonl.fold``, checked
  against the log: identity, size, CRC-32 of the covered bytes), the usual case from the
  second open on; ``first_recall`` is the first recall after it (it decodes the lines of
  the candidates it looks at; the term index comes from the snapshot);
* ``cold_open`` — no snapshot on disk (the first open, or after a purge or a refused
  snapshot): the whole log is folded, every text tokenized and the snapshot written;
* ``no_snapshot_open`` — the snapshot switched off (``snapshot_lines=None``): the fold
  alone, as before the snapshot; its first recall tokenizes every text;
* ``unchecksummed_open`` — the same records written without line checksums (an older log:
  every field validated again on replay), snapshot off.

Second table: peak RSS vs token budget. One subprocess per budget (a fresh process, so
its ``VmHWM`` from ``/proc/self/status`` is that setting's own peak) opens the same
records, runs the same recalls and reports its peak RSS, the tokens loaded and the
characters of loaded representations; ``no_snapshot_peak_rss_mib`` is the same child with
the fold snapshot switched off (every record decoded and held, every text tokenized).
It shows what the budget bounds (the loaded representations) and what it does not
(canonical records, index, interpreter). Its peak is taken before ``record_chars`` is
counted (that reads every record's text).

The recall table opens each log once first (which writes the fold snapshot), so its
``open_ms`` is an open with the snapshot, the term index ready.

Run it::

    python bench/mmu.py            # 1k, 10k, 100k pages; a few minutes on 2 cores
    python bench/mmu.py --quick    # seconds; what the smoke test runs

Writes ``bench/results/mmu_open.csv``, ``mmu_recall.csv``, ``mmu_rss.csv`` and
``mmu.md`` (the three tables, with the machine's load while it ran). Timings are
``time.perf_counter`` wall-clock for this machine: compare the ratios, not the µs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from labmem.core.clock import FixedClock, format_timestamp
from labmem.core.storage import encode_json_line
from labmem.mmu import (
    GLOBAL_SCOPE,
    ContextMMU,
    FileMemoryService,
    encode_line,
    factor_score,
    page_rank_key,
)
from labmem.mmu.snapshot import snapshot_path

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=30)
SCOPE = "bench"
VOCABULARY = 4_000
SNAPSHOT_LINES = 1  # write the fold snapshot at every size (the default waits for 1,000)
WORDS_PER_RECORD = 40

_ONSETS = "b c d f g h k l m n p r s t v z br dr gr st tr sh ch th".split()
_VOWELS = "a e i o u ai ea oo".split()
_CODAS = ("", "n", "r", "s", "t", "l", "nd", "st", "ng")


def vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                          for _ in range(rng.randint(2, 3))))
    return sorted(words)


def write_records(root: Path, pages: int, seed: int, *, checksums: bool = True) -> list[str]:
    """Write ``pages`` records in one go; return the benchmark's queries.

    ``checksums=False`` writes the lines an older service wrote (plain JSON, no ``crc32``).
    """
    encode = encode_line if checksums else encode_json_line
    rng = random.Random(seed)
    words = vocabulary(rng)
    root.mkdir(parents=True, exist_ok=True)
    chunks = []
    for i in range(pages):
        at = format_timestamp(T0 + timedelta(minutes=i % 40_000))
        text = " ".join(rng.choice(words) for _ in range(WORDS_PER_RECORD)) + "."
        chunks.append(encode({
            "record_id": f"m-{i + 1:06d}", "memory_type": "semantic",
            "scope": SCOPE if i % 10 else GLOBAL_SCOPE, "title": f"note {i}", "text": text,
            "status": "provisional", "importance": round(rng.random(), 3),
            "confidence": 0.5, "utility": 0.5, "salience": round(rng.random(), 3),
            "source_kind": "tool_observed", "origin_key": f"k{i}", "evidence": ["bench"],
            "version": 1, "created_at": at, "updated_at": at}))
    (root / "records.jsonl").write_bytes(b"".join(chunks))
    qrng = random.Random(seed + 1)
    return [" ".join(qrng.sample(words, 2)) for _ in range(20)]


class NaiveMMU(ContextMMU):
    """The seed's selection: score every page in scope, sort them all, keep the best."""

    def select_candidates(self, query_terms, allowed, scope, now):
        scored = []
        matches = self.service.match_counts(query_terms)
        for record_id, page in self.pages.items():
            if page.scope not in allowed or not self.admit(page, now):
                continue
            factors = self.factors(page, query_terms, matches.get(record_id, 0), scope, now)
            scored.append((page_rank_key(factor_score(factors, self.weights), record_id), factors))
        self.scored += len(scored)
        scored = self.one_claim_per_origin(scored)
        scored.sort(key=lambda row: row[0])
        return [row for row in scored if row[1].relevance > 0][: self.candidate_limit]


class InsertionSortMMU(ContextMMU):
    """The seed exactly: score every page, insertion-sort them all (O(n²))."""

    def select_candidates(self, query_terms, allowed, scope, now):
        rows = []
        matches = self.service.match_counts(query_terms)
        for record_id, page in self.pages.items():
            if page.scope not in allowed or not self.admit(page, now):
                continue
            factors = self.factors(page, query_terms, matches.get(record_id, 0), scope, now)
            row = (page_rank_key(factor_score(factors, self.weights), record_id), factors)
            j = len(rows)
            rows.append(row)
            while j > 0 and rows[j - 1][0] > row[0]:
                rows[j] = rows[j - 1]
                j -= 1
            rows[j] = row
        self.scored += len(rows)
        return [row for row in rows if row[1].relevance > 0][: self.candidate_limit]


def time_recalls(mmu: ContextMMU, queries: list[str], recalls: int) -> tuple[float, list]:
    chosen = []
    start = time.perf_counter()
    for i in range(recalls):
        trace = mmu.recall(queries[i % len(queries)], scope=SCOPE,
                           now=NOW + timedelta(seconds=i))
        chosen.append(tuple(c.record_id for c in trace.candidates))
    return (time.perf_counter() - start) / recalls * 1e6, chosen


def recall_table(sizes, recalls, budget, seed, workdir) -> pd.DataFrame:
    rows = []
    for pages in sizes:
        root = workdir / f"pages-{pages}"
        queries = write_records(root, pages, seed)
        FileMemoryService(root, snapshot_lines=SNAPSHOT_LINES)  # writes the fold snapshot
        started = time.perf_counter()
        service = FileMemoryService(root, clock=FixedClock(NOW), snapshot_lines=SNAPSHOT_LINES)
        ours = ContextMMU(service, token_budget=budget)
        service.match_counts(["warm"])  # fill the shared index here, not in the first recall
        open_ms = (time.perf_counter() - started) * 1e3  # ready to recall: open + index
        naive = NaiveMMU(service, token_budget=budget)
        naive_recalls = max(3, recalls if pages <= 10_000 else recalls // 5)
        ours_us, ours_sel = time_recalls(ours, queries, recalls)
        naive_us, naive_sel = time_recalls(naive, queries, naive_recalls)
        if ours_sel[:naive_recalls] != naive_sel:
            raise SystemExit(f"selection differs at {pages} pages: the comparison is invalid")
        insertion_us = float("nan")
        if pages <= 2_000:
            insertion = InsertionSortMMU(service, token_budget=budget)
            insertion_us, ins_sel = time_recalls(insertion, queries, max(3, recalls // 10))
            assert ins_sel == ours_sel[:len(ins_sel)]
        scored_ours = ours.scored / recalls
        scored_naive = naive.scored / naive_recalls
        rows.append({"pages": pages, "open_ms": round(open_ms, 1),
                     "labmem_us": round(ours_us, 1), "naive_sort_us": round(naive_us, 1),
                     "naive_ratio": round(naive_us / ours_us, 1),
                     "insertion_us": round(insertion_us, 1),
                     "insertion_ratio": round(insertion_us / ours_us, 1),
                     "scored_labmem": round(scored_ours, 1),
                     "scored_naive": round(scored_naive, 1),
                     "token_used": ours.token_used, "budget": budget})
        service.close()
    return pd.DataFrame(rows)


def bare_json_loads(path: Path) -> float:
    """The floor: read the file and ``json.loads`` each line, nothing else (seconds)."""
    started = time.perf_counter()
    for line in path.read_bytes().split(b"\n")[:-1]:
        json.loads(line)
    return time.perf_counter() - started


def open_once(root: Path, query: str, *, expect: str,
              snapshot: bool = True) -> tuple[float, float]:
    """Seconds to open a service + MMU on ``root``, and for the first recall after it;
    ``expect``: what must have become of the fold snapshot (the timing is of that case)."""
    gc.collect()
    started = time.perf_counter()
    service = FileMemoryService(root, clock=FixedClock(NOW),
                                snapshot_lines=SNAPSHOT_LINES if snapshot else None)
    mmu = ContextMMU(service, token_budget=2_000)
    opened = time.perf_counter()
    trace = mmu.recall(query, scope=SCOPE, now=NOW)
    first = time.perf_counter() - opened
    if not service.snapshot_state.startswith(expect):
        raise SystemExit(f"{root.name}: snapshot {service.snapshot_state!r}, timed as {expect}")
    service.close()
    return opened - started, first, trace


def open_table(sizes, repeats, seed, workdir) -> pd.DataFrame:
    rows = []
    for pages in sizes:
        root, legacy = workdir / f"open-{pages}", workdir / f"legacy-{pages}"
        query = write_records(root, pages, seed)[0]
        write_records(legacy, pages, seed, checksums=False)
        snapshot = snapshot_path(root / "records.jsonl")
        floors, opens, firsts, colds, cold_firsts, bares, bare_firsts = ([] for _ in range(7))
        for _ in range(repeats):  # interleaved: all see the same load
            floors.append(bare_json_loads(root / "records.jsonl"))
            snapshot.unlink(missing_ok=True)
            cold, cold_first, cold_trace = open_once(root, query, expect="refused: missing")
            colds.append(cold)
            cold_firsts.append(cold_first)
            opened, first, trace = open_once(root, query, expect="loaded")
            opens.append(opened)
            firsts.append(first)
            bare, bare_first, bare_trace = open_once(root, query, expect="off", snapshot=False)
            bares.append(bare)
            bare_firsts.append(bare_first)
            if not trace == cold_trace == bare_trace:
                raise SystemExit(f"{pages} pages: the first recall differs with the snapshot")
        legacy_open, _, _ = open_once(legacy, query, expect="off", snapshot=False)
        floor, opened, first = min(floors), min(opens), min(firsts)
        cold, bare = min(colds), min(bares)
        rows.append({"pages": pages, "json_loads_ms": round(floor * 1e3, 1),
                     "mmu_open_ms": round(opened * 1e3, 1),
                     "open_ratio": round(opened / floor, 2),
                     "first_recall_ms": round(first * 1e3, 1),
                     "open_plus_first_ratio": round((opened + first) / floor, 2),
                     "cold_open_ms": round(cold * 1e3, 1),
                     "cold_ratio": round(cold / floor, 2),
                     "cold_first_recall_ms": round(min(cold_firsts) * 1e3, 1),
                     "no_snapshot_open_ms": round(bare * 1e3, 1),
                     "no_snapshot_ratio": round(bare / floor, 2),
                     "no_snapshot_first_recall_ms": round(min(bare_firsts) * 1e3, 1),
                     "unchecksummed_open_ms": round(legacy_open * 1e3, 1),
                     "checksum_speedup": round(legacy_open / bare, 1),
                     "snapshot_mib": round(snapshot.stat().st_size / 2**20, 1),
                     "log_mib": round((root / "records.jsonl").stat().st_size / 2**20, 1)})
    return pd.DataFrame(rows)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


def write_markdown(path: Path, tables: dict[str, pd.DataFrame], load: str) -> None:
    parts = ["# Context MMU benchmark (`python bench/mmu.py`)", "",
             f"Machine while it ran: {load} (shared; compare the ratios, not the ms).", ""]
    opened = next(iter(tables.values()))
    for row in opened.itertuples(index=False):
        if row.pages == 100_000:
            seconds = row.mmu_open_ms / 1e3
            parts += ["Issue 17 target, MMU open at 100k pages ≤ 1 s and ≤ 3× json.loads: "
                      f"{seconds:.2f} s ({'met' if seconds <= 1 else 'not met'}), "
                      f"{row.open_ratio}× ({'met' if row.open_ratio <= 3 else 'not met'}) "
                      "with the fold snapshot; open + first recall "
                      f"{row.open_plus_first_ratio}×. Without a snapshot on disk (the cold "
                      f"rebuild, which writes it): {row.cold_open_ms / 1e3:.2f} s, "
                      f"{row.cold_ratio}× ({'met' if row.cold_open_ms <= 1000 else 'not met'},"
                      f" {'met' if row.cold_ratio <= 3 else 'not met'}); snapshot off: "
                      f"{row.no_snapshot_open_ms / 1e3:.2f} s, {row.no_snapshot_ratio}×.", ""]
    for title, frame in tables.items():
        head = "| " + " | ".join(frame.columns) + " |"
        rule = "|" + "|".join("---" for _ in frame.columns) + "|"
        body = ["| " + " | ".join(str(v) for v in row) + " |"
                for row in frame.itertuples(index=False)]
        parts += [f"## {title}", "", head, rule, *body, ""]
    path.write_text("\n".join(parts))


def peak_rss_kib() -> int:
    """This process's peak RSS. ``VmHWM`` restarts at exec; ``ru_maxrss`` can carry the
    parent's peak into a fresh child on Linux, so it is only the fallback."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def rss_child(root: str, budget: int, recalls: int, snapshot: bool = True) -> None:
    """Run in a fresh process: open, recall, report peak RSS and what is loaded."""
    queries = json.loads((Path(root) / "queries.json").read_text())
    service = FileMemoryService(root, clock=FixedClock(NOW),
                                snapshot_lines=SNAPSHOT_LINES if snapshot else None)
    mmu = ContextMMU(service, token_budget=budget, warm_top_k=64, l2_top_k=64,
                     candidate_limit=64)
    for i in range(recalls):
        mmu.recall(queries[i % len(queries)], scope=SCOPE, now=NOW + timedelta(seconds=i))
    loaded_chars = sum(len(mmu.cache.get(mmu.pages[i].loaded_key) or "")
                       for i in mmu._resident)
    peak_kib = peak_rss_kib()  # before record_chars, which reads every record's text
    record_chars = sum(len(r.text) for r in service.records())
    print(json.dumps({"budget": budget, "token_used": mmu.token_used,
                      "resident_pages": mmu.ledger().hot + mmu.ledger().warm,
                      "loaded_chars": loaded_chars, "record_chars": record_chars,
                      "peak_rss_mib": round(peak_kib / 1024, 1)}))


def rss_table(pages, budgets, recalls, seed, workdir) -> pd.DataFrame:
    root = workdir / f"rss-{pages}"
    queries = write_records(root, pages, seed)
    (root / "queries.json").write_text(json.dumps(queries))
    FileMemoryService(root, snapshot_lines=SNAPSHOT_LINES)  # each child opens with it
    rows = []
    for budget in budgets:
        peaks = {}
        for snapshot in ("1", "0"):
            done = subprocess.run([sys.executable, __file__, "--rss-child", str(root),
                                   str(budget), str(recalls), snapshot],
                                  capture_output=True, text=True, check=True)
            peaks[snapshot] = json.loads(done.stdout)
        with_snapshot, without = peaks["1"], peaks["0"]
        if {k: v for k, v in with_snapshot.items() if k != "peak_rss_mib"} != {
                k: v for k, v in without.items() if k != "peak_rss_mib"}:
            raise SystemExit(f"budget {budget}: the loads differ with the snapshot")
        rows.append({"pages": pages, **with_snapshot,
                     "no_snapshot_peak_rss_mib": without["peak_rss_mib"]})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--recalls", type=int, default=50)
    parser.add_argument("--budget", type=int, default=2_000)
    parser.add_argument("--rss-pages", type=int, default=20_000)
    parser.add_argument("--budgets", default="0,1000,10000,100000")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--repeats", type=int, default=3, help="open timings: best of N")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temp dir)")
    parser.add_argument("--csv-dir", type=Path, default=RESULTS)
    parser.add_argument("--rss-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child[0], int(args.rss_child[1]), int(args.rss_child[2]),
                  args.rss_child[3] == "1")
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    budgets = [int(b) for b in args.budgets.split(",")]
    recalls, rss_pages, repeats = args.recalls, args.rss_pages, args.repeats
    if args.quick:
        sizes, recalls, rss_pages, budgets, repeats = [300, 1000], 6, 1000, [0, 5000], 1
    load_before = load_average()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        opened = open_table(sizes, repeats, args.seed, work)
        recall = recall_table(sizes, recalls, args.budget, args.seed, work)
        rss = rss_table(rss_pages, budgets, recalls, args.seed, work)
    load = f"{load_before} at the start, {load_average()} at the end"
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print("Open: service + Context MMU vs a bare json.loads of every line (best of "
              f"{repeats}; {load})")
        print(opened.to_string(index=False))
        print()
        print("Recall cost per call: labmem (term index + heap) vs naive (score + sort all)")
        print(recall.to_string(index=False))
        print()
        print("Peak RSS vs token budget (one subprocess per budget)")
        print(rss.to_string(index=False))
    args.csv_dir.mkdir(parents=True, exist_ok=True)
    opened.to_csv(args.csv_dir / "mmu_open.csv", index=False)
    recall.to_csv(args.csv_dir / "mmu_recall.csv", index=False)
    rss.to_csv(args.csv_dir / "mmu_rss.csv", index=False)
    write_markdown(args.csv_dir / "mmu.md", {
        "Open: service + Context MMU vs a bare json.loads of the log": opened,
        "Recall cost per call: labmem (term index + heap) vs naive (score + sort all)": recall,
        "Peak RSS vs token budget (one subprocess per budget)": rss}, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
