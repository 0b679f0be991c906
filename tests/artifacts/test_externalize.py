"""s13 externalization: thresholds, exclusive bodies, pointers, confined and verified reads."""

import hashlib
import json
import os
from datetime import datetime, timedelta

import pytest

from labmem.artifacts.externalize import (
    MAX_SUMMARY_CHARS,
    ArtifactAccessError,
    ArtifactCorruptionError,
    ArtifactIntegrityError,
    ArtifactMissingError,
    ArtifactReference,
    ArtifactValidationError,
    ExternalizationPolicy,
    ToolResultExternalizer,
    parse_source_id,
)
from labmem.core.clock import FixedClock
from labmem.core.errors import LabmemError
from tests.artifacts import workers as artifact_workers
from tests.procs import run_child, run_processes

T0 = "2026-08-01T00:00:00Z"


@pytest.fixture
def session(tmp_path):
    return tmp_path / "sess-42"


def make(session, clock=None, policy=None):
    return ToolResultExternalizer(session, clock=clock or FixedClock(T0), policy=policy)


def snapshot(directory):
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()} if directory.exists() else {}


def test_errors_share_the_labmem_base():
    for error in (ArtifactAccessError, ArtifactIntegrityError, ArtifactValidationError,
                  ArtifactCorruptionError, ArtifactMissingError):
        assert issubclass(error, LabmemError)
    assert issubclass(ArtifactValidationError, ValueError)


# -- 1. thresholds ---------------------------------------------------------------------

def test_bash_counts_characters_other_tools_count_bytes(session):
    ex = make(session)
    chinese = "中" * 20_000  # 20,000 characters, 60,000 bytes
    assert ex.externalize(chinese, "bash").artifact is None  # under 30,000 characters
    assert ex.externalize(chinese, "read_file").artifact is not None  # over 51,200 bytes
    assert ex.externalize("a" * 30_000, "bash").artifact is None  # the limit itself stays
    assert ex.externalize("a" * 30_001, "bash").artifact is not None
    assert ex.externalize("a" * 51_200, "grep").artifact is None
    assert ex.externalize("a" * 51_201, "grep").artifact is not None


def test_small_output_is_returned_inline_and_writes_nothing(session):
    result = make(session).externalize("total 0\n", "bash")
    assert result.context_text == "total 0\n" and result.artifact is None
    assert not session.exists()


def test_thresholds_are_configurable(session):
    ex = make(session, policy=ExternalizationPolicy(bash_max_chars=10, other_max_bytes=5))
    assert ex.externalize("x" * 11, "bash").artifact is not None
    assert ex.externalize("é" * 3, "grep").artifact is not None  # 6 bytes, 3 characters


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_policy_rejects_bad_limits(bad):
    with pytest.raises(ArtifactValidationError, match="policy.bash_max_chars"):
        ExternalizationPolicy(bash_max_chars=bad)


@pytest.mark.parametrize("name", ["", ".hidden", "sess:1", "sess 1", "-x"])
def test_session_id_must_be_a_plain_name(tmp_path, name):
    with pytest.raises(ArtifactValidationError, match="session_dir"):
        ToolResultExternalizer(tmp_path / name if name else tmp_path / "a" / "..")


@pytest.mark.parametrize("tool", ["", "../bash", "a b", None, "x" * 65])
def test_tool_name_is_validated(session, tool):
    with pytest.raises(ArtifactValidationError, match="tool_name"):
        make(session).externalize("a" * 40_000, tool)


def test_output_must_be_text(session):
    with pytest.raises(ArtifactValidationError, match="output"):
        make(session).externalize(b"bytes", "bash")


# -- 2. exclusive, durable bodies with a recorded creation time ------------------------

def test_body_is_written_exactly_under_tool_results(session):
    output = "line\n" * 10_000
    artifact = make(session).externalize(output, "bash").artifact
    body = (session / "tool-results" / artifact.filename).read_bytes()
    assert body == output.encode()
    assert artifact.sha256 == hashlib.sha256(body).hexdigest()
    assert artifact.byte_size == len(body) and artifact.char_count == len(output)


def test_same_output_twice_gets_two_files_never_an_overwrite(session):
    ex = make(session)
    first = ex.externalize("a" * 40_000, "bash").artifact
    second = ex.externalize("a" * 40_000, "bash").artifact
    assert first.filename != second.filename and first.sha256 == second.sha256


def test_restart_never_overwrites_an_existing_body(session):
    make(session).externalize("a" * 40_000, "bash")
    directory = session / "tool-results"
    # a body left by a crashed writer (no manifest record) holds the next name
    stray = directory / f"000002-bash-{hashlib.sha256(b'b' * 40_000).hexdigest()[:12]}.txt"
    stray.write_bytes(b"evidence")
    fresh = make(session)  # a restarted process
    artifact = fresh.externalize("b" * 40_000, "bash").artifact
    assert artifact.filename.startswith("000003-")
    assert stray.read_bytes() == b"evidence"
    assert len(fresh.references()) == 2


def test_creation_time_comes_from_the_clock_and_survives_restart(session):
    clock = FixedClock("2026-08-01T09:30:00Z")
    artifact = make(session, clock=clock).externalize("a" * 40_000, "bash").artifact
    path = session / "tool-results" / artifact.filename
    os.utime(path, (0, 0))  # the file's mtime says 1970: it must not matter
    fresh = make(session, clock=FixedClock("2030-01-01T00:00:00Z"))
    assert fresh.verify(artifact.source_id).created_at == datetime.fromisoformat(
        "2026-08-01T09:30:00+00:00")
    record = json.loads((session / "artifacts.jsonl").read_text().split("\n")[0])
    assert record["created_at"] == "2026-08-01T09:30:00Z"
    assert "tool-results" not in json.dumps(record)  # names only, no paths


def test_crash_after_body_before_record_leaves_an_unrecorded_body(session):
    assert run_child(artifact_workers.crash_before_manifest, str(session)) == 0
    bodies = sorted(p.name for p in (session / "tool-results").iterdir())
    assert len(bodies) == 1
    fresh = make(session)
    assert fresh.references() == []  # never recorded: no reference can point at it
    artifact = fresh.externalize("x" * 40_000, "bash").artifact
    assert artifact.filename not in bodies  # the crashed body is not overwritten


def test_concurrent_writers_never_share_a_name(session):
    names = run_processes(artifact_workers.externalize_many,
                          lambda i, s: (str(session), 5, s.start, s.results), 3, expect=15)
    assert len(set(names)) == 15
    assert len(make(session).references()) == 15


# -- 3. source ids, references and summaries -------------------------------------------

def test_source_id_format(session):
    artifact = make(session).externalize("a" * 40_000, "bash").artifact
    assert artifact.source_id == (f"artifact:sess-42:{artifact.filename}:"
                                  f"{artifact.sha256[:12]}")
    assert parse_source_id(artifact.source_id) == ("sess-42", artifact.filename,
                                                   artifact.sha256[:12])
    assert artifact.source.source_type == "tool_result_artifact"


def test_default_summary_is_clamped_never_refused(session):
    output = "E" * 50_000  # one enormous first line
    artifact = make(session).externalize(output, "bash").artifact
    assert len(artifact.summary) == MAX_SUMMARY_CHARS and artifact.summary.endswith("…")


def test_explicit_summary_over_the_limit_raises_before_any_write(session):
    ex = make(session)
    ex.externalize("a" * 40_000, "bash")
    before = snapshot(session)
    with pytest.raises(ArtifactValidationError, match="summary"):
        ex.externalize("b" * 40_000, "bash", summary="s" * (MAX_SUMMARY_CHARS + 1))
    assert snapshot(session) == before
    artifact = ex.externalize("b" * 40_000, "bash", summary="s" * MAX_SUMMARY_CHARS).artifact
    assert artifact.summary == "s" * MAX_SUMMARY_CHARS


# -- 4. bounded pointer ----------------------------------------------------------------

def test_pointer_header_and_bash_head_and_tail(session):
    output = "START\n" + "middle\n" * 10_000 + "exit status 1\n"
    result = make(session).externalize(output, "bash", summary="build log")
    text, artifact = result.context_text, result.artifact
    assert f"source: {artifact.source_id}" in text
    assert f"sha256: {artifact.sha256}" in text and "summary: build log" in text
    assert "read_artifact" in text
    assert "START" in text and "exit status 1" in text  # head and tail


def test_other_tools_get_a_head_preview_only(session):
    output = "HEAD\n" + "z" * 60_000 + "\nTAIL"
    text = make(session).externalize(output, "grep").context_text
    assert "HEAD" in text and "TAIL" not in text


@pytest.mark.parametrize("unit", ["a", "中", "😀"])
def test_a_one_megabyte_output_becomes_a_pointer_under_32_kb(session, unit):
    output = unit * (1_000_000 // len(unit.encode()))
    for tool in ("bash", "read_file"):
        result = make(session).externalize(output, tool)
        assert len(result.context_text.encode("utf-8")) <= 32 * 1024


# -- 5. memory-facing reference --------------------------------------------------------

def test_for_memory_never_contains_the_body_or_a_path(session):
    output = "first line\n" + "SECRET-BODY-" * 6_000
    artifact = make(session).externalize(output, "grep").artifact
    memory = json.dumps(artifact.for_memory(), ensure_ascii=False)
    assert "SECRET-BODY" not in memory and len(memory) < 1_500
    assert str(session) not in memory and "tool-results" not in memory
    assert set(artifact.for_memory()) == {"source_id", "summary", "sha256", "byte_size",
                                          "char_count", "created_at", "source"}


# -- 6. reading: pages, bounds, confinement, integrity ---------------------------------

def test_read_artifact_returns_a_page_of_lines(session):
    output = "\n".join(f"row {i}" for i in range(1_000))
    ex = make(session, policy=ExternalizationPolicy(bash_max_chars=100))
    artifact = ex.externalize(output, "bash").artifact
    page = ex.read_artifact(artifact, offset=10, limit=3)
    header, *lines = page.split("\n")
    assert lines == ["row 10", "row 11", "row 12"]
    assert "lines 10-12 of 1000" in header and "next offset=13" in header
    assert ex.read_artifact(artifact.source_id, offset=999, limit=5).endswith("row 999")


def test_read_splits_on_newline_only(session):
    ex = make(session, policy=ExternalizationPolicy(bash_max_chars=10))
    artifact = ex.externalize("one\u2028still one\ntwo", "bash").artifact
    assert ex.read_artifact(artifact, limit=1).split("\n")[1] == "one\u2028still one"


def test_one_huge_line_is_bounded(session):
    ex = make(session)
    artifact = ex.externalize("x" * 2_000_000, "bash").artifact
    page = ex.read_artifact(artifact, limit=1)
    assert len(page) < ex.policy.read_max_chars + 200 and "truncated" in page


@pytest.mark.parametrize("offset,limit", [(-1, 5), (0, 0), ("1", 5), (0, True)])
def test_read_rejects_bad_ranges(session, offset, limit):
    ex = make(session)
    artifact = ex.externalize("a" * 40_000, "bash").artifact
    with pytest.raises(ArtifactValidationError):
        ex.read_artifact(artifact, offset=offset, limit=limit)


def forged(artifact, filename):
    data = artifact.to_dict()
    object.__setattr__(artifact, "filename", filename)  # what a hostile caller could pass
    return artifact, data


@pytest.mark.parametrize("filename", ["../artifacts.jsonl", "/etc/passwd", "a/../../x"])
def test_escaping_names_are_refused(session, filename):
    ex = make(session)
    artifact = ex.externalize("a" * 40_000, "bash").artifact
    bad, _ = forged(artifact, filename)
    with pytest.raises(ArtifactAccessError):
        ex.read_artifact(bad)


def test_reference_constructor_refuses_escaping_names(session):
    artifact = make(session).externalize("a" * 40_000, "bash").artifact
    with pytest.raises(ArtifactValidationError, match="filename"):
        ArtifactReference("../x", "s", 1, 1, artifact.sha256, artifact.source,
                          artifact.created_at)


def test_symlink_to_identical_bytes_outside_is_refused(session, tmp_path):
    ex = make(session)
    artifact = ex.externalize("a" * 40_000, "bash").artifact
    path = session / "tool-results" / artifact.filename
    outside = tmp_path / "outside.txt"
    outside.write_bytes(path.read_bytes())  # the very same bytes and digest
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(ArtifactAccessError, match="symlink"):
        ex.read_artifact(artifact)
    with pytest.raises(ArtifactAccessError):
        ex.verify(artifact.source_id)


def test_a_changed_body_raises_integrity_error_on_every_read(session):
    ex = make(session)
    artifact = ex.externalize("a" * 40_000, "bash").artifact
    assert ex.read_artifact(artifact, limit=1)
    path = session / "tool-results" / artifact.filename
    path.write_bytes(b"b" + path.read_bytes()[1:])  # same size, one byte changed
    with pytest.raises(ArtifactIntegrityError, match="tampered"):
        ex.read_artifact(artifact)
    with pytest.raises(ArtifactIntegrityError):
        make(session).verify(artifact.source_id)


def test_verify_rejects_other_sessions_unknown_names_and_wrong_digests(session, tmp_path):
    ex = make(session)
    artifact = ex.externalize("a" * 40_000, "bash").artifact
    assert ex.verify(artifact.source_id) == artifact
    other = artifact.source_id.replace("sess-42", "sess-43")
    with pytest.raises(ArtifactAccessError, match="session"):
        ex.verify(other)
    with pytest.raises(ArtifactAccessError, match="no artifact"):
        ex.verify(artifact.source_id[:-12] + "0" * 12)
    with pytest.raises(ArtifactValidationError, match="source_id"):
        ex.verify("transcript:sess-42:1")
    (session / "tool-results" / artifact.filename).unlink()
    with pytest.raises(ArtifactMissingError):
        ex.verify(artifact.source_id)


def test_reference_must_match_the_recorded_digest(session):
    ex = make(session)
    artifact = ex.externalize("a" * 40_000, "bash").artifact
    lying = ArtifactReference(artifact.filename, "s", 1, 1, "f" * 64, artifact.source,
                              artifact.created_at + timedelta(0))
    with pytest.raises(ArtifactAccessError, match="not an artifact recorded"):
        ex.read_artifact(lying)


def test_an_edited_manifest_line_is_corruption(session):
    ex = make(session)
    ex.externalize("a" * 40_000, "bash")
    manifest = session / "artifacts.jsonl"
    manifest.write_text(manifest.read_text().replace('"sess-42"', '"sess-99"', 1))
    with pytest.raises(ArtifactCorruptionError, match="line 1"):
        make(session).references()


def test_importing_does_no_io():
    import subprocess
    import sys
    code = ("import os, labmem.artifacts;"
            "print(sorted(os.listdir('.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=os.path.dirname(__file__), check=True)
    assert "tool-results" not in done.stdout and "leases.jsonl" not in done.stdout


def test_default_summary_uses_the_first_non_blank_line(session):
    artifact = make(session).externalize("\n\n   \n  make: *** [all] Error 2\n" + "x" * 40_000,
                                         "bash").artifact
    assert artifact.summary.startswith("bash output, 5 lines, ")
    assert artifact.summary.endswith("make: *** [all] Error 2")


def test_the_largest_allowed_preview_still_fits_in_32_kb(session):
    ex = make(session, policy=ExternalizationPolicy(preview_chars=7_000))
    result = ex.externalize("😀" * 300_000, "read_file", summary="😀" * MAX_SUMMARY_CHARS)
    assert len(result.context_text.encode()) <= 32 * 1024
    with pytest.raises(ArtifactValidationError, match="preview_chars"):
        ExternalizationPolicy(preview_chars=7_001)


# -- 7. counting lines as a reader does -------------------------------------------------

@pytest.mark.parametrize("text, lines", [
    ("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("a\nb\n", 2), ("\n", 1), ("a\n\n", 2),
    ("a\u2028b\n", 1),
])
def test_count_lines_does_not_count_a_final_newline_as_a_line(text, lines):
    from labmem.artifacts.externalize import count_lines, split_lines

    assert count_lines(text) == lines == len(split_lines(text))


def test_output_ending_in_a_newline_reports_its_real_line_count(session):
    output = "".join(f"row {i}\n" for i in range(980))  # what `ls -l` or `grep` prints
    ex = make(session, policy=ExternalizationPolicy(bash_max_chars=100))
    result = ex.externalize(output, "bash")
    assert "980 lines" in result.artifact.summary and "981" not in result.artifact.summary
    assert "980 lines" in result.context_text
    header = ex.read_artifact(result.artifact, offset=978, limit=5).split("\n")[0]
    assert "lines 978-979 of 980; end]" in header


# -- 8. how much text stays inline, per script ------------------------------------------

@pytest.mark.parametrize("tool", ["bash", "grep", "read_file"])
@pytest.mark.parametrize("char", ["a", "é", "中", "😀"])
def test_inline_char_limit_is_the_last_length_kept_inline(tool, char):
    policy = ExternalizationPolicy()
    n = policy.inline_char_limit(tool, char)
    assert not policy.should_externalize(char * n, tool)
    assert policy.should_externalize(char * (n + 1), tool)


def test_the_bash_limit_keeps_four_times_more_tokens_of_chinese_than_of_english():
    from labmem.core.text import estimate_tokens

    policy = ExternalizationPolicy()
    english = estimate_tokens("a" * policy.inline_char_limit("bash", "a"))
    chinese = estimate_tokens("中" * policy.inline_char_limit("bash", "中"))
    assert (english, chinese) == (7_500, 30_000) and chinese == 4 * english
    other_en = estimate_tokens("a" * policy.inline_char_limit("grep", "a"))
    other_zh = estimate_tokens("中" * policy.inline_char_limit("grep", "中"))
    assert (other_en, other_zh) == (12_800, 17_066)  # bytes: only a third more
    with pytest.raises(ArtifactValidationError, match="one character"):
        policy.inline_char_limit("bash", "ab")
