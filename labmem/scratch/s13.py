# Generated from notebooks/s13_artifacts.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""s13 from scratch: large tool output behind a bounded pointer, leases, and cleanup.

A large output goes to its own file under ``tool-results/``; the context and the memory
keep a pointer with its SHA-256. A lease journal records which transactions still need an
artifact; cleanup deletes only unreferenced, intact artifacts past their TTL. Every call
reads the files again.
"""

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BASH_MAX_CHARS = 30_000  # bash output is measured in characters ...
OTHER_MAX_BYTES = 51_200  # ... every other tool's in UTF-8 bytes
PREVIEW_CHARS = 4_000
TOOL_RESULTS = "tool-results"
MANIFEST = "artifacts.jsonl"
JOURNAL = "leases.jsonl"


class ArtifactError(Exception):
    """Every error of this layer."""


class ArtifactAccessError(ArtifactError):
    """A read names no artifact of this session, or not a regular file."""


class ArtifactMissingError(ArtifactAccessError):
    """The artifact was recorded but its body is gone."""


class ArtifactIntegrityError(ArtifactError):
    """The body's bytes no longer hash to the recorded digest."""


class LeaseTransitionError(ArtifactError):
    """A lease cannot make the requested move."""


class LeaseCorruptionError(ArtifactError):
    """A complete line of the journal cannot be trusted; the message names it."""


class PublicationRejected(ArtifactError):
    """Raised by a publisher when the memory definitely refused the reference."""


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ArtifactRef:
    """What other layers may hold about an artifact: identity, digest, summary; no body."""

    session_id: str
    filename: str
    summary: str
    sha256: str
    byte_size: int
    char_count: int
    created_at: str

    @property
    def source_id(self) -> str:
        return f"artifact:{self.session_id}:{self.filename}:{self.sha256[:12]}"

    def for_memory(self) -> dict[str, Any]:
        """The memory-facing form: never the body, never a path."""
        return {"source_id": self.source_id, "summary": self.summary, "sha256": self.sha256,
                "byte_size": self.byte_size, "created_at": self.created_at}


@dataclass(frozen=True)
class Externalized:
    """What goes into the context, and the artifact behind it (``None`` when inline)."""

    context_text: str
    artifact: ArtifactRef | None


def should_externalize(output: str, tool_name: str) -> bool:
    """Over the limit: bash counts characters, every other tool UTF-8 bytes."""
    if tool_name == "bash":
        return len(output) > BASH_MAX_CHARS
    return len(output.encode("utf-8")) > OTHER_MAX_BYTES


def count_lines(text: str) -> int:
    """A final newline ends the last line; it does not start another."""
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def pointer_text(ref: ArtifactRef, output: str, tool_name: str) -> str:
    """A header that names the artifact and its digest, then a bounded preview."""
    header = [f"[tool result externalized: {ref.byte_size:,} bytes, {count_lines(output):,}"
              " lines]", f"source: {ref.source_id}", f"summary: {ref.summary}",
              f"sha256: {ref.sha256}",
              "read more: read_artifact(source_id, offset=<line>, limit=<lines>)"]
    if tool_name == "bash":  # a build's verdict is usually at the end
        half = PREVIEW_CHARS // 2
        preview = ["--- head ---", output[:half], "--- tail ---", output[-half:]]
    else:
        preview = ["--- head ---", output[:PREVIEW_CHARS]]
    return "\n".join(header + preview + ["--- end of preview ---"])


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, one write on an O_APPEND descriptor, fsync before returning.

    A torn tail (bytes after the last newline, a crashed writer's) is cut off first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = path.read_bytes() if path.exists() else b""
    complete = data.rfind(b"\n") + 1
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if complete < len(data):
            os.ftruncate(fd, complete)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every complete line, parsed; a torn tail is ignored, a bad line is corruption."""
    data = path.read_bytes() if path.exists() else b""
    records = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        try:
            records.append(json.loads(line))
        except ValueError:
            raise LeaseCorruptionError(f"{path.name} line {number}: not valid JSON; the "
                                       "file was not changed") from None
    return records


def write_body(directory: Path, tool_name: str, body: bytes, sha256: str) -> str:
    """Create the body exclusively under a new name (never overwrite), fsync it."""
    directory.mkdir(parents=True, exist_ok=True)
    sequence = len(os.listdir(directory)) + 1
    while True:
        filename = f"{sequence:06d}-{tool_name}-{sha256[:12]}.txt"
        try:
            fd = os.open(directory / filename, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            sequence += 1
            continue
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        return filename


def externalize(session_dir: Path, output: str, tool_name: str, clock: Any) -> Externalized:
    """Small output stays inline; large output goes to a file behind a pointer.

    The manifest records the creation time from the clock, so ages never depend on a
    file's mtime."""
    if not should_externalize(output, tool_name):
        return Externalized(output, None)
    body = output.encode("utf-8")
    sha256 = hashlib.sha256(body).hexdigest()
    filename = write_body(session_dir / TOOL_RESULTS, tool_name, body, sha256)
    first = output.strip().split("\n", 1)[0][:120]
    ref = ArtifactRef(session_dir.name, filename, f"{tool_name} output, "
                      f"{count_lines(output):,} lines: {first}", sha256, len(body),
                      len(output), iso(clock.now()))
    append_line(session_dir / MANIFEST, vars(ref))
    return Externalized(pointer_text(ref, output, tool_name), ref)


def references(session_dir: Path) -> dict[str, ArtifactRef]:
    """Filename → the manifest's record of it."""
    return {r["filename"]: ArtifactRef(**r) for r in read_lines(session_dir / MANIFEST)}


def read_artifact(session_dir: Path, ref: ArtifactRef, offset: int = 0,
                  limit: int = 200) -> str:
    """Lines ``offset`` … ``offset + limit`` of a recorded artifact, digest re-checked."""
    recorded = references(session_dir).get(ref.filename)
    if recorded is None or recorded.sha256 != ref.sha256:
        raise ArtifactAccessError(f"{ref.filename}: no artifact with this digest here")
    path = session_dir / TOOL_RESULTS / ref.filename
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise ArtifactAccessError(f"{ref.filename}: not a regular file (symlink?)")
    except FileNotFoundError:
        raise ArtifactMissingError(f"{ref.source_id}: the body is gone") from None
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ArtifactIntegrityError(f"{ref.source_id}: the bytes do not match the digest")
    text = data.decode("utf-8")
    lines = text.split("\n")[:count_lines(text)]
    page = lines[offset:offset + limit]
    end = offset + len(page)
    more = f"next offset={end}" if end < len(lines) else "end"
    return f"[{ref.source_id} lines {offset}-{max(end - 1, offset)} of {len(lines)}; " \
           f"{more}]\n" + "\n".join(page)


PHASES = ("prepared", "committed", "aborted", "released")
TRANSITIONS = {None: ("prepared",), "prepared": ("committed", "aborted"),
               "committed": ("released",), "aborted": (), "released": ()}


@dataclass(frozen=True)
class Claim:
    """Transaction ``transaction_id`` wants to keep these exact bytes: no path, no body."""

    transaction_id: str
    source_id: str
    sha256: str

    @property
    def filename(self) -> str:
        return self.source_id.split(":")[2]


def claim_for(transaction_id: str, ref: ArtifactRef) -> Claim:
    return Claim(transaction_id, ref.source_id, ref.sha256)


@dataclass(frozen=True)
class Lease:
    """A claim and where it stands: the fold of its journal lines."""

    claim: Claim
    phase: str
    at: str

    @property
    def protects(self) -> bool:
        """Pending and committed leases keep their artifact; finished ones do not."""
        return self.phase in ("prepared", "committed")


def next_lease(current: "Lease | None", claim: Claim, phase: str, at: str) -> Lease:
    """The lease after one move, or a refusal; repeating the current phase is a no-op."""
    if current is not None and current.claim != claim:
        raise LeaseTransitionError(f"{claim.transaction_id}: already claims "
                                   f"{current.claim.source_id}; use a new transaction id")
    if current is not None and current.phase == phase:
        return current
    before = current.phase if current else None
    if phase not in TRANSITIONS[before]:
        raise LeaseTransitionError(f"{claim.transaction_id}: cannot go from {before} to "
                                   f"{phase}; allowed: {list(TRANSITIONS[before])}")
    return Lease(claim, phase, at)


class LeaseJournal:
    """One session's lease journal, ``leases.jsonl``: one line per move, folded on read."""

    def __init__(self, session_dir: Path, clock: Any = None) -> None:
        self.path = Path(session_dir) / JOURNAL
        self.clock = clock

    def leases(self) -> dict[str, Lease]:
        """Transaction id → its lease, folded from every complete line."""
        leases: dict[str, Lease] = {}
        for number, r in enumerate(read_lines(self.path), start=1):
            claim = Claim(r["transaction_id"], r["source_id"], r["sha256"])
            try:
                leases[claim.transaction_id] = next_lease(
                    leases.get(claim.transaction_id), claim, r["phase"], r["at"])
            except LeaseTransitionError as exc:
                raise LeaseCorruptionError(f"{JOURNAL} line {number}: {exc}") from None
        return leases

    def move(self, claim: Claim, phase: str) -> Lease:
        current = self.leases().get(claim.transaction_id)
        lease = next_lease(current, claim, phase, iso(self.clock.now()))
        if lease is not current:
            append_line(self.path, {**vars(claim), "phase": phase, "at": lease.at})
        return lease

    def prepare(self, claim: Claim) -> Lease:
        return self.move(claim, "prepared")

    def _known(self, transaction_id: str, phase: str) -> Lease:
        current = self.leases().get(transaction_id)
        if current is None:
            raise LeaseTransitionError(f"{transaction_id}: no lease to move to {phase}")
        return self.move(current.claim, phase)

    def commit(self, transaction_id: str) -> Lease:
        return self._known(transaction_id, "committed")

    def abort(self, transaction_id: str) -> Lease:
        return self._known(transaction_id, "aborted")

    def release(self, transaction_id: str) -> Lease:
        return self._known(transaction_id, "released")

    def publish_reference(self, claim: Claim, publisher: Any) -> Any:
        """Prepare durably, then run the memory write: a rejection aborts; any other
        failure leaves the lease prepared, protecting, because the outcome is unknown."""
        self.prepare(claim)
        try:
            result = publisher(claim)
        except PublicationRejected:
            self.abort(claim.transaction_id)
            raise
        self.commit(claim.transaction_id)
        return result


@dataclass(frozen=True)
class Facts:
    """What cleanup saw of one entry of ``tool-results/``, before judging it."""

    file_type: str  # "file", "symlink" or "other", from lstat
    recorded_sha256: str | None = None  # the manifest's digest for the name
    sha256: str | None = None  # the digest of the bytes now
    age: timedelta | None = None  # now minus the recorded creation time
    leases: tuple = ()  # (phase, claimed sha256) of every lease naming the file


@dataclass(frozen=True)
class Decision:
    filename: str
    action: str  # "delete", "retain" or "deny"
    reason: str


ACTIONS = {"symlink_denied": "deny", "orphan_expired": "delete"}  # every other: retain


def cleanup_reason(facts: Facts, orphan_ttl: timedelta) -> str:
    """The first rule that applies decides why a file stays or goes."""
    if facts.file_type == "symlink":
        return "symlink_denied"
    if facts.file_type != "file" or facts.recorded_sha256 is None:
        return "unknown_name"
    protecting = [digest for phase, digest in facts.leases
                  if phase in ("prepared", "committed")]
    if facts.sha256 != facts.recorded_sha256 or any(d != facts.sha256 for d in protecting):
        return "corrupt"
    if protecting:
        return "referenced"
    if facts.age is None or facts.age < orphan_ttl:
        return "recent"
    return "orphan_expired"


def gather_facts(directory: Path, name: str, record: "ArtifactRef | None",
                 leases: tuple, now: datetime) -> Facts:
    """Look, do not judge: lstat (never follow a link), hash, age from the record."""
    mode = os.lstat(directory / name).st_mode
    if stat.S_ISLNK(mode):
        return Facts("symlink")
    if not stat.S_ISREG(mode):
        return Facts("other")
    if record is None:
        return Facts("file")
    digest = hashlib.sha256((directory / name).read_bytes()).hexdigest()
    age = now - datetime.fromisoformat(record.created_at)
    return Facts("file", record.sha256, digest, age, leases)


def plan_cleanup(session_dir: Path, now: datetime, orphan_ttl: timedelta) -> list[Decision]:
    """One decision per entry of ``tool-results/``; changes nothing."""
    directory = session_dir / TOOL_RESULTS
    records = references(session_dir)
    by_file: dict[str, list] = {}
    for lease in LeaseJournal(session_dir).leases().values():
        by_file.setdefault(lease.claim.filename, []).append((lease.phase, lease.claim.sha256))
    plan = []
    for name in sorted(os.listdir(directory)) if directory.is_dir() else []:
        facts = gather_facts(directory, name, records.get(name),
                             tuple(by_file.get(name, ())), now)
        reason = cleanup_reason(facts, orphan_ttl)
        plan.append(Decision(name, ACTIONS.get(reason, "retain"), reason))
    return plan


def apply_cleanup(session_dir: Path, plan: list[Decision]) -> list[str]:
    """Delete what the plan said may go; a file already gone is skipped."""
    deleted = []
    for decision in plan:
        if decision.action == "delete":
            try:
                (session_dir / TOOL_RESULTS / decision.filename).unlink()
            except FileNotFoundError:
                continue
            deleted.append(decision.filename)
    return deleted
