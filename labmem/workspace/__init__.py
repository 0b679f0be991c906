"""s10 workspace memory: facts are logged, memory is distilled.

The chapter in four small modules, each one concept:

* :mod:`labmem.workspace.facts` — the :class:`Fact` record and the append-only daily logs;
* :mod:`labmem.workspace.curation` — :class:`DistillPolicy` and the pure fold that turns
  old-enough facts into curated entries, revision chains and conflict cases; its two
  rules are functions of their own: :func:`is_promotable` (may a group become an entry?)
  and :func:`judge_rivals` (keep, supersede, or fail closed into a conflict?);
* :mod:`labmem.workspace.projection` — ``MEMORY.md`` and the agent's context block;
* :mod:`labmem.workspace.memory` — :class:`WorkspaceMemory`, which owns the files, the
  lock, and the crash-safe human resolution of conflicts.

Its performance tricks are sibling modules, one trick each, each optional behind a
protocol named by a class attribute of :class:`WorkspaceMemory`:
:mod:`~labmem.workspace.distill_cursors` (read only what was appended since the last
distill), :mod:`~labmem.workspace.change_marker` (a distill with nothing new is three
``stat`` calls; ``nothing_new_check``), :mod:`~labmem.workspace.line_matcher` (a daily
log matched in bulk by one pattern; ``read_daily``) and
:mod:`~labmem.workspace.curated_encoding` (curated.json encoded record by record;
``encode_curated``).
"""

from labmem.workspace.curation import (
    Candidate,
    ConflictCase,
    CuratedEntry,
    DistillPolicy,
    DistillReport,
    Resolution,
    RivalVerdict,
    is_promotable,
    judge_rivals,
)
from labmem.workspace.facts import (
    KINDS,
    STABLE_KINDS,
    Fact,
    WorkspaceCorruptionError,
    WorkspaceDuplicateError,
    WorkspaceError,
    WorkspaceScopeError,
    WorkspaceValidationError,
    daily_file_name,
    read_daily_file,
)
from labmem.workspace.memory import (
    RESOLUTION_BOUNDARIES,
    StaleResolutionError,
    WorkspaceConflictError,
    WorkspaceMemory,
)
from labmem.workspace.projection import WorkspaceContext

__all__ = [
    "KINDS", "STABLE_KINDS", "RESOLUTION_BOUNDARIES", "Candidate", "ConflictCase",
    "CuratedEntry", "DistillPolicy", "DistillReport", "Fact", "Resolution", "RivalVerdict",
    "StaleResolutionError", "WorkspaceConflictError", "WorkspaceContext",
    "WorkspaceCorruptionError", "WorkspaceDuplicateError", "WorkspaceError",
    "WorkspaceMemory", "WorkspaceScopeError", "WorkspaceValidationError", "daily_file_name",
    "is_promotable", "judge_rivals", "read_daily_file",
]
