"""s13 reference-aware cleanup: plan read-only, then delete only what is still safe.

*Cleanup is not deleting the session.* A file in ``tool-results/`` may go only if no
prepared or committed lease protects it, it is older than the orphan TTL (by the
creation time recorded when it was written — never its mtime), its bytes still match
the recorded digest, and it is not over the per-run deletion limit.

The rule for one file is a pure function, :func:`cleanup_reason`: the planner first
gathers the file's :class:`ArtifactFacts` (lstat, the manifest record, a hash, the
leases), then asks the rule. Looking and judging are separate, so the rule can be read,
tested and re-implemented without a file system.

Two phases, because time passes between looking and deleting:

1. :func:`plan_cleanup` reads and decides — one :class:`CleanupDecision` per file,
   plus the claims whose artifact is already missing. It changes nothing (the dry run).
2. :func:`apply_cleanup` takes the journal's lock, re-reads the claims, and right
   before each deletion re-checks the file's identity and digest. A file changed in
   between is reported as a race, a reference published after planning wins, and a
   second apply finds nothing left to do.

Plans and reports name files relative to ``tool-results/`` only; no paths. Both phases
refuse (``ArtifactAccessError``) a session whose ``tool-results/`` leaves it.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from labmem.artifacts.externalize import (
    ARTIFACT_NAME_PATTERN,
    TOOL_RESULTS_DIR,
    ArtifactReference,
    ToolResultExternalizer,
    file_digest,
)
from labmem.artifacts.leases import LeaseJournal, LeasePhase, RetentionClaim, RetentionLease
from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.core.errors import InvalidInputError, LabmemError
from labmem.core.storage import fsync_directory

__all__ = [
    "ArtifactFacts",
    "CleanupDecision",
    "CleanupError",
    "CleanupPlan",
    "CleanupPolicy",
    "CleanupReport",
    "apply_cleanup",
    "cleanup_reason",
    "plan_cleanup",
]

#: Why a file is kept or may go (the ``reason`` column of a plan).
REFERENCED = "referenced"  # a prepared or committed lease claims exactly these bytes
RECENT = "recent"  # younger than the orphan TTL
OVER_LIMIT = "over_limit"  # would be deleted, but this run's deletion limit is used up
UNKNOWN = "unknown_name"  # not a recorded artifact (foreign file, or a body without record)
CORRUPT = "corrupt"  # digest disagrees with its record or claim: keep the evidence
SYMLINK = "symlink_denied"  # never followed, never deleted by cleanup
ORPHAN = "orphan_expired"  # unreferenced and past the TTL: planned for deletion

#: reason → action. Only an expired orphan is deleted; a symlink is refused outright.
ACTION_FOR_REASON = {REFERENCED: "retain", RECENT: "retain", OVER_LIMIT: "retain",
                     UNKNOWN: "retain", CORRUPT: "retain", SYMLINK: "deny", ORPHAN: "delete"}
FILE_TYPES = ("file", "symlink", "other")


class CleanupError(LabmemError, ValueError):
    """A cleanup call was refused (bad policy, time, or a plan of another session)."""


@dataclass(frozen=True)
class CleanupPolicy:
    """How old an unreferenced artifact must be, and how many may go in one run."""

    orphan_ttl: timedelta = timedelta(days=1)
    max_deletions: int = 1_000

    def __post_init__(self) -> None:
        if not isinstance(self.orphan_ttl, timedelta) or self.orphan_ttl < timedelta(0):
            raise CleanupError(f"policy.orphan_ttl: must be a non-negative timedelta, got "
                               f"{self.orphan_ttl!r}")
        if (not isinstance(self.max_deletions, int) or isinstance(self.max_deletions, bool)
                or self.max_deletions < 0):
            raise CleanupError(f"policy.max_deletions: must be a non-negative int, got "
                               f"{self.max_deletions!r}")


@dataclass(frozen=True)
class CleanupDecision:
    """One file's fate. ``identity`` (device, inode, size, sha256) is for apply's re-check."""

    filename: str
    action: str  # "delete", "retain" or "deny"
    reason: str
    source_id: str | None = None
    byte_size: int = 0
    age_hours: float | None = None
    identity: tuple[int, int, int, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"filename": self.filename, "action": self.action, "reason": self.reason,
                "source_id": self.source_id, "byte_size": self.byte_size,
                "age_hours": self.age_hours}


@dataclass(frozen=True)
class CleanupPlan:
    """A dry run: what would happen, decided at ``planned_at``. Nothing was changed."""

    session_id: str
    planned_at: datetime
    decisions: tuple[CleanupDecision, ...]
    missing_references: tuple[str, ...]

    @property
    def to_delete(self) -> tuple[CleanupDecision, ...]:
        return tuple(d for d in self.decisions if d.action == "delete")

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(d.reason for d in self.decisions).items()))

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "planned_at": format_timestamp(self.planned_at),
                "dry_run": True, "counts": self.counts(),
                "decisions": [d.to_dict() for d in self.decisions],
                "missing_references": list(self.missing_references)}


@dataclass(frozen=True)
class CleanupReport:
    """What :func:`apply_cleanup` did. ``races`` changed after planning and were kept."""

    deleted: tuple[str, ...]
    retained_referenced: tuple[str, ...]
    races: tuple[str, ...]
    already_gone: tuple[str, ...]
    bytes_freed: int

    def to_dict(self) -> dict[str, Any]:
        return {"deleted": list(self.deleted), "retained_referenced":
                list(self.retained_referenced), "races": list(self.races),
                "already_gone": list(self.already_gone), "bytes_freed": self.bytes_freed}


@dataclass(frozen=True)
class ArtifactFacts:
    """What the planner observed about one entry of ``tool-results/``, before judging it.

    ``file_type`` comes from ``lstat`` (a link is never followed): ``"file"``,
    ``"symlink"`` or ``"other"`` (a directory, a FIFO…). ``recorded_sha256`` is the digest
    the manifest recorded for this name — ``None`` when the name is not an artifact name
    or has no record. ``sha256`` is the digest of the bytes as they are now (``None`` if
    they were not read). ``age`` is *now* minus the recorded creation time. ``leases``
    holds ``(phase, claimed sha256)`` for every lease whose claim names this file.
    """

    file_type: str
    recorded_sha256: str | None = None
    sha256: str | None = None
    age: timedelta | None = None
    leases: tuple[tuple[LeasePhase, str], ...] = ()

    def __post_init__(self) -> None:
        if self.file_type not in FILE_TYPES:
            raise CleanupError(f"facts.file_type: must be one of {FILE_TYPES}, got "
                               f"{self.file_type!r}")
        object.__setattr__(self, "leases", tuple(
            (LeasePhase(phase), digest) for phase, digest in self.leases))


def cleanup_reason(facts: ArtifactFacts, orphan_ttl: timedelta) -> str:
    """Why one file is kept, refused or may go — the first rule that applies wins.

    The order is the argument: a symlink is never judged further; a file we did not
    write is not ours to delete; changed bytes are evidence, kept before any lease or
    age is considered; a prepared or committed lease protects whatever its age; and
    only then does the TTL decide (an artifact exactly ``orphan_ttl`` old has expired).
    """
    if facts.file_type == "symlink":
        return SYMLINK
    if facts.file_type != "file" or facts.recorded_sha256 is None:
        return UNKNOWN
    protecting = [digest for phase, digest in facts.leases if phase.protects]
    if facts.sha256 != facts.recorded_sha256 or any(d != facts.sha256 for d in protecting):
        return CORRUPT
    if protecting:
        return REFERENCED
    if facts.age is None or facts.age < orphan_ttl:
        return RECENT
    return ORPHAN


def _require_now(now: Any) -> datetime:
    try:
        return parse_timestamp(now, field="now")
    except InvalidInputError as exc:
        raise CleanupError(str(exc)) from None


def _require_journal(journal: Any) -> LeaseJournal:
    if not isinstance(journal, LeaseJournal):
        raise CleanupError(f"journal: must be a LeaseJournal, got {type(journal).__name__}")
    return journal


def _claims_by_filename(journal: LeaseJournal) -> dict[str, list[RetentionClaim]]:
    claims: dict[str, list[RetentionClaim]] = {}
    for claim in journal.protecting_claims():
        claims.setdefault(claim.filename, []).append(claim)
    return claims


def _leases_by_filename(leases: list[RetentionLease]) -> dict[str, list[tuple[LeasePhase, str]]]:
    """filename → (phase, claimed digest) of every lease, protecting or not."""
    by_name: dict[str, list[tuple[LeasePhase, str]]] = {}
    for lease in leases:
        by_name.setdefault(lease.claim.filename, []).append((lease.phase, lease.claim.sha256))
    return by_name


def plan_cleanup(*, journal: LeaseJournal, policy: CleanupPolicy | None = None,
                 now: datetime | str) -> CleanupPlan:
    """Decide every file in ``tool-results/`` without changing anything."""
    journal = _require_journal(journal)
    policy = CleanupPolicy() if policy is None else policy
    if not isinstance(policy, CleanupPolicy):
        raise CleanupError("policy: must be a CleanupPolicy")
    now = _require_now(now)
    externalizer = ToolResultExternalizer(journal.session_dir)
    records = {ref.filename: ref for ref in externalizer.references()}
    all_leases = list(journal.leases().values())
    leases = _leases_by_filename(all_leases)
    directory = journal.session_dir / TOOL_RESULTS_DIR
    names = sorted(os.listdir(directory)) if directory.is_dir() else []
    decisions: list[CleanupDecision] = []
    deletions = 0
    for name in names:
        try:
            decision = _decide(directory, name, records.get(name), leases.get(name, []),
                               policy, now)
        except FileNotFoundError:  # removed while we were listing: nothing to decide
            continue
        if decision.action == "delete":
            if deletions >= policy.max_deletions:
                decision = CleanupDecision(name, "retain", OVER_LIMIT, decision.source_id,
                                           decision.byte_size, decision.age_hours)
            else:
                deletions += 1
        decisions.append(decision)
    present = set(names)
    missing = sorted({lease.claim.source_id for lease in all_leases
                      if lease.protects and lease.claim.filename not in present})
    return CleanupPlan(externalizer.session_id, now, tuple(decisions), tuple(missing))


def _decide(directory: Any, name: str, record: ArtifactReference | None,
            leases: list[tuple[LeasePhase, str]], policy: CleanupPolicy,
            now: datetime) -> CleanupDecision:
    """Gather one file's facts (hashing only a recorded regular file), then apply the rule."""
    info = os.lstat(directory / name)
    if stat.S_ISLNK(info.st_mode):
        facts = ArtifactFacts("symlink")
    elif not stat.S_ISREG(info.st_mode):
        facts = ArtifactFacts("other")
    elif record is None or not ARTIFACT_NAME_PATTERN.fullmatch(name):
        facts = ArtifactFacts("file")
    else:
        digest, info = file_digest(directory / name)
        facts = ArtifactFacts("file", record.sha256, digest, now - record.created_at,
                              tuple(leases))
    reason = cleanup_reason(facts, policy.orphan_ttl)
    if reason == SYMLINK:
        return CleanupDecision(name, ACTION_FOR_REASON[reason], reason)
    if facts.recorded_sha256 is None:
        return CleanupDecision(name, ACTION_FOR_REASON[reason], reason, byte_size=info.st_size)
    identity = ((info.st_dev, info.st_ino, info.st_size, facts.sha256)
                if reason == ORPHAN else None)
    return CleanupDecision(name, ACTION_FOR_REASON[reason], reason, record.source_id,
                           info.st_size, round(facts.age.total_seconds() / 3600, 2), identity)


def apply_cleanup(plan: CleanupPlan, *, journal: LeaseJournal,
                  now: datetime | str) -> CleanupReport:
    """Delete the plan's orphans that are still unreferenced and byte-for-byte unchanged."""
    journal = _require_journal(journal)
    if not isinstance(plan, CleanupPlan):
        raise CleanupError(f"plan: must be a CleanupPlan, got {type(plan).__name__}")
    if plan.session_id != journal.session_dir.name:
        raise CleanupError(f"plan: was made for session {plan.session_id!r}, not "
                           f"{journal.session_dir.name!r}; plan this session first")
    now = _require_now(now)
    if now < plan.planned_at:
        raise CleanupError("now: is before the plan was made; plan again")
    directory = journal.session_dir / TOOL_RESULTS_DIR
    deleted, referenced, races, gone = [], [], [], []
    freed = 0
    with journal.locked():  # no lease can be prepared while we check and delete
        # a tool-results/ swapped for a symlink since planning would aim the deletions
        # outside the session: ArtifactAccessError, nothing deleted
        ToolResultExternalizer(journal.session_dir).check_confinement()
        claims = _claims_by_filename(journal)
        for decision in plan.to_delete:
            name = decision.filename
            if name in claims:
                referenced.append(name)
                continue
            path = directory / name
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):  # e.g. swapped for a symlink
                    races.append(name)
                    continue
                digest, info = file_digest(path)
            except FileNotFoundError:
                gone.append(name)  # a second apply, or someone else removed it
                continue
            except OSError:  # O_NOFOLLOW refused a symlink swapped in after lstat
                races.append(name)
                continue
            if (info.st_dev, info.st_ino, info.st_size, digest) != decision.identity:
                races.append(name)
                continue
            os.unlink(path)
            deleted.append(name)
            freed += info.st_size
        if deleted:
            fsync_directory(directory)
    return CleanupReport(tuple(deleted), tuple(referenced), tuple(races), tuple(gone), freed)
