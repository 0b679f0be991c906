"""s10 distill with nothing new, flat in history: the ``daily/`` marker (issue 18).

A distill with nothing new used to ``stat`` every daily file up to the cutoff. It now
compares one number, the ``daily/`` directory's mtime that every append bumps, with the
one its cursors recorded — and trusts it only when it was already older than
curated.json when that was written (the "racy git" rule: a coarse clock can give a later
append the same timestamp). These tests make the appends that must still be seen: from
another process, from another instance, into an old file, into a new file, and in the
same timestamp tick.
"""

import json
import os
from datetime import timedelta

import pytest

from labmem.core.clock import format_timestamp
from labmem.workspace import DistillPolicy, WorkspaceMemory
from tests.file_access import FileAccess
from tests.procs import run_child
from tests.workspace import workers
from tests.workspace.test_distill_cursors import T0, Oracle, _history, make

POLICY, AS_OF = DistillPolicy(), T0 + timedelta(days=70)
OLD = 1_500_000_000 * 10**9  # 2017, in ns: a marker set long before any distill


def _distilled(root, days=10):
    """A distilled history, the full fold beside it (the oracle: every fact of every daily
    file, folded again each time), and the report of a distill with nothing new."""
    ws, oracle = _history(root, days=days), Oracle()
    assert ws.distill(policy=POLICY, as_of=AS_OF) == oracle.distill(ws, POLICY, AS_OF)
    again = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (again.created, again.updated) == (0, 0)
    assert again == oracle.distill(ws, POLICY, AS_OF)
    return ws, oracle, again


@pytest.mark.parametrize("day", [3, 20], ids=["old file", "new file"])
def test_an_append_by_another_process_is_picked_up(tmp_path, day):
    root = tmp_path / "project"
    ws, oracle, again = _distilled(root)
    late = format_timestamp(T0 + timedelta(days=day, hours=20))  # day 3 has a file, 20 not
    assert (root / "daily" / f"2026-06-{day + 1:02d}.jsonl").exists() == (day == 3)
    assert run_child(workers.append_fact_at, root, "note 1", late, "t:late") == 0
    report = ws.distill(policy=POLICY, as_of=AS_OF)  # the same instance, same arguments
    assert (report.scanned, report.updated) == (again.scanned + 1, 1)
    assert report == oracle.distill(ws, POLICY, AS_OF)
    assert "t:late" in {i for e in ws.curated_entries() for i in e.evidence_ids}


def test_an_append_by_another_instance_into_a_new_daily_file_is_picked_up(tmp_path):
    root = tmp_path / "project"
    ws, oracle, again = _distilled(root)
    other = make(root)
    other.append_fact("note 2", kind="pitfall", evidence=["t:new-day"],
                      recorded_at=T0 + timedelta(days=20))  # a day with no file yet
    assert (root / "daily" / "2026-06-21.jsonl").exists()
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (report.scanned, report.updated) == (again.scanned + 1, 1)
    assert report == oracle.distill(ws, POLICY, AS_OF)


def test_an_append_in_the_same_timestamp_tick_is_picked_up(tmp_path, monkeypatch):
    """A clock that ticks coarsely: the marker, curated.json and a later append all
    carry the same timestamp. The marker is unchanged, yet the append must be seen."""
    root = tmp_path / "project"
    ws, oracle, again = _distilled(root)
    tick = os.stat(root / "daily").st_mtime_ns
    os.utime(root / "curated.json", ns=(tick, tick))  # written in the marker's tick

    def coarse_bump(self):
        os.utime(self.daily_dir, ns=(tick, tick))  # the append lands in the same tick

    monkeypatch.setattr(WorkspaceMemory, "_mark_daily_changed", coarse_bump)
    make(root).append_fact("note 1", kind="pitfall", evidence=["t:same-tick"],
                           recorded_at=T0 + timedelta(days=2, hours=20))
    assert os.stat(root / "daily").st_mtime_ns == tick  # the marker did not move
    report = make(root).distill(policy=POLICY, as_of=AS_OF)
    assert (report.scanned, report.updated) == (again.scanned + 1, 1)
    assert report == oracle.distill(ws, POLICY, AS_OF)


def test_a_distill_with_nothing_new_reads_no_listing_of_the_logs(tmp_path):
    """With the marker older than curated.json, no daily file is opened, stat'ed by
    name in a listing, or listed: the cost does not depend on how many there are."""
    root = tmp_path / "project"
    ws = _history(root, days=40)
    os.utime(root / "daily", ns=(OLD, OLD))  # the logs were written long ago
    first = ws.distill(policy=POLICY, as_of=AS_OF)
    seen = FileAccess.start(root, ("open", "os.listdir", "os.scandir"))
    try:
        again = make(root).distill(policy=POLICY, as_of=AS_OF)
    finally:
        FileAccess.stop()
    assert (again.scanned, again.created, again.updated) == (first.scanned, 0, 0)
    assert not [e for e in seen if e[0] != "open"]  # no listdir, no scandir
    assert {name for _, name in seen} - {"MEMORY.md"} == {"workspace.json", "curated.json"}


def test_a_distill_with_nothing_new_trusts_the_stamp_of_memory_md(tmp_path):
    """MEMORY.md is dated 1 ns before curated.json: a distill with nothing new that finds
    that date (and the recorded size) does not read it (its cost does not grow with the
    curated view); any write of it since carries a later date."""
    root = tmp_path / "project"
    ws = _history(root, days=5)
    ws.distill(policy=POLICY, as_of=AS_OF)
    probe = tmp_path / "probe"
    probe.write_text("x")
    os.utime(probe, ns=(OLD + 1, OLD + 1))
    if probe.stat().st_mtime_ns != OLD + 1:  # pragma: no cover
        pytest.skip("this filesystem does not keep nanoseconds: MEMORY.md is hashed")
    assert os.stat(root / "MEMORY.md").st_mtime_ns == os.stat(root / "curated.json").st_mtime_ns - 1
    seen = FileAccess.start(root, ("open", "os.listdir", "os.scandir"))
    try:
        again = make(root).distill(policy=POLICY, as_of=AS_OF)
    finally:
        FileAccess.stop()
    assert (again.created, again.updated) == (0, 0)
    assert "MEMORY.md" not in {name for _, name in seen}


def test_a_rewrite_that_keeps_the_cursors_drops_the_marker(tmp_path):
    """Only a distill that lists the logs may record the marker: a resolution rewrites
    curated.json later, and its mtime would make a marker recorded in an append's tick
    look safe."""
    root = tmp_path / "project"
    ws = make(root)
    for value, n, evidence in (("A", 0, "t:1"), ("B", 5, "t:2"), ("B", 5, "t:3"),
                               ("C", 6, "t:4"), ("C", 6, "t:5")):
        ws.append_fact(value, kind="decision", memory_key="k", importance=5 if n == 0 else 3,
                       evidence=[evidence], recorded_at=T0 + timedelta(days=n))
    ws.distill(policy=POLICY, as_of=AS_OF)
    ws.distill(policy=POLICY, as_of=AS_OF + timedelta(days=1))  # the rivals are old enough
    assert type(_header(root)["marker"]) is int
    (case,) = ws.list_conflicts()
    ws.resolve_conflict(case.conflict_id, "c1", expected_revision=case.base_revision,
                        actor="ann", rationale="test")
    assert _header(root)["marker"] is None and _header(root)["report"] is None
    report = make(root).distill(policy=POLICY, as_of=AS_OF + timedelta(days=1))
    assert type(_header(root)["marker"]) is int  # the next distill records it again
    assert report.conflicts == 0


def _header(root):
    return json.loads((root / "curated.json").read_text(encoding="utf-8"))["distill"]
