"""The transcript/user-memory benchmark still runs end to end (tiny sizes; numbers unchecked)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_transcript_user_benchmark_runs_quick(tmp_path):
    csv = tmp_path / "out.csv"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "transcript_user.py"), "--quick",
                           "--csv", str(csv)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Per-append cost" in done.stdout and "set_preference" in done.stdout
    assert csv.read_text().startswith("events,")
