"""s12 remote store: scope, validation, duplicates across processes, crash tails, cost."""

import multiprocessing
from datetime import datetime

import pytest
import workers

from labmem.clock import FixedClock, SteppingClock
from labmem.errors import LabmemError
from labmem.provenance import MemorySource, scope_digest
from labmem.remote import (
    MemoryKind,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStore,
    RemoteMemoryValidationError,
)

SOURCE = MemorySource("transcript-42", "conversation_transcript", "Persistence decision",
                      "2026-08-01T12:00:00Z")


def make_store(path, user="alice", clock=None):
    return RemoteMemoryStore(path, user_id=user,
                             clock=clock or SteppingClock("2026-08-02T00:00:00Z"))


def add(store, memory_id=None, content="Selected SQLite WAL.", kind=MemoryKind.CONVERSATION,
        summary="sqlite", source=SOURCE):
    return store.append(kind=kind, content=content, summary=summary, source=source,
                        memory_id=memory_id)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "records.jsonl"


def test_errors_share_the_labmem_base():
    for error in (RemoteMemoryValidationError, RemoteMemoryDuplicateError,
                  RemoteMemoryScopeError, RemoteMemoryCorruptionError):
        assert issubclass(error, RemoteMemoryError) and issubclass(error, LabmemError)


def test_append_writes_scope_and_both_times(path):
    store = make_store(path)
    record = add(store, "memory-42")
    assert record.user_scope == scope_digest("alice")
    assert record.stored_at == datetime.fromisoformat("2026-08-02T00:00:00+00:00")
    assert record.source.captured_at == datetime.fromisoformat("2026-08-01T12:00:00+00:00")
    line = path.read_text(encoding="utf-8")
    assert f'"user_scope":"{scope_digest("alice")}"' in line
    assert '"stored_at":"2026-08-02T00:00:00Z"' in line
    assert '"captured_at":"2026-08-01T12:00:00Z"' in line


def test_fresh_instance_reads_back_exactly(path):
    store = make_store(path)
    written = [add(store, f"m-{i}", content=f"content {i} 记忆") for i in range(5)]
    written.append(add(store, kind="profile", content="likes tea", summary=""))
    fresh = make_store(path)
    assert fresh.read_all() == tuple(written)
    assert fresh.get("m-3") == written[3]
    assert fresh.get("nope") is None


def test_derived_id_makes_a_retry_a_duplicate(path):
    store = make_store(path)
    first = add(store)
    assert first.memory_id.startswith("conversation-")
    with pytest.raises(RemoteMemoryDuplicateError, match=first.memory_id):
        add(store)
    assert add(store, content="other content").memory_id != first.memory_id
    assert len(make_store(path).read_all()) == 2


def test_duplicate_explicit_id_is_refused_and_nothing_changes(path):
    store = make_store(path)
    add(store, "memory-42")
    before = path.read_bytes()
    with pytest.raises(RemoteMemoryDuplicateError):
        add(make_store(path), "memory-42", content="different")
    assert path.read_bytes() == before


@pytest.mark.parametrize("kwargs, field", [
    ({"content": "  "}, "content"),
    ({"content": "x" * 20_001}, "content"),
    ({"content": 42}, "content"),
    ({"summary": "s" * 2_001}, "summary"),
    ({"kind": "diary"}, "kind"),
    ({"memory_id": "has space"}, "memory_id"),
    ({"memory_id": ""}, "memory_id"),
    ({"source": {"source_id": " ", "source_type": "t", "title": "x",
                 "captured_at": "2026-08-01T00:00:00Z"}}, "source.source_id"),
    ({"source": {"source_id": "s", "source_type": "", "title": "x",
                 "captured_at": "2026-08-01T00:00:00Z"}}, "source.source_type"),
    ({"source": {"source_id": "s", "source_type": "t", "title": " ",
                 "captured_at": "2026-08-01T00:00:00Z"}}, "source.title"),
    ({"source": {"source_id": "s", "source_type": "t", "title": "x",
                 "captured_at": "2026-08-01T00:00:00"}}, "source.captured_at"),
    ({"source": "transcript-42"}, "source"),
])
def test_invalid_input_is_refused_before_writing(path, kwargs, field):
    store = make_store(path)
    args = {"kind": MemoryKind.CONVERSATION, "content": "c", "summary": "s",
            "source": SOURCE, "memory_id": None, **kwargs}
    with pytest.raises(RemoteMemoryValidationError) as err:
        store.append(**args)
    assert err.value.field == field
    assert not path.exists()


def test_limits_are_inclusive(path):
    add(make_store(path), "m-1", content="x" * 20_000, summary="s" * 2_000)


def test_blank_user_id_is_refused(path):
    with pytest.raises(RemoteMemoryValidationError, match="user_id"):
        RemoteMemoryStore(path, user_id=" ")


def test_other_scope_is_refused_on_every_read_path(path):
    add(make_store(path, "alice"), "m-1")
    bob = make_store(path, "bob")
    for read in (bob.read_all, lambda: bob.get("m-1"), bob.latest_profile, len,
                 lambda: add(bob, "m-2")):
        with pytest.raises(RemoteMemoryScopeError, match="line 1"):
            read(bob) if read is len else read()
    assert len(make_store(path, "alice").read_all()) == 1


def test_torn_tail_is_ignored_then_repaired(path):
    store = make_store(path)
    add(store, "m-1")
    add(store, "m-2")
    with open(path, "ab") as handle:
        handle.write(b'{"memory_id":"m-3","user_sc')
    fresh = make_store(path)
    assert [r.memory_id for r in fresh.read_all()] == ["m-1", "m-2"]
    add(fresh, "m-4")
    assert [r.memory_id for r in make_store(path).read_all()] == ["m-1", "m-2", "m-4"]
    assert path.read_bytes().endswith(b"\n") and path.read_bytes().count(b"\n") == 3


@pytest.mark.parametrize("bad", [
    b"not json",
    b'{"memory_id": "m-9"}',
    b'{"memory_id":"m-1","user_scope":"SCOPE","kind":"conversation","content":"c",'
    b'"summary":"","source":{"source_id":"s","source_type":"t","title":"x",'
    b'"captured_at":"2026-08-01T00:00:00Z"},"stored_at":"2026-08-01T00:00:00Z"}',
])
def test_complete_bad_line_raises_corruption_with_line_number(path, bad):
    store = make_store(path)
    add(store, "m-1")
    with open(path, "ab") as handle:
        handle.write(bad.replace(b"SCOPE", store.user_scope.encode()) + b"\n")
    fresh = make_store(path)
    with pytest.raises(RemoteMemoryCorruptionError, match="line 2"):
        fresh.read_all()
    with pytest.raises(RemoteMemoryCorruptionError, match="line 2"):
        fresh.get("m-1")


def test_latest_profile_by_captured_at_then_id(path):
    store = make_store(path)
    assert store.latest_profile() is None

    def profile(memory_id, at):
        return add(store, memory_id, kind="profile", content=f"profile {memory_id}",
                   source=MemorySource(f"snap-{memory_id}", "profile_snapshot", "p", at))

    profile("profile-b", "2026-07-01T00:00:00Z")
    newest = profile("profile-a", "2026-07-05T00:00:00Z")
    profile("profile-c", "2026-06-01T00:00:00Z")  # stored later, captured earlier
    assert store.latest_profile() == newest
    tie = profile("profile-z", "2026-07-05T00:00:00Z")
    assert make_store(path).latest_profile() == tie


def test_appends_do_not_reread_the_store(path):
    """Per-append bytes read is 0 whatever the size; only another writer's bytes are read."""
    store = make_store(path, clock=FixedClock("2026-08-02T00:00:00Z"))
    for i in range(300):
        add(store, f"m-{i}")
    fresh = make_store(path)
    fresh.read_all()
    assert fresh.bytes_read == path.stat().st_size  # the index is built once
    per_append = []
    for i in range(300, 400):
        before = fresh.bytes_read
        add(fresh, f"m-{i}")
        per_append.append(fresh.bytes_read - before)
    assert per_append == [0] * 100
    other = make_store(path)
    other.read_all()
    size = path.stat().st_size
    add(other, "from-other")
    other_bytes = path.stat().st_size - size
    before = fresh.bytes_read
    add(fresh, "m-after")
    assert fresh.bytes_read - before == other_bytes
    assert fresh.get("from-other") is not None


def race(path, writers, *, noop_lock):
    ctx = multiprocessing.get_context("spawn")
    start, pause, results = ctx.Barrier(writers), ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=workers.append_same_id,
                         args=(str(path), start, pause, noop_lock, results))
             for _ in range(writers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    outcomes = sorted(results.get(timeout=5) for _ in procs)
    lines = [line for line in path.read_bytes().split(b"\n") if line]
    return outcomes, lines


WRITERS = 4


def test_concurrent_duplicate_appends_store_exactly_one(path):
    outcomes, lines = race(path, WRITERS, noop_lock=False)
    assert outcomes == ["duplicate"] * (WRITERS - 1) + ["stored"]
    assert len(lines) == 1
    assert make_store(path).get("memory-42") is not None


def test_the_same_race_breaks_without_the_lock(path):
    """The control experiment: the same race with the lock replaced by a no-op.

    Every writer now passes the duplicate check before anyone writes, so nobody gets
    the RemoteMemoryDuplicateError the contract promises. (The log's last-moment
    "not caught up" guard refuses most late writers, but it is no substitute for the
    lock: nothing stops two writers that pass it together from both writing.)
    """
    outcomes, lines = race(path, WRITERS, noop_lock=True)
    assert outcomes != ["duplicate"] * (WRITERS - 1) + ["stored"]
    assert "duplicate" not in outcomes
    assert outcomes.count("stored") >= 1 and len(lines) == outcomes.count("stored")
