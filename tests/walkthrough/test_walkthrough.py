"""The layered-memory walkthrough end to end, offline, in a fresh process."""

import json
import os
import subprocess
import sys

import pytest

from labmem.artifacts.leases import LeaseJournal, PublicationRejected, RetentionClaim
from labmem.core.clock import FixedClock
from labmem.walkthrough import CHECKS, MANIFEST_NAME, WalkthroughError, run_walkthrough
from labmem.walkthrough.owner import WorkspaceReferenceOwner
from labmem.workspace import WorkspaceMemory

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
    assert lines[-1].startswith("RESULT: OK — ")
    manifest = json.loads((home / MANIFEST_NAME).read_text())
    assert list(manifest["checks"]) == list(CHECKS) and all(manifest["checks"].values())
    assert set(manifest) == {"checks", "layers", "artifacts"}
    text = json.dumps(manifest)
    assert str(tmp_path) not in text  # no absolute paths
    assert "test_case_0001 PASSED" not in json.dumps(manifest["layers"])  # no bodies
    assert all((home / f["path"]).is_file() for f in manifest["artifacts"])


def test_output_is_the_same_on_every_run(tmp_path):
    one = run_cli("walkthrough", "--home", str(tmp_path / "a")).stdout
    two = run_cli("walkthrough", "--home", str(tmp_path / "b")).stdout
    assert one == two


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


def test_without_home_a_temporary_directory_is_used_and_printed():
    done = run_cli("walkthrough")
    assert done.returncode == 0
    assert done.stdout.splitlines()[0].startswith("home: ")


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
