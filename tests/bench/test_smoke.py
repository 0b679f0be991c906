"""The store/recall benchmark still runs end to end (tiny sizes; its numbers are not checked)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_store_recall_benchmark_runs_quick(tmp_path):
    csv = tmp_path / "store_recall.csv"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "store_recall.py"), "--quick",
         "--csv", str(csv), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "labmem append" in done.stdout and "bare O_APPEND" in done.stdout
    assert "labmem recall" in done.stdout
    assert "Per-append cost" in done.stdout
    assert csv.read_text().startswith("records,")
