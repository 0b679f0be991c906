"""The artifacts benchmark still runs end to end (smoke sizes; its numbers are not checked)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_artifacts_benchmark_runs_quick(tmp_path):
    csv = tmp_path / "artifacts.csv"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "artifacts.py"), "--quick",
         "--csv", str(csv), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "Externalize" in done.stdout and "plain" in done.stdout
    assert "Cleanup" in done.stdout and "naive" in done.stdout
    assert csv.read_text().startswith("part,size_bytes,")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("labmem-bench")]
