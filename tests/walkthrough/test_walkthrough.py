"""The layered-memory walkthrough end to end, offline, in a fresh process."""

import json
import os
import subprocess
import sys

import pytest

from labmem.artifacts.leases import LeaseJournal, PublicationRejected, RetentionClaim
from labmem.core.clock import FixedClock
from labmem.walkthrough import (
    CHECK_MEANINGS,
    CHECKS,
    MANIFEST_NAME,
    OWNERS,
    POLICY,
    Walkthrough,
    WalkthroughError,
    home_listing,
    run_walkthrough,
)
from labmem.walkthrough.owner import WorkspaceReferenceOwner
from labmem.workspace import DistillPolicy, WorkspaceMemory

START = "2026-08-01T12:00:00Z"
STAGES = ["[1] Transcript evidence", "[2] Artifact reference", "[3] Workspace log and distill",
          "[4] User preference dedup and isolation", "[5] Query-scoped recall",
          "[6] Crash-recovered artifact leases and cleanup",
          "[7] Compaction boundary — sources verified=2"]


def run_cli(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC", "OPENAI", "MODEL_ID"))}
    env.update(env_extra or {})
    code = ("import sys\nfrom labmem.cli import main\nrc = main(sys.argv[1:])\n"
            "assert not any(m.startswith(('anthropic', 'openai')) for m in sys.modules)\n"
            "sys.exit(rc)\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_end_to_end_in_a_subprocess_without_provider_variables(tmp_path):
    home = tmp_path / "home"
    done = run_cli("walkthrough", "--home", str(home), env_extra={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for expected, line in zip(STAGES, lines, strict=False):
        assert line.startswith(expected)
    assert lines[-2].startswith("RESULT: OK — ")
    assert lines[-1] == f"manifest: {home / MANIFEST_NAME}"  # where to find it, when kept
    manifest = json.loads((home / MANIFEST_NAME).read_text())
    assert list(manifest["checks"]) == list(CHECKS) and all(manifest["checks"].values())
    assert set(manifest) == {"checks", "layers", "artifacts"}
    text = json.dumps(manifest)
    assert str(tmp_path) not in text  # no absolute paths
    assert "test_case_0001 PASSED" not in json.dumps(manifest["layers"])  # no bodies
    assert "MongoDB" not in text  # the summarizer's lie is a view, not a report
    assert all((home / f["path"]).is_file() for f in manifest["artifacts"])


def test_output_is_the_same_on_every_run(tmp_path):
    one = run_cli("walkthrough", "--home", str(tmp_path / "a")).stdout.splitlines()
    two = run_cli("walkthrough", "--home", str(tmp_path / "b")).stdout.splitlines()
    assert one[:-1] == two[:-1]  # all but the line naming the manifest's own path


def test_reusing_a_home_fails_and_overwrites_nothing(tmp_path):
    home = tmp_path / "home"
    run_walkthrough(home, clock=FixedClock("2026-08-01T12:00:00Z"), out=lambda line: None)
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    done = run_cli("walkthrough", "--home", str(home))
    assert done.returncode == 2 and "already exists" in done.stderr
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "something").write_text("x")
    with pytest.raises(WalkthroughError, match="not empty"):
        run_walkthrough(tmp_path / "used", clock=FixedClock("2026-08-01T12:00:00Z"))


def test_without_home_the_run_leaves_nothing_behind(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = run_cli("walkthrough", env_extra={"TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2].startswith("RESULT: OK — ") and "add --home DIR to keep it" in lines[-1]
    assert list(scratch.iterdir()) == []  # the temporary home is gone


def test_a_failing_check_is_reported(tmp_path, monkeypatch):
    import labmem.walkthrough.run as run
    from labmem.context.sources import SourcePointerResolver, SourceResolution

    class Blind(SourcePointerResolver):  # a resolver that never finds anything
        def resolve(self, pointer):
            return SourceResolution(pointer, "missing", None, "blind")

    monkeypatch.setattr(run, "SourcePointerResolver", Blind)
    lines = []
    result = run.run_walkthrough(tmp_path / "h", clock=FixedClock("2026-08-01T12:00:00Z"),
                                 out=lines.append)
    assert not result.ok and result.failing() == ["sources_verified"]
    assert lines[-1] == "RESULT: FAILED — sources_verified"
    assert json.loads(result.manifest_path.read_text())["checks"]["sources_verified"] is False


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    home = tmp_path_factory.mktemp("walk") / "home"
    return home, run_walkthrough(home, clock=FixedClock(START), out=lambda line: None)


def test_the_checks_say_what_they_prove(finished):
    _, result = finished
    assert tuple(result.checks) == CHECKS == tuple(CHECK_MEANINGS)
    assert all(after in ("restart", "stage 6", "stage 7") and len(proves) > 40
               for after, proves in CHECK_MEANINGS.values())


def test_one_decision_is_followed_through_every_layer(finished):
    _, result = finished
    transcript, artifact, workspace, user, remote, _, context = result.stages
    asked, answer = transcript.details["events"]
    decision = transcript.details["candidate"]["source"]["source_id"]
    assert decision == answer["event_id"] and answer["role"] == "assistant"
    assert decision in workspace.details["curated"][0]["evidence_ids"]
    assert user.details["source_event_id"] == asked["event_id"]
    assert remote.details["hit"]["provenance"]["source_id"] == decision
    kept = artifact.details["reference"]["source_id"]
    assert workspace.details["outcome_fact"]["source_id"] == kept
    assert [r["pointer"] for r in context.details["resolutions"]] == [decision, kept]
    assert {r["status"] for r in context.details["resolutions"]} == {"available"}


def test_the_repeat_threshold_is_what_promotes_the_decision(finished):
    _, result = finished
    stage = result.stages[2]
    facts = stage.details["facts"]
    assert len(facts) == 2 and all(f["importance"] < POLICY.minimum_importance for f in facts)
    assert len({e for f in facts for e in f["evidence"]}) == POLICY.repeat_threshold == 2
    assert stage.details["promotion"]["alone"] == [False, False]
    assert stage.details["promotion"]["together"] is True
    [entry] = stage.details["curated"]
    assert entry["occurrences"] == 2 and len(entry["evidence_ids"]) == 2


def test_without_the_repeat_nothing_is_curated(tmp_path, monkeypatch):
    import labmem.walkthrough.run as run

    monkeypatch.setattr(run, "POLICY", DistillPolicy(minimum_age_days=0, repeat_threshold=3))
    result = run.run_walkthrough(tmp_path / "h", clock=FixedClock(START), out=lambda line: None)
    assert result.stages[2].details["curated"] == []
    assert result.failing() == ["workspace_deduplicated"]


def test_stage_by_stage_is_the_same_run(finished, tmp_path):
    _, whole = finished
    lines = []
    walk = Walkthrough(tmp_path / "h", clock=FixedClock(START), out=lines.append)
    stages = [walk.transcript_evidence(), walk.artifact_reference(), walk.workspace_distill(),
              walk.user_preference(), walk.recall()]
    restart_checks = walk.restart()
    stages += [walk.leases_and_cleanup(), walk.compaction()]
    result = walk.finish()
    assert tuple(s.line for s in stages) == result.lines == whole.lines == tuple(lines[:7])
    assert list(restart_checks) == list(CHECKS[:6]) and all(restart_checks.values())
    assert result.checks == whole.checks and result.ok


def test_stages_run_in_order_only(tmp_path):
    walk = Walkthrough(tmp_path / "h", clock=FixedClock(START), out=lambda line: None)
    with pytest.raises(WalkthroughError, match="next one is transcript_evidence"):
        walk.recall()
    walk.transcript_evidence()
    with pytest.raises(WalkthroughError, match="next one is artifact_reference"):
        walk.transcript_evidence()
    walk.run()
    with pytest.raises(WalkthroughError, match="run is finished"):
        walk.run()


def test_views_hold_what_the_manifest_leaves_out(finished):
    home, result = finished
    pointer = result.stages[1].views["pointer"]
    assert "test_case_0001 PASSED" in pointer  # the pointer's preview quotes the body
    context = result.stages[6]
    after = context.views["messages_after"]
    assert len(context.views["messages_before"]) == context.details["messages_before"] == 12
    assert len(after) == context.details["messages_after"] and "MongoDB" in after[0]["content"]
    assert "Chose SQLite in WAL mode" in context.views["durable_context"]
    assert "MongoDB" not in context.views["durable_context"]
    assert context.details["durable_tokens"] > 0
    assert "MongoDB" not in (home / MANIFEST_NAME).read_text()


def test_home_listing_names_each_file_and_its_owner(finished):
    home, _ = finished
    listing = home_listing(home)
    assert [f["path"] for f in listing] == sorted(f["path"] for f in listing)
    assert {f["owner"] for f in listing} == set(OWNERS.values())  # incl. the manifest
    assert all(not f["path"].endswith(".lock") and (home / f["path"]).stat().st_size
               == f["bytes"] for f in listing)
    manifest = json.loads((home / MANIFEST_NAME).read_text())
    assert manifest["artifacts"] == [f for f in listing if f["path"] != MANIFEST_NAME]


# -- the workspace as a ReferenceOwner --------------------------------------------------

@pytest.fixture
def owner_setup(tmp_path):
    from labmem.artifacts.externalize import ToolResultExternalizer

    clock = FixedClock("2026-08-01T12:00:00Z")
    ext = ToolResultExternalizer(tmp_path / "s1", clock=clock)
    artifact = ext.externalize("x\n" * 20_000, "bash").artifact
    workspace = WorkspaceMemory(tmp_path / "ws", workspace_id="w", clock=clock)
    return WorkspaceReferenceOwner(workspace), LeaseJournal(tmp_path / "s1", clock=clock), \
        artifact


def test_owner_reports_published_with_source_and_digest(owner_setup):
    owner, journal, artifact = owner_setup
    claim = RetentionClaim.for_reference("tx-1", artifact)
    journal.publish_reference(claim, lambda c: owner.publish(c, content="log", title="t"))
    status = owner.status("tx-1")
    assert (status.state, status.source_id, status.sha256) == ("published", artifact.source_id,
                                                               artifact.sha256)


def test_reconcile_commits_published_and_seals_absent(owner_setup):
    owner, journal, artifact = owner_setup
    published = RetentionClaim.for_reference("tx-pub", artifact)
    journal.prepare(published)
    owner.publish(published, content="log", title="t")  # crashed before commit
    lost = RetentionClaim.for_reference("tx-lost", artifact)
    journal.prepare(lost)  # crashed before the memory write
    report = journal.reconcile_pending(owner)
    assert report.committed == ("tx-pub",) and report.aborted == ("tx-lost",)
    with pytest.raises(PublicationRejected, match="sealed"):
        owner.publish(lost, content="a late write", title="t")
    assert owner.status("tx-lost").state == "absent"
    assert owner.seal_absent("tx-lost") == owner.seal_absent("tx-lost") == 1
