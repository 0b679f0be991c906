"""s14 source verification: a pointer is not evidence until its owner says so.

Durable items carry *pointers* (``transcript:<session>:<sequence>``,
``artifact:<session>:<file>:<digest>``). Before each prompt assembly a fresh
:class:`SourcePointerResolver` asks the owning layer — the s09 transcript reader or the
s13 externalizer's ``verify`` — and turns each pointer into exactly one of five states:

``available``   the owner has it and its digest checks out (with the evidence SHA-256);
``missing``     the owner has no such evidence (never written, or cleaned up);
``denied``      the ``authorize`` callback said no (asked before any file access), or the
                path would leave the trusted root (symlinks included);
``corrupt``     the pointer is malformed, or the owner's record or digest is bad;
``unsupported`` another scheme.

Nothing is cached between assemblies and no excerpt is returned: the renderer gets a
status and a digest, never text that could stand in for the evidence.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.artifacts import (
    ArtifactAccessError,
    ArtifactCorruptionError,
    ArtifactIntegrityError,
    ArtifactMissingError,
    ToolResultExternalizer,
)
from labmem.context.durable import DurableContextState
from labmem.core.clock import format_timestamp
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import SESSION_ID_PATTERN
from labmem.core.render import BlockFormat, fixed, join_lines, require_choice, require_sha256
from labmem.transcript import Transcript, TranscriptCorruptionError

__all__ = ["SourcePointerResolver", "SourceResolution", "STATUSES", "SOURCE_STATUSES",
           "DURABLE_FORMAT", "render_durable_context"]

#: The five states of a source resolution; the durable context prints exactly these.
SOURCE_STATUSES = ("available", "missing", "denied", "corrupt", "unsupported")
STATUSES = SOURCE_STATUSES
_SESSION = SESSION_ID_PATTERN.pattern
_TRANSCRIPT = re.compile(rf"transcript:({_SESSION}):([1-9][0-9]*)")
_ARTIFACT = re.compile(rf"artifact:({_SESSION}):([^:/\\]+):([0-9a-f]{{12}}|[0-9a-f]{{64}})")


@dataclass(frozen=True)
class SourceResolution:
    """What one pointer resolved to for this assembly — a status, never the evidence."""

    pointer: str
    status: str
    evidence_sha256: str | None
    reason: str


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def record_digest(record: dict) -> str:
    """The SHA-256 of a transcript record in one canonical JSON form."""
    canonical = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class SourcePointerResolver:
    """Resolves pointers against trusted roots, through each owner's own reader."""

    def __init__(self, *, transcript_root: str | Path, artifact_root: str | Path,
                 authorize: Callable[[str], bool] | None = None) -> None:
        for name, value in (("transcript_root", transcript_root),
                            ("artifact_root", artifact_root)):
            if not isinstance(value, (str, Path)):
                raise InvalidInputError(name, "must be a directory path")
        if authorize is not None and not callable(authorize):
            raise InvalidInputError("authorize", "must be a callable pointer -> bool or None")
        self.transcript_root = Path(transcript_root)
        self.artifact_root = Path(artifact_root)
        self.authorize = authorize

    def resolve(self, pointer: str) -> SourceResolution:
        """One pointer → one of the five states, with a reason."""
        def result(status: str, reason: str, sha: str | None = None) -> SourceResolution:
            return SourceResolution(pointer, status, sha, reason)

        if not isinstance(pointer, str) or not pointer:
            return SourceResolution(str(pointer), "corrupt", None, "not a pointer string")
        if self.authorize is not None:
            try:
                allowed = self.authorize(pointer)
            except Exception as exc:  # noqa: BLE001 - a failing policy denies, it never allows
                return result("denied", f"authorize raised {type(exc).__name__}")
            if allowed is not True:
                return result("denied", "authorize refused this pointer")
        scheme = pointer.split(":", 1)[0]
        if scheme == "transcript":
            return self._transcript(pointer, result)
        if scheme == "artifact":
            return self._artifact(pointer, result)
        return result("unsupported", f"no owner for scheme {scheme!r}")

    def _transcript(self, pointer, result) -> SourceResolution:
        match = _TRANSCRIPT.fullmatch(pointer)
        if match is None:
            return result("corrupt", "malformed transcript pointer")
        path = self.transcript_root / f"{match.group(1)}.jsonl"
        if not path.exists():
            return result("missing", "no such session")
        if not _inside(path, self.transcript_root):
            return result("denied", "the session file leaves the trusted root")
        try:
            record = Transcript(path).lookup(pointer)
        except TranscriptCorruptionError as exc:
            return result("corrupt", f"transcript unreadable at line {exc.line}")
        if record is None:
            return result("missing", "no such event in the session")
        return result("available", "event found", record_digest(record))

    def _artifact(self, pointer, result) -> SourceResolution:
        match = _ARTIFACT.fullmatch(pointer)
        if match is None:
            return result("corrupt", "malformed artifact pointer")
        session, filename, digest = match.groups()
        session_dir = self.artifact_root / session
        if not session_dir.exists():
            return result("missing", "no such session")
        if not _inside(session_dir, self.artifact_root):
            return result("denied", "the session directory leaves the trusted root")
        externalizer = ToolResultExternalizer(session_dir)
        try:  # every component under the session, resolved: tool-results/, the manifest
            externalizer.check_confinement()
        except ArtifactAccessError:
            return result("denied", "the artifact paths leave the session (a symlink)")
        try:
            recorded = externalizer.recorded(filename)
            if recorded is None:
                return result("missing", "no such artifact was recorded")
            if not recorded.sha256.startswith(digest):
                return result("corrupt", "the pointer's digest disagrees with the owner's record")
            reference = externalizer.verify(f"artifact:{session}:{filename}:{digest[:12]}")
        except ArtifactMissingError:
            return result("missing", "the artifact body is gone (cleaned up)")
        except ArtifactIntegrityError:
            return result("corrupt", "the body no longer matches its digest")
        except ArtifactCorruptionError as exc:
            return result("corrupt", f"the artifact manifest is unreadable at line {exc.line}")
        except ArtifactAccessError:
            return result("denied", "the body is not a regular file inside the session")
        return result("available", "digest verified", reference.sha256)

    def resolve_all(self, pointers: Iterable[str]) -> tuple[SourceResolution, ...]:
        """Resolve each pointer afresh (call once per prompt assembly)."""
        return tuple(self.resolve(pointer) for pointer in pointers)


# -- rendering the durable state -------------------------------------------------------


#: The durable context's line format, ``- [fact ID] text (source=…; …; source_status=…)``:
#: stored text never prints a raw ``[``, ``]`` or ``=`` (so it cannot close an item's head,
#: open another item, or forge an attribute or a status marker), markup is escaped, and
#: line breaks and control characters become ``\\uXXXX`` (:mod:`labmem.core.render`).
DURABLE_FORMAT = BlockFormat("durable_context", reserved="[]=", markup=True)


def _one_line(text: str, field: str = "text") -> str:
    """Stored text as one field of a durable-context line (see :data:`DURABLE_FORMAT`)."""
    return DURABLE_FORMAT.text(text, field)


def _status(pointer: str, resolutions: Mapping[str, Any] | None) -> str:
    if resolutions is None:
        return "source_status=unverified; evidence_unavailable=true"
    resolution = resolutions[pointer]
    if resolution.status == "available":
        return f"source_status=available; evidence_sha256={resolution.evidence_sha256}"
    return f"source_status={resolution.status}; evidence_unavailable=true"


def _check_resolution(index: int, resolution: Any) -> None:
    """A resolution prints a status and maybe a digest: both must be ones the format knows.

    The resolution type itself stays permissive (tests and callers build their own); what
    is printed is checked here: a status that is not one of the five, or a digest that is
    not a full SHA-256 (a newline in it would start a forged line), is refused.
    """
    where = f"source_resolutions[{index}]"
    status = require_choice(getattr(resolution, "status", None), f"{where}.status",
                            SOURCE_STATUSES)
    digest = getattr(resolution, "evidence_sha256", None)
    if status == "available" or digest is not None:
        require_sha256(digest, f"{where}.evidence_sha256")


def _index_resolutions(state: DurableContextState,
                       source_resolutions: Sequence[Any] | None) -> Mapping[str, Any] | None:
    if source_resolutions is None:
        return None
    by_pointer: dict[str, Any] = {}
    for index, resolution in enumerate(source_resolutions):
        _check_resolution(index, resolution)
        pointer = getattr(resolution, "pointer", None)
        if pointer in by_pointer:
            raise InvalidInputError("source_resolutions", f"{pointer!r} is resolved twice")
        by_pointer[pointer] = resolution
    wanted = set(state.pointers())
    if set(by_pointer) != wanted:
        missing = sorted(wanted - set(by_pointer))
        extra = sorted(set(by_pointer) - wanted)
        raise InvalidInputError("source_resolutions",
                                f"need exactly one per durable pointer; missing {missing}, "
                                f"unexpected {extra}",
                                "resolve state.pointers() afresh for this prompt")
    return by_pointer


def render_durable_context(state: DurableContextState,
                           source_resolutions: Sequence[Any] | None = None) -> str:
    """The durable state as a prompt block: one escaped line per item, with its source
    pointer and whether that source was verified for *this* assembly.

    Stored text is printed through :data:`DURABLE_FORMAT`, so no content, id or pointer can
    produce a line, an item head, an attribute or a status marker. Each resolution must
    have one of the five :data:`SOURCE_STATUSES` and, when it prints a digest, a full
    SHA-256; anything else raises :class:`~labmem.core.errors.InvalidInputError`.
    """
    if not isinstance(state, DurableContextState):
        raise InvalidInputError("state", "must be a DurableContextState")
    resolved = _index_resolutions(state, source_resolutions)
    lines = ["<durable_context>", "confirmed facts:"]
    for f in state.facts:
        lines.append(f"- [fact {_one_line(f.fact_id, 'fact.fact_id')}] "
                     f"{_one_line(f.content, 'fact.content')} "
                     f"(source={_one_line(f.source_pointer, 'fact.source_pointer')}; "
                     f"last_confirmed_at={format_timestamp(f.last_confirmed_at)}; "
                     f"{_status(f.source_pointer, resolved)})")
    lines.append("pending items (open until their source says otherwise):")
    for p in state.pending_items:
        lines.append(f"- [pending {_one_line(p.item_id, 'pending.item_id')}] "
                     f"{_one_line(p.description, 'pending.description')} "
                     f"(source={_one_line(p.source_pointer, 'pending.source_pointer')}; "
                     f"last_confirmed_at={format_timestamp(p.last_confirmed_at)}; "
                     f"{_status(p.source_pointer, resolved)})")
    lines.append("retrieval evidence:")
    for e in state.retrieval_evidence:
        conflict = ("" if e.conflict_key is None
                    else f"; conflict_key={_one_line(e.conflict_key, 'evidence.conflict_key')}")
        lines.append(f"- [memory {_one_line(e.memory_id, 'evidence.memory_id')}] "
                     f"rank={e.rank} score={fixed(e.score, 'evidence.score')} "
                     f"(source={_one_line(e.source_pointer, 'evidence.source_pointer')}; "
                     f"captured_at={format_timestamp(e.captured_at)}{conflict}; "
                     f"{_status(e.source_pointer, resolved)})")
    lines.append("</durable_context>")
    return join_lines(lines, "durable_context")
