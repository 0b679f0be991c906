"""The workspace benchmark still runs end to end (tiny sizes; its numbers are not checked)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_workspace_benchmark_runs_quick(tmp_path):
    csv = tmp_path / "workspace.csv"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "workspace.py"), "--quick",
         "--csv", str(csv), "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "parse floor" in done.stdout and "labmem/floor" in done.stdout
    assert "naive/labmem" in done.stdout and "not with the log" in done.stdout
    assert csv.read_text().startswith("facts,")
