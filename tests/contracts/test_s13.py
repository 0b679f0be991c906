"""s13: one contract suite, run on the from-scratch artifact layer and on the library's.

Every contract of the layer is parametrized over both implementations. Then the exercise's
checker is shown to reject plausible wrong pieces (naming the contract they break) and to
accept correct pieces written differently from the chapter's.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from labmem.exercises import s13 as exercises
from labmem.exercises.suites.s13 import PRODUCTION, SCRATCH, SUITE
from labmem.scratch import s13 as scratch

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}
NAMES = SUITE.names()
INLINE, POINTER, NEVER_OVERWRITTEN, MEMORY, PAGES, REREAD, MOVES, REPEATS, RESTART, \
    PUBLISH, JOURNAL_LINES, RULE, PLAN, APPLY = NAMES


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=str)
@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_contract_holds_on_every_implementation(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def test_the_suite_is_the_layer_in_teaching_order():
    assert 8 <= len(SUITE.contracts) <= 15
    assert len(set(NAMES)) == len(NAMES)
    assert repr(SUITE.run(SCRATCH, who="the from-scratch")) == (
        f"✓ the from-scratch artifact layer passes all {len(NAMES)} contracts")


# -- the exercise: the learner's pieces in the module, judged by the suite ----------------

def stub(*args):
    raise NotImplementedError



def test_stubs_are_reported_as_not_written_yet():
    report = exercises.check_layer(externalize=stub, next_lease=stub, cleanup_reason=stub)
    assert report.passed == 0
    text = repr(report)
    assert text.startswith(f"✗ your artifact layer passes 0 of {len(NAMES)} contracts; failing:")
    assert "not written yet (stub() raises NotImplementedError)" in text


def test_the_chapters_pieces_pass_and_unknown_pieces_are_refused():
    pieces = {name: getattr(scratch, name) for name in exercises.PIECES}
    assert repr(exercises.check_layer(**pieces)) == (
        f"✓ your artifact layer passes all {len(NAMES)} contracts")
    with pytest.raises(TypeError, match="'cleanup'"):
        exercises.check_layer(cleanup=stub)


def assert_breaks(report, *contracts):
    assert not report.ok
    assert set(contracts) <= report.failing_names, repr(report)


# externalize: wrong, then right in another way --------------------------------------------

def _write(session_dir, output, tool_name, clock, *, measure_bytes=False, preview=None,
           overwrite=False, mtime_clock=False):
    """The chapter's externalize with one thing done wrong."""
    size_over = (len(output.encode()) > scratch.OTHER_MAX_BYTES if measure_bytes or
                 tool_name != "bash" else len(output) > scratch.BASH_MAX_CHARS)
    if not size_over:
        return scratch.Externalized(output, None)
    body = output.encode("utf-8")
    digest = hashlib.sha256(body).hexdigest()
    directory = session_dir / scratch.TOOL_RESULTS
    if overwrite:
        directory.mkdir(parents=True, exist_ok=True)
        filename = f"000001-{tool_name}-{digest[:12]}.txt"
        (directory / filename).write_bytes(body)
    else:
        filename = scratch.write_body(directory, tool_name, body, digest)
    created = clock.now()
    if mtime_clock:  # the file's mtime instead of the clock
        from datetime import datetime, timezone
        created = datetime.fromtimestamp(os.stat(directory / filename).st_mtime, timezone.utc)
    ref = scratch.ArtifactRef(session_dir.name, filename, f"{tool_name} output", digest,
                              len(body), len(output), scratch.iso(created))
    scratch.append_line(session_dir / scratch.MANIFEST, vars(ref))
    text = preview(ref, output) if preview else scratch.pointer_text(ref, output, tool_name)
    return scratch.Externalized(text, ref)


def externalize_measuring_bytes_for_bash(session_dir, output, tool_name, clock):
    """Measures every tool in bytes, bash too."""
    return _write(session_dir, output, tool_name, clock, measure_bytes=True)


def externalize_with_the_whole_body(session_dir, output, tool_name, clock):
    """Puts the whole output after the header: not a bounded pointer."""
    return _write(session_dir, output, tool_name, clock,
                  preview=lambda ref, out: f"source: {ref.source_id}\nsha256: {ref.sha256}\n"
                                           + out)


def externalize_head_only(session_dir, output, tool_name, clock):
    """A bounded preview, but the head only, even for bash."""
    return _write(session_dir, output, tool_name, clock,
                  preview=lambda ref, out: f"source: {ref.source_id}\nsha256: {ref.sha256}\n"
                                           + out[:4_000])


def externalize_overwriting(session_dir, output, tool_name, clock):
    """Names the body by its digest alone, so the same output overwrites the same file."""
    return _write(session_dir, output, tool_name, clock, overwrite=True)


def externalize_dated_by_mtime(session_dir, output, tool_name, clock):
    """Records the file's mtime as the creation time instead of the clock's time."""
    return _write(session_dir, output, tool_name, clock, mtime_clock=True)


def externalize_written_differently(session_dir, output, tool_name, clock):
    """Measures first, writes with the chapter's helpers, records the fields one by one."""
    size, limit = ((len(output), scratch.BASH_MAX_CHARS) if tool_name == "bash"
                   else (len(output.encode("utf-8")), scratch.OTHER_MAX_BYTES))
    if size <= limit:
        return scratch.Externalized(output, None)
    body = output.encode("utf-8")
    digest = hashlib.sha256(body).hexdigest()
    name = scratch.write_body(session_dir / "tool-results", tool_name, body, digest)
    summary = f"{tool_name}: {scratch.count_lines(output)} lines"
    ref = scratch.ArtifactRef(session_dir.name, name, summary, digest, len(body), len(output),
                              scratch.iso(clock.now()))
    scratch.append_line(session_dir / "artifacts.jsonl", {
        "session_id": ref.session_id, "filename": name, "summary": summary, "sha256": digest,
        "byte_size": len(body), "char_count": len(output), "created_at": ref.created_at})
    return scratch.Externalized(scratch.pointer_text(ref, output, tool_name), ref)


@pytest.mark.parametrize("wrong,breaks", [
    (externalize_measuring_bytes_for_bash, (INLINE,)),
    (externalize_with_the_whole_body, (POINTER,)),
    (externalize_head_only, (POINTER,)),
    (externalize_overwriting, (NEVER_OVERWRITTEN,)),
    (externalize_dated_by_mtime, (NEVER_OVERWRITTEN,)),
], ids=lambda v: getattr(v, "__name__", "contracts"))
def test_wrong_externalize_breaks_a_named_contract(wrong, breaks):
    assert_breaks(exercises.check_layer(externalize=wrong), *breaks)


def test_externalize_written_differently_passes():
    assert exercises.check_layer(externalize=externalize_written_differently).ok


# next_lease: wrong, then right in another way ----------------------------------------------

def next_lease_reviving_finished_leases(current, claim, phase, at):
    """Lets an aborted or released lease be committed again (a late commit revives it)."""
    if current is not None and current.phase in ("aborted", "released") and phase == "committed":
        return scratch.Lease(current.claim, phase, at)
    return scratch.next_lease(current, claim, phase, at)


def next_lease_refusing_repeats(current, claim, phase, at):
    """Treats repeating the current phase as an illegal move."""
    if current is not None and current.phase == phase:
        raise scratch.LeaseTransitionError(f"{claim.transaction_id}: already {phase}")
    return scratch.next_lease(current, claim, phase, at)


def next_lease_ignoring_the_claim(current, claim, phase, at):
    """Never compares the claim: a transaction can switch to another artifact."""
    if current is not None and current.phase == phase:
        return scratch.Lease(claim, phase, at)
    before = current.phase if current else None
    if phase not in scratch.TRANSITIONS[before]:
        raise scratch.LeaseTransitionError(f"{before} → {phase}")
    return scratch.Lease(claim, phase, at)


def next_lease_releasing_prepared(current, claim, phase, at):
    """Lets a prepared lease be released directly, as if it had been committed."""
    if current is not None and current.phase == "prepared" and phase == "released":
        return scratch.Lease(claim, phase, at)
    return scratch.next_lease(current, claim, phase, at)


def next_lease_written_differently(current, claim, phase, at):
    """Checks the first move apart, then the claim, the no-op and the table."""
    if current is None:
        if phase != "prepared":
            raise scratch.LeaseTransitionError(f"{claim.transaction_id}: no lease yet")
        return scratch.Lease(claim, phase, at)
    if current.claim != claim:
        raise scratch.LeaseTransitionError(f"{claim.transaction_id}: another claim")
    if phase == current.phase:
        return current
    if phase not in scratch.TRANSITIONS[current.phase]:
        raise scratch.LeaseTransitionError(f"{current.phase} → {phase}")
    return scratch.Lease(claim, phase, at)


@pytest.mark.parametrize("wrong,breaks", [
    (next_lease_reviving_finished_leases, (MOVES,)),
    (next_lease_refusing_repeats, (REPEATS,)),
    (next_lease_ignoring_the_claim, (REPEATS,)),
    (next_lease_releasing_prepared, (MOVES,)),
], ids=lambda v: getattr(v, "__name__", "contracts"))
def test_wrong_next_lease_breaks_a_named_contract(wrong, breaks):
    assert_breaks(exercises.check_layer(next_lease=wrong), *breaks)


def test_next_lease_written_differently_passes():
    assert exercises.check_layer(next_lease=next_lease_written_differently).ok


# cleanup_reason: wrong, then right in another way ------------------------------------------

def only_committed_protects(facts, orphan_ttl):
    """Forgets that a *prepared* lease protects too."""
    if facts.file_type == "symlink":
        return "symlink_denied"
    if facts.file_type != "file" or facts.recorded_sha256 is None:
        return "unknown_name"
    protecting = [d for phase, d in facts.leases if phase == "committed"]
    if facts.sha256 != facts.recorded_sha256 or any(d != facts.sha256 for d in protecting):
        return "corrupt"
    if protecting:
        return "referenced"
    return "recent" if facts.age < orphan_ttl else "orphan_expired"


def ttl_inclusive(facts, orphan_ttl):
    """Keeps a file that is exactly orphan_ttl old."""
    reason = scratch.cleanup_reason(facts, orphan_ttl)
    return "recent" if reason == "orphan_expired" and facts.age <= orphan_ttl else reason


def lease_before_digest(facts, orphan_ttl):
    """Lets a lease win over changed bytes."""
    if facts.file_type == "symlink":
        return "symlink_denied"
    if facts.file_type != "file" or facts.recorded_sha256 is None:
        return "unknown_name"
    if any(phase in ("prepared", "committed") for phase, _ in facts.leases):
        return "referenced"
    if facts.sha256 != facts.recorded_sha256:
        return "corrupt"
    return "recent" if facts.age < orphan_ttl else "orphan_expired"


def any_lease_protects(facts, orphan_ttl):
    """Counts released and aborted leases as protecting."""
    reason = scratch.cleanup_reason(facts, orphan_ttl)
    if reason in ("recent", "orphan_expired") and facts.leases:
        return "referenced"
    return reason


def cleanup_reason_written_differently(facts, orphan_ttl):
    """The rules as a table of (test, reason), tried in order."""
    protecting = {d for phase, d in facts.leases if phase in ("prepared", "committed")}
    rules = (
        (lambda: facts.file_type == "symlink", "symlink_denied"),
        (lambda: facts.file_type != "file" or facts.recorded_sha256 is None, "unknown_name"),
        (lambda: facts.sha256 != facts.recorded_sha256 or bool(protecting - {facts.sha256}),
         "corrupt"),
        (lambda: bool(protecting), "referenced"),
        (lambda: facts.age is None or facts.age < orphan_ttl, "recent"),
    )
    return next((reason for test, reason in rules if test()), "orphan_expired")


@pytest.mark.parametrize("wrong,breaks", [
    (only_committed_protects, (RULE, PLAN)),
    (ttl_inclusive, (RULE,)),
    (lease_before_digest, (RULE,)),
    (any_lease_protects, (RULE, PLAN)),
], ids=lambda v: getattr(v, "__name__", "contracts"))
def test_wrong_cleanup_reason_breaks_a_named_contract(wrong, breaks):
    assert_breaks(exercises.check_layer(cleanup_reason=wrong), *breaks)


def test_cleanup_reason_written_differently_passes():
    assert exercises.check_layer(cleanup_reason=cleanup_reason_written_differently).ok


# -- from scratch vs the library: the measured differences hold ------------------------------

def test_the_measured_table(tmp_path):
    work = exercises.measure_journal(tmp_path)
    assert work["library"]["records decoded"] == 0
    assert work["from scratch"]["records decoded"] == 29_900
    assert work["from scratch"]["bytes per record"] < work["library"]["bytes per record"]
    assert all(row["from scratch"].startswith("accepted") and
               row["library"] == "refused: LeaseCorruptionError"
               for row in exercises.hand_edits(tmp_path))
    assert all((row["from scratch"], row["library"]) == ("deleted", "kept")
               for row in exercises.cleanup_races(tmp_path))
    assert exercises.pending_after_restart(tmp_path) == {"from scratch": 2, "library": 0}
