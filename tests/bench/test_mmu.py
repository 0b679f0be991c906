"""The Context MMU benchmark still runs end to end (tiny sizes; its numbers are not checked)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mmu_benchmark_runs_quick(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mmu.py"), "--quick",
         "--csv-dir", str(tmp_path), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "naive_ratio" in done.stdout and "peak_rss_mib" in done.stdout
    assert "open_ratio" in done.stdout and "json_loads_ms" in done.stdout
    assert (tmp_path / "mmu_open.csv").read_text().startswith("pages,json_loads_ms,mmu_open_ms")
    assert "load average" in (tmp_path / "mmu.md").read_text()
    assert (tmp_path / "mmu_recall.csv").read_text().startswith("pages,")
    assert (tmp_path / "mmu_rss.csv").read_text().startswith("pages,")
