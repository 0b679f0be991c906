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

Second table: peak RSS vs token budget. One subprocess per budget (a fresh process, so
its ``VmHWM`` from ``/proc/self/status`` is that setting's own peak) opens the same
records, runs the same recalls and reports its peak RSS, the tokens loaded and the
characters of loaded representations.
It shows what the budget bounds (the loaded representations) and what it does not
(canonical records, index, interpreter).

Run it::

    python bench/mmu.py            # 1k, 10k, 100k pages; a few minutes on 2 cores
    python bench/mmu.py --quick    # seconds; what the smoke test runs

Writes ``bench/results/mmu_recall.csv`` and ``bench/results/mmu_rss.csv``. Timings are
``time.perf_counter`` wall-clock for this machine: compare the ratios, not the µs.
"""

from __future__ import annotations

import argparse
import json
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
from labmem.mmu import GLOBAL_SCOPE, ContextMMU, FileMemoryService, factor_score, rank_key

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=30)
SCOPE = "bench"
VOCABULARY = 4_000
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


def write_records(root: Path, pages: int, seed: int) -> list[str]:
    """Write ``pages`` records in one go; return the benchmark's queries."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    root.mkdir(parents=True, exist_ok=True)
    chunks = []
    for i in range(pages):
        at = format_timestamp(T0 + timedelta(minutes=i % 40_000))
        text = " ".join(rng.choice(words) for _ in range(WORDS_PER_RECORD)) + "."
        chunks.append(encode_json_line({
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
        for record_id, page in self.pages.items():
            if page.scope not in allowed or not self.admit(page, now):
                continue
            factors = self.factors(page, query_terms, scope, now)
            scored.append((rank_key(factor_score(factors, self.weights), record_id), factors))
        self.scored += len(scored)
        scored = self.one_claim_per_origin(scored)
        scored.sort(key=lambda row: row[0])
        return [row for row in scored if row[1].relevance > 0][: self.candidate_limit]


class InsertionSortMMU(ContextMMU):
    """The seed exactly: score every page, insertion-sort them all (O(n²))."""

    def select_candidates(self, query_terms, allowed, scope, now):
        rows = []
        for record_id, page in self.pages.items():
            if page.scope not in allowed or not self.admit(page, now):
                continue
            factors = self.factors(page, query_terms, scope, now)
            row = (rank_key(factor_score(factors, self.weights), record_id), factors)
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
        started = time.perf_counter()
        service = FileMemoryService(root, clock=FixedClock(NOW))
        ours = ContextMMU(service, token_budget=budget)
        open_ms = (time.perf_counter() - started) * 1e3
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


def rss_child(root: str, budget: int, recalls: int) -> None:
    """Run in a fresh process: open, recall, report peak RSS and what is loaded."""
    queries = json.loads((Path(root) / "queries.json").read_text())
    service = FileMemoryService(root, clock=FixedClock(NOW))
    mmu = ContextMMU(service, token_budget=budget, warm_top_k=64, l2_top_k=64,
                     candidate_limit=64)
    for i in range(recalls):
        mmu.recall(queries[i % len(queries)], scope=SCOPE, now=NOW + timedelta(seconds=i))
    loaded_chars = sum(len(mmu.cache.get(p.loaded_key) or "") for p in mmu.pages.values()
                       if p.loaded_key is not None)
    record_chars = sum(len(r.text) for r in service.records())
    peak_kib = peak_rss_kib()
    print(json.dumps({"budget": budget, "token_used": mmu.token_used,
                      "resident_pages": mmu.ledger().hot + mmu.ledger().warm,
                      "loaded_chars": loaded_chars, "record_chars": record_chars,
                      "peak_rss_mib": round(peak_kib / 1024, 1)}))


def rss_table(pages, budgets, recalls, seed, workdir) -> pd.DataFrame:
    root = workdir / f"rss-{pages}"
    queries = write_records(root, pages, seed)
    (root / "queries.json").write_text(json.dumps(queries))
    rows = []
    for budget in budgets:
        done = subprocess.run([sys.executable, __file__, "--rss-child", str(root),
                               str(budget), str(recalls)],
                              capture_output=True, text=True, check=True)
        rows.append({"pages": pages, **json.loads(done.stdout)})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--recalls", type=int, default=50)
    parser.add_argument("--budget", type=int, default=2_000)
    parser.add_argument("--rss-pages", type=int, default=20_000)
    parser.add_argument("--budgets", default="0,1000,10000,100000")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temp dir)")
    parser.add_argument("--csv-dir", type=Path, default=RESULTS)
    parser.add_argument("--rss-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child[0], int(args.rss_child[1]), int(args.rss_child[2]))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    budgets = [int(b) for b in args.budgets.split(",")]
    recalls, rss_pages = args.recalls, args.rss_pages
    if args.quick:
        sizes, recalls, rss_pages, budgets = [300, 1000], 6, 1000, [0, 5000]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        recall = recall_table(sizes, recalls, args.budget, args.seed, work)
        rss = rss_table(rss_pages, budgets, recalls, args.seed, work)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print("Recall cost per call: labmem (term index + heap) vs naive (score + sort all)")
        print(recall.to_string(index=False))
        print()
        print("Peak RSS vs token budget (one subprocess per budget)")
        print(rss.to_string(index=False))
    args.csv_dir.mkdir(parents=True, exist_ok=True)
    recall.to_csv(args.csv_dir / "mmu_recall.csv", index=False)
    rss.to_csv(args.csv_dir / "mmu_rss.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
