"""The recall-at-scale benchmark runs end to end (tiny sizes; its numbers are not checked)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "recall_scale"
ENGINES = ("labmem-jsonl/teaching", "labmem-jsonl/bm25", "labmem-jsonl/bm25_recency",
           "labmem-sqlite/bm25", "rank_bm25", "bm25s", "fts5")


def test_recall_scale_benchmark_runs_quick(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "recall_scale.py"), "--quick",
         "--out", str(out), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "p50 µs" in done.stdout and "peak MiB" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("target: labmem best p50 at 1,000")

    document = json.loads((out / f"{NAME}.json").read_text(encoding="utf-8"))
    ran = {(row["records"], row["engine"]) for row in document["results"]}
    for engine in ENGINES:  # every engine has a row at both sizes, or says why it cannot run
        if engine in document["skipped"]:
            assert f"skipped {engine}" in done.stdout
            continue
        assert {(300, engine), (1_000, engine)} <= ran
        assert engine in done.stdout
    assert not document["failures"]
    assert {"labmem-jsonl/teaching", "rank_bm25", "bm25s", "fts5"} - set(document["skipped"])

    markdown = (out / f"{NAME}.md").read_text(encoding="utf-8")
    assert "| records | engine |" in markdown and "python bench/recall_scale.py --quick" in markdown
    assert str(tmp_path) not in markdown  # no machine-specific paths in the report
    assert (out / f"{NAME}.png").read_bytes().startswith(b"\x89PNG")
    assert (out / f"{NAME}.csv").read_text().startswith("records,engine,")
    assert list(tmp_path.iterdir()) == [out]  # the temporary directory was removed


def test_recall_cold_runs_every_engine_with_dense_and_fused(tmp_path):
    """The cold-start table at the smallest size that writes a sidecar (1,000 records):
    every engine opened by a new process, and the dense and fused rows beside the
    contextual scorer's, with the vectors' size on disk."""
    out, cache = tmp_path / "out", tmp_path / "cache"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "recall_scale.py"), "--cold", str(cache),
         "--sizes", "1000", "--queries", "5", "--rounds", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads((out / "recall_cold.json").read_text(encoding="utf-8"))
    entry = document["sizes"]["1000"]
    assert {"labmem-jsonl/contextual", "labmem-jsonl/dense", "labmem-jsonl/fused",
            "fts5", "tantivy"} <= set(entry["engines"])
    assert entry["files"]["vectors_bytes"] > 0
    for engine in ("labmem-jsonl/dense", "labmem-jsonl/fused"):
        row = entry["engines"][engine]
        assert row["open_first_s"] > 0 and row["peak_mib"] > 0 and row["vectors"]
    markdown = (out / "recall_cold.md").read_text(encoding="utf-8")
    assert "Dense and fused beside the contextual scorer" in markdown
    assert "| 1,000 | labmem-jsonl/fused |" in markdown
    assert str(tmp_path) not in markdown
