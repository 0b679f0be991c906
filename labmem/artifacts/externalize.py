"""s13 artifacts: large tool output lives in a file; the context keeps a bounded pointer.

A tool can print megabytes. Putting all of it in the prompt wastes the budget and
drowns the next turn, so :class:`ToolResultExternalizer` writes an output over the
threshold to ``<session>/tool-results/<filename>`` and returns a *pointer*: a header
(source id, summary, full SHA-256, how to read more) and a bounded preview.

Three promises make the pointer trustworthy later:

* **Never overwrite.** Bodies are created with ``O_EXCL`` and fsynced; a restarted
  process picks a new name rather than replacing evidence.
* **Time from the clock, not the disk.** The creation time comes from the injected
  clock and is recorded in a small manifest (``artifacts.jsonl`` beside
  ``tool-results/``), never read from a file's mtime — so ages and TTLs are the same
  on every machine and in every notebook run.
* **A reference is not a copy.** :meth:`ArtifactReference.for_memory` carries the
  summary, digest and source id — never the body and never a path. Every read
  re-checks the digest and stays inside the session's own ``tool-results/``.

The session directory is the trusted root. Every write and every read first resolves the
real path of what it touches under it (:meth:`ToolResultExternalizer.check_confinement`):
a ``tool-results/``, manifest or manifest lock that is a symlink, or resolves anywhere but
its own place in the session, is refused with :class:`ArtifactAccessError` before a byte
is written or read — a symlinked ``tool-results/`` would otherwise send bodies, and
cleanup's deletions, outside the session.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock, format_timestamp, parse_timestamp, resolve_clock
from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError, validated_as
from labmem.core.provenance import SESSION_ID_PATTERN, MemorySource
from labmem.core.storage import JsonlLog, fsync_directory, write_durably
from labmem.core.text import estimate_tokens
from labmem.core.validation import require_text

__all__ = [
    "ArtifactAccessError",
    "ArtifactCorruptionError",
    "ArtifactError",
    "ArtifactIntegrityError",
    "ArtifactMissingError",
    "ArtifactReference",
    "ArtifactValidationError",
    "ExternalizationPolicy",
    "ExternalizedToolResult",
    "ToolResultExternalizer",
    "format_source_id",
    "parse_source_id",
]

TOOL_RESULTS_DIR = "tool-results"
MANIFEST_NAME = "artifacts.jsonl"
SOURCE_TYPE = "tool_result_artifact"
MAX_SUMMARY_CHARS = 240
DIGEST_PREFIX_HEX = 12
TOOL_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: ``<seq>-<tool>-<sha12>.txt`` — the only names this layer ever creates.
ARTIFACT_NAME_PATTERN = re.compile(r"(\d{6})-([A-Za-z0-9][A-Za-z0-9._-]{0,63})-([0-9a-f]{12})\.txt")
SOURCE_ID_PATTERN = re.compile(
    r"artifact:([A-Za-z0-9][A-Za-z0-9._-]*):([^:/\\]+):([0-9a-f]{12})"
)
_HASH_CHUNK = 1 << 20


class ArtifactError(LabmemError):
    """Base of every error the artifact layer raises."""


class ArtifactValidationError(ArtifactError, InvalidInputError):
    """A call was refused before any file was written."""


class ArtifactAccessError(ArtifactError):
    """A read would leave the session's ``tool-results/`` or names no artifact of it."""


class ArtifactMissingError(ArtifactAccessError):
    """The artifact was recorded but its body is gone (for example, cleaned up)."""


class ArtifactIntegrityError(ArtifactError):
    """The body's bytes no longer match the digest recorded when it was written."""


class ArtifactCorruptionError(ArtifactError, CorruptionError):
    """A complete line of the artifact manifest cannot be decoded (``line N``)."""


@dataclass(frozen=True)
class ExternalizationPolicy:
    """When output leaves the context, and how much of it the pointer shows.

    ``bash`` output is measured in characters (what a terminal transcript feels like);
    every other tool in UTF-8 bytes (what a protocol message costs). The two differ
    threefold for Chinese text: 30,000 CJK characters are 90,000 bytes.
    """

    bash_max_chars: int = 30_000
    other_max_bytes: int = 51_200
    preview_chars: int = 4_000
    read_max_chars: int = 16_000

    def __post_init__(self) -> None:
        for name in ("bash_max_chars", "other_max_bytes", "preview_chars", "read_max_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ArtifactValidationError(
                    f"policy.{name}", f"must be a positive int, got {value!r}")
        if self.preview_chars > 7_000:  # 4 bytes each, + header: stays under 32 KB
            raise ArtifactValidationError(
                "policy.preview_chars", f"is {self.preview_chars}, above 7,000",
                "keep the pointer small: a CJK preview costs 3 bytes per character")

    def measure(self, output: str, tool_name: str) -> tuple[int, int, str]:
        """(size, limit, unit) of ``output`` under this policy."""
        if tool_name == "bash":
            return len(output), self.bash_max_chars, "characters"
        return len(output.encode("utf-8")), self.other_max_bytes, "bytes"

    def should_externalize(self, output: str, tool_name: str) -> bool:
        size, limit, _ = self.measure(output, tool_name)
        return size > limit

    def inline_char_limit(self, tool_name: str, char: str = "a") -> int:
        """The most characters of text written in ``char`` (one character, e.g. ``"a"`` for
        English, ``"中"`` for Chinese) that ``tool_name`` still keeps inline.

        ``bash`` counts characters, so the script does not matter; other tools count UTF-8
        bytes, so a CJK character (3 bytes) or an emoji (4) leaves room for fewer.
        """
        if not isinstance(char, str) or len(char) != 1:
            raise ArtifactValidationError("char", f"must be one character, got {char!r}")
        if tool_name == "bash":
            return self.bash_max_chars
        return self.other_max_bytes // len(char.encode("utf-8"))


def format_source_id(session_id: str, filename: str, sha256: str) -> str:
    """``artifact:<session>:<filename>:<first 12 hex of sha256>`` — what s14 verifies."""
    return f"artifact:{session_id}:{filename}:{sha256[:DIGEST_PREFIX_HEX]}"


def parse_source_id(source_id: Any) -> tuple[str, str, str]:
    """(session, filename, sha256 prefix) of an artifact source id; refuses anything else."""
    validated_as(ArtifactValidationError, require_text, source_id, "source_id")
    match = SOURCE_ID_PATTERN.fullmatch(source_id)
    if match is None:
        raise ArtifactValidationError(
            "source_id", f"is not an artifact source id: {source_id[:120]!r}",
            "expected artifact:<session>:<filename>:<12 hex of sha256>")
    return match.group(1), match.group(2), match.group(3)


@dataclass(frozen=True)
class ArtifactReference:
    """What other layers may hold about an artifact: identity and digest, no body."""

    filename: str
    summary: str
    byte_size: int
    char_count: int
    sha256: str
    source: MemorySource
    created_at: datetime

    def __post_init__(self) -> None:
        if not isinstance(self.filename, str) or not ARTIFACT_NAME_PATTERN.fullmatch(self.filename):
            raise ArtifactValidationError("reference.filename",
                                          f"is not an artifact file name: {self.filename!r}")
        validated_as(ArtifactValidationError, require_text, self.summary, "reference.summary",
                     max_chars=MAX_SUMMARY_CHARS)
        if not isinstance(self.sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ArtifactValidationError("reference.sha256", "must be 64 lowercase hex digits")
        at = validated_as(ArtifactValidationError, parse_timestamp, self.created_at,
                          field="reference.created_at")
        object.__setattr__(self, "created_at", at)

    @property
    def source_id(self) -> str:
        return self.source.source_id

    def for_memory(self) -> dict[str, Any]:
        """The memory-facing form: summary, digest, sizes and source — never the body."""
        return {
            "source_id": self.source.source_id,
            "summary": self.summary,
            "sha256": self.sha256,
            "byte_size": self.byte_size,
            "char_count": self.char_count,
            "created_at": format_timestamp(self.created_at),
            "source": self.source.to_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"filename": self.filename, **self.for_memory()}


@dataclass(frozen=True)
class ExternalizedToolResult:
    """What goes into the context (``context_text``) and the artifact behind it, if any."""

    context_text: str
    artifact: ArtifactReference | None


def _first_line(output: str) -> str:
    """The first non-blank line, without splitting the whole (possibly huge) output."""
    start = 0
    while start < len(output):
        end = output.find("\n", start)
        end = len(output) if end < 0 else end
        line = output[start:min(end, start + 1_000)].strip()
        if line:
            return line
        start = end + 1
    return ""


def count_lines(text: str) -> int:
    """Lines as a reader counts them: a final newline ends the last line, it does not start
    another (``"a\nb\n"`` has 2 lines, ``""`` has 0). ``"\n"`` only, never U+2028."""
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def split_lines(text: str) -> list[str]:
    """The :func:`count_lines` lines themselves, without their newlines."""
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else ([] if not text else lines)


def _default_summary(output: str, tool_name: str, char_count: int) -> str:
    first = _first_line(output)
    line_count = count_lines(output)
    text = f"{tool_name} output, {line_count:,} lines, {char_count:,} characters: {first}"
    text = " ".join(text.split())
    if len(text) > MAX_SUMMARY_CHARS:  # a default summary is clamped, never refused
        text = text[: MAX_SUMMARY_CHARS - 1] + "…"
    return text


def _sha256_of_file(fd: int) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, _HASH_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _decode_manifest_entry(session_id: str, line_number: int,
                           obj: dict[str, Any]) -> ArtifactReference:
    try:
        if obj.get("session") != session_id:
            raise ValueError(f"belongs to session {obj.get('session')!r}")
        source = MemorySource.from_dict(obj["source"])
        reference = ArtifactReference(
            obj["filename"], obj["summary"], int(obj["byte_size"]), int(obj["char_count"]),
            obj["sha256"], source, obj["created_at"])
        if source.source_id != format_source_id(session_id, reference.filename, reference.sha256):
            raise ValueError("source id does not match filename and digest")
        return reference
    except (KeyError, TypeError, ValueError, LabmemError) as exc:
        raise ArtifactCorruptionError(MANIFEST_NAME, line_number,
                                      f"not a valid artifact record ({exc})") from None


class ToolResultExternalizer:
    """Moves large tool output of one session into ``tool-results/`` behind a pointer."""

    def __init__(self, session_dir: str | os.PathLike[str], *, clock: Clock | None = None,
                 policy: ExternalizationPolicy | None = None) -> None:
        self.session_dir = Path(session_dir)
        self.session_id = self.session_dir.name
        if not SESSION_ID_PATTERN.fullmatch(self.session_id):
            raise ArtifactValidationError(
                "session_dir", f"its name {self.session_id!r} is not a valid session id",
                "name the directory with letters, digits, '.', '_' or '-'")
        self.clock = resolve_clock(clock)
        if policy is None:
            policy = ExternalizationPolicy()
        if not isinstance(policy, ExternalizationPolicy):
            raise ArtifactValidationError("policy", "must be an ExternalizationPolicy")
        self.policy = policy
        self.tool_results_dir = self.session_dir / TOOL_RESULTS_DIR
        self._manifest = JsonlLog(self.session_dir / MANIFEST_NAME,
                                  decode=partial(_decode_manifest_entry, self.session_id),
                                  corruption_error=ArtifactCorruptionError)
        self._by_name: dict[str, ArtifactReference] = {}

    # -- writing -----------------------------------------------------------------------

    def check_confinement(self) -> None:
        """Refuse a session whose artifact paths leave it; reads nothing, writes nothing.

        ``tool-results/``, the manifest and the manifest's lock file must each be absent or
        a real entry of this session (a directory, a file, a file) whose real path is its
        own place under the session's real path — never a symlink, wherever it points.
        """
        root = os.path.realpath(self.session_dir)
        manifest = self.session_dir / MANIFEST_NAME
        for path, is_kind, kind in ((self.tool_results_dir, stat.S_ISDIR, "directory"),
                                    (manifest, stat.S_ISREG, "file"),
                                    (Path(f"{manifest}.lock"), stat.S_ISREG, "file")):
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode) or not is_kind(info.st_mode) \
                    or os.path.realpath(path) != os.path.join(root, path.name):
                raise ArtifactAccessError(
                    f"{path.name}: is not a {kind} inside session {self.session_id!r} (a "
                    "symlink or another place); artifacts stay inside their session, so "
                    "nothing was written or read — replace it with a real "
                    f"{kind} of the session")

    def externalize(self, output: str, tool_name: str, *,
                    summary: str | None = None) -> ExternalizedToolResult:
        """Return the output inline when small, else write it and return a pointer.

        Raises :class:`ArtifactAccessError`, having written nothing, when the session's
        artifact paths leave the session (:meth:`check_confinement`).
        """
        # everything the body and its manifest line hold is validated before the first
        # byte is written: a lone surrogate would otherwise fail the manifest line's
        # encoding after the body was already on disk
        validated_as(ArtifactValidationError, require_text, output, "output", allow_blank=True)
        if not isinstance(tool_name, str) or not TOOL_NAME_PATTERN.fullmatch(tool_name):
            raise ArtifactValidationError(
                "tool_name", f"is not a tool name: {tool_name!r}",
                "use letters, digits, '.', '_' or '-' (at most 64)")
        if summary is not None:  # an explicit summary is the caller's claim: refuse, not clamp
            validated_as(ArtifactValidationError, require_text, summary, "summary",
                         max_chars=MAX_SUMMARY_CHARS)
            summary = " ".join(summary.split())
        if not self.policy.should_externalize(output, tool_name):
            return ExternalizedToolResult(output, None)
        summary = summary or _default_summary(output, tool_name, len(output))
        self.check_confinement()  # before the lock: not even a lock file is created
        body = output.encode("utf-8")
        sha256 = hashlib.sha256(body).hexdigest()
        created_at = self.clock.now()
        with self._manifest.locked():
            self._refresh()  # checks the confinement again, under the lock
            filename = self._write_body(tool_name, sha256, body)
            reference = ArtifactReference(
                filename=filename,
                summary=summary,
                byte_size=len(body), char_count=len(output), sha256=sha256,
                source=MemorySource(format_source_id(self.session_id, filename, sha256),
                                    SOURCE_TYPE, f"{tool_name} output", created_at),
                created_at=created_at)
            self._manifest.append({"session": self.session_id, **reference.to_dict()})
        self._by_name[filename] = reference
        return ExternalizedToolResult(self._pointer(reference, output, tool_name), reference)

    def _write_body(self, tool_name: str, sha256: str, body: bytes) -> str:
        """Create the body exclusively; skip any name already on disk (never overwrite)."""
        self.tool_results_dir.mkdir(parents=True, exist_ok=True)
        self.check_confinement()  # a symlink planted since the last check is refused too
        sequence = len(self._by_name) + 1
        while True:
            filename = f"{sequence:06d}-{tool_name}-{sha256[:DIGEST_PREFIX_HEX]}.txt"
            try:
                fd = os.open(self.tool_results_dir / filename,
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:  # e.g. a body whose manifest line was never written
                sequence += 1
                continue
            try:
                write_durably(fd, body)
            finally:
                os.close(fd)
            fsync_directory(self.tool_results_dir)
            return filename

    def _pointer(self, reference: ArtifactReference, output: str, tool_name: str) -> str:
        lines = count_lines(output)
        header = [
            f"[tool result externalized: {reference.byte_size:,} bytes, "
            f"{reference.char_count:,} characters, {lines:,} lines, "
            f"~{estimate_tokens(output):,} tokens]",
            f"source: {reference.source_id}",
            f"summary: {reference.summary}",
            f"sha256: {reference.sha256}",
            "read more: read_artifact(source_id, offset=<line>, limit=<lines>)",
        ]
        budget = self.policy.preview_chars
        if tool_name == "bash":  # errors and exit status tend to be at the end
            half = budget // 2
            preview = ["--- head ---", output[:half], "--- tail ---", output[-half:]]
        else:
            preview = ["--- head ---", output[:budget]]
        return "\n".join(header + preview + ["--- end of preview ---"])

    # -- reading -----------------------------------------------------------------------

    def _refresh(self) -> None:
        self.check_confinement()  # every read and write of the manifest starts here
        for reference in self._manifest.refresh():
            self._by_name[reference.filename] = reference

    def references(self) -> list[ArtifactReference]:
        """Every artifact recorded for this session, in creation order."""
        self._refresh()
        return list(self._by_name.values())

    def recorded(self, filename: str) -> ArtifactReference | None:
        """The manifest record of ``filename`` (no file access), or ``None``."""
        self._refresh()
        return self._by_name.get(filename)

    def verify(self, source_id: str) -> ArtifactReference:
        """Re-check an artifact from its owner: session, record, confinement and digest."""
        session, filename, prefix = parse_source_id(source_id)
        if session != self.session_id:
            raise ArtifactAccessError(
                f"source_id: names session {session!r}, not this session {self.session_id!r}")
        reference = self.recorded(filename)
        if reference is None or reference.sha256[:DIGEST_PREFIX_HEX] != prefix:
            raise ArtifactAccessError(f"source_id: no artifact {filename!r} with digest {prefix}"
                                      " was recorded in this session")
        self._read_verified(reference)
        return reference

    def read_artifact(self, artifact: ArtifactReference | str, *, offset: int = 0,
                      limit: int = 200) -> str:
        """Lines ``offset`` … ``offset + limit`` (0-based) of an artifact, bounded in size."""
        for name, value in (("offset", offset), ("limit", limit)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ArtifactValidationError(name, f"must be a non-negative int, got {value!r}")
        if limit == 0:
            raise ArtifactValidationError("limit", "must be at least 1")
        if isinstance(artifact, str):
            artifact = self.verify(artifact)
        if not isinstance(artifact, ArtifactReference):
            raise ArtifactValidationError(
                "artifact", f"must be an ArtifactReference or a source id, got "
                f"{type(artifact).__name__}")
        text = self._read_verified(artifact).decode("utf-8")
        lines = split_lines(text)  # "\n" only: U+2028 inside a line is not a break
        page = lines[offset: offset + limit]
        end = offset + len(page)
        header = (f"[{artifact.source_id} lines {offset}-{max(end - 1, offset)} of {len(lines)}"
                  + (f"; next offset={end}]" if end < len(lines) else "; end]"))
        body = "\n".join(page)
        cap = self.policy.read_max_chars
        if len(body) > cap:  # one huge line must not flood the context either
            body = body[:cap] + f"\n[... truncated at {cap:,} characters]"
        return header + "\n" + body

    def _confined_path(self, filename: Any) -> Path:
        """The body path, refusing ``..``, absolute names, separators and foreign names."""
        if (not isinstance(filename, str) or filename in ("", ".", "..") or "/" in filename
                or "\\" in filename or os.path.isabs(filename) or "\x00" in filename):
            raise ArtifactAccessError(
                f"filename: {str(filename)[:80]!r} leaves the session's {TOOL_RESULTS_DIR}/"
                " directory; pass a reference returned by this externalizer")
        return self.tool_results_dir / filename

    def _read_verified(self, reference: ArtifactReference) -> bytes:
        path = self._confined_path(reference.filename)
        recorded = self.recorded(reference.filename)
        if recorded is None or recorded.sha256 != reference.sha256:
            raise ArtifactAccessError(
                f"filename: {reference.filename!r} is not an artifact recorded with this digest"
                " in this session")
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            raise ArtifactMissingError(
                f"{reference.source_id}: the body is gone (cleaned up or removed)") from None
        if not stat.S_ISREG(info.st_mode):  # a symlink, even to identical bytes, is refused
            raise ArtifactAccessError(
                f"{reference.filename}: is not a regular file inside {TOOL_RESULTS_DIR}/"
                " (symlinks are refused)")
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise ArtifactAccessError(f"{reference.filename}: cannot be opened ({exc.strerror})"
                                      ) from None
        try:
            chunks = []
            while chunk := os.read(fd, _HASH_CHUNK):
                chunks.append(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        digest = hashlib.sha256(data).hexdigest()
        if digest != reference.sha256:
            raise ArtifactIntegrityError(
                f"{reference.source_id}: the body's sha256 is {digest[:12]}…, not the "
                f"recorded {reference.sha256[:12]}…; treat it as tampered evidence")
        return data

    def __repr__(self) -> str:
        return f"ToolResultExternalizer(session={self.session_id!r})"


def file_digest(path: Path) -> tuple[str, os.stat_result]:
    """(sha256, stat) of a regular file opened without following symlinks."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(fd)
        digest, _ = _sha256_of_file(fd)
        return digest, info
    finally:
        os.close(fd)

