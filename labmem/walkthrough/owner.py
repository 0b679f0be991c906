"""The s10 workspace memory as s13's :class:`~labmem.artifacts.leases.ReferenceOwner`.

An artifact outcome is published into the workspace as an ``outcome`` fact whose
``fact_id`` is the lease's transaction id, whose source is the artifact's source id,
and whose evidence carries the full digest. Reconciliation can then ask the workspace
what it holds (:meth:`status`), and — when it holds nothing — make sure it never will
(:meth:`seal_absent`), before the lease lets the artifact go.

The owner's answer is read back from the workspace's log on disk, never from memory of
the ``publish`` call: :func:`reference_status` decodes one stored fact, so a fresh
process after a crash answers exactly as the process that wrote it would have.

Publishing and sealing take one lock of their own, so "check not sealed, then write"
and "check not written, then seal" cannot interleave.
"""

from __future__ import annotations

from labmem.artifacts import OwnerStatus, PublicationRejected, RetentionClaim
from labmem.core.clock import format_timestamp
from labmem.core.errors import LabmemError
from labmem.core.provenance import MemorySource
from labmem.core.storage import file_lock, read_snapshot, write_snapshot
from labmem.workspace import Fact, WorkspaceMemory

__all__ = ["DIGEST_MARK", "ReferenceOwnerRace", "WorkspaceReferenceOwner", "reference_evidence",
           "reference_status"]

SEALED_NAME = "sealed_transactions.json"
DIGEST_MARK = "#sha256="


def reference_evidence(source_id: str, sha256: str) -> str:
    """The evidence id an outcome fact carries for one artifact: source id + full digest."""
    return f"{source_id}{DIGEST_MARK}{sha256}"


def reference_status(fact: Fact | None) -> OwnerStatus:
    """What the workspace can vouch for about one transaction, given its stored fact.

    * no fact under the transaction id → ``absent`` (reconciliation may seal and abort);
    * a fact without a source, or whose evidence does not hold exactly one id carrying
      the digest mark → ``unknown``: it cannot say what it holds, so the lease keeps
      protecting the artifact (unknown is never taken for absent);
    * otherwise → ``published`` with the source id and digest written in that evidence id.
    """
    if fact is None:
        return OwnerStatus("absent")
    marked = [e for e in fact.evidence if DIGEST_MARK in e]
    if fact.source is None or len(marked) != 1:
        return OwnerStatus("unknown")
    source_id, _, sha256 = marked[0].partition(DIGEST_MARK)
    return OwnerStatus("published", source_id, sha256)


class ReferenceOwnerRace(LabmemError):
    """``seal_absent`` found the transaction published after all; reconcile again."""


class WorkspaceReferenceOwner:
    """Artifact references held by a workspace memory, with sealing for reconciliation."""

    def __init__(self, workspace: WorkspaceMemory) -> None:
        self.workspace = workspace
        self.sealed_path = workspace.directory / SEALED_NAME
        self._lock = file_lock(workspace.directory / "references")

    def _sealed(self) -> dict[str, int]:
        document = read_snapshot(self.sealed_path) or {"sealed": {}}
        return dict(document["sealed"])

    def publish(self, claim: RetentionClaim, *, content: str, title: str) -> str:
        """Write the outcome fact for ``claim`` (the lease's publisher). Refused if sealed."""
        with self._lock:
            if claim.transaction_id in self._sealed():
                raise PublicationRejected(
                    f"transaction {claim.transaction_id!r} was sealed as absent; publish a "
                    "new transaction instead")
            fact = self.workspace.append_fact(
                content, kind="outcome", importance=3, fact_id=claim.transaction_id,
                source=MemorySource(claim.source_id, "tool_artifact", title,
                                    format_timestamp(self.workspace.clock.now())),
                evidence=[reference_evidence(claim.source_id, claim.sha256)])
        return fact.fact_id

    def status(self, transaction_id: str) -> OwnerStatus:
        """Read from the workspace's log on disk (see :func:`reference_status`)."""
        return reference_status(self.workspace.get_fact(transaction_id))

    def seal_absent(self, transaction_id: str) -> int:
        with self._lock:
            if self.workspace.get_fact(transaction_id) is not None:
                raise ReferenceOwnerRace(f"transaction {transaction_id!r} is published")
            sealed = self._sealed()
            if transaction_id not in sealed:
                sealed[transaction_id] = max(sealed.values(), default=0) + 1
                write_snapshot(self.sealed_path, {"sealed": sealed})
            return sealed[transaction_id]
