"""The layered-memory walkthrough: every layer in one offline, restart-safe run.

It adds no memory mechanism of its own. It composes the chapters' public APIs
(s09 → s14) to follow one decision through every layer, drops every object half-way and
rebuilds them from disk, and writes a manifest of boundary checks — a report, never a
source of truth. :class:`Walkthrough` runs it one stage per call (each returns a
:class:`Stage`); :func:`run_walkthrough` runs it in one call.

Its glue hands the transcript's memory candidate on with its provenance:
:func:`hand_to_workspace` (a decision fact resting on the candidate's event) and
:func:`hand_to_store` (a record with the candidate's source; a retry returns it). The
chapter's from-scratch run (:mod:`labmem.scratch.walkthrough`) has the same glue over the
from-scratch layers, and one contract suite (:mod:`labmem.exercises.suites.walkthrough`)
judges both. Its one rule of its own sits at the seam between s10 and s13:
:func:`reference_status` says what the workspace, as the artifact's reference owner,
can vouch for — read from the stored fact, so it survives a restart.
"""

from labmem.walkthrough.owner import (
    DIGEST_MARK,
    WorkspaceReferenceOwner,
    reference_evidence,
    reference_status,
)
from labmem.walkthrough.run import (
    CHECK_MEANINGS,
    CHECKS,
    MANIFEST_NAME,
    OWNERS,
    OWNERSHIP,
    POLICY,
    QUERY,
    SESSION,
    WORKSPACE_ID,
    Stage,
    Walkthrough,
    WalkthroughError,
    WalkthroughResult,
    hand_to_store,
    hand_to_workspace,
    home_listing,
    run_walkthrough,
)

__all__ = ["CHECKS", "CHECK_MEANINGS", "DIGEST_MARK", "MANIFEST_NAME", "OWNERS", "OWNERSHIP",
           "POLICY", "QUERY", "SESSION", "WORKSPACE_ID", "Stage", "Walkthrough",
           "WalkthroughError", "WalkthroughResult", "WorkspaceReferenceOwner", "hand_to_store",
           "hand_to_workspace", "home_listing", "reference_evidence", "reference_status",
           "run_walkthrough"]
