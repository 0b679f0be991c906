"""s14 source verification: five states, owners asked afresh, nothing cached or excerpted."""

import os

import pytest

from labmem.artifacts.externalize import ToolResultExternalizer
from labmem.context import DurableContextState, DurableFact, render_durable_context
from labmem.context.sources import STATUSES, SourcePointerResolver, record_digest
from labmem.core.clock import FixedClock, SteppingClock
from labmem.core.errors import InvalidInputError
from labmem.transcript import Transcript

CLOCK = "2026-08-01T12:00:00Z"


@pytest.fixture
def roots(tmp_path):
    transcripts, artifacts = tmp_path / "sessions", tmp_path / "artifacts"
    t = Transcript(transcripts / "s1.jsonl", clock=SteppingClock(CLOCK))
    t.append({"type": "message", "role": "user", "content": "Migrate to SQLite."})
    t.append({"type": "message", "role": "assistant", "content": "Chose WAL."})
    ext = ToolResultExternalizer(artifacts / "s1", clock=FixedClock(CLOCK))
    artifact = ext.externalize("line of build output\n" * 3_000, "bash").artifact
    return transcripts, artifacts, t, ext, artifact


def resolver(roots, **kw):
    return SourcePointerResolver(transcript_root=roots[0], artifact_root=roots[1], **kw)


def body_path(roots):
    return roots[1] / "s1" / "tool-results" / roots[4].filename


def test_available_transcript_and_artifact(roots):
    r = resolver(roots)
    event = r.resolve("transcript:s1:2")
    assert event.status == "available"
    assert event.evidence_sha256 == record_digest(roots[2].lookup("transcript:s1:2"))
    art = r.resolve(roots[4].source_id)
    assert art.status == "available" and art.evidence_sha256 == roots[4].sha256
    full = f"artifact:s1:{roots[4].filename}:{roots[4].sha256}"
    assert r.resolve(full).status == "available"


@pytest.mark.parametrize("pointer, reason", [
    ("transcript:s1:3", "no such event"),
    ("transcript:s9:1", "no such session"),
    ("artifact:s9:x.txt:0123456789ab", "no such session"),
    ("artifact:s1:000099-bash-0123456789ab.txt:0123456789ab", "no such artifact"),
])
def test_missing(roots, pointer, reason):
    resolution = resolver(roots).resolve(pointer)
    assert (resolution.status, resolution.reason) == ("missing", resolution.reason)
    assert reason in resolution.reason and resolution.evidence_sha256 is None


def test_cleaned_up_artifact_is_missing_at_the_next_assembly(roots):
    r = resolver(roots)
    assert r.resolve(roots[4].source_id).status == "available"
    body_path(roots).unlink()
    assert r.resolve(roots[4].source_id).status == "missing"


@pytest.mark.parametrize("pointer", ["transcript:s1", "transcript:s1:0", "transcript:../x:1",
                                     "artifact:s1:a/b.txt:0123456789ab", "artifact:s1:x.txt:xyz",
                                     "", "transcript:s1:2\nforged"])
def test_malformed_pointers_are_corrupt(roots, pointer):
    assert resolver(roots).resolve(pointer).status == "corrupt"


def test_tampered_body_and_digest_mismatch_are_corrupt(roots):
    r = resolver(roots)
    wrong = f"artifact:s1:{roots[4].filename}:{'0' * 64}"
    assert r.resolve(wrong).status == "corrupt"
    body_path(roots).write_bytes(b"tampered")
    assert r.resolve(roots[4].source_id).status == "corrupt"


def test_corrupt_transcript(roots):
    with open(roots[0] / "s1.jsonl", "ab") as handle:
        handle.write(b"not json\n")
    resolution = resolver(roots).resolve("transcript:s1:1")
    assert resolution.status == "corrupt" and "line 3" in resolution.reason


def test_denied_by_authorize_before_any_file_access(tmp_path):
    asked = []

    def authorize(pointer):
        asked.append(pointer)
        return False

    r = SourcePointerResolver(transcript_root=tmp_path / "absent", artifact_root=tmp_path / "x",
                              authorize=authorize)
    assert r.resolve("transcript:s1:1").status == "denied"
    assert asked == ["transcript:s1:1"]
    assert not (tmp_path / "absent").exists()
    boom = SourcePointerResolver(transcript_root=tmp_path, artifact_root=tmp_path,
                                 authorize=lambda p: 1 / 0)
    assert boom.resolve("transcript:s1:1").status == "denied"


def test_symlinks_out_of_the_root_are_denied(roots, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.replace(roots[0] / "s1.jsonl", outside / "s1.jsonl")
    (roots[0] / "s1.jsonl").symlink_to(outside / "s1.jsonl")
    assert resolver(roots).resolve("transcript:s1:1").status == "denied"
    body = body_path(roots)
    (outside / "body").write_bytes(body.read_bytes())  # identical bytes, still denied
    body.unlink()
    body.symlink_to(outside / "body")
    assert resolver(roots).resolve(roots[4].source_id).status == "denied"


def test_other_schemes_are_unsupported(roots):
    resolution = resolver(roots).resolve("https://example.com/evidence")
    assert resolution.status == "unsupported"
    assert set(STATUSES) == {"available", "missing", "denied", "corrupt", "unsupported"}


def test_render_reflects_fresh_resolutions(roots):
    state = DurableContextState(facts=(
        DurableFact("f-1", "Chose WAL.", "transcript:s1:2", CLOCK),
        DurableFact("f-2", "Build log kept.", roots[4].source_id, CLOCK)))
    r = resolver(roots)
    before = render_durable_context(state, r.resolve_all(state.pointers()))
    assert before.count("source_status=available; evidence_sha256=") == 2
    body_path(roots).unlink()
    after = render_durable_context(state, r.resolve_all(state.pointers()))
    assert "source_status=missing; evidence_unavailable=true" in after
    assert "line of build output" not in before + after  # no excerpts, ever


def test_roots_are_validated():
    with pytest.raises(InvalidInputError, match="transcript_root"):
        SourcePointerResolver(transcript_root=None, artifact_root=".")
    with pytest.raises(InvalidInputError, match="authorize"):
        SourcePointerResolver(transcript_root=".", artifact_root=".", authorize="yes")
