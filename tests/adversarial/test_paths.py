"""Paths (issue item 12): a symlink inside a session must not carry artifacts out of it.

The session directory is the trusted root. A ``tool-results/`` (or manifest, or manifest
lock) that is a symlink sends bodies, reads and cleanup's deletions elsewhere; every one of
them must be refused, and the source resolver must report ``denied``, never ``available``.
"""

from __future__ import annotations

import os

import pytest

from labmem.artifacts import (
    ArtifactAccessError,
    LeaseJournal,
    ToolResultExternalizer,
    apply_cleanup,
    plan_cleanup,
)
from labmem.context import SourcePointerResolver
from labmem.core.clock import FixedClock

T0 = "2026-08-01T00:00:00Z"
BIG_OUTPUT = "build line\n" * 5_000


def tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


@pytest.fixture
def roots(tmp_path):
    artifacts, outside = tmp_path / "artifacts", tmp_path / "outside"
    outside.mkdir()
    (artifacts / "s1").mkdir(parents=True)
    return artifacts, outside


def test_externalize_into_a_symlinked_tool_results_writes_nothing(roots):
    artifacts, outside = roots
    session = artifacts / "s1"
    os.symlink(outside, session / "tool-results")
    with pytest.raises(ArtifactAccessError, match="tool-results"):
        ToolResultExternalizer(session, clock=FixedClock(T0)).externalize(BIG_OUTPUT, "bash")
    assert tree(outside) == []
    assert tree(session) == ["tool-results"]  # not even a manifest or a lock file


def test_small_output_stays_inline_whatever_the_directory(roots):
    artifacts, outside = roots
    os.symlink(outside, artifacts / "s1" / "tool-results")
    result = ToolResultExternalizer(artifacts / "s1").externalize("short", "bash")
    assert result.artifact is None and result.context_text == "short"


def test_a_swapped_tool_results_is_refused_on_read_and_by_the_resolver(roots):
    artifacts, outside = roots
    session = artifacts / "s1"
    externalizer = ToolResultExternalizer(session, clock=FixedClock(T0))
    artifact = externalizer.externalize(BIG_OUTPUT, "bash").artifact
    resolver = SourcePointerResolver(transcript_root=artifacts, artifact_root=artifacts)
    assert resolver.resolve(artifact.source_id).status == "available"
    (session / "tool-results").rename(outside / "tool-results")  # the same bytes, elsewhere
    os.symlink(outside / "tool-results", session / "tool-results")
    for read in (lambda: externalizer.read_artifact(artifact),
                 lambda: externalizer.verify(artifact.source_id),
                 lambda: ToolResultExternalizer(session).read_artifact(artifact.source_id)):
        with pytest.raises(ArtifactAccessError):
            read()
    resolution = resolver.resolve(artifact.source_id)
    assert resolution.status == "denied" and resolution.evidence_sha256 is None


def test_a_symlink_to_another_sessions_tool_results_is_refused_too(roots):
    artifacts, _ = roots
    ToolResultExternalizer(artifacts / "s2", clock=FixedClock(T0)).externalize(BIG_OUTPUT,
                                                                               "bash")
    os.symlink(artifacts / "s2" / "tool-results", artifacts / "s1" / "tool-results")
    with pytest.raises(ArtifactAccessError):  # inside the artifact root, outside the session
        ToolResultExternalizer(artifacts / "s1").externalize(BIG_OUTPUT, "bash")
    assert len(tree(artifacts / "s2" / "tool-results")) == 1


def test_cleanup_never_deletes_through_a_symlinked_tool_results(roots):
    artifacts, outside = roots
    session = artifacts / "s1"
    artifact = ToolResultExternalizer(session, clock=FixedClock(T0)).externalize(
        BIG_OUTPUT, "bash").artifact
    journal = LeaseJournal(session, clock=FixedClock(T0))
    later = "2026-09-01T00:00:00Z"
    plan = plan_cleanup(journal=journal, now=later)
    assert [d.filename for d in plan.to_delete] == [artifact.filename]
    (session / "tool-results").rename(outside / "tool-results")
    os.symlink(outside / "tool-results", session / "tool-results")
    with pytest.raises(ArtifactAccessError):
        apply_cleanup(plan, journal=journal, now=later)
    with pytest.raises(ArtifactAccessError):
        plan_cleanup(journal=journal, now=later)
    assert tree(outside / "tool-results") == [artifact.filename]


@pytest.mark.parametrize("name", ["artifacts.jsonl", "artifacts.jsonl.lock"])
def test_a_symlinked_manifest_or_lock_is_refused(roots, name):
    artifacts, outside = roots
    victim = outside / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, artifacts / "s1" / name)
    with pytest.raises(ArtifactAccessError, match=name.replace(".", r"\.")):
        ToolResultExternalizer(artifacts / "s1").externalize(BIG_OUTPUT, "bash")
    assert victim.read_text() == "precious"
    assert tree(outside) == ["victim.txt"]
