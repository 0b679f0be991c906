"""s13: artifacts — large tool output behind a bounded pointer, leases, cleanup.

Modules, in the order an artifact lives::

    externalize  ToolResultExternalizer: the body on disk, a pointer with a digest in memory
    leases       LeaseJournal: a hash-chained journal of who still needs an artifact
    cleanup      plan_cleanup / apply_cleanup: reference-aware, two-phase, re-verified;
                 cleanup_reason: the rule for one file, a pure function of its ArtifactFacts

Importing this package does no I/O.
"""

from labmem.artifacts.cleanup import (
    ArtifactFacts,
    CleanupDecision,
    CleanupError,
    CleanupPlan,
    CleanupPolicy,
    CleanupReport,
    apply_cleanup,
    cleanup_reason,
    plan_cleanup,
)
from labmem.artifacts.externalize import (
    ArtifactAccessError,
    ArtifactCorruptionError,
    ArtifactError,
    ArtifactIntegrityError,
    ArtifactMissingError,
    ArtifactReference,
    ArtifactValidationError,
    ExternalizationPolicy,
    ExternalizedToolResult,
    ToolResultExternalizer,
    format_source_id,
    parse_source_id,
)
from labmem.artifacts.leases import (
    LeaseCorruptionError,
    LeaseJournal,
    LeaseJournalError,
    LeasePendingError,
    LeasePhase,
    LeaseRecovery,
    LeaseTransitionError,
    LeaseValidationError,
    OwnerStatus,
    PublicationRejected,
    ReconciliationReport,
    ReferenceOwner,
    RetentionClaim,
    RetentionLease,
)

__all__ = [
    "ArtifactAccessError", "ArtifactCorruptionError", "ArtifactError", "ArtifactIntegrityError",
    "ArtifactMissingError", "ArtifactReference", "ArtifactValidationError",
    "ExternalizationPolicy", "ExternalizedToolResult", "ToolResultExternalizer",
    "format_source_id", "parse_source_id",
    "LeaseCorruptionError", "LeaseJournal", "LeaseJournalError", "LeasePendingError",
    "LeasePhase", "LeaseRecovery", "LeaseTransitionError", "LeaseValidationError",
    "OwnerStatus", "PublicationRejected",
    "ReconciliationReport", "ReferenceOwner", "RetentionClaim", "RetentionLease",
    "ArtifactFacts", "CleanupDecision", "CleanupError", "CleanupPlan", "CleanupPolicy",
    "CleanupReport", "apply_cleanup", "cleanup_reason", "plan_cleanup",
]
