"""The store-backends benchmark runs end to end (tiny sizes; its numbers are not checked)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labmem.recall.postgres import INSTALL_HINT, find_server_binaries

ROOT = Path(__file__).resolve().parents[2]
NAME = "store_backends"
BACKENDS = ["jsonl", "sqlite", "postgres"]


@pytest.mark.skipif(find_server_binaries() is None,
                    reason=f"no PostgreSQL server binaries: `{INSTALL_HINT}`")
def test_store_backends_benchmark_runs_quick(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "store_backends.py"), "--quick",
         "--out", str(out), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "records/s" in done.stdout and "p50 µs" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("recall p50 at 300 records ÷ sqlite")

    document = json.loads((out / f"{NAME}.json").read_text(encoding="utf-8"))
    assert [(r["writers"], r["backend"]) for r in document["appends"]] == [
        (w, b) for w in (1, 4) for b in BACKENDS]
    assert [(r["records"], r["backend"]) for r in document["recall"]] == [
        (300, b) for b in BACKENDS]
    assert all(r["same_hits_as_sqlite"] for r in document["recall"])
    assert {r["x_sqlite"] for r in document["appends"] if r["backend"] == "sqlite"} == {1.0}
    assert not document["skipped"]

    markdown = (out / f"{NAME}.md").read_text(encoding="utf-8")
    assert "| writers | backend |" in markdown and "| records | backend |" in markdown
    assert "python bench/store_backends.py --quick" in markdown
    assert str(tmp_path) not in markdown  # no machine-specific paths in the report
    assert (out / f"{NAME}.png").read_bytes().startswith(b"\x89PNG")
    assert list(tmp_path.iterdir()) == [out]  # the temporary directory was removed
