"""Checkers for the s13 exercises (artifacts: thresholds, cleanup, reconciliation).

Three predict exercises: each checker compares the learner's answer with what the real
library does on a throw-away session, not with a hand-written copy of the answer. One
build exercise: the learner writes three pieces of the chapter's from-scratch layer
(:mod:`labmem.scratch.s13`): externalizing an output, the lease's next state, the cleanup
rule for one file; :func:`check_layer` puts them into the module and runs the layer's
contract suite (:mod:`labmem.exercises.suites.s13`) on it. Then the measured comparison of
the module with the library (:func:`measure_journal`, :func:`hand_edits`,
:func:`cleanup_races`, :func:`pending_after_restart`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from labmem.artifacts import (
    ExternalizationPolicy,
    LeaseJournal,
    OwnerStatus,
    RetentionClaim,
    ToolResultExternalizer,
    apply_cleanup,
    plan_cleanup,
)
from labmem.core.clock import FixedClock, parse_timestamp
from labmem.core.i18n import _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.contracts import ContractReport, assemble
from labmem.exercises.suites.s13 import SUITE
from labmem.scratch import s13 as scratch

T0 = parse_timestamp("2026-08-01T00:00:00Z", field="T0")

#: Exercise 1: name → (tool, output). Which does the default policy externalize?
EXERCISE_1_OUTPUTS: dict[str, tuple[str, str]] = {
    "bash, 20,000 Chinese characters": ("bash", "中" * 20_000),
    "grep, 20,000 Chinese characters": ("grep", "中" * 20_000),
    "bash, 40,000 ASCII characters": ("bash", "a" * 40_000),
    "read_file, 50,000 ASCII characters": ("read_file", "a" * 50_000),
    "read_file, 13,000 emoji": ("read_file", "😀" * 13_000),
}

#: Exercise 2: file → (age in hours at cleanup time, lease history, tampered?).
EXERCISE_2_FILES: dict[str, tuple[int, tuple[str, ...], bool]] = {
    "A": (72, ("prepare", "commit"), False),
    "B": (24, (), False),  # exactly the one-day TTL
    "C": (23, (), False),
    "D": (240, ("prepare",), False),  # the process crashed before commit
    "E": (20, ("prepare", "commit", "release"), False),  # released, but young
    "F": (120, (), True),
    "G": (30, ("prepare", "abort"), False),
}

#: Exercise 3: what the owner answers about a pending lease (label → description).
EXERCISE_3_ANSWERS: dict[str, str] = {
    "published": "published, with the same source id and digest",
    "published_other": "published, but a reference with another digest",
    "absent": "absent: it definitely does not hold the reference",
    "unknown": "unknown: it cannot tell right now",
}


def externalized_names() -> set[str]:
    """Exercise 1, computed with the real default policy."""
    policy = ExternalizationPolicy()
    return {name for name, (tool, output) in EXERCISE_1_OUTPUTS.items()
            if policy.should_externalize(output, tool)}


def deleted_files() -> set[str]:
    """Exercise 2, computed by planning a real cleanup over a throw-away session."""
    with tempfile.TemporaryDirectory(prefix="labmem-s13-ex-") as root:
        session = Path(root) / "exercise"
        now = T0 + timedelta(hours=max(age for age, _, _ in EXERCISE_2_FILES.values()))
        clock = FixedClock(T0)
        journal = LeaseJournal(session, clock=clock)
        names = {}
        for label, (age, history, tampered) in EXERCISE_2_FILES.items():
            clock.at = now - timedelta(hours=age)
            ex = ToolResultExternalizer(session, clock=clock)
            artifact = ex.externalize(f"{label}\n" * 20_000, "bash").artifact
            names[artifact.filename] = label
            for step in history:
                if step == "prepare":
                    journal.prepare(RetentionClaim.for_reference(f"tx-{label}", artifact))
                else:
                    getattr(journal, step)(f"tx-{label}")
            if tampered:
                path = session / "tool-results" / artifact.filename
                path.write_bytes(b"?" + path.read_bytes()[1:])
        plan = plan_cleanup(journal=journal, now=now)
        return {names[d.filename] for d in plan.to_delete}


class _Owner:
    """An owner that gives one of the exercise's answers about any transaction."""

    def __init__(self, answer: str, claim: RetentionClaim) -> None:
        self.answer, self.claim = answer, claim

    def status(self, transaction_id: str) -> OwnerStatus:
        if self.answer == "published":
            return OwnerStatus("published", self.claim.source_id, self.claim.sha256)
        if self.answer == "published_other":
            return OwnerStatus("published", self.claim.source_id, "0" * 64)
        return OwnerStatus(self.answer)

    def seal_absent(self, transaction_id: str) -> int:
        return 1


def reconciled_phases() -> dict[str, str]:
    """Exercise 3: crash between prepare and commit, then reconcile with each answer."""
    phases = {}
    with tempfile.TemporaryDirectory(prefix="labmem-s13-ex-") as root:
        for answer in EXERCISE_3_ANSWERS:
            session = Path(root) / answer.replace("_", "-")
            ex = ToolResultExternalizer(session, clock=FixedClock(T0))
            artifact = ex.externalize("x" * 40_000, "bash").artifact
            claim = RetentionClaim.for_reference("tx-1", artifact)
            LeaseJournal(session, clock=FixedClock(T0)).prepare(claim)  # ... then a crash
            fresh = LeaseJournal(session, clock=FixedClock(T0))
            fresh.reconcile_pending(_Owner(answer, claim))
            phases[answer] = fresh.leases()["tx-1"].phase.value
    return phases


def check_externalized(answer: Any) -> Feedback:
    name = _("s13.1 externalized outputs")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, (set, frozenset, list, tuple)):
        return Feedback(name, False, _("give a set of names from EXERCISE_1_OUTPUTS"))
    expected = externalized_names()
    if set(answer) == expected:
        return Feedback(name, True, _("bash is measured in characters, other tools in UTF-8 "
                          "bytes (3 per CJK character, 4 per emoji)"))
    if "bash, 20,000 Chinese characters" in set(answer):
        return Feedback(name, False, _("bash counts characters: 20,000 is under 30,000"))
    return Feedback(name, False, _("count UTF-8 bytes for every tool except bash "
                      "(limit 51,200), characters for bash (limit 30,000)"))


def check_deleted(answer: Any) -> Feedback:
    name = _("s13.2 cleanup deletions")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, (set, frozenset, list, tuple)):
        return Feedback(name, False, _("give a set of file labels such as {'A'}"))
    expected = deleted_files()
    given = set(answer)
    if given == expected:
        return Feedback(name, True, _("only unreferenced, intact files at least one day old go: "
                          "B is exactly one day old, G's lease was aborted"))
    unknown = given - set(EXERCISE_2_FILES)
    if unknown:
        return Feedback(name, False, _("no file is labelled {label!r}; use {files}")
                                     .format(label=sorted(unknown)[0],
                                             files=", ".join(EXERCISE_2_FILES)))
    if "D" in given:
        return Feedback(name, False, _("a pending (prepared) lease protects its artifact, "
                          "whatever its age"))
    if "F" in given:
        return Feedback(name, False, _("a tampered file is kept as evidence, never deleted"))
    if "E" in given:
        return Feedback(name, False, _("E's lease was released, so nothing protects it — but "
                          "how old is it?"))
    if "G" not in given:
        return Feedback(name, False, _("an aborted lease protects nothing"))
    if "B" not in given:
        return Feedback(name, False, _("a file stays only while it is *younger* than the TTL"))
    return Feedback(name, False, _("check each file: lease phase, digest, then age against "
                      "one day"))


def check_reconciled(answer: Any) -> Feedback:
    name = _("s13.3 reconciliation")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, Mapping):
        return Feedback(name, False, _("give a dict: owner answer → phase name"))
    expected = reconciled_phases()
    given = {key: getattr(value, "value", value) for key, value in answer.items()}
    if set(given) != set(expected):
        return Feedback(name, False, _("answer for exactly these keys: {keys}")
                                     .format(keys=", ".join(expected)))
    if given == expected:
        return Feedback(name, True, _("only a confirmed, matching answer settles a lease; "
                                      "'unknown' and a reference to other bytes keep it "
                                      "pending and protecting"))
    if given["unknown"] != expected["unknown"]:
        return Feedback(name, False, _("an unknown outcome must not release the artifact"))
    if given["published_other"] != expected["published_other"]:
        return Feedback(name, False, _("the owner holds a reference to *other* bytes: that "
                          "confirms neither this claim nor its absence"))
    return Feedback(name, False, _("a matching publication commits; a confirmed absence "
                      "(sealed first) aborts"))


# -- building the layer ------------------------------------------------------------------

#: The pieces of the chapter's module the learner writes in Exercise 4, in order.
PIECES = ("externalize", "next_lease", "cleanup_reason")


def check_layer(**pieces: Any) -> ContractReport:
    """Exercise 4: the chapter's from-scratch artifact layer with the learner's own pieces
    (``externalize=...``, ``next_lease=...``, ``cleanup_reason=...``) put in place of the
    module's, judged by the whole layer's contract suite. A piece left as ``None`` keeps
    the module's own version."""
    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        raise TypeError(f"check_layer() takes {', '.join(PIECES)}; not {unknown[0]!r}")
    given = {name: piece for name, piece in pieces.items() if piece is not None}
    return SUITE.run(assemble(scratch, given), who="your")


#: Single-function build exercises: none. The cleanup rule for one file is one of the three
#: pieces of Exercise 4, judged with the rest of the layer by its contract suite.
BUILD: tuple = ()


# -- from scratch vs the library, measured -------------------------------------------------

def _output(label: str) -> str:
    return "".join(f"{label} line {n:04d}\n" for n in range(3_000))


class _CountingJournal(LeaseJournal):
    """The library's journal, counting the stored records it decodes."""

    decoded = 0

    def _decode(self, line_number: int, obj: dict[str, Any]) -> Any:
        type(self).decoded += 1
        return super()._decode(line_number, obj)


def measure_journal(directory: Path, *, transactions: int = 100) -> dict[str, dict[str, int]]:
    """``transactions`` leases, each prepared then committed, by one journal instance per
    implementation: the records each one decodes doing it, and the bytes it stores."""
    counts = {"records": 0}

    def counting_read(path: Path) -> list[dict[str, Any]]:
        records = scratch.read_lines(path)
        counts["records"] += len(records)
        return records

    module = assemble(scratch, {"read_lines": counting_read})
    results: dict[str, dict[str, int]] = {}
    session = Path(directory) / "journal-scratch"
    ref = module.externalize(session, _output("log"), "bash", FixedClock(T0)).artifact
    journal = module.LeaseJournal(session, clock=FixedClock(T0))
    counts["records"] = 0
    for n in range(transactions):
        journal.prepare(module.claim_for(f"tx-{n}", ref))
        journal.commit(f"tx-{n}")
    stored = (session / "leases.jsonl").stat().st_size
    results["from scratch"] = {"records stored": 2 * transactions,
                               "records decoded": counts["records"],
                               "bytes per record": stored // (2 * transactions)}

    session = Path(directory) / "journal-library"
    ref = ToolResultExternalizer(session, clock=FixedClock(T0)).externalize(
        _output("log"), "bash").artifact
    library = _CountingJournal(session, clock=FixedClock(T0))
    _CountingJournal.decoded = 0
    for n in range(transactions):
        library.prepare(RetentionClaim.for_reference(f"tx-{n}", ref))
        library.commit(f"tx-{n}")
    stored = (session / "leases.jsonl").stat().st_size
    results["library"] = {"records stored": 2 * transactions,
                          "records decoded": _CountingJournal.decoded,
                          "bytes per record": stored // (2 * transactions)}
    return results


#: the hand edits :func:`hand_edits` makes to a journal of two leases
EDITS = ("an aborted lease edited to committed", "the last record cut off")


def hand_edits(directory: Path) -> list[dict[str, str]]:
    """Each of :data:`EDITS` on each implementation's journal (tx-1 committed, tx-2
    aborted): what a fresh journal then reads (tx-2's phase, how many leases) or refuses."""
    rows = []
    for edit in EDITS:
        row = {"hand edit": edit}
        for label, impl in (("from scratch", scratch), ("library", None)):
            session = Path(directory) / "edits" / f"{label.replace(' ', '-')}-{len(rows)}"
            if impl is None:
                ref = ToolResultExternalizer(session, clock=FixedClock(T0)).externalize(
                    _output("log"), "bash").artifact
                journal: Any = LeaseJournal(session, clock=FixedClock(T0))
                claim = RetentionClaim.for_reference
            else:
                ref = scratch.externalize(session, _output("log"), "bash",
                                          FixedClock(T0)).artifact
                journal = scratch.LeaseJournal(session, clock=FixedClock(T0))
                claim = scratch.claim_for
            journal.prepare(claim("tx-1", ref))
            journal.commit("tx-1")
            journal.prepare(claim("tx-2", ref))
            journal.abort("tx-2")
            path = session / "leases.jsonl"
            lines = path.read_text(encoding="utf-8").split("\n")[:-1]
            if edit == EDITS[0]:
                lines[3] = lines[3].replace('"aborted"', '"committed"')
            else:
                lines = lines[:-1]
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            fresh = (LeaseJournal(session) if impl is None else scratch.LeaseJournal(session))
            try:
                leases = fresh.leases()
                phase = getattr(leases["tx-2"].phase, "value", leases["tx-2"].phase)
                row[label] = f"accepted: tx-2 {phase}"
            except Exception as exc:  # the library's refusal is the point
                row[label] = f"refused: {type(exc).__name__}"
        rows.append(row)
    return rows


#: what happens to a planned orphan between :func:`plan_cleanup` and :func:`apply_cleanup`
RACES = ("a reference is published to it", "its bytes are rewritten")


def cleanup_races(directory: Path) -> list[dict[str, str]]:
    """Plan a cleanup of one expired orphan, let one of :data:`RACES` happen, then apply:
    whether each implementation deleted the file."""
    rows = []
    for race in RACES:
        row = {"between plan and apply": race}
        for label in ("from scratch", "library"):
            session = Path(directory) / "races" / f"{label.replace(' ', '-')}-{len(rows)}"
            clock = FixedClock(T0)
            library = label == "library"
            if library:
                ref = ToolResultExternalizer(session, clock=clock).externalize(
                    _output("orphan"), "bash").artifact
                journal: Any = LeaseJournal(session, clock=clock)
                plan: Any = plan_cleanup(journal=journal, now=T0 + timedelta(days=2))
            else:
                ref = scratch.externalize(session, _output("orphan"), "bash", clock).artifact
                journal = scratch.LeaseJournal(session, clock=clock)
                plan = scratch.plan_cleanup(session, T0 + timedelta(days=2), timedelta(days=1))
            body = session / "tool-results" / ref.filename
            if race == RACES[0]:
                claim = (RetentionClaim.for_reference if library else scratch.claim_for)(
                    "tx-late", ref)
                journal.publish_reference(claim, lambda c: "memory entry")
            else:
                body.unlink()
                body.write_text("new evidence under the old name", encoding="utf-8")
            if library:
                apply_cleanup(plan, journal=journal, now=T0 + timedelta(days=2))
            else:
                scratch.apply_cleanup(session, plan)
            row[label] = "kept" if body.exists() else "deleted"
        rows.append(row)
    return rows


class _AnsweringOwner:
    """A memory that answers ``published`` for tx-1 and ``absent`` for everything else."""

    def __init__(self, claim: RetentionClaim) -> None:
        self.claim, self.generation = claim, 0

    def status(self, transaction_id: str) -> OwnerStatus:
        if transaction_id == self.claim.transaction_id:
            return OwnerStatus("published", self.claim.source_id, self.claim.sha256)
        return OwnerStatus("absent")

    def seal_absent(self, transaction_id: str) -> int:
        self.generation += 1
        return self.generation


def pending_after_restart(directory: Path) -> dict[str, int]:
    """Two publications crash between prepare and commit (the memory holds tx-1, not
    tx-2). After a restart: leases still pending in the module (it has no way to ask the
    memory) and in the library after ``reconcile_pending``."""
    out = {}
    for label in ("from scratch", "library"):
        session = Path(directory) / "pending" / label.replace(" ", "-")
        if label == "library":
            ref = ToolResultExternalizer(session, clock=FixedClock(T0)).externalize(
                _output("log"), "bash").artifact
            claims = [RetentionClaim.for_reference(f"tx-{n}", ref) for n in (1, 2)]
            for claim in claims:
                LeaseJournal(session, clock=FixedClock(T0)).prepare(claim)  # ... a crash
            fresh = LeaseJournal(session, clock=FixedClock(T0))
            fresh.reconcile_pending(_AnsweringOwner(claims[0]))
            leases = fresh.leases()
        else:
            ref = scratch.externalize(session, _output("log"), "bash", FixedClock(T0)).artifact
            for n in (1, 2):
                scratch.LeaseJournal(session, clock=FixedClock(T0)).prepare(
                    scratch.claim_for(f"tx-{n}", ref))
            leases = scratch.LeaseJournal(session).leases()
        out[label] = sum(getattr(lease.phase, "value", lease.phase) == "prepared"
                         for lease in leases.values())
    return out
