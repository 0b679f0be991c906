# Generated from notebooks/s11_user_memory.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""User memory from scratch: keyed preferences as a revision log, one directory per user.

Written cell by cell in notebooks/s11_user_memory.ipynb. A change to a preference is one
fsync'd line of ``preferences.jsonl``; the current state is the fold of those lines, and
MEMORY.md is a projection of that state. Every user has a directory named by a digest of
their id, and every write reads, decides and appends under that directory's lock.
"""
import contextlib
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

CREATED, UPDATED, UNCHANGED, DELETED = "created", "updated", "unchanged", "deleted"
STALE = "stale"  # a decision only: a stale write is refused, so no write has this status


@dataclass(frozen=True)
class Preference:
    """One revision of one key. A tombstone (a delete) has no value and a ``deleted_at``."""

    key: str
    value: str | None
    revision: int
    updated_at: datetime
    expires_at: datetime | None = None
    source_event_id: str | None = None
    deleted_at: datetime | None = None

    @property
    def deleted(self) -> bool:
        return self.deleted_at is not None

    def is_active(self, as_of: datetime) -> bool:
        """Active while ``as_of < expires_at``: expired exactly *at* ``expires_at``."""
        return not self.deleted and (self.expires_at is None or as_of < self.expires_at)


@dataclass(frozen=True)
class PreferenceWrite:
    """What one set or delete did: its status and the key's value before and after."""

    status: str
    key: str
    previous_value: str | None
    current_value: str | None
    revision: int


class UserMemoryError(Exception):
    """Base of the errors this layer raises on purpose."""


class StaleWriteError(UserMemoryError):
    """A changing write is not later than the key's stored revision (a tombstone too)."""


class ScopeError(UserMemoryError):
    """A line of the log belongs to another user than the directory's owner."""


class CorruptLogError(UserMemoryError):
    """A complete line of the log cannot be read, or breaks the revision sequence."""


def scope_digest(user_id: str) -> str:
    """The name of a user's directory: stable for one id, and the id (an e-mail address,
    say) never becomes a file name."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError(f"user_id must be a non-blank string, got {user_id!r}")
    return hashlib.sha256(f"labmem-scope:v1:{user_id}".encode()).hexdigest()[:16]


def write_status(stored: Preference | None, value: str | None,
                 expires_at: datetime | None, source_event_id: str | None,
                 updated_at: datetime) -> str:
    """What one write (``value=None``: a delete) does to its key's ``stored`` revision.

    Same state first, so a retried event is unchanged whatever time it carries; only a
    write that changes something must be later than the stored revision.
    """
    if stored is not None:
        if value is None:
            same = stored.deleted
        else:
            same = (not stored.deleted and stored.value == value
                    and stored.expires_at == expires_at
                    and stored.source_event_id == source_event_id)
        if same:
            return UNCHANGED
        if updated_at <= stored.updated_at:
            return STALE
    if value is None:
        return DELETED
    return CREATED if stored is None or stored.deleted else UPDATED


def stamp(moment: datetime | None) -> str | None:
    """A UTC time as stored: ISO 8601 with a ``Z``."""
    if moment is None:
        return None
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def parse_stamp(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def encode_revision(pref: Preference, user_scope: str) -> bytes:
    """One revision as one line of the log; every line names the user it belongs to."""
    record = {"user_scope": user_scope, "key": pref.key, "value": pref.value,
              "revision": pref.revision, "updated_at": stamp(pref.updated_at),
              "expires_at": stamp(pref.expires_at), "source_event_id": pref.source_event_id,
              "deleted_at": stamp(pref.deleted_at)}
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def decode_revision(line: bytes, number: int, user_scope: str) -> Preference:
    """One complete line back into a revision; refuses another user's line by name."""
    try:
        record = json.loads(line)
        scope = record["user_scope"]
        pref = Preference(record["key"], record["value"], record["revision"],
                          parse_stamp(record["updated_at"]), parse_stamp(record["expires_at"]),
                          record["source_event_id"], parse_stamp(record["deleted_at"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptLogError(f"line {number}: not a revision ({exc})") from None
    if scope != user_scope:
        raise ScopeError(f"line {number}: belongs to user scope {scope!r}, not {user_scope!r}")
    return pref


def read_revisions(path: Path, user_scope: str) -> list[Preference]:
    """Every complete line of the log, in order. An unterminated last line is a write that
    died before its fsync returned: it never happened, so it is left out."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")[:-1]  # split on "\n" only; the piece after the last one is torn
    return [decode_revision(line, n, user_scope) for n, line in enumerate(lines, start=1)]


def append_revision(path: Path, line: bytes) -> None:
    """The commit of one change: cut a torn tail, append one line, fsync (and the directory,
    when the log is new)."""
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        if data and not data.endswith(b"\n"):
            os.ftruncate(fd, data.rfind(b"\n") + 1)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """Make a new or renamed directory entry durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fold(revisions: list[Preference]) -> dict[str, Preference]:
    """The state: each key's latest revision (tombstones included), replayed from the log.

    Each key's revisions must count 1, 2, 3 … in log order; a line that skips or repeats
    one is a lost or doubled write, refused with its line number.
    """
    state: dict[str, Preference] = {}
    for number, pref in enumerate(revisions, start=1):
        old = state.get(pref.key)
        expected = 1 if old is None else old.revision + 1
        if pref.revision != expected:
            raise CorruptLogError(f"line {number}: revision {pref.revision} of {pref.key!r} "
                                  f"where {expected} was expected")
        state[pref.key] = pref
    return state


def render_memory_md(user_scope: str, state: dict[str, Preference], as_of: datetime) -> str:
    """MEMORY.md: the preferences active at ``as_of``, by key. A view, never read back."""
    lines = [f"- {p.key}: {p.value} (revision {p.revision})"
             for p in sorted(state.values(), key=lambda p: p.key) if p.is_active(as_of)]
    return (f"# User memory\n\n<!-- user_scope: {user_scope}; as_of: {stamp(as_of)} -->\n\n"
            "## Preferences\n\n" + "\n".join(lines or ["- (none active)"]) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` whole: a temp file beside it, fsync, rename, fsync the directory.
    A crash leaves the old file or the new one, never half of one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # one per writing process
    with open(temp, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temp, path)
    sync_directory(path.parent)


class UTCClock:
    """The wall clock, for when no other clock is given."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class UserMemory:
    """One user's preferences under a shared ``root``: ``root/users/<scope digest>/``."""

    def __init__(self, root: str | os.PathLike, *, user_id: str, clock=None) -> None:
        self.user_scope = scope_digest(user_id)
        self.directory = Path(root) / "users" / self.user_scope
        self.log_path = self.directory / "preferences.jsonl"
        self.memory_md_path = self.directory / "MEMORY.md"
        self.clock = clock or UTCClock()

    @contextlib.contextmanager
    def locked(self):
        """The user's cross-process lock: ``flock`` on ``user.lock``, held by the open file,
        so two objects in one process exclude each other as two processes do."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "user.lock", "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def preferences(self) -> dict[str, Preference]:
        """The current state, folded from the log on disk (read again on every call)."""
        return fold(read_revisions(self.log_path, self.user_scope))

    def get_preference(self, key: str) -> Preference | None:
        return self.preferences().get(key)

    def list_preferences(self) -> list[Preference]:
        """Every stored key that is not deleted, by key (expired ones included)."""
        return sorted((p for p in self.preferences().values() if not p.deleted),
                      key=lambda p: p.key)

    def list_active_preferences(self, as_of: datetime) -> list[Preference]:
        return [p for p in self.list_preferences() if p.is_active(as_of)]

    def set_preference(self, key: str, value: str, *, expires_at: datetime | None = None,
                       source_event_id: str | None = None,
                       updated_at: datetime | None = None) -> PreferenceWrite:
        if not isinstance(value, str):
            raise TypeError(f"value must be a string, got {type(value).__name__}")
        return self.write(key, value, expires_at, source_event_id,
                          updated_at or self.clock.now())

    def delete_preference(self, key: str, *,
                          deleted_at: datetime | None = None) -> PreferenceWrite:
        """Store a tombstone: a delete is a revision, so an older write stays refused."""
        return self.write(key, None, None, None, deleted_at or self.clock.now())

    def write(self, key: str, value: str | None, expires_at: datetime | None,
              source_event_id: str | None, at: datetime) -> PreferenceWrite:
        """Read-modify-write under the lock: read the log, decide, append one line."""
        with self.locked():
            state = self.preferences()
            old = state.get(key)
            status = write_status(old, value, expires_at, source_event_id, at)
            if status == STALE:
                raise StaleWriteError(f"updated_at {stamp(at)} is not later than revision "
                                      f"{old.revision} of {key!r} at {stamp(old.updated_at)}")
            previous = None if old is None else old.value
            if status == UNCHANGED:
                return PreferenceWrite(status, key, previous, previous, old.revision)
            new = Preference(key, value, 1 if old is None else old.revision + 1, at,
                             expires_at, source_event_id, at if value is None else None)
            append_revision(self.log_path, encode_revision(new, self.user_scope))
            state[key] = new
            write_atomically(self.memory_md_path,
                             render_memory_md(self.user_scope, state, self.clock.now()))
        return PreferenceWrite(status, key, previous, value, new.revision)

    def refresh_memory_md(self, as_of: datetime) -> Path:
        """Project MEMORY.md again (expiry happens without any write)."""
        with self.locked():
            write_atomically(self.memory_md_path,
                             render_memory_md(self.user_scope, self.preferences(), as_of))
        return self.memory_md_path
