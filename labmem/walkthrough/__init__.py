"""The layered-memory walkthrough: every layer in one offline, restart-safe run.

It adds no memory mechanism of its own. It composes the chapters' public APIs
(s09 → s14), drops every object half-way and rebuilds them from disk, and writes a
manifest of boundary checks — a report, never a source of truth.
"""

from labmem.walkthrough.owner import WorkspaceReferenceOwner
from labmem.walkthrough.run import (
    CHECKS,
    MANIFEST_NAME,
    OWNERS,
    OWNERSHIP,
    WalkthroughError,
    WalkthroughResult,
    run_walkthrough,
)

__all__ = ["CHECKS", "MANIFEST_NAME", "OWNERS", "OWNERSHIP", "WalkthroughError",
           "WalkthroughResult", "WorkspaceReferenceOwner", "run_walkthrough"]
