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

``distill`` does not read the whole history each time. ``curated.json`` also records, in
the same atomic write as the entries, a cursor per daily file (bytes and lines read, and
how many of them were eligible), the facts that were eligible but are not curated yet
(the *pending* facts: a group short of evidence, a rival short of independent evidence,
a key frozen by a conflict), and how many facts each key holds that can never count
again (older than its active revision: *stale* for good). A distill folds the pending
facts with the lines appended since the cursors — the same result, state and report, as
folding every line again. A new policy, or an earlier cutoff, reads everything again.

A distill with nothing new (same policy and cutoff, no daily log grown, no new
resolution, MEMORY.md intact) reads the first lines of curated.json and ``stat`` s three
paths — ``daily/``, ``resolutions.jsonl``, ``MEMORY.md`` — and nothing else: its cost is
flat in the history. What tells it that no log grew is a *marker*, the mtime of the
``daily/`` directory:

* every ``append_fact`` bumps it (``os.utime``) under the workspace lock, *before* the
  line is written — a process killed between the two costs one full check, never a missed
  fact — and creating a daily file bumps it anyway;
* the distill that writes the cursors reads it before listing the logs and records it in
  the same atomic write (only such a distill: a resolution that rewrites curated.json with
  the cursors it found drops the marker, and the next distill checks every file);
* a distill with nothing new trusts the logs when the marker is the recorded one *and* was
  already older than curated.json when that was written (curated.json's own mtime). This
  is the "racy git" rule: timestamps are coarse (a tick of a few ms, or a second on some
  filesystems), so an append in the same tick as the recorded marker can leave it
  unchanged; such a marker is not trusted, and each daily file's size is compared with its
  cursor, as before (one ``stat`` each). An append after curated.json was written bumps
  the marker to at least curated.json's time, so it always differs from a marker older
  than that.

What the marker does not cover: bytes written into a daily file behind the library's back
(a hand edit, a restore that keeps the directory's mtime), and a wall clock set back so
far that a bump lands exactly on the recorded value. The cursors never trusted such files
either (a same-size edit was never seen). The bump is not ``fsync``ed on its own; on
filesystems that do not journal metadata in order, a power cut could keep a fact's line
but lose its bump: that fact then waits for the next append, or the next distill with
other arguments, which read every log grown since its cursor.

MEMORY.md is vouched for the same way: each distill dates it 1 ns before curated.json
(``os.utime``), a date no later write of it can carry, and records its size; a distill
with nothing new that finds both trusts it, and hashes it otherwise (a hand edit, or a
filesystem that rounds the nanosecond away). A hand edit in the microseconds between the
library's write of MEMORY.md and its stamp would be taken as intact.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, BinaryIO

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import InvalidInputError, validated_as
from labmem.core.provenance import MemorySource, scope_digest
from labmem.core.storage import (
    JsonlLog,
    LockFactory,
    encode_json_line,
    file_lock,
    paused_gc,
    read_snapshot,
    write_snapshot,
    write_text_atomic,
)
from labmem.core.validation import parse_json, require_text
from labmem.workspace.curation import (
    ACTIVE,
    OPEN,
    ConflictCase,
    CuratedEntry,
    CuratedState,
    DistillPolicy,
    DistillReport,
    Resolution,
    apply_resolution,
    fold_facts,
)
from labmem.workspace.facts import (
    MAX_CONTENT_CHARS,
    SCHEMA_VERSION,
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
    decode_fact,
    open_daily_log,
    read_daily_file,
    read_daily_since,
)
from labmem.workspace.projection import WorkspaceContext, render_memory_md

__all__ = ["WorkspaceMemory", "WorkspaceConflictError", "StaleResolutionError",
           "RESOLUTION_BOUNDARIES"]

IDENTITY_FORMAT = "labmem.workspace/v1"
CURATED_FORMAT = "labmem.workspace.curated/v3"  # v1 + the distill cursors and marker
#: read (the entries and conflicts); the next distill reads every daily file again
LEGACY_CURATED_FORMATS = ("labmem.workspace.curated/v1", "labmem.workspace.curated/v2")
RECORDS = ("entries", "conflicts", "pending")  # curated.json members with a line per item
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


@dataclass
class _Cursors:
    """What ``curated.json`` remembers about the daily logs, beside the curated state.

    ``files``: for each daily file older than the cutoff day, ``[offset, lines, eligible]``
    — the bytes and lines read, and how many of those facts were eligible. The cutoff
    day's own file is read again each time (its facts cross the cutoff); ``open_file`` is
    its ``[name, offset]`` as read. ``pending``: the eligible facts of the cursored files
    that are not curated and can still count. ``dead``: per key, the eligible facts of the
    cursored files that can never count again (not newer than the key's active revision).
    ``report``: what a distill with nothing new would report (``None``: run the fold).
    ``marker``: the ``daily/`` directory's mtime (ns) when the distill that wrote these
    cursors listed the logs; ``None`` when a later write kept the cursors without listing
    them again (then the next distill with nothing new checks each file).
    """

    policy: dict[str, Any]
    cutoff: datetime
    files: dict[str, list[int]] = field(default_factory=dict)
    open_file: list[Any] | None = None
    resolutions: int = 0
    memory_md: str = ""
    memory_md_bytes: int = 0
    report: dict[str, int] | None = None
    pending: list[Fact] = field(default_factory=list)
    dead: dict[str, int] = field(default_factory=dict)
    marker: int | None = None

    def header(self) -> dict[str, Any]:
        """The ``distill`` member: small, so a distill with nothing new parses only it."""
        return {"policy": self.policy, "cutoff": format_timestamp(self.cutoff),
                "marker": self.marker, "open_file": self.open_file,
                "resolutions": self.resolutions, "memory_md": self.memory_md,
                "memory_md_bytes": self.memory_md_bytes, "report": self.report}

    @classmethod
    def from_document(cls, header: Mapping[str, Any], files: Mapping[str, Any],
                      pending: Sequence[Any], dead: Mapping[str, Any]) -> _Cursors:
        marker = header["marker"]
        if marker is not None and type(marker) is not int:
            raise ValueError(f"marker {marker!r} is not a time in nanoseconds")
        return cls(policy=dict(header["policy"]),
                   cutoff=parse_timestamp(header["cutoff"], field="cutoff"),
                   files={str(k): [int(n) for n in v] for k, v in files.items()},
                   open_file=header["open_file"], resolutions=int(header["resolutions"]),
                   memory_md=str(header["memory_md"]),
                   memory_md_bytes=int(header["memory_md_bytes"]), report=header["report"],
                   pending=[decode_fact({**f, "schema_version": SCHEMA_VERSION}, f["line"])
                            for f in pending],
                   dead={str(k): int(v) for k, v in dead.items()}, marker=marker)


def _digest(text: str | bytes) -> str:
    """What MEMORY.md's header entry holds: the SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def _encode_document(document: Mapping[str, Any]) -> str:
    """curated.json as ``encode_snapshot(document, records=RECORDS)`` writes it (the C
    encoder, one record per line), each record checked on its own by
    :func:`encode_json_line`: ``encode_snapshot`` checks the nesting of the document as
    a whole, and a large curated view holds more than 100 brackets in total, so it walked
    every entry in Python on every write."""
    members = []
    for name, value in document.items():
        if name in RECORDS and isinstance(value, list) and value:
            body = b"[\n" + b",\n".join(encode_json_line(v)[:-1] for v in value) + b"\n]"
        elif isinstance(value, dict):
            body = encode_json_line(value)[:-1]
        else:  # a string, a number or null
            body = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        members.append(json.dumps(name, ensure_ascii=False).encode("utf-8") + b":" + body)
    return (b"{\n" + b",\n".join(members) + b"\n}\n").decode("utf-8")


class _Head:
    """The first lines of curated.json (``encode_snapshot``'s layout: ``{``, then one
    ``"name":value,`` line per header member), read only as far as they are asked for."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._buffer = b""
        self._chunk = 4096  # the distill member fits; the per-file cursors come next

    def member(self, index: int, name: str) -> Any:
        """The value of header line ``index`` (1-based after ``{``) if it is ``name``,
        else the ``KeyError`` that sends the caller to the full read."""
        while self._buffer.count(b"\n") <= index:
            chunk = self._handle.read(self._chunk)
            if not chunk:
                raise KeyError(name)
            self._buffer += chunk
            self._chunk *= 4
        lines = self._buffer.split(b"\n", index + 1)
        if lines[0] != b"{":
            raise KeyError(name)
        try:
            # the one validating parser: a header line nested 100,000 levels deep is a
            # ValueError here (then the full read reports it), never a RecursionError
            member = parse_json(b"{" + lines[index].rstrip(b",") + b"}")
        except ValueError:  # UnicodeDecodeError, JSONDecodeError and too deep included
            raise KeyError(name) from None
        if not isinstance(member, dict) or list(member) != [name]:
            raise KeyError(name)
        return member[name]


class WorkspaceMemory:
    """One project's facts, curated view, conflicts and MEMORY.md projection."""

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

    def _load_document(self) -> tuple[CuratedState, _Cursors | None, dict[str, Any] | None]:
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
            cursors = None if header is None else _Cursors.from_document(
                header, doc["files"], doc["pending"], doc["dead"])
        except (KeyError, TypeError, ValueError, InvalidInputError) as exc:
            raise WorkspaceCorruptionError(self.curated_path.name, None,
                                           f"bad curated document ({exc!r})") from None
        return state, cursors, doc

    def _document(self, state: CuratedState, cursors: _Cursors | None) -> dict[str, Any]:
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

    def _write_document(self, state: CuratedState, cursors: _Cursors | None) -> None:
        """Write curated.json with cursors kept from an earlier distill (a resolution):
        the marker is dropped, since only a distill that lists the logs may record it."""
        if cursors is not None:  # the digest of the MEMORY.md that shows this state
            shown = render_memory_md(self.workspace_scope, state).encode("utf-8")
            cursors.memory_md, cursors.memory_md_bytes = _digest(shown), len(shown)
            cursors.marker = None
        write_text_atomic(self.curated_path, _encode_document(self._document(state, cursors)))

    def _settled(self, state: CuratedState) -> CuratedState:
        """``state`` with every audited resolution applied (repairs a crashed resolve)."""
        for conflict_id, resolution in sorted(self._audit_log().items()):
            case = state.conflicts.get(conflict_id)
            if case is not None and case.status == OPEN:
                state = apply_resolution(state, resolution)
        return state

    def _store(self, after: CuratedState, cursors: _Cursors | None,
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
            cursors.memory_md, cursors.memory_md_bytes = _digest(shown), len(shown)
        document = self._document(after, cursors)
        if stored is None or document != stored:
            if cursors is not None and not listed and cursors.marker is not None:
                cursors.marker = None
                document = self._document(after, cursors)
            write_text_atomic(self.curated_path, _encode_document(document))
        self._project(after, text)
        if cursors is not None:
            self._stamp_memory_md()

    def _stamp_memory_md(self) -> None:
        """Date MEMORY.md (just written, or just read and found equal to the projection)
        1 ns before curated.json. Any later write of it — a hand edit, another library
        call — carries a later time, so a distill with nothing new that finds this exact
        time (and the recorded size) knows MEMORY.md is intact without hashing it; any
        other time sends it to the digest. (A filesystem that cannot store the nanosecond
        rounds it away: then every such distill hashes.)"""
        try:
            written = os.stat(self.curated_path).st_mtime_ns
            os.utime(self.memory_md_path, ns=(written - 1, written - 1))
        except OSError:
            pass  # (best effort: the digest still decides)

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
        """The report of a distill that would change nothing, read from the cursors alone
        (the header lines of curated.json and three ``stat`` calls); else ``None``.

        The logs are unchanged when the ``daily/`` marker is the one recorded and was
        already older than curated.json when that was written (see the module notes);
        otherwise each daily file's size is checked against its cursor.
        """
        try:
            handle = open(self.curated_path, "rb")
        except FileNotFoundError:
            return None
        with handle:
            written = os.fstat(handle.fileno()).st_mtime_ns
            head = _Head(handle)
            try:
                self._check_header(head.member(1, "format"), head.member(2, "workspace_scope"))
                header = head.member(3, "distill")
                if header is None or header["report"] is None or \
                        header["policy"] != policy.to_dict():
                    return None
                cutoff = policy.cutoff(as_of)
                if parse_timestamp(header["cutoff"], field="cutoff") != cutoff:
                    return None
                try:
                    audited = os.stat(self.resolutions_path).st_size
                except FileNotFoundError:
                    audited = 0
                if audited != header["resolutions"]:
                    return None
                marker = header["marker"]
                if type(marker) is not int or marker >= written or \
                        marker != self._daily_marker():
                    if not self._logs_unchanged(head.member(4, "files"),
                                                header["open_file"], cutoff.date()):
                        return None
                if not self._memory_md_intact(header, written):
                    return None
                return DistillReport(**header["report"])
            except (KeyError, TypeError, ValueError, AttributeError, InvalidInputError):
                return None  # an unexpected header: the fold reads and checks everything

    def _memory_md_intact(self, header: Mapping[str, Any], written: int) -> bool:
        """Is MEMORY.md the projection the header describes? Its stamp and size say so
        (see :meth:`_stamp_memory_md`), else its digest decides."""
        try:
            shown = os.stat(self.memory_md_path)
        except FileNotFoundError:
            return False
        if shown.st_mtime_ns == written - 1 and shown.st_size == header["memory_md_bytes"]:
            return True
        try:
            with open(self.memory_md_path, "rb") as handle:
                return _digest(handle.read()) == header["memory_md"]
        except FileNotFoundError:
            return False

    def _daily_marker(self) -> int | None:
        """The change marker of the daily logs: the ``daily/`` directory's mtime (ns)."""
        try:
            return os.stat(self.daily_dir).st_mtime_ns
        except FileNotFoundError:
            return None

    def _mark_daily_changed(self) -> None:
        """Bump the marker, *before* a fact is appended (a crash between the two costs
        one per-file check, never a missed fact). Creating a file bumps it too."""
        try:
            os.utime(self.daily_dir)
        except FileNotFoundError:
            pass  # the append creates the directory: a marker no cursor recorded

    def _logs_unchanged(self, files: Mapping[str, list[int]], open_file: list[Any] | None,
                        last_day: date) -> bool:
        """Is every daily file up to ``last_day`` exactly as long as the cursors say?

        One ``stat`` per file, relative to the open directory (no path objects: this is
        the whole cost of a distill with nothing new).
        """
        try:
            directory = os.open(self.daily_dir, os.O_RDONLY)
        except FileNotFoundError:
            return not files and open_file is None
        except OSError:
            return False  # (a platform that cannot open a directory: read everything)
        try:
            seen, open_seen = 0, open_file is None
            for name in os.listdir(directory):
                cursor = files.get(name)
                if cursor is not None:
                    if os.stat(name, dir_fd=directory).st_size != cursor[0]:
                        return False
                    seen += 1
                elif open_file is not None and name == open_file[0]:
                    if os.stat(name, dir_fd=directory).st_size != open_file[1]:
                        return False
                    open_seen = True
                else:
                    day = day_of_file(Path(name))
                    if day is not None and day <= last_day:
                        return False  # a daily file no cursor knows
            return seen == len(files) and open_seen
        finally:
            os.close(directory)

    def _distill(self, state: CuratedState, cursors: _Cursors | None, policy: DistillPolicy,
                 as_of: datetime, last_day: date
                 ) -> tuple[CuratedState, DistillReport, _Cursors]:
        """Fold the pending facts and the lines appended since the cursors into ``state``.

        Equal, state and report, to folding every line of every daily file up to the
        cutoff day again: a fact a cursor has passed is curated, pending (folded again
        here) or dead (counted, as the full fold would count it, but never read again).
        """
        cutoff = policy.cutoff(as_of)
        if cursors is None or cursors.policy != policy.to_dict() or cutoff < cursors.cutoff:
            cursors = _Cursors(policy.to_dict(), cutoff)  # read everything again
        marker = self._daily_marker()  # before the listing: a later change is seen next time
        stable = policy.stable_kinds
        kept_dead = dict(cursors.dead)
        files: dict[str, list[int]] = {}
        candidates = list(cursors.pending)
        scanned = eligible = 0
        open_file = None
        for path in self._daily_files():
            day = day_of_file(path)
            if day > last_day:
                break
            cursor = cursors.files.get(path.name) if day < last_day else None
            offset, lines, counted = cursor if cursor is not None else (0, 0, 0)
            # the facts of a stable kind (no other can count under this policy), each
            # line checked all the same
            new, offset, lines = read_daily_since(path, self.workspace_scope,
                                                  (offset, lines), stable)
            candidates += new
            if day < last_day:
                counted += len(new)
                files[path.name] = [offset, lines, counted]
                eligible += counted
            else:
                open_file = [path.name, offset]
                eligible += sum(1 for f in new if f.recorded_at <= cutoff)
            scanned += lines
        held_before = {c.memory_key for c in state.conflicts.values() if c.status == OPEN}
        after, folded, uncurated = fold_facts(state, candidates, policy=policy, as_of=as_of)

        # what stays: the eligible facts that are not curated, pending or dead for good
        active = {e.memory_key: e for e in after.entries.values()
                  if e.memory_key is not None and e.status == ACTIVE}
        held = {c.memory_key for c in after.conflicts.values() if c.status == OPEN}
        cutoff_day = datetime.combine(last_day, datetime.min.time(), cutoff.tzinfo)
        pending: list[Fact] = []  # (a fact before the cutoff day is in a cursored file)
        dead: Counter[str] = Counter(kept_dead)
        again_pending = 0
        again_dead: Counter[str] = Counter(kept_dead)
        newest = {k: e.last_recorded_at for k, e in active.items()}
        for fact in uncurated:
            key, at = fact.memory_key, fact.recorded_at
            if key is not None and key in newest and at <= newest[key]:
                again_dead[key] += 1
                if at < cutoff_day:
                    dead[key] += 1
            else:
                again_pending += 1
                if at < cutoff_day:
                    pending.append(fact)

        def split(counts: Mapping[str, int], frozen: set[str]) -> tuple[int, int]:
            return (sum(n for k, n in counts.items() if k in frozen),
                    sum(n for k, n in counts.items() if k not in frozen))

        held_dead, stale_dead = split(kept_dead, held_before)
        report = DistillReport(
            scanned=scanned, eligible=eligible, created=folded.created,
            updated=folded.updated, skipped=folded.skipped + held_dead,
            superseded=folded.superseded, conflicts=folded.conflicts,
            stale=folded.stale + stale_dead)
        again_held, again_stale = split(again_dead, held)
        again = DistillReport(scanned=scanned, eligible=eligible,
                              skipped=again_pending + again_held,
                              conflicts=folded.conflicts, stale=again_stale)
        try:
            audited = self.resolutions_path.stat().st_size
        except FileNotFoundError:
            audited = 0
        pending.sort(key=lambda f: (f.recorded_at, f.line))  # = Fact.order
        return after, report, _Cursors(
            policy=policy.to_dict(), cutoff=cutoff, files=files, open_file=open_file,
            resolutions=audited, report=again.to_dict(), pending=pending,
            dead={k: n for k, n in sorted(dead.items()) if n}, marker=marker)

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
