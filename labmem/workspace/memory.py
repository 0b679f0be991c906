"""s10 workspace memory: facts are logged, memory is distilled.

One :class:`WorkspaceMemory` owns one project's memory directory::

    project_dir/workspace.json          who this memory belongs to (id + scope), written once
    project_dir/daily/YYYY-MM-DD.jsonl  append-only facts, one file per UTC day — never deleted
    project_dir/curated.json            canonical curated view (entries, revision chains, conflicts)
                                        and the distill cursors (how far each daily log was read)
    project_dir/resolutions.jsonl       append-only audit log of human conflict resolutions
    project_dir/MEMORY.md               projection of curated.json (repaired when edited by hand)
    project_dir/workspace.lock          the cross-process lock for every write

The workspace id is stored *inside* the directory, not derived from its path: moving the
project keeps its memory, while a daily log copied in from another project carries a
different ``workspace_scope`` on every line and is refused.

A human conflict resolution touches three files in order — audit line, ``curated.json``,
``MEMORY.md``. The audit line is the decision; the other two are derived from it, so a
process that dies between any two writes is repaired by the next reader (or by simply
retrying the same call).

The distill and curation here are the teaching types; the performance tricks live in
sibling modules, one trick each, behind a small documented seam (a protocol; the class
attribute of :class:`WorkspaceMemory` in brackets names the implementation in use):

* :mod:`labmem.workspace.distill_cursors` — a distill reads only the lines appended since
  the last one (the cursors, pending and dead facts stored in ``curated.json``;
  ``distill_since`` without cursors is the full fold);
* :mod:`labmem.workspace.change_marker` — a distill with nothing new reads the head of
  ``curated.json`` and ``stat`` s three paths (``nothing_new_check``);
* :mod:`labmem.workspace.line_matcher` — a daily log is matched in bulk by one pattern of
  the line form it is written in (``read_daily``);
* :mod:`labmem.workspace.curated_encoding` — ``curated.json`` is encoded one record at a
  time (``encode_curated``).
"""

from __future__ import annotations

import heapq
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, ClassVar

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import InvalidInputError, validated_as
from labmem.core.provenance import MemorySource, scope_digest
from labmem.core.storage import (
    JsonlLog,
    LockFactory,
    file_lock,
    paused_gc,
    read_snapshot,
    write_snapshot,
    write_text_atomic,
)
from labmem.core.validation import require_text
from labmem.workspace.change_marker import (
    ChangeMarker,
    NothingNewCheck,
    digest,
    nothing_new,
    stamp_memory_md,
)
from labmem.workspace.curated_encoding import DocumentEncoder, encode_document
from labmem.workspace.curation import (
    OPEN,
    ConflictCase,
    CuratedEntry,
    CuratedState,
    DistillPolicy,
    DistillReport,
    Resolution,
    apply_resolution,
)
from labmem.workspace.distill_cursors import DistillCursors, distill_since
from labmem.workspace.facts import (
    MAX_CONTENT_CHARS,
    DailyReader,
    Fact,
    WorkspaceCorruptionError,
    WorkspaceDuplicateError,
    WorkspaceError,
    WorkspaceScopeError,
    WorkspaceValidationError,
    check_evidence,
    check_fact_id,
    check_importance,
    check_kind,
    check_memory_key,
    check_source,
    daily_file_name,
    day_of_file,
    open_daily_log,
    read_daily_file,
)
from labmem.workspace.line_matcher import read_daily_since
from labmem.workspace.projection import WorkspaceContext, render_memory_md

__all__ = ["WorkspaceMemory", "WorkspaceConflictError", "StaleResolutionError",
           "RESOLUTION_BOUNDARIES"]

IDENTITY_FORMAT = "labmem.workspace/v1"
CURATED_FORMAT = "labmem.workspace.curated/v3"  # v1 + the distill cursors and marker
#: read (the entries and conflicts); the next distill reads every daily file again
LEGACY_CURATED_FORMATS = ("labmem.workspace.curated/v1", "labmem.workspace.curated/v2")
MAX_ACTOR_CHARS = 200
MAX_RATIONALE_CHARS = 2_000
MAX_RECENT_LIMIT = 1_000

#: The durable steps of :meth:`WorkspaceMemory.resolve_conflict`, in order; crash tests
#: stop a child process at each of them.
RESOLUTION_BOUNDARIES = ("audit_appended", "curated_written", "memory_md_written")


def _reached(boundary: str) -> None:
    """Called after each durable step of a resolution. A no-op: crash tests replace it
    in a child process with one that calls ``os._exit`` at a chosen boundary."""


class WorkspaceConflictError(WorkspaceError, InvalidInputError):
    """A resolution names a conflict that was already settled with another candidate."""


class StaleResolutionError(WorkspaceError):
    """``expected_revision`` is not the key's revision the conflict was recorded against."""

    field = "expected_revision"


def _validated(check: Any, *args: Any, **kwargs: Any) -> Any:
    return validated_as(WorkspaceValidationError, check, *args, **kwargs)


def _timestamp(value: Any, field: str) -> datetime:
    return _validated(parse_timestamp, value, field=field)


class WorkspaceMemory:
    """One project's facts, curated view, conflicts and MEMORY.md projection."""

    #: how a distill reads a daily log from its cursor; ``None``: this module's
    #: ``read_daily_since`` (the bulk matcher of ``line_matcher``, looked up at each
    #: distill); ``read_daily_lines`` is the plain reader (same facts, same errors, slower)
    read_daily: ClassVar[DailyReader | None] = None
    #: the shortcut of a distill with nothing new; ``None`` always runs the fold
    #: (same report, nothing written): see ``change_marker``
    nothing_new_check: ClassVar[NothingNewCheck | None] = staticmethod(nothing_new)
    #: how curated.json is encoded; ``encode_plain`` is the storage layer's encoder
    #: (same text, slower): see ``curated_encoding``
    encode_curated: ClassVar[DocumentEncoder] = staticmethod(encode_document)

    def __init__(self, project_dir: str | os.PathLike[str], *, workspace_id: str | None = None,
                 clock: Clock | None = None, lock_factory: LockFactory = file_lock) -> None:
        if not isinstance(project_dir, (str, os.PathLike)):
            raise WorkspaceValidationError(
                "project_dir", f"must be a path, got {type(project_dir).__name__}",
                "pass the directory that holds this project's memory")
        if workspace_id is not None:
            _validated(require_text, workspace_id, "workspace_id", max_chars=200)
        self.clock = _validated(resolve_clock, clock)
        self.directory = Path(project_dir)
        self.daily_dir = self.directory / "daily"
        self.identity_path = self.directory / "workspace.json"
        self.curated_path = self.directory / "curated.json"
        self.resolutions_path = self.directory / "resolutions.jsonl"
        self.memory_md_path = self.directory / "MEMORY.md"
        self._lock = lock_factory(self.directory / "workspace")
        self._marker = ChangeMarker(self.daily_dir)
        doc = read_snapshot(self.identity_path, corruption_error=WorkspaceCorruptionError)
        if doc is None:  # written once, atomically: only its creation needs the lock
            self.directory.mkdir(parents=True, exist_ok=True)
            with self._lock:
                self.workspace_id = self._identify(workspace_id)
        else:
            self.workspace_id = self._identify(workspace_id, doc)
        self.workspace_scope = scope_digest(self.workspace_id, field="workspace_id")
        self._logs: dict[str, JsonlLog[Fact]] = {}  # day file name → follower for appends
        self._index: dict[str, Fact] | None = None  # fact id → fact, built on first need
        self._resolutions: JsonlLog[Resolution] = JsonlLog(
            self.resolutions_path, decode=self._decode_resolution,
            corruption_error=WorkspaceCorruptionError)
        self._audit: dict[str, Resolution] = {}  # conflict id → its resolution

    def __repr__(self) -> str:
        return f"WorkspaceMemory(workspace_scope={self.workspace_scope!r})"

    # -- identity ---------------------------------------------------------------------

    def _identify(self, workspace_id: str | None, doc: Any = None) -> str:
        """Check the stored workspace id (``doc``, or read it now), or store the given
        (or a new random) one."""
        if doc is None:
            doc = read_snapshot(self.identity_path, corruption_error=WorkspaceCorruptionError)
        if doc is None:
            chosen = workspace_id if workspace_id is not None else uuid.uuid4().hex
            created = _timestamp(self.clock.now(), "clock.now()")
            write_snapshot(self.identity_path, {
                "format": IDENTITY_FORMAT, "workspace_id": chosen,
                "workspace_scope": scope_digest(chosen, field="workspace_id"),
                "created_at": format_timestamp(created)})
            return chosen
        stored = doc.get("workspace_id") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or doc.get("format") != IDENTITY_FORMAT or \
                not isinstance(stored, str) or not stored.strip() or \
                doc.get("workspace_scope") != scope_digest(stored, field="workspace_id"):
            raise WorkspaceCorruptionError(self.identity_path.name, None,
                                           "not a workspace identity document")
        if workspace_id is not None and workspace_id != stored:
            raise WorkspaceScopeError(
                f"workspace_id: this directory belongs to workspace {stored!r}, not "
                f"{workspace_id!r}; open it without workspace_id, or use another directory")
        return stored

    def _check_scope(self, path_name: str, where: str, scope: Any) -> None:
        if scope != self.workspace_scope:
            raise WorkspaceScopeError(
                f"{where}: belongs to workspace scope {scope!r}, not "
                f"{self.workspace_scope!r}; a file copied in from another workspace is "
                f"refused — move {path_name} back to its own project")

    # -- facts --------------------------------------------------------------------------

    def append_fact(
        self,
        content: str,
        *,
        kind: str,
        importance: int = 3,
        memory_key: str | None = None,
        source: MemorySource | Mapping[str, Any] | None = None,
        evidence: Sequence[str] | None = None,
        recorded_at: datetime | str | None = None,
        fact_id: str | None = None,
    ) -> Fact:
        """Validate one fact and append it to the daily log of its ``recorded_at`` day.

        ``fact_id`` is generated (``fact:<day>:<line>``) unless given; a caller-chosen id
        makes the append retry-safe: repeating the identical fact returns the stored one,
        reusing the id for a different fact raises :class:`WorkspaceDuplicateError`.
        """
        _validated(require_text, content, "content", max_chars=MAX_CONTENT_CHARS)
        check_kind(kind)
        check_importance(importance)
        check_memory_key(memory_key)
        checked_source = check_source(source)
        evidence_ids = check_evidence(evidence)
        check_fact_id(fact_id)
        now = _timestamp(self.clock.now(), "clock.now()")
        at = now if recorded_at is None else _timestamp(recorded_at, "recorded_at")
        if at > now:
            raise WorkspaceValidationError(
                "recorded_at", f"{format_timestamp(at)} is later than now "
                f"({format_timestamp(now)})", "a fact cannot be recorded in the future")
        name = daily_file_name(at.date())
        with self._lock:
            index = self._fact_index() if fact_id is not None else {}
            log = self._logs.get(name)
            if log is None:
                log = self._logs[name] = open_daily_log(self.daily_dir / name,
                                                        self.workspace_scope)
            self._remember(log.refresh())
            line = log.line_count + 1
            fact = Fact(fact_id=fact_id or f"fact:{at.date().isoformat()}:{line}",
                        recorded_at=at, kind=kind, content=content, importance=importance,
                        memory_key=memory_key, source=checked_source, evidence=evidence_ids,
                        line=line)
            if fact_id in index:
                stored = index[fact_id]
                if stored.payload() == fact.payload():
                    return stored
                raise WorkspaceDuplicateError(fact_id)
            self._mark_daily_changed()
            log.append(fact.to_record(self.workspace_scope))
            self._remember([fact])
        return fact

    def _remember(self, facts: list[Fact]) -> None:
        if self._index is not None:
            self._index.update((f.fact_id, f) for f in facts)

    def _daily_files(self) -> list[Path]:
        """The daily logs, oldest day first (a listing, no reads)."""
        try:
            paths = [p for p in self.daily_dir.iterdir() if day_of_file(p) is not None]
        except FileNotFoundError:
            return []
        return sorted(paths, key=lambda p: p.name)

    def _fact_index(self) -> dict[str, Fact]:
        """Every fact by id; built by reading each log once, then followed."""
        if self._index is None:
            self._logs = {p.name: open_daily_log(p, self.workspace_scope)
                          for p in self._daily_files()}
            self._index = {}
        for path in self._daily_files():
            log = self._logs.get(path.name)
            if log is None:
                log = self._logs[path.name] = open_daily_log(path, self.workspace_scope)
            self._remember(log.refresh())
        return self._index

    def get_fact(self, fact_id: str) -> Fact | None:
        """One logged fact by id (for source resolvers and reference owners), or None."""
        if not isinstance(fact_id, str):
            return None
        with self._lock:
            return self._fact_index().get(fact_id)

    def iter_facts(self) -> Iterator[Fact]:
        """Every logged fact, day by day (reads every log: for notebooks and audits)."""
        for path in self._daily_files():
            yield from read_daily_file(path, self.workspace_scope)[0]

    # -- curated state --------------------------------------------------------------------

    def _decode_resolution(self, line: int, record: dict[str, Any]) -> Resolution:
        self._check_scope(self.resolutions_path.name, f"{self.resolutions_path.name} line {line}",
                          record.get("workspace_scope"))
        try:
            return Resolution.from_dict(record)
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkspaceCorruptionError(self.resolutions_path.name, line,
                                           f"not a resolution record ({exc!r})") from None

    def _audit_log(self) -> dict[str, Resolution]:
        """Every recorded human resolution by conflict id (reads only new lines)."""
        for resolution in self._resolutions.refresh():
            self._audit[resolution.conflict_id] = resolution
        return self._audit

    def _load(self) -> CuratedState:
        return self._load_document()[0]

    def _check_header(self, fmt: Any, scope: Any) -> None:
        self._check_scope(self.curated_path.name, self.curated_path.name, scope)
        if fmt != CURATED_FORMAT and fmt not in LEGACY_CURATED_FORMATS:
            raise WorkspaceCorruptionError(self.curated_path.name, None,
                                           f"format is {fmt!r}, expected {CURATED_FORMAT!r}")

    def _load_document(self) -> tuple[CuratedState, DistillCursors | None, dict[str, Any] | None]:
        """The curated state, the distill cursors stored with it, and the raw document."""
        doc = read_snapshot(self.curated_path, corruption_error=WorkspaceCorruptionError)
        if doc is None:
            return CuratedState(), None, None
        if not isinstance(doc, dict):
            raise WorkspaceCorruptionError(self.curated_path.name, None, "not a JSON object")
        self._check_header(doc.get("format"), doc.get("workspace_scope"))
        try:
            state = CuratedState.from_dict(doc)
            header = doc.get("distill") if doc["format"] == CURATED_FORMAT else None
            cursors = None if header is None else DistillCursors.from_document(
                header, doc["files"], doc["pending"], doc["dead"])
        except (KeyError, TypeError, ValueError, InvalidInputError) as exc:
            raise WorkspaceCorruptionError(self.curated_path.name, None,
                                           f"bad curated document ({exc!r})") from None
        return state, cursors, doc

    def _document(self, state: CuratedState, cursors: DistillCursors | None) -> dict[str, Any]:
        """curated.json: the header lines first (a distill with nothing new reads only
        the first three, and the per-file cursors on the fourth when the marker cannot
        vouch for the logs), then one entry, conflict and pending fact per line."""
        return {"format": CURATED_FORMAT, "workspace_scope": self.workspace_scope,
                "distill": None if cursors is None else cursors.header(),
                "files": {} if cursors is None else cursors.files,
                **state.to_dict(),
                "pending": [] if cursors is None else
                [{**f.to_dict(), "line": f.line} for f in cursors.pending],
                "dead": {} if cursors is None else dict(sorted(cursors.dead.items()))}

    def _write_document(self, state: CuratedState, cursors: DistillCursors | None) -> None:
        """Write curated.json with cursors kept from an earlier distill (a resolution):
        the marker is dropped, since only a distill that lists the logs may record it."""
        if cursors is not None:  # the digest of the MEMORY.md that shows this state
            shown = render_memory_md(self.workspace_scope, state).encode("utf-8")
            cursors.memory_md, cursors.memory_md_bytes = digest(shown), len(shown)
            cursors.marker = None
        write_text_atomic(self.curated_path, self.encode_curated(self._document(state, cursors)))

    def _settled(self, state: CuratedState) -> CuratedState:
        """``state`` with every audited resolution applied (repairs a crashed resolve)."""
        for conflict_id, resolution in sorted(self._audit_log().items()):
            case = state.conflicts.get(conflict_id)
            if case is not None and case.status == OPEN:
                state = apply_resolution(state, resolution)
        return state

    def _store(self, after: CuratedState, cursors: DistillCursors | None,
               stored: dict[str, Any] | None, *, listed: bool = False) -> None:
        """Write curated.json only when it changes, then make MEMORY.md match it.

        ``stored`` is the document as read; ``cursors`` are kept (a resolution or a repair
        clears their ``report``: the next distill runs the fold). ``listed``: the cursors
        come from a distill that listed the logs just now; other cursors lose their marker
        when the document is rewritten — the racy-timestamp rule compares the marker with
        curated.json's mtime, which must be the time the marker was read.
        """
        text = render_memory_md(self.workspace_scope, after)
        if cursors is not None:
            shown = text.encode("utf-8")
            cursors.memory_md, cursors.memory_md_bytes = digest(shown), len(shown)
        document = self._document(after, cursors)
        if stored is None or document != stored:
            if cursors is not None and not listed and cursors.marker is not None:
                cursors.marker = None
                document = self._document(after, cursors)
            write_text_atomic(self.curated_path, self.encode_curated(document))
        self._project(after, text)
        if cursors is not None:
            self._stamp_memory_md()

    def _stamp_memory_md(self) -> None:
        """Date MEMORY.md 1 ns before curated.json (see ``change_marker``)."""
        stamp_memory_md(self.curated_path, self.memory_md_path)

    def _project(self, state: CuratedState, text: str | None = None) -> str:
        if text is None:
            text = render_memory_md(self.workspace_scope, state)
        try:
            current = self.memory_md_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        if current != text:
            write_text_atomic(self.memory_md_path, text)
        return text

    def _current(self) -> CuratedState:
        """The curated state for a reader; a half-finished resolution is completed first."""
        state = self._load()
        settled = self._settled(state)
        if settled is not state:
            with self._lock:
                state, cursors, stored = self._load_document()
                settled = self._settled(state)
                if settled is not state and cursors is not None:
                    cursors.report = None
                self._store(settled, cursors, stored)
        return settled

    # -- distill --------------------------------------------------------------------------

    def distill(self, *, policy: DistillPolicy, as_of: datetime | str) -> DistillReport:
        """Promote old-enough facts into the curated view (see ``curation``).

        Only daily files up to the cutoff day are read. Idempotent: a second run with
        the same arguments writes nothing. The daily logs are never changed.
        """
        if not isinstance(policy, DistillPolicy):
            raise WorkspaceValidationError("policy", f"must be a DistillPolicy, got "
                                                     f"{type(policy).__name__}",
                                           "pass DistillPolicy() or DistillPolicy(...)")
        at = _timestamp(as_of, "as_of")
        now = _timestamp(self.clock.now(), "clock.now()")
        if at > now:
            raise WorkspaceValidationError(
                "as_of", f"{format_timestamp(at)} is later than now ({format_timestamp(now)})",
                "distill as of now or an earlier moment")
        last_day = policy.cutoff(at).date()
        with self._lock:
            report = self._nothing_new(policy, at)
            if report is not None:
                return report
            with paused_gc():
                before, cursors, stored = self._load_document()
                state = self._settled(before)
                after, report, cursors = self._distill(state, cursors, policy, at, last_day)
                self._store(after, cursors, stored, listed=True)
        return report

    def _nothing_new(self, policy: DistillPolicy, as_of: datetime) -> DistillReport | None:
        """The report of a distill that would change nothing, found without running the
        fold (see ``change_marker``), or ``None``."""
        check = self.nothing_new_check
        return None if check is None else check(self, policy, as_of)

    def _mark_daily_changed(self) -> None:
        """Bump the change marker of the daily logs before an append."""
        self._marker.bump()

    def _distill(self, state: CuratedState, cursors: DistillCursors | None,
                 policy: DistillPolicy, as_of: datetime, last_day: date
                 ) -> tuple[CuratedState, DistillReport, DistillCursors]:
        """Fold the facts not folded yet into ``state`` (see ``distill_cursors``)."""
        marker = self._marker.read()  # before the listing: a later change is seen next time
        daily_files = self._daily_files()
        try:
            audited = self.resolutions_path.stat().st_size
        except FileNotFoundError:
            audited = 0
        return distill_since(state, cursors, policy, as_of, last_day,
                             daily_files=daily_files, workspace_scope=self.workspace_scope,
                             read_daily=self.read_daily or read_daily_since,
                             marker=marker, audited=audited)

    # -- reading ----------------------------------------------------------------------------

    def curated_entries(self, *, include_superseded: bool = False) -> tuple[CuratedEntry, ...]:
        """The curated entries by id (only active ones unless asked)."""
        state = self._current()
        return tuple(state.entries[k] for k in sorted(state.entries)
                     if include_superseded or state.entries[k].status == "active")

    def revision_chain(self, memory_key: str) -> tuple[CuratedEntry, ...]:
        """A key's revisions from the first to the active one, following ``supersedes``."""
        check_memory_key(memory_key)
        state = self._current()
        revisions = sorted((e for e in state.entries.values() if e.memory_key == memory_key),
                           key=lambda e: e.revision)
        return tuple(revisions)

    def list_conflicts(self, *, include_resolved: bool = False) -> tuple[ConflictCase, ...]:
        """Conflict cases by id: the open ones (and the settled ones when asked)."""
        state = self._current()
        return tuple(state.conflicts[k] for k in sorted(state.conflicts)
                     if include_resolved or state.conflicts[k].status == OPEN)

    def read_memory_md(self) -> str:
        """MEMORY.md, re-rendered from curated.json first if missing or edited by hand."""
        state = self._current()
        text = render_memory_md(self.workspace_scope, state)
        try:
            unchanged = self.memory_md_path.read_text(encoding="utf-8") == text
        except FileNotFoundError:
            unchanged = False
        if not unchanged:
            with self._lock:
                text = self._project(self._current())
        return text

    def get_context_for_agent(self, recent_limit: int = 20) -> WorkspaceContext:
        """The projection plus the ``recent_limit`` most recent *unkeyed* facts.

        Reads the daily files newest day first and stops as soon as it holds enough
        facts: every fact in an older file is older than every fact in a newer one.
        (Keyed facts reach the prompt only through their curated revision.)
        """
        if isinstance(recent_limit, bool) or not isinstance(recent_limit, int) or \
                not 0 <= recent_limit <= MAX_RECENT_LIMIT:
            raise WorkspaceValidationError(
                "recent_limit", f"must be an integer from 0 to {MAX_RECENT_LIMIT}, "
                f"got {recent_limit!r}")
        memory_md = render_memory_md(self.workspace_scope, self._current())
        found: list[Fact] = []
        files = bytes_read = 0
        if recent_limit:
            for path in reversed(self._daily_files()):
                facts, read = read_daily_file(path, self.workspace_scope)
                files += 1
                bytes_read += read
                found += [f for f in facts if f.memory_key is None]
                if len(found) >= recent_limit:
                    break
        recent = heapq.nlargest(recent_limit, found, key=lambda f: f.order)
        return WorkspaceContext(self.workspace_scope, memory_md, tuple(recent), files,
                                bytes_read)

    # -- conflicts ----------------------------------------------------------------------------

    def resolve_conflict(self, conflict_id: str, candidate_id: str, *, expected_revision: int,
                         actor: str, rationale: str) -> Resolution:
        """Settle an open conflict with one candidate; returns the audit record.

        Retrying the same decision returns the same record and finishes any step a
        crashed attempt left undone; a different decision on a settled conflict is refused.
        """
        _validated(require_text, conflict_id, "conflict_id", max_chars=300)
        _validated(require_text, candidate_id, "candidate_id", max_chars=50)
        if isinstance(expected_revision, bool) or not isinstance(expected_revision, int) or \
                expected_revision < 0:
            raise WorkspaceValidationError(
                "expected_revision", f"must be an integer ≥ 0, got {expected_revision!r}",
                "pass the conflict's base_revision (0 when the key had no value)")
        _validated(require_text, actor, "actor", max_chars=MAX_ACTOR_CHARS)
        _validated(require_text, rationale, "rationale", max_chars=MAX_RATIONALE_CHARS)
        with self._lock:
            before, cursors, stored = self._load_document()
            audit = self._audit_log()
            resolution = audit.get(conflict_id)
            if resolution is None:
                resolution = self._decide(before, conflict_id, candidate_id, expected_revision,
                                          actor, rationale)
                self._resolutions.append({"workspace_scope": self.workspace_scope,
                                          **resolution.to_dict()})
                self._audit[conflict_id] = resolution
                _reached("audit_appended")
            elif resolution.candidate_id != candidate_id:
                raise WorkspaceConflictError(
                    "candidate_id", f"{conflict_id} was already resolved with "
                    f"{resolution.candidate_id!r} by {resolution.actor!r}",
                    "a settled conflict is not reopened; log new facts and distill again")
            after = self._settled(before)
            if after is not before:
                if cursors is not None:
                    cursors.report = None  # the next distill folds against the new state
                self._write_document(after, cursors)
                _reached("curated_written")
            self._project(after)
            _reached("memory_md_written")
        return resolution

    def _decide(self, state: CuratedState, conflict_id: str, candidate_id: str,
                expected_revision: int, actor: str, rationale: str) -> Resolution:
        case = state.conflicts.get(conflict_id)
        if case is None:
            known = ", ".join(sorted(state.conflicts)) or "none"
            raise WorkspaceValidationError("conflict_id", f"{conflict_id!r} is not a conflict",
                                           f"known conflicts: {known}")
        if case.candidate(candidate_id) is None:
            choices = ", ".join(c.candidate_id for c in case.candidates)
            raise WorkspaceValidationError("candidate_id", f"{candidate_id!r} is not a "
                                           f"candidate of {conflict_id}", f"choose {choices}")
        if expected_revision != case.base_revision:
            raise StaleResolutionError(
                f"expected_revision: {expected_revision} is not revision "
                f"{case.base_revision} of {case.memory_key!r} that {conflict_id} was recorded "
                "against; re-read the conflict with list_conflicts() and decide again")
        return Resolution(
            resolution_id=f"resolution:{conflict_id}", conflict_id=conflict_id,
            memory_key=case.memory_key, candidate_id=candidate_id,
            expected_revision=expected_revision, actor=actor, rationale=rationale,
            resolved_at=_timestamp(self.clock.now(), "clock.now()"))
