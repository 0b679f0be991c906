"""The s13 contract suite: what the artifact layer promises, contract by contract.

``SUITE`` runs on any implementation that offers the operations the chapter builds:

* ``externalize(session_dir, output, tool_name, clock)`` → ``context_text`` and
  ``artifact`` (a reference with ``filename``, ``sha256``, ``source_id``, ``for_memory()``);
  ``read_artifact(session_dir, reference, offset, limit)``;
* ``LeaseJournal(session_dir, clock=...)`` with ``prepare(claim)``, ``commit``, ``abort``,
  ``release``, ``leases()`` and ``publish_reference(claim, publisher)``, and
  ``claim_for(transaction_id, reference)``;
* ``Facts(file_type, recorded_sha256, sha256, age, leases)`` and
  ``cleanup_reason(facts, orphan_ttl)``; ``plan_cleanup(session_dir, now, orphan_ttl)`` and
  ``apply_cleanup(session_dir, plan)``;
* the errors ``ArtifactAccessError``, ``ArtifactMissingError``, ``ArtifactIntegrityError``,
  ``LeaseTransitionError``, ``LeaseCorruptionError`` and ``PublicationRejected``.

``SCRATCH`` is the chapter's from-scratch module (:mod:`labmem.scratch.s13`) itself;
``PRODUCTION`` is :mod:`labmem.artifacts` behind :class:`_Production`, which only says where
the library keeps the same operations. Every check tries its cases smallest first and names
the first one that breaks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from labmem import artifacts as production
from labmem.core.clock import FixedClock, SteppingClock, parse_timestamp
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, expect, is_a
from labmem.scratch import s13 as scratch_module

START = "2026-08-01T09:00:00Z"
T0 = parse_timestamp(START, field="START")
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


class _Production:
    """The library's artifact layer under the names the contracts use."""

    ArtifactAccessError = production.ArtifactAccessError
    ArtifactMissingError = production.ArtifactMissingError
    ArtifactIntegrityError = production.ArtifactIntegrityError
    LeaseTransitionError = production.LeaseTransitionError
    LeaseCorruptionError = production.LeaseCorruptionError
    PublicationRejected = production.PublicationRejected
    Facts = production.ArtifactFacts
    cleanup_reason = staticmethod(production.cleanup_reason)
    claim_for = staticmethod(production.RetentionClaim.for_reference)

    @staticmethod
    def externalize(session_dir: Path, output: str, tool_name: str, clock: Any) -> Any:
        return production.ToolResultExternalizer(session_dir, clock=clock).externalize(
            output, tool_name)

    @staticmethod
    def read_artifact(session_dir: Path, reference: Any, offset: int = 0,
                      limit: int = 200) -> str:
        return production.ToolResultExternalizer(session_dir).read_artifact(
            reference, offset=offset, limit=limit)

    @staticmethod
    def LeaseJournal(session_dir: Path, clock: Any = None) -> production.LeaseJournal:  # noqa: N802
        return production.LeaseJournal(session_dir, clock=clock or FixedClock(START))

    @staticmethod
    def plan_cleanup(session_dir: Path, now: Any, orphan_ttl: timedelta) -> Any:
        return production.plan_cleanup(
            journal=production.LeaseJournal(session_dir),
            policy=production.CleanupPolicy(orphan_ttl=orphan_ttl), now=now)

    @staticmethod
    def apply_cleanup(session_dir: Path, plan: Any) -> list[str]:
        report = production.apply_cleanup(plan, journal=production.LeaseJournal(session_dir),
                                          now=plan.planned_at)
        return list(report.deleted)

    def __repr__(self) -> str:
        return "labmem.artifacts"


SCRATCH = scratch_module
PRODUCTION = _Production()


# -- helpers ------------------------------------------------------------------------------

@contextmanager
def _session(name: str = "session-1") -> Iterator[Path]:
    """A fresh session directory (its name is the session id) in a throw-away root."""
    root = Path(tempfile.mkdtemp(prefix="labmem-s13-contract-"))
    try:
        yield root / name
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _expect(case: str, got: Any, want: Any) -> None:
    expect(case, got, want, show=_short)


def _refused(error: type, action: Callable[[], Any], case: str) -> BaseException:
    try:
        got = action()
    except Exception as exc:
        if is_a(exc, error):
            return exc
        if isinstance(exc, NotImplementedError):
            raise
        raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, got "
                             f"{type(exc).__name__}: {exc}") from None
    raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, but it was "
                         f"accepted ({_short(got)})")


def _snapshot(directory: Path) -> dict[str, Any]:
    """Every entry under ``directory``: a file's bytes, a link's target."""
    out: dict[str, Any] = {}
    for path in sorted(directory.rglob("*")) if directory.exists() else []:
        name = str(path.relative_to(directory))
        if path.is_symlink():
            out[name] = ("link", os.readlink(path))
        elif path.is_file() and not name.endswith(".lock"):
            out[name] = path.read_bytes()
    return out


def _body(session: Path, reference: Any) -> Path:
    return session / "tool-results" / reference.filename


def _artifact(impl: Any, session: Path, label: str, clock: Any = None) -> Any:
    """A fresh artifact in ``session``: 3,000 lines of bash output naming ``label``."""
    output = "".join(f"{label} line {n:04d}\n" for n in range(3_000))
    return impl.externalize(session, output, "bash", clock or FixedClock(START)).artifact


def _phase(lease: Any) -> str:
    return getattr(lease.phase, "value", lease.phase)


def _history(impl: Any, journal: Any, transaction_id: str, reference: Any,
             steps: tuple[str, ...]) -> None:
    for step in steps:
        if step == "prepare":
            journal.prepare(impl.claim_for(transaction_id, reference))
        else:
            getattr(journal, step)(transaction_id)


def _decisions(plan: Any) -> dict[str, tuple[str, str]]:
    """filename → (action, reason) of a plan (a list of decisions, or a plan object)."""
    return {d.filename: (d.action, d.reason) for d in getattr(plan, "decisions", plan)}


# -- externalizing --------------------------------------------------------------------------

INLINE_CASES = (("bash", "a", 30_000, False), ("bash", "a", 30_001, True),
                ("bash", "中", 30_000, False), ("grep", "a", 51_200, False),
                ("grep", "a", 51_201, True), ("grep", "中", 17_066, False),
                ("grep", "中", 17_067, True), ("read_file", "😀", 12_801, True))


def small_output_stays_inline(impl: Any) -> None:
    for tool, char, count, leaves in INLINE_CASES:
        case = f"externalize({char!r} * {count:,}, {tool!r})"
        with _session() as session:
            output = char * count
            result = impl.externalize(session, output, tool, FixedClock(START))
            _expect(f"{case}: externalized?", result.artifact is not None, leaves)
            if not leaves:
                _expect(f"{case}: the context text", result.context_text == output, True)
                _expect(f"{case}: files written", _snapshot(session), {})


POINTER_MAX_CHARS = 5_000


def large_output_leaves_a_bounded_pointer(impl: Any) -> None:
    outputs = (("bash", "a" * 30_000 + "\nFAILED test_flush"),
               ("grep", "docs/设计.md: 数据持久化\n" * 3_000),
               ("bash", "".join(f"test_{n} PASSED\n" for n in range(23_000)) + "exit 1\n"))
    for tool, output in outputs:
        case = f"externalize({len(output):,} characters, {tool!r})"
        with _session() as session:
            result = impl.externalize(session, output, tool, FixedClock(START))
            ref = result.artifact
            if ref is None:
                raise ContractBroken(f"smallest case: {case} — expected an artifact, got "
                                     "the output inline")
            body = output.encode("utf-8")
            digest = hashlib.sha256(body).hexdigest()
            _expect(f"{case}: the reference's sha256", ref.sha256, digest)
            _expect(f"{case}: the body on disk equals the output",
                    _body(session, ref).read_bytes() == body, True)
            _expect(f"{case}: the source id", ref.source_id,
                    f"artifact:{session.name}:{ref.filename}:{digest[:12]}")
            text = result.context_text
            _expect(f"{case}: the pointer at most {POINTER_MAX_CHARS:,} characters",
                    len(text) <= POINTER_MAX_CHARS, True)
            for what, needle in (("the source id", ref.source_id), ("the full digest", digest)):
                _expect(f"{case}: the pointer names {what}", needle in text, True)
            if tool == "bash":
                last = output.rstrip("\n").rsplit("\n", 1)[-1]
                _expect(f"{case}: the pointer shows the last line {last!r}", last in text, True)


def bodies_are_never_overwritten(impl: Any) -> None:
    output = "x" * 30_001
    digest = hashlib.sha256(output.encode()).hexdigest()
    for planted in (False, True):
        case = ("the same output externalized twice"
                + (" after a crash left a body without its record" if planted else ""))
        with _session() as session:
            junk = session / "tool-results" / f"000001-bash-{digest[:12]}.txt"
            if planted:
                junk.parent.mkdir(parents=True)
                junk.write_bytes(b"left by a crash")
            clock = SteppingClock(START)
            first = impl.externalize(session, output, "bash", clock).artifact
            second = impl.externalize(session, output, "bash", clock).artifact
            names = {first.filename, second.filename} | ({junk.name} if planted else set())
            _expect(f"{case}: distinct file names", len(names), 3 if planted else 2)
            for ref in (first, second):
                _expect(f"{case}: {ref.filename} holds the output",
                        _body(session, ref).read_bytes() == output.encode(), True)
            if planted:
                _expect(f"{case}: the planted file", junk.read_bytes(), b"left by a crash")
            _expect(f"{case}: created_at of the two, from the clock",
                    [r.for_memory()["created_at"] for r in (first, second)],
                    ["2026-08-01T09:00:00Z", "2026-08-01T09:00:01Z"])


def memory_keeps_no_body(impl: Any) -> None:
    lines = [f"row {n}: value {n * 7}" for n in range(3_000)]
    lines[1_500] = "SECRET-TOKEN-1500 the body's middle line"
    for tool in ("bash", "grep"):
        case = f"for_memory() of a {tool} artifact of 3,000 lines"
        with _session() as session:
            ref = impl.externalize(session, "\n".join(lines), tool, FixedClock(START)).artifact
            kept = ref.for_memory()
            for key, want in (("source_id", ref.source_id), ("sha256", ref.sha256)):
                _expect(f"{case}: {key!r}", kept.get(key), want)
            _expect(f"{case}: has a summary", bool(kept.get("summary")), True)
            text = json.dumps(kept, ensure_ascii=False, default=str)
            for what, needle in (("a line of the body", "SECRET-TOKEN"),
                                 ("the session's path", str(session)),
                                 ("the directory tool-results/", "tool-results")):
                _expect(f"{case}: contains {what}", needle in text, False)


def reads_page_by_line(impl: Any) -> None:
    lines = [f"line {n:05d}" for n in range(3_000)]
    for final_newline in (True, False):
        output = "\n".join(lines) + ("\n" if final_newline else "")
        ending = "ending in a newline" if final_newline else "without a final newline"
        with _session() as session:
            ref = impl.externalize(session, output, "bash", FixedClock(START)).artifact
            for offset, limit in ((0, 1), (0, 3), (2_998, 5), (1_000, 2)):
                case = f"read_artifact(offset={offset}, limit={limit}) of 3,000 lines {ending}"
                header, *page = impl.read_artifact(session, ref, offset=offset,
                                                   limit=limit).split("\n")
                _expect(f"{case}: the page", page, lines[offset:offset + limit])
                _expect(f"{case}: the header says 'of 3000'", "of 3000" in header, True)


def reads_refuse_bad_bodies(impl: Any) -> None:
    def edit(path: Path) -> None:
        path.write_bytes(b"#" + path.read_bytes()[1:])

    def remove(path: Path) -> None:
        path.unlink()

    def link(path: Path) -> None:
        copy = path.parent.parent.parent / "outside.txt"
        copy.write_bytes(path.read_bytes())  # the very same bytes and digest
        path.unlink()
        path.symlink_to(copy)

    cases = ((edit, impl.ArtifactIntegrityError, "its first byte edited"),
             (remove, impl.ArtifactMissingError, "its body deleted"),
             (link, impl.ArtifactAccessError, "its body replaced by a symlink to a copy"))
    for damage, error, what in cases:
        case = f"read_artifact of an artifact with {what}"
        with _session() as session:
            ref = _artifact(impl, session, "evidence")
            damage(_body(session, ref))
            _refused(error, lambda r=ref, s=session: impl.read_artifact(s, r), case)


# -- leases -----------------------------------------------------------------------------------

def lease_moves_follow_the_machine(impl: Any) -> None:
    allowed = (("prepare", "commit"), ("prepare", "abort"), ("prepare", "commit", "release"))
    for steps in allowed:
        case = " → ".join(steps)
        with _session() as session:
            ref = _artifact(impl, session, "a")
            journal = impl.LeaseJournal(session, clock=FixedClock(START))
            _history(impl, journal, "tx-1", ref, steps)
            phase = _phase(impl.LeaseJournal(session).leases()["tx-1"])
            _expect(f"{case}: the phase a fresh journal reads", phase,
                    {"commit": "committed", "abort": "aborted", "release": "released"}[steps[-1]])
    refused = (((), "commit"), ((), "release"), (("prepare",), "release"),
               (("prepare", "abort"), "commit"), (("prepare", "commit"), "abort"),
               (("prepare", "commit", "release"), "commit"))
    for before, step in refused:
        case = f"{' → '.join(before) or 'no lease'}, then {step}"
        with _session() as session:
            ref = _artifact(impl, session, "a")
            journal = impl.LeaseJournal(session, clock=FixedClock(START))
            _history(impl, journal, "tx-1", ref, before)
            files = _snapshot(session)
            _refused(impl.LeaseTransitionError,
                     lambda j=journal, s=step: getattr(j, s)("tx-1"), case)
            _expect(f"{case}: the session's files after the refusal", _snapshot(session), files)


def repeats_change_nothing(impl: Any) -> None:
    for steps, again in ((("prepare",), "prepare"), (("prepare", "commit"), "commit")):
        case = f"{' → '.join(steps)}, then {again} again"
        with _session() as session:
            ref = _artifact(impl, session, "a")
            journal = impl.LeaseJournal(session, clock=FixedClock(START))
            _history(impl, journal, "tx-1", ref, steps)
            files = _snapshot(session)
            _history(impl, journal, "tx-1", ref, (again,))
            _expect(f"{case}: the session's files", _snapshot(session), files)
    case = "prepare tx-1 for artifact a, then prepare tx-1 for artifact b"
    with _session() as session:
        a, b = _artifact(impl, session, "a"), _artifact(impl, session, "b")
        journal = impl.LeaseJournal(session, clock=FixedClock(START))
        journal.prepare(impl.claim_for("tx-1", a))
        _refused(impl.LeaseTransitionError,
                 lambda: journal.prepare(impl.claim_for("tx-1", b)), case)
        lease = impl.LeaseJournal(session).leases()["tx-1"]
        _expect(f"{case}: the claim a fresh journal reads", lease.claim.source_id, a.source_id)


HISTORIES = ((("prepare",), "prepared", True), (("prepare", "commit"), "committed", True),
             (("prepare", "abort"), "aborted", False),
             (("prepare", "commit", "release"), "released", False))


def leases_survive_a_restart(impl: Any) -> None:
    for count in (1, len(HISTORIES)):
        case = "; ".join(f"tx-{n}: {' → '.join(h[0])}" for n, h in enumerate(HISTORIES[:count]))
        with _session() as session:
            journal = impl.LeaseJournal(session, clock=FixedClock(START))
            for n, (steps, _, _) in enumerate(HISTORIES[:count]):
                _history(impl, journal, f"tx-{n}", _artifact(impl, session, f"a{n}"), steps)
            leases = impl.LeaseJournal(session).leases()  # a fresh instance: a restart
            got = {tx: (_phase(lease), lease.protects) for tx, lease in sorted(leases.items())}
            want = {f"tx-{n}": (phase, protects)
                    for n, (_, phase, protects) in enumerate(HISTORIES[:count])}
            _expect(f"{case}: (phase, protects) read by a fresh journal", got, want)


def publishing_is_not_yet_trusting(impl: Any) -> None:
    def outcome(name: str) -> Callable[[Any], Any]:
        def publisher(claim: Any) -> str:
            seen.append(_phase(impl.LeaseJournal(session).leases()[claim.transaction_id]))
            if name == "rejected":
                raise impl.PublicationRejected("the memory refused it")
            if name == "timed out":
                raise ConnectionError("no answer within 5 s")
            return "memory entry 1"
        return publisher

    for name, phase in (("succeeds", "committed"), ("rejected", "aborted"),
                        ("timed out", "prepared")):
        case = f"publish_reference with a publisher that {'is ' if name != 'succeeds' else ''}" \
               f"{name}"
        seen: list[str] = []
        with _session() as session:
            ref = _artifact(impl, session, "a")
            journal = impl.LeaseJournal(session, clock=FixedClock(START))
            claim = impl.claim_for("tx-1", ref)
            if name == "succeeds":
                _expect(f"{case}: the value returned", journal.publish_reference(
                    claim, outcome(name)), "memory entry 1")
            else:
                error = impl.PublicationRejected if name == "rejected" else ConnectionError
                publisher = outcome(name)
                _refused(error, lambda j=journal, c=claim, p=publisher: j.publish_reference(c, p),
                         case)
            _expect(f"{case}: the phase on disk while the publisher ran", seen, ["prepared"])
            _expect(f"{case}: the phase afterwards",
                    _phase(impl.LeaseJournal(session).leases()["tx-1"]), phase)


def journal_lines_are_checked(impl: Any) -> None:
    case = "prepare → commit of tx-1, then a torn line"
    with _session() as session:
        ref = _artifact(impl, session, "a")
        journal = impl.LeaseJournal(session, clock=FixedClock(START))
        _history(impl, journal, "tx-1", ref, ("prepare", "commit"))
        path = session / "leases.jsonl"
        with open(path, "ab") as f:
            f.write(b'{"seq": 3, "transaction_id": "tx-1", "pha')
        leases = impl.LeaseJournal(session).leases()
        _expect(f"{case}: tx-1 read by a fresh journal", _phase(leases["tx-1"]), "committed")
        impl.LeaseJournal(session, clock=FixedClock(START)).release("tx-1")
        leases = impl.LeaseJournal(session).leases()
        _expect(f"{case}, then release: tx-1 read by a fresh journal",
                _phase(leases["tx-1"]), "released")
        _expect(f"{case}, then release: the journal ends with a newline",
                path.read_bytes().endswith(b"\n"), True)
        lines = path.read_bytes().count(b"\n")
        with open(path, "ab") as f:
            f.write(b"not json\n")
        case = f"{case}, then release, then a complete line 'not json'"
        error = _refused(impl.LeaseCorruptionError,
                         lambda: impl.LeaseJournal(session).leases(), case)
        _expect(f"{case}: the error names line {lines + 1}",
                f"line {lines + 1}" in str(error), True)


# -- cleanup ----------------------------------------------------------------------------------

def rule_cases(impl: Any) -> tuple[tuple[str, Any, str], ...]:
    """(what, facts, expected reason) with a one-day TTL, smallest first."""
    def facts(*args: Any, **kwargs: Any) -> Any:
        return impl.Facts(*args, **kwargs)

    same = {"recorded_sha256": "sha-A", "sha256": "sha-A"}
    old = {**same, "age": 2 * DAY}
    return (
        ("a symlink", facts("symlink"), "symlink_denied"),
        ("a directory", facts("other"), "unknown_name"),
        ("a file with no record", facts("file"), "unknown_name"),
        ("an intact file, 48 h old, no lease", facts("file", **old), "orphan_expired"),
        ("an intact file, exactly 24 h old", facts("file", **same, age=DAY), "orphan_expired"),
        ("an intact file, 23 h old", facts("file", **same, age=23 * HOUR), "recent"),
        ("edited bytes, 48 h old", facts("file", "sha-A", "sha-X", 2 * DAY), "corrupt"),
        ("a prepared lease, 10 days old", facts("file", **same, age=10 * DAY,
                                                leases=(("prepared", "sha-A"),)), "referenced"),
        ("a committed lease", facts("file", **old, leases=(("committed", "sha-A"),)),
         "referenced"),
        ("a released lease", facts("file", **old, leases=(("released", "sha-A"),)),
         "orphan_expired"),
        ("an aborted lease", facts("file", **old, leases=(("aborted", "sha-A"),)),
         "orphan_expired"),
        ("edited bytes with a committed lease", facts(
            "file", "sha-A", "sha-X", 2 * DAY, (("committed", "sha-A"),)), "corrupt"),
        ("a committed lease claiming other bytes", facts(
            "file", **old, leases=(("committed", "sha-B"),)), "corrupt"),
        ("a released lease claiming other bytes", facts(
            "file", **old, leases=(("released", "sha-B"),)), "orphan_expired"),
        ("a released and a prepared lease, 2 h old", facts(
            "file", **same, age=2 * HOUR,
            leases=(("released", "sha-A"), ("prepared", "sha-A"))), "referenced"),
    )


def the_rule_for_one_file(impl: Any) -> None:
    for what, facts, reason in rule_cases(impl):
        _expect(f"cleanup_reason({what}, orphan_ttl=24 h)", impl.cleanup_reason(facts, DAY),
                reason)


#: label → (hours old at cleanup, lease history, damage) for the on-disk plan
PLAN_FILES: dict[str, tuple[int, tuple[str, ...], str]] = {
    "orphan": (48, (), ""),
    "committed": (48, ("prepare", "commit"), ""),
    "pending": (240, ("prepare",), ""),
    "released": (48, ("prepare", "commit", "release"), ""),
    "aborted": (30, ("prepare", "abort"), ""),
    "recent": (2, (), "old mtime"),
    "expired, touched": (26, (), "new mtime"),
    "tampered": (48, (), "edited"),
}
PLAN_REASONS = {"orphan": "orphan_expired", "committed": "referenced", "pending": "referenced",
                "released": "orphan_expired", "aborted": "orphan_expired", "recent": "recent",
                "expired, touched": "orphan_expired", "tampered": "corrupt",
                "notes.txt": "unknown_name", "link.txt": "symlink_denied"}
NOW = T0 + timedelta(hours=240)


def _plan_session(impl: Any, session: Path, labels: tuple[str, ...]) -> dict[str, str]:
    """Write the labelled artifacts of :data:`PLAN_FILES`; filename → label."""
    clock = FixedClock(START)
    journal = impl.LeaseJournal(session, clock=clock)
    names = {}
    for label in labels:
        hours, steps, damage = PLAN_FILES[label]
        clock.at = NOW - timedelta(hours=hours)
        ref = _artifact(impl, session, label.replace(" ", "-").replace(",", ""), clock)
        names[ref.filename] = label
        _history(impl, journal, f"tx-{len(names)}", ref, steps)
        path = _body(session, ref)
        if damage == "edited":
            path.write_bytes(b"#" + path.read_bytes()[1:])
        elif damage:
            stamp = (NOW if damage == "new mtime" else T0 - timedelta(days=365)).timestamp()
            os.utime(path, (stamp, stamp))
    if len(labels) == len(PLAN_FILES):
        (session / "tool-results" / "notes.txt").write_text("a file this layer never wrote")
        (session / "tool-results" / "link.txt").symlink_to(session / "artifacts.jsonl")
        names.update({"notes.txt": "notes.txt", "link.txt": "link.txt"})
    return names


ACTION = {"orphan_expired": "delete", "symlink_denied": "deny"}


def the_plan_decides_every_file(impl: Any) -> None:
    for labels in (("orphan",), ("orphan", "committed"), tuple(PLAN_FILES)):
        case = f"a plan 240 h after T0, one-day TTL, over {', '.join(labels)}" + (
            ", a foreign file and a symlink" if len(labels) == len(PLAN_FILES) else "")
        with _session() as session:
            names = _plan_session(impl, session, labels)
            before = _snapshot(session)
            plan = impl.plan_cleanup(session, NOW, DAY)
            got = {names.get(f, f): d for f, d in sorted(_decisions(plan).items())}
            want = {label: (ACTION.get(PLAN_REASONS[label], "retain"), PLAN_REASONS[label])
                    for label in sorted(names.values())}
            _expect(f"{case}: the files decided", sorted(got), sorted(want))
            for label in sorted(want):
                _expect(f"{case}: (action, reason) of {label!r}", got[label], want[label])
            _expect(f"{case}: the session's files after planning", _snapshot(session), before)


def applying_deletes_exactly_the_plan(impl: Any) -> None:
    for labels in (("orphan",), tuple(PLAN_FILES)):
        case = f"apply a plan over {', '.join(labels)}"
        with _session() as session:
            names = _plan_session(impl, session, labels)
            plan = impl.plan_cleanup(session, NOW, DAY)
            planned = sorted(f for f, (action, _) in _decisions(plan).items()
                             if action == "delete")
            _expect(f"{case}: files deleted", sorted(impl.apply_cleanup(session, plan)), planned)
            left = sorted(os.listdir(session / "tool-results"))
            _expect(f"{case}: files left", left, sorted(set(names) - set(planned)))
            _expect(f"{case}, twice: files deleted the second time",
                    list(impl.apply_cleanup(session, plan)), [])


SUITE = ContractSuite(N_("artifact layer"), (
    Contract(N_("output up to its limit stays inline: bash counts characters, other tools UTF-8 "
                "bytes"), small_output_stays_inline),
    Contract(N_("a large output goes to a file and the context gets a bounded pointer naming its "
                "source id and digest (for bash, the tail too)"),
             large_output_leaves_a_bounded_pointer),
    Contract(N_("a body is written once under a new name, never overwritten, and dated by the "
                "clock"), bodies_are_never_overwritten),
    Contract(N_("what memory keeps is the source id, summary and digest — never the body or a "
                "path"), memory_keeps_no_body),
    Contract(N_("a read returns lines by offset and limit, a final newline ending the last line"),
             reads_page_by_line),
    Contract(N_("every read re-checks the body: edited bytes, a missing body and a symlink are "
                "refused"), reads_refuse_bad_bodies),
    Contract(N_("a lease moves only prepare → commit | abort and commit → release; any other "
                "move is refused and nothing is written"), lease_moves_follow_the_machine),
    Contract(N_("repeating a lease's phase changes nothing, and a transaction cannot switch "
                "artifacts"), repeats_change_nothing),
    Contract(N_("a fresh journal reads every lease back: prepared and committed protect, aborted "
                "and released do not"), leases_survive_a_restart),
    Contract(N_("publishing makes the intent durable before the memory write; a rejection aborts, "
                "an unknown failure stays prepared"), publishing_is_not_yet_trusting),
    Contract(N_("a torn last journal line is ignored and repaired; a complete bad line is "
                "corruption naming its line"), journal_lines_are_checked),
    Contract(N_("the rule for one file: symlink, unknown name, changed bytes, protecting lease, "
                "age — the first that applies decides"), the_rule_for_one_file),
    Contract(N_("a plan decides every file from the leases and the recorded creation time (never "
                "the mtime) and changes nothing"), the_plan_decides_every_file),
    Contract(N_("applying a plan deletes exactly its expired orphans; applying it again deletes "
                "nothing"), applying_deletes_exactly_the_plan),
))
