"""s13 retention leases: a memory reference protects its artifact, crash or not.

When a memory layer wants to keep a reference to an artifact, the artifact must
not be cleaned up underneath it. A :class:`RetentionClaim` (source id + full digest,
no path, no body) is recorded in the session's :class:`LeaseJournal` as a small
state machine::

    (none) ──prepare──▶ PREPARED ──commit──▶ COMMITTED ──release──▶ RELEASED
                           └──────abort────▶ ABORTED

*Publishing is not yet trusting*: :meth:`LeaseJournal.publish_reference` makes the
PREPARED record durable **before** the memory write runs. If the process dies in
between, recovery finds a pending lease, and a pending lease keeps protecting its
artifact until :meth:`LeaseJournal.reconcile_pending` has asked the memory owner
what really happened.

The journal is append-only JSONL; each record carries the SHA-256 of the previous
one (a hash chain), so an edited or removed record is detected on the next read,
while a torn (unterminated) tail from a crashed writer is ignored and cut off.

A chain has no anchor for its *end*: cutting the last records off leaves a valid,
shorter chain (and a committed lease whose records went is simply gone). So every
append is followed by an atomically replaced **chain head** (``leases.head.json``: how
many records, and the hash of the last). On every read the journal's end must reach the
head — it may be one record ahead, the trace of a crash between the append and the head
write — otherwise the journal is refused as truncated. Recovery is explicit: restore
the journal from a backup, or accept the loss with :meth:`LeaseJournal.reanchor` and
re-publish the references the memory still holds.

Publishing twice is refused too: :meth:`LeaseJournal.publish_reference` after a failure
of unknown outcome finds the lease still PREPARED and raises :class:`LeasePendingError`
without running the publisher again; :meth:`LeaseJournal.reconcile_pending` settles it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from labmem.artifacts.externalize import parse_source_id
from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError
from labmem.core.storage import JsonlLog, read_snapshot, write_snapshot

__all__ = [
    "LeaseCorruptionError",
    "LeaseJournal",
    "LeaseJournalError",
    "LeasePendingError",
    "LeasePhase",
    "LeaseRecovery",
    "LeaseTransitionError",
    "LeaseValidationError",
    "OwnerStatus",
    "PublicationRejected",
    "ReconciliationReport",
    "ReferenceOwner",
    "RetentionClaim",
    "RetentionLease",
]

JOURNAL_NAME = "leases.jsonl"
HEAD_NAME = "leases.head.json"
HEAD_FORMAT = "labmem.lease-journal-head/v1"
GENESIS = "0" * 64
_SHA256 = re.compile(r"[0-9a-f]{64}")
TRANSACTION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
T = TypeVar("T")


class LeaseJournalError(LabmemError):
    """Base of every error the lease journal raises."""


class LeaseValidationError(LeaseJournalError, InvalidInputError):
    """A claim or argument was refused before anything was written."""


class LeaseTransitionError(LeaseJournalError):
    """The requested phase change is not allowed from the lease's current phase."""


class LeasePendingError(LeaseTransitionError):
    """A publication of this transaction already ran and its outcome is unknown.

    The lease is still PREPARED (and protecting); running the publisher again could make
    the memory hold the reference twice. Settle it with ``reconcile_pending`` first.
    """


class LeaseCorruptionError(LeaseJournalError, CorruptionError):
    """A complete journal line was edited, reordered or breaks the state machine, or the
    journal's end does not reach its chain head (records were cut off)."""


class PublicationRejected(LabmemError):
    """Raised by a publisher when the memory owner definitely refused the reference."""


class LeasePhase(str, Enum):
    PREPARED = "prepared"
    COMMITTED = "committed"
    ABORTED = "aborted"
    RELEASED = "released"

    @property
    def protects(self) -> bool:
        """Pending and committed leases keep their artifact; finished ones do not."""
        return self in (LeasePhase.PREPARED, LeasePhase.COMMITTED)


#: phase → phases it may move to (repeating the current phase is a no-op).
TRANSITIONS: dict[LeasePhase | None, frozenset[LeasePhase]] = {
    None: frozenset({LeasePhase.PREPARED}),
    LeasePhase.PREPARED: frozenset({LeasePhase.COMMITTED, LeasePhase.ABORTED}),
    LeasePhase.COMMITTED: frozenset({LeasePhase.RELEASED}),
    LeasePhase.ABORTED: frozenset(),
    LeasePhase.RELEASED: frozenset(),
}


@dataclass(frozen=True)
class RetentionClaim:
    """"Transaction ``transaction_id`` wants to keep artifact ``source_id`` with this digest."

    No path and no body: a claim protects exactly the bytes whose digest it names.
    """

    transaction_id: str
    source_id: str
    sha256: str

    def __post_init__(self) -> None:
        if (not isinstance(self.transaction_id, str)
                or not TRANSACTION_ID_PATTERN.fullmatch(self.transaction_id)):
            raise LeaseValidationError(
                "claim.transaction_id", f"is not a transaction id: {self.transaction_id!r}",
                "use letters, digits, '.', '_', ':' or '-' (at most 128)")
        try:
            _, _, prefix = parse_source_id(self.source_id)
        except InvalidInputError as exc:
            raise LeaseValidationError("claim.source_id", exc.problem, exc.fix) from None
        if not isinstance(self.sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise LeaseValidationError("claim.sha256", "must be the full 64-hex SHA-256")
        if not self.sha256.startswith(prefix):
            raise LeaseValidationError("claim.sha256", "does not match the source id's digest",
                                       "claim the digest of the artifact the source id names")

    @property
    def filename(self) -> str:
        return parse_source_id(self.source_id)[1]

    @classmethod
    def for_reference(cls, transaction_id: str, reference: Any) -> RetentionClaim:
        """A claim for an :class:`~labmem.artifacts.externalize.ArtifactReference`."""
        return cls(transaction_id, reference.source_id, reference.sha256)

    def to_dict(self) -> dict[str, str]:
        return {"transaction_id": self.transaction_id, "source_id": self.source_id,
                "sha256": self.sha256}


@dataclass(frozen=True)
class RetentionLease:
    """A claim and where it stands now (the fold of its journal records)."""

    claim: RetentionClaim
    phase: LeasePhase
    updated_at: datetime
    sealed_generation: int | None = None

    @property
    def protects(self) -> bool:
        return self.phase.protects

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {**self.claim.to_dict(), "phase": self.phase.value,
                               "updated_at": format_timestamp(self.updated_at)}
        if self.sealed_generation is not None:
            row["sealed_generation"] = self.sealed_generation
        return row


@dataclass(frozen=True)
class LeaseRecovery:
    """What a fresh journal instance found on disk. Counts and claims; no paths."""

    leases: tuple[RetentionLease, ...]
    torn_tail_bytes: int

    def by_phase(self, phase: LeasePhase) -> tuple[RetentionLease, ...]:
        return tuple(lease for lease in self.leases if lease.phase is phase)

    @property
    def protected_source_ids(self) -> frozenset[str]:
        return frozenset(lease.claim.source_id for lease in self.leases if lease.protects)

    def to_dict(self) -> dict[str, Any]:
        counts = {phase.value: len(self.by_phase(phase)) for phase in LeasePhase}
        return {"leases": len(self.leases), **counts,
                "protected": sorted(self.protected_source_ids),
                "torn_tail_bytes": self.torn_tail_bytes}


@dataclass(frozen=True)
class OwnerStatus:
    """A reference owner's answer about one transaction.

    ``state`` is ``published`` (then ``source_id`` and ``sha256`` say what it holds),
    ``absent`` (it definitely does not hold it) or ``unknown`` (it cannot tell now).
    """

    state: str
    source_id: str | None = None
    sha256: str | None = None

    def __post_init__(self) -> None:
        if self.state not in ("published", "absent", "unknown"):
            raise LeaseValidationError("status.state", f"is {self.state!r}",
                                       "answer 'published', 'absent' or 'unknown'")


@runtime_checkable
class ReferenceOwner(Protocol):
    """The memory that holds artifact references, as reconciliation sees it."""

    def status(self, transaction_id: str) -> OwnerStatus:
        """Whether this transaction's reference was published, is absent, or unknown."""

    def seal_absent(self, transaction_id: str) -> int:
        """Promise that this transaction can never publish later; return the new generation."""


@dataclass(frozen=True)
class ReconciliationReport:
    committed: tuple[str, ...] = ()
    aborted: tuple[str, ...] = ()
    still_pending: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, list[str]]:
        return {"committed": list(self.committed), "aborted": list(self.aborted),
                "still_pending": list(self.still_pending), "mismatched": list(self.mismatched)}


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 of a record's canonical JSON without its own ``hash`` field."""
    body = {key: value for key, value in record.items() if key != "hash"}
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class LeaseJournal:
    """The hash-chained, append-only lease journal of one session directory."""

    def __init__(self, session_dir: str | os.PathLike[str], *, clock: Clock | None = None,
                 lock_factory: Callable[[Path], AbstractContextManager[Any]] | None = None
                 ) -> None:
        self.session_dir = Path(session_dir)
        self.clock = resolve_clock(clock)
        kwargs = {} if lock_factory is None else {"lock_factory": lock_factory}
        self._log = JsonlLog(self.session_dir / JOURNAL_NAME, decode=self._decode,
                             corruption_error=LeaseCorruptionError, **kwargs)
        self._leases: dict[str, RetentionLease] = {}
        self._last_hash = GENESIS
        self._hashes: list[str] = []  # the hash of every record folded, in order
        self._head_path = self.session_dir / HEAD_NAME

    # -- reading: fold the chain -------------------------------------------------------

    def _decode(self, line_number: int, obj: dict[str, Any]) -> RetentionLease:
        """Check one record against the chain and the state machine, then fold it."""
        def corrupt(problem: str) -> LeaseCorruptionError:
            return LeaseCorruptionError(JOURNAL_NAME, line_number, problem)

        if obj.get("seq") != line_number:
            raise corrupt(f"sequence is {obj.get('seq')!r}, expected {line_number}")
        if obj.get("prev") != self._last_hash:
            raise corrupt("does not chain to the previous record (edited, removed or reordered)")
        if obj.get("hash") != record_hash(obj):
            raise corrupt("its hash does not match its content (the record was edited)")
        try:
            claim = RetentionClaim(obj["transaction_id"], obj["source_id"], obj["sha256"])
            phase = LeasePhase(obj["phase"])
            at = parse_timestamp(obj["at"], field="at")
        except (KeyError, ValueError, LabmemError) as exc:
            raise corrupt(f"not a valid lease record ({exc})") from None
        current = self._leases.get(claim.transaction_id)
        if current is not None and current.claim != claim:
            raise corrupt(f"transaction {claim.transaction_id!r} changes its claim")
        if phase not in TRANSITIONS[current.phase if current else None]:
            raise corrupt(f"{current.phase.value if current else 'none'} → {phase.value}"
                          " is not a lease transition")
        lease = RetentionLease(claim, phase, at, obj.get("sealed_generation"))
        self._leases[claim.transaction_id] = lease
        self._last_hash = obj["hash"]
        self._hashes.append(obj["hash"])
        return lease

    def _fold(self) -> None:
        """Fold the records appended since the last read; a bad line rolls the fold back,
        so it is reported again (same line) next time."""
        leases, last_hash, folded = dict(self._leases), self._last_hash, len(self._hashes)
        try:
            self._log.refresh()
        except LeaseJournalError:
            self._leases, self._last_hash = leases, last_hash
            del self._hashes[folded:]
            raise

    # -- the chain head: an anchor for the journal's end ----------------------------------

    def _read_head(self) -> tuple[int, str] | None:
        """``(records, hash of the last)`` from the chain head, or None when there is none."""
        document = read_snapshot(self._head_path, corruption_error=LeaseCorruptionError)
        if document is None:
            return None
        records = document.get("records") if isinstance(document, dict) else None
        last = document.get("hash") if isinstance(document, dict) else None
        if (not isinstance(document, dict) or document.get("format") != HEAD_FORMAT
                or isinstance(records, bool) or not isinstance(records, int) or records < 1
                or not isinstance(last, str) or not _SHA256.fullmatch(last)):
            raise LeaseCorruptionError(HEAD_NAME, None, "not a valid chain head (expected "
                                       f"format {HEAD_FORMAT!r}, records >= 1 and a hash)")
        return records, last

    def _head_problem(self, head: tuple[int, str] | None, *, strict: bool) -> str | None:
        """Why the folded journal's end disagrees with ``head``; None when it agrees.

        Under the lock (``strict``) no writer is between its append and its head write, so
        the journal ends at the head or one record after it (a crash in that window).
        Without the lock other writers may have appended since the head was read, so the
        journal may be any number of records ahead; it may never be behind.
        """
        records = self._log.line_count
        if head is None:
            if records <= 1:  # nothing written yet, or a crash before the first head
                return None
            return (f"holds {records} records but its chain head ({HEAD_NAME}) is missing, "
                    "so its end cannot be checked")
        count, last = head
        if records < count:
            return (f"ends at record {records}, but its chain head ({HEAD_NAME}) says "
                    f"{count} records were written: records were cut off its end")
        if self._hashes[count - 1] != last:
            return (f"record {count} does not have the hash its chain head ({HEAD_NAME}) "
                    "recorded: the journal was rewritten")
        if strict and records > count + 1:
            return (f"holds {records} records but its chain head ({HEAD_NAME}) says {count}: "
                    "records were appended without their head")
        return None

    def _refresh(self, *, strict: bool) -> None:
        head = self._read_head()  # the head first: a head read before the log is never ahead
        self._fold()
        problem = self._head_problem(head, strict=strict)
        if problem is not None and not strict:
            with self._log.locked():  # perhaps a writer was between its append and its head
                self._refresh(strict=True)
            return
        if problem is not None:
            raise LeaseCorruptionError(
                JOURNAL_NAME, None,
                f"{problem}. A cut-off record may have been the lease that protected an "
                "artifact: restore the journal from a backup, or accept the loss with "
                "LeaseJournal(session).reanchor() and re-publish every reference the memory "
                "still holds")

    def _write_head(self) -> None:
        write_snapshot(self._head_path, {"format": HEAD_FORMAT,
                                         "records": self._log.line_count,
                                         "hash": self._last_hash})

    def refresh(self) -> None:
        """Catch up with records appended (by any process) since the last read.

        A bad line rolls the fold back, so it is reported again (same line) next time; a
        journal whose end does not reach its chain head is refused on every read.
        """
        self._refresh(strict=False)

    def reanchor(self) -> LeaseRecovery:
        """Accept the journal as it is now and write its chain head at its end.

        The recovery step after a truncation was reported and no backup exists: the chain
        itself must still verify (an edited record is never accepted). Leases whose records
        were cut off are gone — re-publish the references the memory still holds.
        """
        with self._log.locked():
            self._fold()
            if self._log.line_count:
                self._write_head()
            else:
                self._head_path.unlink(missing_ok=True)
            return self.recover()

    def leases(self) -> dict[str, RetentionLease]:
        """transaction id → current lease, after catching up."""
        self.refresh()
        return dict(self._leases)

    def protecting_claims(self) -> list[RetentionClaim]:
        """Claims whose lease is prepared or committed: their artifacts must stay."""
        return [lease.claim for lease in self.leases().values() if lease.protects]

    def recover(self) -> LeaseRecovery:
        """The current leases as folded from disk (call it on a fresh instance)."""
        self.refresh()
        ordered = sorted(self._leases.values(), key=lambda lease: lease.claim.transaction_id)
        return LeaseRecovery(tuple(ordered), self._log.torn_tail_bytes)

    def locked(self) -> AbstractContextManager[Any]:
        """The journal's cross-process lock (cleanup re-reads claims under it)."""
        return self._log.locked()

    # -- writing: transitions ----------------------------------------------------------

    def _transition(self, transaction_id: str, phase: LeasePhase, *,
                    claim: RetentionClaim | None = None,
                    sealed_generation: int | None = None,
                    fresh: bool = False) -> RetentionLease:
        """Append one phase change under the lock. ``fresh``: the lease must not be in
        ``phase`` already (a publication never re-runs on a pending lease)."""
        with self._log.locked():
            self._refresh(strict=True)
            current = self._leases.get(transaction_id)
            if claim is not None and current is not None and current.claim != claim:
                raise LeaseTransitionError(
                    f"transaction_id: {transaction_id!r} already claims another artifact "
                    f"({current.claim.source_id}); use a new transaction id")
            if fresh and current is not None and current.phase is phase:
                raise LeasePendingError(
                    f"transaction_id: {transaction_id!r} is already {phase.value}: an earlier "
                    "publication's outcome is unknown (its publisher failed or is still "
                    "running), so the publisher was not called again; settle it with "
                    "reconcile_pending(owner) first")
            if current is not None and current.phase is phase:
                return current  # repeating the current phase is a no-op (safe retry)
            if phase not in TRANSITIONS[current.phase if current else None]:
                where = current.phase.value if current else "no lease"
                raise LeaseTransitionError(
                    f"transaction_id: {transaction_id!r} cannot go from {where} to "
                    f"{phase.value}; allowed: "
                    f"{sorted(p.value for p in TRANSITIONS[current.phase if current else None])}")
            claim = claim or current.claim  # type: ignore[union-attr]
            record: dict[str, Any] = {
                "seq": self._log.line_count + 1, **claim.to_dict(), "phase": phase.value,
                "at": format_timestamp(self.clock.now()), "prev": self._last_hash,
            }
            if sealed_generation is not None:
                record["sealed_generation"] = sealed_generation
            record["hash"] = record_hash(record)
            self._log.append(record)
            lease = RetentionLease(claim, phase, parse_timestamp(record["at"], field="at"),
                                   sealed_generation)
            self._leases[transaction_id] = lease
            self._last_hash = record["hash"]
            self._hashes.append(record["hash"])
            self._write_head()  # a crash before this leaves the head one record behind
            return lease

    def prepare(self, claim: RetentionClaim) -> RetentionLease:
        """Durably record the intent to publish ``claim`` (it protects from now on)."""
        return self._prepare(claim)

    def _prepare(self, claim: RetentionClaim, *, fresh: bool = False) -> RetentionLease:
        if not isinstance(claim, RetentionClaim):
            raise LeaseValidationError("claim", f"must be a RetentionClaim, got "
                                       f"{type(claim).__name__}")
        session = parse_source_id(claim.source_id)[0]
        if session != self.session_dir.name:
            raise LeaseValidationError(
                "claim.source_id", f"names session {session!r}, not this journal's session "
                f"{self.session_dir.name!r}", "record the lease in the artifact's own session")
        return self._transition(claim.transaction_id, LeasePhase.PREPARED, claim=claim,
                                fresh=fresh)

    def commit(self, transaction_id: str) -> RetentionLease:
        return self._transition(self._require_known(transaction_id), LeasePhase.COMMITTED)

    def abort(self, transaction_id: str, *, sealed_generation: int | None = None
              ) -> RetentionLease:
        return self._transition(self._require_known(transaction_id), LeasePhase.ABORTED,
                                sealed_generation=sealed_generation)

    def release(self, transaction_id: str) -> RetentionLease:
        """The memory dropped its reference: the artifact may age out again."""
        return self._transition(self._require_known(transaction_id), LeasePhase.RELEASED)

    def _require_known(self, transaction_id: Any) -> str:
        if not isinstance(transaction_id, str) or not TRANSACTION_ID_PATTERN.fullmatch(
                transaction_id):
            raise LeaseValidationError("transaction_id", f"is not a transaction id: "
                                       f"{transaction_id!r}")
        return transaction_id

    # -- publication and reconciliation ------------------------------------------------

    def publish_reference(self, claim: RetentionClaim, publisher: Callable[[RetentionClaim], T],
                          *, verify: Callable[[str], Any] | None = None) -> T:
        """Prepare durably, run ``publisher`` (the memory write), then commit or abort.

        ``PublicationRejected`` from the publisher means "definitely not written":
        the lease is aborted and the exception re-raised. Any other failure means
        "we do not know": the lease stays PREPARED (still protecting) and the error
        propagates, for :meth:`reconcile_pending` to settle later. Until then a retry
        with the same transaction raises :class:`LeasePendingError`, writes nothing and
        does not call the publisher (the memory may hold the reference already).

        ``verify`` (e.g. ``externalizer.verify``) re-checks the artifact *after* the
        lease protects it: a cleanup that ran just before the prepare cannot leave
        memory holding a reference to a deleted file. If it raises, nothing was
        published, so the lease aborts and the error propagates.
        """
        if not callable(publisher):
            raise LeaseValidationError("publisher", "must be callable with the claim")
        if verify is not None and not callable(verify):
            raise LeaseValidationError("verify", "must be callable with the source id")
        self._prepare(claim, fresh=True)
        if verify is not None:
            try:
                verify(claim.source_id)
            except Exception:
                self.abort(claim.transaction_id)
                raise
        try:
            result = publisher(claim)
        except PublicationRejected:
            self.abort(claim.transaction_id)
            raise
        self.commit(claim.transaction_id)
        return result

    def reconcile_pending(self, owner: ReferenceOwner) -> ReconciliationReport:
        """Settle every PREPARED lease by asking the owner what it holds.

        Published with the same source id and digest → commit. Absent → the owner
        seals the transaction first (so a late write cannot appear after we let the
        artifact go), then the lease aborts. Unknown or a different reference → the
        lease stays pending and keeps protecting.
        """
        if not isinstance(owner, ReferenceOwner):
            raise LeaseValidationError("owner", "must have status() and seal_absent()")
        committed, aborted, pending, mismatched = [], [], [], []
        for lease in sorted(self.leases().values(), key=lambda x: x.claim.transaction_id):
            if lease.phase is not LeasePhase.PREPARED:
                continue
            txid = lease.claim.transaction_id
            answer = owner.status(txid)
            if not isinstance(answer, OwnerStatus):
                raise LeaseValidationError("owner.status", f"returned {type(answer).__name__}",
                                           "return an OwnerStatus")
            if answer.state == "published":
                if (answer.source_id, answer.sha256) == (lease.claim.source_id,
                                                         lease.claim.sha256):
                    self.commit(txid)
                    committed.append(txid)
                else:
                    mismatched.append(txid)
            elif answer.state == "absent":
                generation = owner.seal_absent(txid)
                if not isinstance(generation, int) or isinstance(generation, bool):
                    raise LeaseValidationError("owner.seal_absent", "must return an int "
                                               f"generation, got {generation!r}")
                self.abort(txid, sealed_generation=generation)
                aborted.append(txid)
            else:
                pending.append(txid)
        return ReconciliationReport(tuple(committed), tuple(aborted), tuple(pending),
                                    tuple(mismatched))

    def __repr__(self) -> str:
        return f"LeaseJournal(session={self.session_dir.name!r})"
