"""Benchmark: externalizing large tool output, and reference-aware cleanup.

Part 1 — externalize. For 1 MB and 10 MB of tool output (multi-line ASCII log text)
it times, interleaved rep by rep so that disk noise hits both alike:

* ``labmem externalize`` — :meth:`ToolResultExternalizer.externalize`: measure the
  output, encode it, SHA-256 it, create the body with ``O_EXCL``, write, ``fsync``,
  ``fsync`` the directory, append one manifest line (lock, ``fsync``), build the
  bounded pointer;
* ``plain write+fsync`` — the same bytes written to a new file with ``os.write`` and
  ``os.fsync``: no digest, no manifest, no pointer — the physical limit.

It also prints the pointer's size (what stays in the context) and the time of one
verified ``read_artifact`` page (which re-hashes the whole body).

Part 2 — cleanup over N artifacts (default 1,000; a quarter referenced by committed
leases, all past the TTL). ``plan`` hashes every file and folds the journal; ``apply``
takes the journal lock, re-reads the claims and re-hashes each orphan right before
deleting it. The peer is a naive sweep (``listdir`` + ``lstat`` + ``unlink`` of the
same orphans) that checks no reference and no digest: what cleanup costs over
"just delete old files".

Run it::

    python bench/artifacts.py            # 1 MB and 10 MB, 1,000 artifacts
    python bench/artifacts.py --quick    # smoke run: 1 MB, 100 artifacts

Results go to ``bench/results/artifacts.csv`` (git-ignored). All files live in a
temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from labmem.artifacts import (
    ExternalizationPolicy,
    LeaseJournal,
    RetentionClaim,
    ToolResultExternalizer,
    apply_cleanup,
    plan_cleanup,
)
from labmem.core.clock import FixedClock

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_CSV = BENCH_DIR / "results" / "artifacts.csv"
T0 = "2026-08-01T00:00:00Z"
MB = 1_000_000


def log_text(size: int) -> str:
    """Deterministic multi-line ASCII 'build log' of exactly ``size`` characters."""
    line = "step 000000: compiled module ok, 0 warnings\n"
    lines = [line.replace("000000", f"{i:06d}") for i in range(size // len(line) + 1)]
    return "".join(lines)[:size]


def plain_write(path: Path, body: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def bench_externalize(root: Path, size: int, reps: int) -> dict[str, object]:
    output = log_text(size)
    body = output.encode()
    ex = ToolResultExternalizer(root / f"ext-{size}", clock=FixedClock(T0))
    plain_dir = root / f"plain-{size}"
    plain_dir.mkdir()
    labmem_s, plain_s, read_s = [], [], []
    pointer_bytes = 0
    for rep in range(reps):
        start = time.perf_counter()
        result = ex.externalize(output, "bash")
        labmem_s.append(time.perf_counter() - start)
        pointer_bytes = len(result.context_text.encode())
        start = time.perf_counter()
        plain_write(plain_dir / f"{rep}.txt", body)
        plain_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        ex.read_artifact(result.artifact, offset=100, limit=50)
        read_s.append(time.perf_counter() - start)
    labmem_ms = statistics.median(labmem_s) * 1000
    plain_ms = statistics.median(plain_s) * 1000
    return {"part": "externalize", "size_bytes": size, "n": reps,
            "labmem_ms": round(labmem_ms, 2), "peer_ms": round(plain_ms, 2),
            "ratio": round(labmem_ms / plain_ms, 2), "pointer_bytes": pointer_bytes,
            "read_page_ms": round(statistics.median(read_s) * 1000, 2)}


def make_session(directory: Path, count: int) -> tuple[LeaseJournal, list[str]]:
    """``count`` small artifacts (a low threshold keeps them ~2 KB); every 4th referenced."""
    clock = FixedClock(T0)
    ex = ToolResultExternalizer(directory, clock=clock,
                                policy=ExternalizationPolicy(bash_max_chars=100))
    journal = LeaseJournal(directory, clock=clock)
    orphans = []
    for i in range(count):
        artifact = ex.externalize(f"artifact {i}\n" * 150, "bash").artifact
        if i % 4 == 0:
            journal.prepare(RetentionClaim.for_reference(f"tx-{i}", artifact))
            journal.commit(f"tx-{i}")
        else:
            orphans.append(artifact.filename)
    return journal, orphans


def bench_cleanup(root: Path, count: int) -> dict[str, object]:
    journal, orphans = make_session(root / "cleanup", count)
    naive_dir = root / "naive"
    shutil.copytree(root / "cleanup" / "tool-results", naive_dir)
    now = FixedClock(T0).now() + timedelta(days=2)
    start = time.perf_counter()
    plan = plan_cleanup(journal=LeaseJournal(journal.session_dir), now=now)
    plan_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    report = apply_cleanup(plan, journal=LeaseJournal(journal.session_dir), now=now)
    apply_ms = (time.perf_counter() - start) * 1000
    assert sorted(report.deleted) == sorted(orphans), "cleanup deleted the wrong files"
    doomed = set(orphans)
    start = time.perf_counter()
    for name in sorted(os.listdir(naive_dir)):
        os.lstat(naive_dir / name)
        if name in doomed:
            os.unlink(naive_dir / name)
    naive_ms = (time.perf_counter() - start) * 1000
    total = plan_ms + apply_ms
    return {"part": "cleanup", "size_bytes": count, "n": len(report.deleted),
            "labmem_ms": round(total, 2), "peer_ms": round(naive_ms, 2),
            "ratio": round(total / naive_ms, 2), "plan_ms": round(plan_ms, 2),
            "apply_ms": round(apply_ms, 2),
            "retained": len(plan.decisions) - len(plan.to_delete)}


def render(rows: list[dict[str, object]]) -> str:
    out = ["Externalize (median per output; peer = plain write + fsync of the same bytes)",
           f"{'size':>8} {'reps':>5} {'labmem ms':>10} {'plain ms':>9} {'ratio':>6} "
           f"{'pointer B':>10} {'read page ms':>13}"]
    for row in rows:
        if row["part"] == "externalize":
            out.append(f"{row['size_bytes'] / MB:>6.0f}MB {row['n']:>5} {row['labmem_ms']:>10} "
                       f"{row['peer_ms']:>9} {row['ratio']:>6} {row['pointer_bytes']:>10,} "
                       f"{row['read_page_ms']:>13}")
    out += ["", "Cleanup (plan + apply; peer = naive listdir + unlink, no claims, no digests)",
            f"{'files':>6} {'deleted':>8} {'kept':>5} {'plan ms':>8} {'apply ms':>9} "
            f"{'labmem ms':>10} {'naive ms':>9} {'ratio':>6}"]
    for row in rows:
        if row["part"] == "cleanup":
            out.append(f"{row['size_bytes']:>6} {row['n']:>8} {row['retained']:>5} "
                       f"{row['plan_ms']:>8} {row['apply_ms']:>9} {row['labmem_ms']:>10} "
                       f"{row['peer_ms']:>9} {row['ratio']:>6}")
    return "\n".join(out)


def write_csv(rows: list[dict[str, object]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = ["part", "size_bytes", "n", "labmem_ms", "peer_ms", "ratio", "pointer_bytes",
              "read_page_ms", "plan_ms", "apply_ms", "retained"]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 MB, 100 artifacts")
    parser.add_argument("--reps", type=int, help="externalize repetitions (default 5)")
    parser.add_argument("--artifacts", type=int, help="artifacts for cleanup (default 1000)")
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="where to write the CSV")
    parser.add_argument("--no-csv", action="store_true", help="print only")
    parser.add_argument("--dir", type=Path, help="create the temporary directory here")
    args = parser.parse_args(argv)
    sizes = [MB] if args.quick else [MB, 10 * MB]
    reps = args.reps or (2 if args.quick else 5)
    count = args.artifacts or (100 if args.quick else 1_000)
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="labmem-bench-artifacts-", dir=args.dir))
    try:
        rows = [bench_externalize(root, size, reps) for size in sizes]
        rows.append(bench_cleanup(root, count))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(render(rows))
    if not args.no_csv:
        write_csv(rows, args.csv)
    print(f"\nTotal run time: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
