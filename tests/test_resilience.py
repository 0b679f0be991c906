"""The resilience scorecard: every case passes on labmem and fails on a broken double."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labmem import resilience
from labmem.resilience import CaseResult, run_case, run_scorecard
from tests import resilience_doubles as doubles


def test_every_case_passes_on_labmem(tmp_path):
    lines = []
    results, report = run_scorecard(tmp_path / "out", out=lines.append)
    assert all(r.passed for r in results), [r for r in results if not r.passed]
    assert lines[-2] == f"Passed: {len(results)}/{len(results)}"
    data = json.loads(report.read_text())
    assert data["passed"] == data["total"] == len(results) >= 12


@pytest.mark.parametrize("name, run", [
    ("concurrent_duplicate_write",
     lambda d: resilience.concurrent_duplicate_write(d, doubles.no_lock_store)),
    ("id_collision_different_content",
     lambda d: resilience.id_collision_different_content(d, doubles.swallowing_store)),
    ("cross_scope_open", lambda d: resilience.cross_scope_open(d, doubles.scope_blind_store)),
    ("torn_complete_line", lambda d: resilience.torn_complete_line(d, doubles.lenient_store)),
    ("unterminated_tail", lambda d: resilience.unterminated_tail(d, doubles.tail_blind_store)),
    ("sigkill_mid_stream",
     lambda d: resilience.sigkill_mid_stream(d, "tests.resilience_doubles:buffering_store")),
    ("recall_after_restart",
     lambda d: resilience.recall_after_restart(d, make_engine=doubles.WritingEngine)),
    ("tampered_artifact",
     lambda d: resilience.tampered_artifact(d, doubles.trusting_externalizer)),
    ("lease_publication_crash",
     lambda d: resilience.lease_publication_crash(
         d, "tests.resilience_doubles:publish_first_journal")),
    ("lease_journal_truncation",
     lambda d: resilience.lease_journal_truncation(d, doubles.headless_journal)),
    ("publish_retry_after_unknown_outcome",
     lambda d: resilience.publish_retry_after_unknown_outcome(d, doubles.republishing_journal)),
    ("symlinked_tool_results",
     lambda d: resilience.symlinked_tool_results(d, doubles.symlink_following_externalizer)),
])
def test_each_case_fails_against_a_broken_double(tmp_path, name, run):
    result = run_case(name, run, tmp_path)
    assert result.case == name and not result.passed, result


def test_the_sigkill_observation_does_not_depend_on_timing(tmp_path):
    """The writer may finish a few more records before the signal lands; the observation
    reports only what is promised (the acknowledged ones), so it reads the same every run."""
    result = resilience.sigkill_mid_stream(tmp_path)
    assert result.passed
    assert result.observed == ("30 acknowledged before SIGKILL, 30 of them stored after it; "
                               "missing 0, duplicated 0")


def test_every_case_has_a_double():
    marker = test_each_case_fails_against_a_broken_double.pytestmark[0]
    assert sorted(name for name, _ in marker.args[1]) == sorted(resilience.all_cases())


def test_an_exploding_case_fails_alone_and_the_rest_run(tmp_path):
    def explode(workdir):
        raise RuntimeError("boom")

    lines = []
    results, _ = run_scorecard(tmp_path, cases={"explodes": explode,
                                                "fine": lambda d: CaseResult("fine", True, "ok")},
                               out=lines.append)
    assert [r.passed for r in results] == [False, True]
    assert lines[0].startswith("[FAIL] explodes: unexpected RuntimeError: boom")
    assert lines[2] == "Passed: 1/2"


def test_cli_exit_code_and_report(tmp_path):
    done = subprocess.run([sys.executable, "-m", "labmem.cli", "resilience", "--output-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[PASS] sigkill_mid_stream" in done.stdout
    assert Path(tmp_path / "resilience_report.json").exists()
