"""s10 facts: what the agent learned about a project, one line per fact, never rewritten.

A :class:`Fact` is raw evidence: "we chose SQLite WAL", "tests need ``TZ=UTC``". Facts
go to ``daily/YYYY-MM-DD.jsonl`` (the UTC day of ``recorded_at``) and stay there; the
curated view (``curated.json``) is *derived* from them by ``distill`` and can always be
derived again. Every line carries the ``workspace_scope``, so a log copied in from
another project is refused instead of silently becoming this project's memory.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol

from labmem.core.clock import UTC, format_timestamp, parse_stored_timestamp
from labmem.core.errors import (
    CorruptionError,
    DuplicateError,
    InvalidInputError,
    LabmemError,
    ScopeError,
)
from labmem.core.provenance import MemorySource
from labmem.core.storage import JsonlLog
from labmem.core.validation import require_text

__all__ = [
    "KINDS", "STABLE_KINDS", "Fact", "WorkspaceError", "WorkspaceValidationError",
    "WorkspaceCorruptionError", "WorkspaceScopeError", "WorkspaceDuplicateError",
    "daily_file_name", "day_of_file", "read_daily_file", "read_daily_lines",
    "DailyReader",
]

SCHEMA_VERSION = 1
KINDS = ("decision", "convention", "pitfall", "outcome")
STABLE_KINDS = frozenset({"decision", "convention", "pitfall"})
MAX_CONTENT_CHARS = 4_000
MAX_EVIDENCE_IDS = 50
MAX_ID_CHARS = 200
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
FACT_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:#@/-]{0,199}")
GENERATED_ID_PREFIX = "fact:"  # reserved: ``fact:<day>:<line>`` ids are made by the log
DAILY_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})\.jsonl")


class WorkspaceError(LabmemError):
    """Base of every error the workspace memory raises."""


class WorkspaceValidationError(WorkspaceError, InvalidInputError):
    """A call was refused before anything was written."""


class WorkspaceCorruptionError(WorkspaceError, CorruptionError):
    """A stored line or document of the workspace cannot be trusted."""


class WorkspaceScopeError(WorkspaceError, ScopeError):
    """A file (or a line in it) belongs to another workspace."""


class WorkspaceDuplicateError(WorkspaceError, DuplicateError, InvalidInputError):
    """A caller-chosen ``fact_id`` is already used by a different fact."""

    def __init__(self, fact_id: str) -> None:
        InvalidInputError.__init__(
            self, "fact_id", f"{fact_id!r} is already used by a different fact",
            "choose a new id, or repeat the identical fact to get the stored one back",
        )


def _refuse(field: str, problem: str, fix: str = "") -> WorkspaceValidationError:
    return WorkspaceValidationError(field, problem, fix)


def check_memory_key(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not KEY_PATTERN.fullmatch(value):
        raise _refuse("memory_key", f"{value!r} is not a memory key",
                      "use 1-64 characters from a-z 0-9 _ . -, e.g. 'storage.engine'")
    return value


def check_importance(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise _refuse("importance", f"must be an integer from 1 to 5, got {value!r}",
                      "1 = trivia, 3 = useful (the default), 5 = never forget")
    return value


def check_kind(value: Any) -> str:
    if value not in KINDS:
        raise _refuse("kind", f"{value!r} is not a fact kind", f"use one of: {', '.join(KINDS)}")
    return value


def check_evidence(value: Any) -> tuple[str, ...]:
    """Evidence ids (transcript event ids, artifact ids …): unique, sorted, bounded."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise _refuse("evidence", f"must be a list of evidence ids, got {type(value).__name__}",
                      "pass e.g. ['transcript:session-1:5']")
    if len(value) > MAX_EVIDENCE_IDS:
        raise _refuse("evidence", f"has {len(value)} ids, more than {MAX_EVIDENCE_IDS}")
    for i, item in enumerate(value):
        try:
            require_text(item, f"evidence[{i}]", max_chars=MAX_ID_CHARS)
        except InvalidInputError as exc:
            raise _refuse(exc.field, exc.problem, exc.fix) from None
    return tuple(sorted(set(value)))


def check_source(value: Any) -> MemorySource | None:
    if value is None or isinstance(value, MemorySource):
        return value
    try:
        return MemorySource.from_dict(value)
    except InvalidInputError as exc:
        raise _refuse(exc.field, exc.problem, exc.fix) from None


def check_fact_id(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not FACT_ID_PATTERN.fullmatch(value):
        raise _refuse("fact_id", f"{value!r} is not a fact id",
                      "use up to 200 characters from A-Z a-z 0-9 . _ : # @ / -")
    if value.startswith(GENERATED_ID_PREFIX):
        raise _refuse("fact_id", f"{value!r} uses the reserved prefix {GENERATED_ID_PREFIX!r}",
                      "leave fact_id out to get a generated id, or use another prefix")
    return value


def daily_file_name(day: date) -> str:
    return f"{day.isoformat()}.jsonl"


def day_of_file(path: Path) -> date | None:
    """The day a ``daily/`` file holds, or ``None`` for a name that is not a daily log."""
    match = DAILY_NAME.fullmatch(path.name)
    if match is None:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None


@dataclass(frozen=True)
class Fact:
    """One logged fact. ``line`` is its line in its daily file (1-based)."""

    fact_id: str
    recorded_at: datetime
    kind: str
    content: str
    importance: int
    memory_key: str | None
    source: MemorySource | None
    evidence: tuple[str, ...]
    line: int = 0

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        """What makes this fact *independent* evidence: its evidence ids, else its
        source id, else its own id. Two facts citing the same transcript event are
        one piece of evidence, not two."""
        if self.evidence:
            return self.evidence
        if self.source is not None:
            return (self.source.source_id,)
        return (self.fact_id,)

    @property
    def order(self) -> tuple[datetime, str, int]:
        """A total, stable order: time first, then day file and line."""
        return (self.recorded_at, self.recorded_at.date().isoformat(), self.line)

    def payload(self) -> dict[str, Any]:
        """The caller-given part, used to recognize a retried append of the same fact."""
        return {"kind": self.kind, "content": self.content, "importance": self.importance,
                "memory_key": self.memory_key,
                "source": None if self.source is None else self.source.to_dict(),
                "evidence": list(self.evidence)}

    def to_dict(self) -> dict[str, Any]:
        return {"fact_id": self.fact_id, "recorded_at": format_timestamp(self.recorded_at),
                **self.payload()}

    def to_record(self, workspace_scope: str) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "workspace_scope": workspace_scope,
                **self.to_dict()}


def _stored_evidence(value: Any) -> tuple[str, ...]:
    """Evidence as ``to_record`` writes it (a sorted list of distinct ids, each checked
    on the way in), checked again cheaply; anything else takes :func:`check_evidence`."""
    if type(value) is list and len(value) <= MAX_EVIDENCE_IDS:
        previous = ""
        for item in value:  # ASCII: no surrogate; sorted and distinct: no set, no sort
            if type(item) is not str or not previous < item or len(item) > MAX_ID_CHARS \
                    or not item.isascii() or item.isspace():
                break
            previous = item
        else:
            return tuple(value)
    return check_evidence(value)


_new_object = object.__new__
_from_iso = datetime.fromisoformat
_fact_id_ok = FACT_ID_PATTERN.fullmatch
_key_ok = KEY_PATTERN.fullmatch


def decode_fact(record: Mapping[str, Any], line: int) -> Fact:
    """A stored line back into a :class:`Fact`; raises ``ValueError``-like errors.

    Every field is checked as strictly as on the way in (a stored line is not trusted):
    the line as ``to_record`` writes it takes :func:`_canonical_fact`, anything else —
    and anything that fails one of its tests, good or bad — :func:`_checked_fact`, which
    runs every checker in order and so names the first bad field exactly.
    """
    fact = _canonical_fact(record, line)
    return _checked_fact(record, line) if fact is None else fact


def _canonical_fact(record: Mapping[str, Any], line: int) -> Fact | None:
    """The common valid line, checked in one expression of cheap tests (the line reader
    decodes each line of a log with it), or ``None``: ASCII content, a ``…Z`` time, no
    source, one evidence id. Accepts only what :func:`_checked_fact` accepts, and returns
    the same fact (a property test holds the two to that); ``workspace_scope`` is the
    caller's to check."""
    get = record.get
    content, importance, memory_key, evidence = \
        get("content"), get("importance"), get("memory_key"), get("evidence")
    kind, fact_id, at, version, source = \
        get("kind"), get("fact_id"), get("recorded_at"), get("schema_version"), get("source")
    if not (type(content) is str and content.isascii()
            and 0 < len(content) <= MAX_CONTENT_CHARS and not content.isspace()
            and type(importance) is int and 1 <= importance <= 5
            and (memory_key is None or (type(memory_key) is str and _key_ok(memory_key)))
            and type(evidence) is list and len(evidence) == 1
            and type(only := evidence[0]) is str and only.isascii()
            and 0 < len(only) <= MAX_ID_CHARS and not only.isspace()
            and source is None and kind in KINDS and version == SCHEMA_VERSION
            and type(fact_id) is str and _fact_id_ok(fact_id)
            and type(at) is str and at[-1:] == "Z"):
        return None
    try:
        recorded_at = _from_iso(at)
    except ValueError:
        return None
    if recorded_at.tzinfo is not UTC:
        return None
    fact = _new_object(Fact)
    fields = fact.__dict__  # filled in place: no frozen __setattr__, no second dict
    fields["fact_id"] = fact_id
    fields["recorded_at"] = recorded_at
    fields["kind"] = kind
    fields["content"] = content
    fields["importance"] = importance
    fields["memory_key"] = memory_key
    fields["source"] = None
    fields["evidence"] = (only,)
    fields["line"] = line
    return fact


def _checked_fact(record: Mapping[str, Any], line: int) -> Fact:
    """:func:`decode_fact` field by field, each through its checker, in the checkers'
    order (the first problem is the one reported); fast paths only for exact forms."""
    if record.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"schema_version {record.get('schema_version')!r} is not supported")
    fact_id = record.get("fact_id")
    if not isinstance(fact_id, str) or not FACT_ID_PATTERN.fullmatch(fact_id):
        raise ValueError(f"fact_id {fact_id!r} is not a fact id")
    recorded_at = parse_stored_timestamp(record.get("recorded_at"), field="recorded_at")
    kind = record.get("kind")
    if kind not in KINDS:
        check_kind(kind)
    content = require_text(record.get("content"), "content", max_chars=MAX_CONTENT_CHARS)
    importance = record.get("importance")
    if type(importance) is not int or not 1 <= importance <= 5:
        check_importance(importance)
    memory_key = check_memory_key(record.get("memory_key"))
    source = record.get("source")
    source = None if source is None else check_source(source)
    return _trusted_fact(fact_id, recorded_at, kind, content, importance, memory_key, source,
                         _stored_evidence(record.get("evidence")), line)


def _trusted_fact(fact_id: str, recorded_at: datetime, kind: str, content: str,
                  importance: int, memory_key: str | None, source: MemorySource | None,
                  evidence: tuple[str, ...], line: int) -> Fact:
    """A :class:`Fact` from checked fields, without the frozen dataclass's slow
    ``__init__`` (nine ``object.__setattr__`` calls): the instance is the same."""
    fact = _new_object(Fact)
    fact.__dict__.update(fact_id=fact_id, recorded_at=recorded_at, kind=kind, content=content,
                         importance=importance, memory_key=memory_key, source=source,
                         evidence=evidence, line=line)
    return fact


def open_daily_log(path: Path, workspace_scope: str,
                   start: tuple[int, int] = (0, 0)) -> JsonlLog[Fact]:
    """A follow-reader over one daily file that refuses lines of another workspace
    (from ``start``, an ``(offset, lines)`` cursor, when given)."""
    day = day_of_file(path)

    def decode(line: int, record: dict[str, Any]) -> Fact:
        if record.get("workspace_scope") == workspace_scope:
            fact = _canonical_fact(record, line)
            if fact is not None and fact.recorded_at.date() == day:
                return fact
        return checked(line, record)  # (the reason, or a fact of another shape)

    def checked(line: int, record: dict[str, Any]) -> Fact:
        scope = record.get("workspace_scope")
        if scope != workspace_scope:
            raise WorkspaceScopeError(
                f"daily/{path.name} line {line}: belongs to workspace scope {scope!r}, not "
                f"{workspace_scope!r}; a log copied in from another workspace is refused — "
                "move it back to its own project"
            )
        try:
            fact = decode_fact(record, line)
        except (ValueError, TypeError) as exc:
            raise WorkspaceCorruptionError(f"daily/{path.name}", line, str(exc)) from None
        if fact.recorded_at.date() != day:
            raise WorkspaceCorruptionError(
                f"daily/{path.name}", line,
                f"recorded_at {format_timestamp(fact.recorded_at)} is not on {day}")
        return fact

    # no lock of its own: every writer of a daily log holds the workspace lock
    return JsonlLog(path, decode=decode, corruption_error=WorkspaceCorruptionError,
                    lock_factory=lambda _: contextlib.nullcontext(), start=start)


def read_daily_file(path: Path, workspace_scope: str) -> tuple[list[Fact], int]:
    """Every complete fact in one daily file, and the bytes read to get them."""
    log = open_daily_log(path, workspace_scope)
    facts = log.refresh()
    return facts, log.bytes_read


class DailyReader(Protocol):
    """How a distill reads one daily log from a cursor: the facts of ``kinds`` on the
    complete lines after ``start`` (``(offset, lines)``), and the cursor after them.

    :func:`read_daily_lines` is the reader every other one must equal (same facts, same
    errors); :func:`labmem.workspace.line_matcher.read_daily_since` is a faster one.
    """

    def __call__(self, path: Path, workspace_scope: str, start: tuple[int, int],
                 kinds: Collection[str]) -> tuple[list[Fact], int, int]: ...


def read_daily_lines(path: Path, workspace_scope: str, start: tuple[int, int],
                     kinds: Collection[str]) -> tuple[list[Fact], int, int]:
    """The plain :class:`DailyReader`: each line parsed and checked on its own."""
    log = open_daily_log(path, workspace_scope, start=start)
    return [f for f in log.refresh() if f.kind in kinds], log.offset, log.line_count
