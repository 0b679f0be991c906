"""s10 workspace memory: daily fact logs, distill, supersession, conflicts, projection."""

import json
import shutil
from datetime import datetime, timedelta, timezone

import pytest

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError, LabmemError, ScopeError
from labmem.core.provenance import MemorySource
from labmem.workspace import (
    RESOLUTION_BOUNDARIES,
    DistillPolicy,
    DistillReport,
    StaleResolutionError,
    WorkspaceConflictError,
    WorkspaceCorruptionError,
    WorkspaceDuplicateError,
    WorkspaceMemory,
    WorkspaceScopeError,
    WorkspaceValidationError,
)
from tests.procs import run_child, run_processes
from tests.workspace import workers as workspace_workers

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
AS_OF = datetime(2026, 9, 30, tzinfo=timezone.utc)  # default policy: cutoff 2026-08-31
POLICY = DistillPolicy()


def day(n, hour=9):
    """An instant ``n`` days after 2026-07-01 (day 0), well before the default cutoff."""
    return datetime(2026, 7, 1, hour, tzinfo=timezone.utc) + timedelta(days=n)


def make(tmp_path, **kw):
    kw.setdefault("workspace_id", "labmem-demo")
    return WorkspaceMemory(tmp_path / "project", clock=FixedClock(NOW), **kw)


def files(root):
    """Every file under ``root`` with its bytes (the lock file's content is not state)."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def keyed(ws, value, n, evidence, key="storage.engine", importance=3, hour=9):
    return ws.append_fact(value, kind="decision", memory_key=key, importance=importance,
                          evidence=[evidence], recorded_at=day(n, hour))


# -- 6. identity, the daily log, validation ------------------------------------------

def test_6_directory_and_identity_are_created_once(tmp_path):
    ws = make(tmp_path)
    doc = json.loads((tmp_path / "project" / "workspace.json").read_text())
    assert doc["workspace_id"] == "labmem-demo" and doc["workspace_scope"] == ws.workspace_scope
    again = WorkspaceMemory(tmp_path / "project", clock=FixedClock(NOW))  # id read back
    assert again.workspace_id == "labmem-demo"
    with pytest.raises(WorkspaceScopeError, match="belongs to workspace 'labmem-demo'"):
        WorkspaceMemory(tmp_path / "project", workspace_id="other", clock=FixedClock(NOW))


def test_6_a_generated_id_is_kept(tmp_path):
    first = WorkspaceMemory(tmp_path / "p", clock=FixedClock(NOW))
    assert WorkspaceMemory(tmp_path / "p").workspace_id == first.workspace_id


def test_6_fact_record_lands_in_its_day_file(tmp_path):
    ws = make(tmp_path)
    source = MemorySource("transcript:s1:5", "transcript_event", "WAL chosen", day(0))
    fact = ws.append_fact("Use SQLite WAL.", kind="decision", importance=4, source=source,
                          evidence=["transcript:s1:5", "transcript:s1:4"], recorded_at=day(0))
    stored = json.loads((tmp_path / "project/daily/2026-07-01.jsonl").read_text())
    assert stored == {"schema_version": 1, "workspace_scope": ws.workspace_scope,
                      "fact_id": "fact:2026-07-01:1", "recorded_at": "2026-07-01T09:00:00Z",
                      "kind": "decision", "content": "Use SQLite WAL.", "importance": 4,
                      "memory_key": None, "source": source.to_dict(),
                      "evidence": ["transcript:s1:4", "transcript:s1:5"]}
    assert fact.fact_id == "fact:2026-07-01:1" and fact.line == 1
    default = ws.append_fact("Ran the migration.", kind="outcome")
    assert default.recorded_at == NOW and default.importance == 3
    assert (tmp_path / "project/daily/2026-10-01.jsonl").exists()


def test_6_moving_the_project_keeps_its_memory(tmp_path):
    ws = make(tmp_path)
    ws.append_fact("Use SQLite WAL.", kind="decision", importance=5, recorded_at=day(0))
    shutil.move(tmp_path / "project", tmp_path / "moved")
    moved = WorkspaceMemory(tmp_path / "moved", clock=FixedClock(NOW))
    assert moved.distill(policy=POLICY, as_of=AS_OF).created == 1


@pytest.mark.parametrize("kwargs, field", [
    (dict(content=" "), "content"),
    (dict(content=7), "content"),
    (dict(kind="opinion"), "kind"),
    (dict(importance=0), "importance"),
    (dict(importance=6), "importance"),
    (dict(importance=True), "importance"),
    (dict(memory_key="Bad Key"), "memory_key"),
    (dict(evidence="transcript:1"), "evidence"),
    (dict(evidence=["ok", " "]), "evidence[1]"),
    (dict(source={"source_id": "x"}), "source"),
    (dict(recorded_at="2026-07-01T09:00:00"), "recorded_at"),
    (dict(recorded_at="2026-10-02T00:00:00Z"), "recorded_at"),
    (dict(fact_id="fact:2026-07-01:9"), "fact_id"),
    (dict(fact_id="has space"), "fact_id"),
])
def test_6_invalid_input_raises_before_writing(tmp_path, kwargs, field):
    ws = make(tmp_path)
    ws.append_fact("first", kind="outcome", recorded_at=day(0))
    before = files(tmp_path)
    args = {"content": "A fact.", "kind": "decision", **kwargs}
    with pytest.raises(WorkspaceValidationError) as info:
        ws.append_fact(args.pop("content"), **args)
    assert info.value.field == field
    assert isinstance(info.value, InvalidInputError) and isinstance(info.value, LabmemError)
    assert files(tmp_path) == before


def test_6_caller_fact_id_makes_appends_retry_safe(tmp_path):
    ws = make(tmp_path)
    first = ws.append_fact("Artifact stored.", kind="outcome", fact_id="txn-42",
                           evidence=["artifact:a1#sha256=ab"], recorded_at=day(0))
    before = files(tmp_path)
    fresh = make(tmp_path)  # a new process retrying after a crash
    assert fresh.append_fact("Artifact stored.", kind="outcome", fact_id="txn-42",
                             evidence=["artifact:a1#sha256=ab"], recorded_at=day(1)) == first
    assert files(tmp_path) == before
    with pytest.raises(WorkspaceDuplicateError, match="txn-42"):
        fresh.append_fact("Something else.", kind="outcome", fact_id="txn-42")
    assert fresh.get_fact("txn-42") == first and fresh.get_fact("nope") is None


def test_6_a_log_copied_from_another_workspace_is_refused(tmp_path):
    other = WorkspaceMemory(tmp_path / "other", workspace_id="other", clock=FixedClock(NOW))
    other.append_fact("Their decision.", kind="decision", importance=5, recorded_at=day(2))
    ws = make(tmp_path)
    ws.append_fact("Our decision.", kind="decision", importance=5, recorded_at=day(1))
    shutil.copy(tmp_path / "other/daily/2026-07-03.jsonl", tmp_path / "project/daily")
    before = files(tmp_path / "project")
    with pytest.raises(WorkspaceScopeError, match="2026-07-03.jsonl line 1") as info:
        ws.distill(policy=POLICY, as_of=AS_OF)
    assert isinstance(info.value, ScopeError)
    with pytest.raises(WorkspaceScopeError):
        ws.get_context_for_agent()
    with pytest.raises(WorkspaceScopeError):
        ws.append_fact("More.", kind="outcome", recorded_at=day(2))
    assert files(tmp_path / "project") == before


def test_6_torn_tail_is_ignored_then_repaired(tmp_path):
    ws = make(tmp_path)
    ws.append_fact("one", kind="outcome", recorded_at=day(0))
    path = tmp_path / "project/daily/2026-07-01.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"schema_version": 1, "fact_id": "fa')
    assert [f.content for f in make(tmp_path).get_context_for_agent().recent_facts] == ["one"]
    second = make(tmp_path).append_fact("two", kind="outcome", recorded_at=day(0, 10))
    assert second.fact_id == "fact:2026-07-01:2"
    assert [json.loads(x)["content"] for x in path.read_text().splitlines()] == ["one", "two"]


def test_6_corrupt_line_is_named(tmp_path):
    ws = make(tmp_path)
    ws.append_fact("one", kind="outcome", recorded_at=day(0))
    path = tmp_path / "project/daily/2026-07-01.jsonl"
    with open(path, "ab") as handle:
        handle.write(b"not json\n")
    with pytest.raises(WorkspaceCorruptionError, match="line 2"):
        ws.get_context_for_agent()


def _append_race(tmp_path, noop_lock, workers=3, per_worker=15):
    make(tmp_path)
    project = str(tmp_path / "project")
    per_process = run_processes(
        workspace_workers.append_many,
        lambda i, s: (project, i, per_worker, noop_lock, s.start, s.results), workers)
    return [fid for ids in per_process for fid in ids]


def test_6_concurrent_appenders_get_unique_ids(tmp_path):
    workers, per_worker = 3, 15
    ids = _append_race(tmp_path, noop_lock=False)
    assert len(set(ids)) == workers * per_worker
    lines = (tmp_path / "project/daily/2026-08-01.jsonl").read_text().split("\n")[:-1]
    assert sorted(json.loads(x)["fact_id"] for x in lines) == sorted(ids)
    assert [json.loads(x)["fact_id"] for x in lines] == [
        f"fact:2026-08-01:{n}" for n in range(1, workers * per_worker + 1)]


def test_6_control_without_the_lock_the_race_breaks(tmp_path):
    ids = _append_race(tmp_path, noop_lock=True)
    refused = [i for i in ids if i.startswith("refused")]
    assert refused or len(set(ids)) < len(ids)  # duplicate ids, or appends refused


# -- 7. distill policy, merging, idempotence ---------------------------------------------

def test_7_policy_defaults_and_validation():
    assert POLICY.to_dict() == {"minimum_age_days": 30, "minimum_importance": 4,
                                "repeat_threshold": 2, "supersession_repeat_threshold": 2,
                                "stable_kinds": ["convention", "decision", "pitfall"]}
    for kwargs, field in [(dict(minimum_age_days=-1), "policy.minimum_age_days"),
                          (dict(minimum_importance=9), "policy.minimum_importance"),
                          (dict(repeat_threshold=0), "policy.repeat_threshold"),
                          (dict(stable_kinds={"opinion"}), "policy.stable_kinds")]:
        with pytest.raises(WorkspaceValidationError) as info:
            DistillPolicy(**kwargs)
        assert info.value.field == field


def populate(ws):
    ws.append_fact("Use SQLite WAL for the local store.", kind="decision",
                   evidence=["transcript:s1:4"], recorded_at=day(0))
    ws.append_fact("use sqlite  WAL for the local store.", kind="decision",
                   evidence=["transcript:s2:9"], recorded_at=day(3))      # a repeat
    ws.append_fact("Tests need TZ=UTC.", kind="convention", importance=5,
                   recorded_at=day(1))                                    # important
    ws.append_fact("Flaky port 8080.", kind="pitfall", importance=2,
                   evidence=["transcript:s1:7"], recorded_at=day(2))       # once, minor
    ws.append_fact("Flaky port 8080.", kind="pitfall", importance=2,
                   evidence=["transcript:s1:7"], recorded_at=day(4))       # same evidence
    ws.append_fact("Migration ran in 4 s.", kind="outcome", importance=5,
                   recorded_at=day(1))                                    # not stable
    ws.append_fact("Never force-push main.", kind="convention", importance=5,
                   recorded_at=day(61))                                   # too young


def test_7_promotion_merging_and_report(tmp_path):
    ws = make(tmp_path)
    populate(ws)
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert report == DistillReport(scanned=7, eligible=5, created=2, updated=0, skipped=2,
                                   superseded=0, conflicts=0, stale=0)
    entries = {e.content: e for e in ws.curated_entries()}
    assert set(entries) == {"Use SQLite WAL for the local store.", "Tests need TZ=UTC."}
    wal = entries["Use SQLite WAL for the local store."]
    assert wal.evidence_ids == ("transcript:s1:4", "transcript:s2:9")
    assert wal.occurrences == 2 and len(wal.fact_ids) == 2
    # a third repeat later updates the same entry
    ws.append_fact("Use SQLite WAL for the local store.", kind="decision",
                   evidence=["transcript:s3:1"], recorded_at=day(5))
    again = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (again.created, again.updated, again.eligible) == (0, 1, 6)
    wal = {e.content: e for e in ws.curated_entries()}["Use SQLite WAL for the local store."]
    assert wal.occurrences == 3 and len(wal.evidence_ids) == 3


def test_7_the_cutoff_decides_and_stable_kinds_are_configurable(tmp_path):
    ws = make(tmp_path)
    populate(ws)
    later = ws.distill(policy=POLICY, as_of=NOW)  # cutoff 2026-09-01T12:00 passes day 61
    assert later.created == 3
    outcomes = DistillPolicy(stable_kinds={"outcome"})
    assert ws.distill(policy=outcomes, as_of=NOW).created == 1


def test_7_distill_is_idempotent_byte_for_byte(tmp_path):
    ws = make(tmp_path)
    populate(ws)
    keyed(ws, "PostgreSQL", 1, "t:1", importance=5)
    keyed(ws, "DuckDB", 10, "t:2", key="analytics.engine", importance=5)
    keyed(ws, "ClickHouse", 10, "t:3", key="analytics.engine", importance=5)  # a conflict
    first = ws.distill(policy=POLICY, as_of=AS_OF)
    before = files(tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "project").rglob("*")}
    second = WorkspaceMemory(tmp_path / "project", clock=FixedClock(NOW)).distill(
        policy=POLICY, as_of=AS_OF)
    assert files(tmp_path) == before
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "project").rglob("*")} == stamps
    assert (second.created, second.updated, second.superseded) == (0, 0, 0)
    assert second.conflicts == first.conflicts == 1


def test_7_distill_never_touches_the_daily_logs(tmp_path):
    ws = make(tmp_path)
    populate(ws)
    logs = files(tmp_path / "project" / "daily")
    ws.distill(policy=POLICY, as_of=AS_OF)
    ws.distill(policy=POLICY, as_of=NOW)
    assert files(tmp_path / "project" / "daily") == logs


def test_7_distill_reads_only_logs_up_to_the_cutoff(tmp_path):
    ws = make(tmp_path)
    populate(ws)
    young = tmp_path / "project/daily/2026-09-20.jsonl"
    young.write_text("garbage that distill must not read\n")
    assert ws.distill(policy=POLICY, as_of=AS_OF).scanned == 7  # the cutoff day is read


def test_7_distill_validates(tmp_path):
    ws = make(tmp_path)
    with pytest.raises(WorkspaceValidationError, match="as_of"):
        ws.distill(policy=POLICY, as_of="2026-10-02T00:00:00Z")  # later than the clock
    with pytest.raises(WorkspaceValidationError, match="as_of"):
        ws.distill(policy=POLICY, as_of="2026-09-01T00:00:00")
    with pytest.raises(WorkspaceValidationError, match="policy"):
        ws.distill(policy={"minimum_age_days": 1}, as_of=AS_OF)
    assert not (tmp_path / "project/curated.json").exists()


# -- 8. keyed facts: supersession, staleness, conflicts ----------------------------------

def test_8_supersession_needs_enough_independent_newer_evidence(tmp_path):
    ws = make(tmp_path)
    keyed(ws, "SQLite", 0, "t:1", importance=5)
    assert ws.distill(policy=POLICY, as_of=AS_OF).created == 1
    keyed(ws, "PostgreSQL", 10, "t:2")
    keyed(ws, "PostgreSQL", 11, "t:2")  # the same evidence again is not independent
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (report.created, report.superseded, report.skipped) == (0, 0, 2)
    assert [e.content for e in ws.curated_entries()] == ["SQLite"]
    keyed(ws, "PostgreSQL", 12, "t:3")
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (report.created, report.superseded) == (1, 1)
    chain = ws.revision_chain("storage.engine")
    assert [(e.entry_id, e.content, e.status) for e in chain] == [
        ("storage.engine#r1", "SQLite", "superseded"),
        ("storage.engine#r2", "PostgreSQL", "active")]
    assert chain[0].superseded_by == "storage.engine#r2"
    assert chain[1].supersedes == "storage.engine#r1"
    assert chain[1].evidence_ids == ("t:2", "t:3") and chain[1].occurrences == 3


def test_8_stale_evidence_cannot_roll_back(tmp_path):
    ws = make(tmp_path)
    keyed(ws, "SQLite", 0, "t:1", importance=5)
    keyed(ws, "PostgreSQL", 10, "t:2")
    keyed(ws, "PostgreSQL", 11, "t:3")
    ws.distill(policy=POLICY, as_of=AS_OF)
    assert ws.revision_chain("storage.engine")[-1].content == "PostgreSQL"
    for n, ev in [(2, "t:4"), (5, "t:5"), (9, "t:6")]:  # late-arriving, older evidence
        keyed(ws, "SQLite", n, ev)
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (report.stale, report.created, report.superseded) == (3, 0, 0)
    assert [e.content for e in ws.curated_entries()] == ["PostgreSQL"]
    keyed(ws, "SQLite", 20, "t:7")  # genuinely newer evidence counts again
    keyed(ws, "SQLite", 21, "t:8")
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (report.created, report.superseded, report.stale) == (1, 1, 3)
    assert [e.content for e in ws.revision_chain("storage.engine")] == [
        "SQLite", "PostgreSQL", "SQLite"]


def conflicted(tmp_path):
    ws = make(tmp_path)
    keyed(ws, "SQLite", 0, "t:1", importance=5)
    ws.distill(policy=POLICY, as_of=AS_OF)
    for n, ev in [(10, "t:2"), (11, "t:3")]:
        keyed(ws, "PostgreSQL", n, ev)
    for n, ev in [(10, "t:4"), (12, "t:5")]:
        keyed(ws, "DuckDB", n, ev)
    return ws


def test_8_equally_strong_rivals_fail_closed(tmp_path):
    ws = conflicted(tmp_path)
    curated_before = (tmp_path / "project/curated.json").read_bytes()
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (report.conflicts, report.created, report.superseded, report.skipped) == (1, 0, 0, 4)
    assert [e.content for e in ws.curated_entries()] == ["SQLite"]  # nothing changed
    entries_before = json.loads(curated_before)["entries"]
    assert json.loads((tmp_path / "project/curated.json").read_text())["entries"] == \
        entries_before
    [case] = ws.list_conflicts()
    assert case.conflict_id == "conflict:storage.engine:r1" and case.base_revision == 1
    assert [(c.candidate_id, c.content, c.strength) for c in case.candidates] == [
        ("c1", "DuckDB", 2), ("c2", "PostgreSQL", 2)]
    assert "Open conflicts" in ws.read_memory_md()
    # more evidence does not break the freeze: a human decides
    keyed(ws, "PostgreSQL", 13, "t:9")
    assert ws.distill(policy=POLICY, as_of=AS_OF).superseded == 0


def test_8_human_resolution_with_audit_record(tmp_path):
    ws = conflicted(tmp_path)
    ws.distill(policy=POLICY, as_of=AS_OF)
    [case] = ws.list_conflicts()
    with pytest.raises(StaleResolutionError, match="expected_revision"):
        ws.resolve_conflict(case.conflict_id, "c2", expected_revision=0, actor="ann",
                            rationale="x")
    with pytest.raises(WorkspaceValidationError, match="choose c1, c2"):
        ws.resolve_conflict(case.conflict_id, "c9", expected_revision=1, actor="ann",
                            rationale="x")
    with pytest.raises(WorkspaceValidationError) as info:
        ws.resolve_conflict(case.conflict_id, "c2", expected_revision=1, actor=" ",
                            rationale="x")
    assert info.value.field == "actor"
    assert not (tmp_path / "project/resolutions.jsonl").exists()
    resolution = ws.resolve_conflict(case.conflict_id, "c2", expected_revision=1, actor="ann",
                                     rationale="we need concurrent writers")
    assert ws.list_conflicts() == ()
    [settled] = ws.list_conflicts(include_resolved=True)
    assert settled.status == "resolved" and settled.resolution == resolution
    chain = ws.revision_chain("storage.engine")
    assert [(e.content, e.status, e.resolved_by) for e in chain] == [
        ("SQLite", "superseded", None),
        ("PostgreSQL", "active", "resolution:conflict:storage.engine:r1")]
    audit = (tmp_path / "project/resolutions.jsonl").read_text().split("\n")[:-1]
    assert len(audit) == 1 and json.loads(audit[0])["actor"] == "ann"
    # retry: same record, nothing written
    before = files(tmp_path)
    assert ws.resolve_conflict(case.conflict_id, "c2", expected_revision=1, actor="ann",
                               rationale="we need concurrent writers") == resolution
    assert files(tmp_path) == before
    with pytest.raises(WorkspaceConflictError, match="already resolved with 'c2'"):
        ws.resolve_conflict(case.conflict_id, "c1", expected_revision=1, actor="bob",
                            rationale="DuckDB!")
    # the rivals the human saw are stale now; the key does not reopen
    report = ws.distill(policy=POLICY, as_of=AS_OF)
    assert (report.conflicts, report.created, report.stale) == (0, 0, 2)


def _reference_files(tmp_path):
    ws = conflicted(tmp_path / "reference")
    ws.distill(policy=POLICY, as_of=AS_OF)
    ws.resolve_conflict("conflict:storage.engine:r1", "c2", expected_revision=1, actor="ann",
                        rationale="we benchmarked both")
    return files(tmp_path / "reference")


@pytest.mark.parametrize("boundary", RESOLUTION_BOUNDARIES)
def test_8_resolution_survives_a_crash_at_each_boundary(tmp_path, boundary):
    expected = _reference_files(tmp_path)
    ws = conflicted(tmp_path / "crash")
    ws.distill(policy=POLICY, as_of=AS_OF)
    project = tmp_path / "crash" / "project"
    code = run_child(workspace_workers.resolve_and_die_at, str(project), boundary,
                     "conflict:storage.engine:r1", "c2", 1)
    assert code == workspace_workers.CRASH_EXIT_CODE  # it really died there
    audit = (project / "resolutions.jsonl").read_text().split("\n")[:-1]
    assert len(audit) == 1  # the decision is durable from the first boundary on
    # a fresh reader sees the decision applied (it completes the missing steps) …
    reopened = WorkspaceMemory(project, clock=FixedClock(NOW))
    assert reopened.list_conflicts() == ()
    assert reopened.revision_chain("storage.engine")[-1].content == "PostgreSQL"
    # … and retrying the same call is a no-op that returns the same record
    retry = reopened.resolve_conflict("conflict:storage.engine:r1", "c2", expected_revision=1,
                                      actor="ann", rationale="we benchmarked both")
    assert retry.resolved_at == datetime(2026, 10, 1, 12, tzinfo=timezone.utc)
    assert files(tmp_path / "crash") == expected


def test_8_a_retry_alone_repairs_a_crash_before_the_curated_write(tmp_path):
    """Retry first (no reader in between): the audit line drives the repair."""
    ws = conflicted(tmp_path)
    ws.distill(policy=POLICY, as_of=AS_OF)
    project = tmp_path / "project"
    code = run_child(workspace_workers.resolve_and_die_at, str(project), "audit_appended",
                     "conflict:storage.engine:r1", "c1", 1)
    assert code == workspace_workers.CRASH_EXIT_CODE
    assert json.loads((project / "curated.json").read_text())["conflicts"][0]["status"] == "open"
    retry = WorkspaceMemory(project, clock=FixedClock(NOW)).resolve_conflict(
        "conflict:storage.engine:r1", "c1", expected_revision=1, actor="ann", rationale="later")
    assert retry.rationale == "we benchmarked both"  # the durable decision, not the retry's
    assert json.loads((project / "curated.json").read_text())["conflicts"][0]["status"] == \
        "resolved"
    assert "DuckDB" in (project / "MEMORY.md").read_text()


# -- 9. curated.json is canonical; MEMORY.md and the agent context are projections -----

def test_9_memory_md_is_repaired_when_edited_by_hand(tmp_path):
    ws = make(tmp_path)
    populate(ws)
    ws.distill(policy=POLICY, as_of=AS_OF)
    path = tmp_path / "project/MEMORY.md"
    good = path.read_text()
    assert "Use SQLite WAL" in good and "transcript:s2:9" in good
    path.write_text(good + "- We use MongoDB. (added by hand)\n")
    assert ws.read_memory_md() == good
    assert path.read_text() == good
    path.unlink()
    assert ws.read_memory_md() == good and path.read_text() == good


def test_9_curated_json_from_another_workspace_is_refused(tmp_path):
    other = WorkspaceMemory(tmp_path / "other", workspace_id="other", clock=FixedClock(NOW))
    other.append_fact("Theirs.", kind="decision", importance=5, recorded_at=day(0))
    other.distill(policy=POLICY, as_of=AS_OF)
    ws = make(tmp_path)
    shutil.copy(tmp_path / "other/curated.json", tmp_path / "project/curated.json")
    for call in (ws.read_memory_md, ws.list_conflicts, ws.get_context_for_agent,
                 lambda: ws.distill(policy=POLICY, as_of=AS_OF)):
        with pytest.raises(WorkspaceScopeError, match="curated.json"):
            call()


def test_9_context_is_projection_plus_recent_unkeyed_facts(tmp_path):
    ws = make(tmp_path)
    populate(ws)
    keyed(ws, "PostgreSQL", 71, "t:1", importance=5)  # keyed: only via its revision
    ws.distill(policy=POLICY, as_of=AS_OF)
    context = ws.get_context_for_agent(recent_limit=3)
    assert context.memory_md == ws.read_memory_md()
    assert [f.content for f in context.recent_facts] == [
        "Never force-push main.", "Flaky port 8080.", "use sqlite  WAL for the local store."]
    assert context.daily_files_read == 4  # days 71 (keyed only), 61, 4 and 3
    text = context.text
    assert text.startswith('<workspace_memory workspace_scope="') and "Tests need TZ=UTC." in text
    assert ws.get_context_for_agent(recent_limit=0).recent_facts == ()


def test_9_context_reads_only_the_newest_daily_files(tmp_path):
    ws = make(tmp_path)
    for n in range(30):
        for k in range(4):
            ws.append_fact(f"day {n} fact {k}", kind="outcome", recorded_at=day(n, 8 + k))
    (tmp_path / "project/daily/2026-07-01.jsonl").write_text("corrupt, but never read\n")
    context = make(tmp_path).get_context_for_agent(recent_limit=6)
    assert [f.content for f in context.recent_facts] == [
        "day 29 fact 3", "day 29 fact 2", "day 29 fact 1", "day 29 fact 0",
        "day 28 fact 3", "day 28 fact 2"]
    assert context.daily_files_read == 2
    one_file = (tmp_path / "project/daily/2026-07-30.jsonl").stat().st_size
    assert context.bytes_read <= 2 * one_file + 10


def test_9_context_validates_recent_limit(tmp_path):
    ws = make(tmp_path)
    for bad in (-1, 1.5, True, 10_000):
        with pytest.raises(WorkspaceValidationError) as info:
            ws.get_context_for_agent(recent_limit=bad)
        assert info.value.field == "recent_limit"


def test_import_does_no_io(tmp_path, monkeypatch):
    import importlib

    import labmem.workspace as module

    monkeypatch.chdir(tmp_path)
    importlib.reload(module)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", range(6))
def test_7_distill_is_idempotent_on_random_histories(tmp_path, seed):
    """Found by the benchmark: an old fact of a value that later became active must be
    classified the same way on every run (stale), not merged on the second one."""
    import random

    rng = random.Random(seed)
    ws = make(tmp_path)
    for i in range(300):
        keyed_fact = rng.random() < 0.6
        ws.append_fact(
            f"value {rng.randrange(3)}" if keyed_fact else f"note {rng.randrange(40)}",
            kind=rng.choice(["decision", "convention", "pitfall"]),
            importance=rng.randint(1, 5),
            memory_key=f"k{rng.randrange(4)}" if keyed_fact else None,
            evidence=[f"t:{rng.randrange(200)}"], recorded_at=day(rng.randrange(60), hour=i % 24))
    first = ws.distill(policy=POLICY, as_of=AS_OF)
    before = files(tmp_path)
    second = make(tmp_path).distill(policy=POLICY, as_of=AS_OF)
    assert files(tmp_path) == before
    assert (second.created, second.updated, second.superseded) == (0, 0, 0)
    assert (second.stale, second.conflicts) == (first.stale, first.conflicts)
