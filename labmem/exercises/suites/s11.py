"""The s11 contract suite: what a user memory promises, tried on any implementation.

Three implementations keep these promises: the chapter's from-scratch module
(:mod:`labmem.scratch.s11`), the production layer (:class:`labmem.user.UserMemory`, which
adds a profile, a compacted snapshot, a cached state and validation) and the learner's layer
(the from-scratch module with the learner's pieces in it). Each is reached through a
:class:`Layer`: how to open one user's memory, and which errors it raises on purpose.
Every contract works in a fresh temporary directory and tries its smallest case first.
"""

from __future__ import annotations

import fcntl
import shutil
import tempfile
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from labmem.core.clock import FixedClock, parse_timestamp
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, expect

T0 = parse_timestamp("2026-08-01T00:00:00Z", field="T0")
#: How long a write must stay blocked while the contract holds the user's lock.
LOCK_WAIT_SECONDS = 0.4


def _expect(case: str, got: Any, want: Any) -> None:
    expect(case, got, want, show=repr)


def hour(h: float) -> datetime:
    """``h`` hours after 2026-08-01T00:00Z: the times every contract uses."""
    return T0 + timedelta(hours=h)


@dataclass(frozen=True)
class Layer:
    """One implementation of user memory, as the contracts see it.

    ``open(root, user_id, clock)`` gives one user's memory, with ``set_preference``,
    ``delete_preference``, ``get_preference``, ``list_preferences``,
    ``list_active_preferences(as_of)``, ``refresh_memory_md(as_of)``, ``directory`` and
    ``memory_md_path``; ``log_path(memory)`` is its revision log.
    """

    name: str
    open: Callable[[Path, str, Any], Any]
    log_path: Callable[[Any], Path]
    stale_error: type[Exception]
    scope_error: type[Exception]
    corrupt_error: type[Exception]


def layer_of(module: types.ModuleType, name: str = "from-scratch") -> Layer:
    """The :class:`Layer` of the from-scratch module, or of a learner's copy of it."""
    return Layer(name=name,
                 open=lambda root, user_id, clock: module.UserMemory(root, user_id=user_id,
                                                                     clock=clock),
                 log_path=lambda memory: memory.log_path,
                 stale_error=module.StaleWriteError, scope_error=module.ScopeError,
                 corrupt_error=module.CorruptLogError)


def _production() -> Layer:
    from labmem.user import (
        StalePreferenceUpdateError,
        UserMemory,
        UserMemoryCorruptionError,
        UserScopeError,
    )
    return Layer(name="production",
                 open=lambda root, user_id, clock: UserMemory(root, user_id=user_id,
                                                              clock=clock),
                 log_path=lambda memory: memory.preference_log_path,
                 stale_error=StalePreferenceUpdateError, scope_error=UserScopeError,
                 corrupt_error=UserMemoryCorruptionError)


# -- helpers ----------------------------------------------------------------------------

class _Workspace:
    """A fresh root for one case; ``open(user)`` gives that user's memory on it."""

    def __init__(self, layer: Layer) -> None:
        self.layer = layer
        self._dir = tempfile.TemporaryDirectory(prefix="labmem-s11-contract-")
        self.root = Path(self._dir.name)

    def open(self, user_id: str = "alice", at: datetime = T0) -> Any:
        return self.layer.open(self.root, user_id, FixedClock(at))

    def __enter__(self) -> _Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self._dir.cleanup()


def _files(memory: Any) -> dict[str, bytes]:
    """Every file of the user's directory, name → bytes (the lock file's content is empty)."""
    return {p.name: p.read_bytes() for p in sorted(Path(memory.directory).iterdir())
            if p.is_file()}


def _summary(write: Any) -> tuple[str, Any, Any, int]:
    return (write.status, write.previous_value, write.current_value, write.revision)


def _written(layer: Layer, case: str, call: Callable[[], Any]) -> tuple[str, Any, Any, int]:
    """The summary of a write that must succeed; a refusal names the case it refused."""
    try:
        return _summary(call())
    except Exception as exc:
        if any(_is(exc, error) for error in (layer.stale_error, layer.scope_error,
                                             layer.corrupt_error)):
            raise ContractBroken(f"smallest case: {case} — refused with "
                                 f"{type(exc).__name__}: {exc}") from None
        raise


def _stored(memory: Any, key: str) -> tuple[Any, int, str] | None:
    """The key's stored value, revision and ``updated_at`` (as hh:mm of 2026-08-01)."""
    pref = memory.get_preference(key)
    return None if pref is None else (pref.value, pref.revision, _hhmm(pref.updated_at))


def _hhmm(moment: datetime) -> str:
    return f"{(moment - T0) // timedelta(hours=1):02d}:00"


def _is(exc: BaseException, error: type[Exception]) -> bool:
    """Is ``exc`` an ``error``? Matched by class name too: a learner's pieces, written in a
    notebook, raise the notebook's own copy of the from-scratch module's classes."""
    return any(c is error or c.__name__ == error.__name__ for c in type(exc).__mro__)


def _refused(layer: Layer, case: str, error: type[Exception], call: Callable[[], Any]) -> None:
    try:
        got = call()
    except Exception as exc:
        if not _is(exc, error):
            raise
        return
    raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, got {got!r}")


# -- the contracts, in the order the chapter builds them --------------------------------

def _scoped_directory(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        user = "alice@example.com"
        first, again, bob = ws.open(user), ws.open(user), ws.open("bob")
        where = Path(first.directory)
        _expect("the same user id opened twice", Path(again.directory), where)
        _expect(f"the directory of {user!r} lies under", where.parent, ws.root / "users")
        if user in str(where) or "alice" in where.name:
            raise ContractBroken(f"smallest case: {user!r} — the directory {where.name!r} "
                                 "shows the id; name it by a digest")
        if Path(bob.directory) == where:
            raise ContractBroken("smallest case: 'alice@example.com' and 'bob' — one "
                                 "directory for two users")


def _first_set_created(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        write = ws.open().set_preference("theme", "dark", updated_at=hour(1))
        _expect("set 'theme'='dark' on nothing stored", _summary(write),
                ("created", None, "dark", 1))
        _expect("a fresh object reads 'theme' after that set", _stored(ws.open(), "theme"),
                ("dark", 1, "01:00"))


def _repeat_unchanged(layer: Layer) -> None:
    for later in (0, 2, -1):  # the same instant, a later retry, an earlier one
        with _Workspace(layer) as ws:
            memory = ws.open()
            memory.set_preference("theme", "dark", source_event_id="evt-1", updated_at=hour(1))
            before = _files(memory)
            case = (f"'dark' (evt-1) at 01:00, then the same again at "
                    f"{1 + later:02d}:00")
            retry_at = hour(1 + later)
            write = _written(layer, case, lambda m=memory, t=retry_at: m.set_preference(
                "theme", "dark", source_event_id="evt-1", updated_at=t))
            _expect(case, write, ("unchanged", "dark", "dark", 1))
            _expect(case + " (stored value, revision, updated_at)", _stored(memory, "theme"),
                    ("dark", 1, "01:00"))
            if _files(memory) != before:
                raise ContractBroken(f"smallest case: {case} — it wrote to a file")


def _later_change_updated(layer: Layer) -> None:
    changes = [("a new value", dict(value="light")),
               ("a new expiry only", dict(value="dark", expires_at=hour(9))),
               ("a new source only", dict(value="dark", source_event_id="evt-2"))]
    for what, change in changes:
        with _Workspace(layer) as ws:
            memory = ws.open()
            memory.set_preference("theme", "dark", updated_at=hour(1))
            case = f"'dark' at 01:00, then {what} at 02:00"
            write = _written(layer, case, lambda m=memory, c=change: m.set_preference(
                "theme", **c, updated_at=hour(2)))
            _expect(case, write, ("updated", "dark", change["value"], 2))
            _expect(case + " (read by a fresh object)", _stored(ws.open(), "theme"),
                    (change["value"], 2, "02:00"))


def _not_later_stale(layer: Layer) -> None:
    for at in (hour(1), hour(0)):  # the same instant first: "later" means strictly later
        with _Workspace(layer) as ws:
            memory = ws.open()
            memory.set_preference("theme", "dark", updated_at=hour(1))
            before = _files(memory)
            case = f"'dark' at 01:00, then 'light' at {at:%H}:00"
            _refused(layer, case, layer.stale_error,
                     lambda m=memory, t=at: m.set_preference("theme", "light", updated_at=t))
            _expect(case + " (stored after the refusal)", _stored(memory, "theme"),
                    ("dark", 1, "01:00"))
            if _files(memory) != before:
                raise ContractBroken(f"smallest case: {case} — the refused write wrote "
                                     "to a file")


def _tombstone_refuses_older(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        memory = ws.open()
        memory.set_preference("theme", "dark", updated_at=hour(1))
        case = "'dark' at 01:00, then delete at 03:00"
        write = _written(layer, case,
                         lambda: memory.delete_preference("theme", deleted_at=hour(3)))
        _expect(case, write, ("deleted", "dark", None, 2))
        _expect(case + " (listed keys)", [p.key for p in memory.list_preferences()], [])
        stored = memory.get_preference("theme")
        _expect(case + " (stored: a tombstone)",
                None if stored is None else (stored.value, stored.revision, stored.deleted),
                (None, 2, True))
        case += ", then 'light' at 02:00"
        _refused(layer, case, layer.stale_error,
                 lambda: memory.set_preference("theme", "light", updated_at=hour(2)))


def _after_tombstone(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        memory = ws.open()
        memory.set_preference("theme", "dark", updated_at=hour(1))
        memory.delete_preference("theme", deleted_at=hour(3))
        case = "'dark' at 01:00, delete at 03:00, delete again at 04:00"
        write = _written(layer, case,
                         lambda: memory.delete_preference("theme", deleted_at=hour(4)))
        _expect(case, write, ("unchanged", None, None, 2))
        case = "'dark' at 01:00, delete at 03:00, then 'light' at 05:00"
        write = _written(layer, case,
                         lambda: memory.set_preference("theme", "light", updated_at=hour(5)))
        _expect(case, write, ("created", None, "light", 3))


def _expiry_boundary(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        memory = ws.open()
        memory.set_preference("trip.city", "Lisbon", updated_at=hour(1), expires_at=hour(5))
        memory.set_preference("reply.language", "English", updated_at=hour(1))
        for at, want in ((4, ["reply.language", "trip.city"]), (5, ["reply.language"]),
                         (6, ["reply.language"])):
            _expect(f"'trip.city' expires at 05:00; active keys at {at:02d}:00",
                    [p.key for p in memory.list_active_preferences(hour(at))], want)
        _expect("an expired key is still stored (listed keys)",
                [p.key for p in memory.list_preferences()], ["reply.language", "trip.city"])


def _memory_md(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        memory = ws.open()
        memory.set_preference("theme", "dark", updated_at=hour(1))
        text = Path(memory.memory_md_path).read_text(encoding="utf-8")
        if "- theme: dark (revision 1" not in text:
            raise ContractBroken("smallest case: one set of 'theme'='dark' — MEMORY.md "
                                 "has no line '- theme: dark (revision 1…'")
        memory.set_preference("answer.length", "short", updated_at=hour(2),
                              expires_at=hour(6))
        memory.set_preference("old.key", "gone", updated_at=hour(2))
        memory.delete_preference("old.key", deleted_at=hour(3))
        memory.set_preference("language", "English", updated_at=hour(4))
        text = Path(memory.refresh_memory_md(hour(7))).read_text(encoding="utf-8")
        case = ("'theme', 'language', 'answer.length' (expires 06:00) and 'old.key' "
                "(deleted), refreshed at 07:00")
        shown = [key for key in ("answer.length", "language", "old.key", "theme")
                 if f"- {key}: " in text]
        _expect(case + " (keys in MEMORY.md)", shown, ["language", "theme"])
        _expect(case + " (order)", text.index("- language: ") < text.index("- theme: "), True)


def _reads_again(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        one, two = ws.open(), ws.open()
        one.set_preference("a.from.one", "1", updated_at=hour(1))
        two.set_preference("b.from.two", "2", updated_at=hour(1))
        one.set_preference("c.from.one", "3", updated_at=hour(2))
        _expect("two objects for one user write three keys in turn (keys read afresh)",
                [p.key for p in ws.open().list_preferences()],
                ["a.from.one", "b.from.two", "c.from.one"])
        write = two.set_preference("a.from.one", "1", updated_at=hour(3))
        _expect("the second object repeats the first one's write", _summary(write),
                ("unchanged", "1", "1", 1))


def _locked_read_modify_write(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        first = ws.open()
        first.set_preference("theme", "sepia", updated_at=hour(1))
        lock_path = Path(first.directory) / "user.lock"
        outcomes: dict[str, Any] = {}

        def write(name: str, value: str, at: int) -> None:
            try:
                outcomes[name] = ws.open().set_preference("theme", value,
                                                          updated_at=hour(at)).status
            except Exception as exc:  # a stale refusal is a fine outcome here
                outcomes[name] = type(exc).__name__

        with open(lock_path, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            writers = [threading.Thread(target=write, args=("light", "light", 3)),
                       threading.Thread(target=write, args=("dark", "dark", 2))]
            for thread in writers:
                thread.start()
            time.sleep(LOCK_WAIT_SECONDS)
            done = [name for thread, name in zip(writers, ("light", "dark"), strict=True)
                    if not thread.is_alive()]
            fcntl.flock(held, fcntl.LOCK_UN)
        for thread in writers:
            thread.join(timeout=30)
        if done:
            raise ContractBroken(f"smallest case: another process holds user.lock — the "
                                 f"write of {done[0]!r} finished without waiting for it")
        case = ("'sepia' at 01:00; while another process holds user.lock, 'light' at 03:00 "
                "and 'dark' at 02:00 wait, then run")
        try:
            final = ws.open().get_preference("theme")
        except Exception as exc:
            if not _is(exc, layer.corrupt_error):
                raise
            raise ContractBroken(f"smallest case: {case} — the log no longer reads: "
                                 f"{exc}") from None
        _expect(case + " (the value read afterwards)", None if final is None else final.value,
                "light")


def _foreign_files_refused(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        alice = ws.open("alice")
        alice.set_preference("theme", "dark", updated_at=hour(1))
        alice.set_preference("theme", "light", updated_at=hour(2))
        bob = ws.open("bob")
        Path(bob.directory).mkdir(parents=True)
        for name in _files(alice):
            if name not in ("user.lock", "MEMORY.md"):
                shutil.copy(Path(alice.directory) / name, Path(bob.directory) / name)
        case = "alice's files copied into bob's directory, then bob"
        _refused(layer, case + " lists his preferences", layer.scope_error,
                 bob.list_preferences)
        _refused(layer, case + " sets 'theme'", layer.scope_error,
                 lambda: bob.set_preference("theme", "sepia", updated_at=hour(3)))


def _torn_tail(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        memory = ws.open()
        memory.set_preference("theme", "dark", updated_at=hour(1))
        memory.set_preference("theme", "light", updated_at=hour(2))
        log = layer.log_path(memory)
        with open(log, "ab") as file:
            file.write(b'{"user_scope": "half a line')
        case = "'dark', 'light', then half a line at the end of the log"
        _expect(case + " (read)", _stored(ws.open(), "theme"), ("light", 2, "02:00"))
        write = ws.open().set_preference("theme", "sepia", updated_at=hour(3))
        _expect(case + ", then 'sepia' at 03:00", _summary(write),
                ("updated", "light", "sepia", 3))
        _expect(case + ", then 'sepia' at 03:00 (read by a fresh object)",
                _stored(ws.open(), "theme"), ("sepia", 3, "03:00"))


def _doubled_line_refused(layer: Layer) -> None:
    with _Workspace(layer) as ws:
        memory = ws.open()
        memory.set_preference("theme", "dark", updated_at=hour(1))
        memory.set_preference("theme", "light", updated_at=hour(2))
        log = layer.log_path(memory)
        lines = log.read_bytes().split(b"\n")[:-1]
        with open(log, "ab") as file:
            file.write(lines[-1] + b"\n")
        doubled = len(lines) + 1
        case = "'dark', 'light', then the last line of the log written twice"
        try:
            got = ws.open().get_preference("theme")
        except Exception as exc:
            if not _is(exc, layer.corrupt_error):
                raise
            if f"line {doubled}" not in str(exc):
                raise ContractBroken(f"smallest case: {case} — the error should name line "
                                     f"{doubled}, the doubled one: {exc}") from None
            return
        raise ContractBroken(f"smallest case: {case} — expected {layer.corrupt_error.__name__}"
                             f", got {got!r}")


SUITE = ContractSuite(N_("user memory"), (
    Contract(N_("a user's directory is named by a digest of the user id, never the id"),
             _scoped_directory),
    Contract(N_("the first set of a key is created at revision 1, and a fresh reader sees it"),
             _first_set_created),
    Contract(N_("a repeat of the stored state is unchanged and writes nothing, whatever its "
                "time"), _repeat_unchanged),
    Contract(N_("a change later than the stored revision is updated at the next revision"),
             _later_change_updated),
    Contract(N_("a change not later than the stored revision is refused as stale"),
             _not_later_stale),
    Contract(N_("a delete leaves a tombstone that refuses an older write"),
             _tombstone_refuses_older),
    Contract(N_("after a tombstone a delete is unchanged and a set re-creates the key"),
             _after_tombstone),
    Contract(N_("a preference is active while as_of < expires_at"), _expiry_boundary),
    Contract(N_("MEMORY.md shows the active preferences by key, and no deleted or expired one"),
             _memory_md),
    Contract(N_("every write reads the log again, so two objects for one user lose nothing"),
             _reads_again),
    Contract(N_("a write takes the user's lock before it reads, so queued writers lose nothing"),
             _locked_read_modify_write),
    Contract(N_("another user's files copied into a directory are refused"),
             _foreign_files_refused),
    Contract(N_("a torn last line is left out on read and cut before the next append"),
             _torn_tail),
    Contract(N_("a doubled line in the log is refused with its line number"),
             _doubled_line_refused),
))


def _scratch() -> Layer:
    from labmem.scratch import s11
    return layer_of(s11)


SCRATCH = _scratch()
PRODUCTION = _production()
