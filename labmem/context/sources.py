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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from labmem.artifacts import (
    ArtifactAccessError,
    ArtifactCorruptionError,
    ArtifactIntegrityError,
    ArtifactMissingError,
    ToolResultExternalizer,
)
from labmem.context.compaction import SOURCE_STATUSES
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import SESSION_ID_PATTERN
from labmem.transcript import Transcript, TranscriptCorruptionError

__all__ = ["SourcePointerResolver", "SourceResolution", "STATUSES"]

STATUSES = SOURCE_STATUSES  # the renderer of the durable context prints exactly these
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
