"""s12 remote store contract, run against every backend (JSONL file, SQLite, PostgreSQL).

Tests that take the ``make_store`` fixture run once per backend ("jsonl", "postgres",
"sqlite"; the PostgreSQL runs use a real server started by the tests, and are skipped
without its binaries). Tests that take ``path`` and call :func:`jsonl_store` are about the
JSONL file itself (its lines, torn tails, bytes read, the file lock). SQLite-only
behaviour is tested in ``test_sqlite_store.py``, PostgreSQL-only in ``tests/postgres``.
"""

import itertools
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock, SteppingClock
from labmem.core.errors import LabmemError
from labmem.core.provenance import MemorySource, scope_digest
from labmem.recall.sqlite_store import SqliteMemoryStore
from labmem.recall.store import (
    MemoryKind,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStore,
    RemoteMemoryValidationError,
)
from tests.postgres.cluster import SHARED_DATABASE, pg_admin_url, pg_server, pg_url  # noqa: F401
from tests.procs import run_processes
from tests.recall import workers

SOURCE = MemorySource("transcript-42", "conversation_transcript", "Persistence decision",
                      "2026-08-01T12:00:00Z")
START = "2026-08-02T00:00:00Z"
BACKENDS = {"jsonl": (RemoteMemoryStore, "records.jsonl"),
            "sqlite": (SqliteMemoryStore, "records.sqlite3")}
#: Every backend the contract runs on: the two file backends and the database server.
ALL_BACKENDS = (*sorted(BACKENDS), "postgres")
_fresh_users = itertools.count(1)


def open_store(request, backend, folder, user="alice", clock=None):
    """A store of ``backend``: on its file in ``folder`` (the file backends; a path to a
    file is taken as it is), or on the shared test database (PostgreSQL)."""
    clock = clock or SteppingClock(START)
    if backend == "postgres":
        from labmem.recall.postgres import PostgresMemoryStore

        return PostgresMemoryStore(request.getfixturevalue("pg_url"), user_id=user,
                                   clock=clock)
    cls, name = BACKENDS[backend]
    return cls(folder if folder.suffix else folder / name, user_id=user, clock=clock)


def name_of(store):
    """What a store's messages call it: its file's name, or its database's."""
    return store.path.name if hasattr(store, "path") else store.name


def jsonl_store(path, user="alice", clock=None):
    return RemoteMemoryStore(path, user_id=user, clock=clock or SteppingClock(START))


def add(store, memory_id=None, content="Selected SQLite WAL.", kind=MemoryKind.CONVERSATION,
        summary="sqlite", source=SOURCE):
    return store.append(kind=kind, content=content, summary=summary, source=source,
                        memory_id=memory_id)


def draft(memory_id=None, content="Selected SQLite WAL.", kind="conversation", **extra):
    return {"kind": kind, "content": content, "summary": "sqlite", "source": SOURCE,
            "memory_id": memory_id, **extra}


@pytest.fixture
def path(tmp_path):
    return tmp_path / "records.jsonl"


@pytest.fixture(params=ALL_BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def store_path(tmp_path, backend):
    """The store's file; for PostgreSQL a path named after the database, never created
    (so "nothing was written to disk here" holds for every backend)."""
    return tmp_path / (SHARED_DATABASE if backend == "postgres" else BACKENDS[backend][1])


@pytest.fixture
def make_store(request, backend, store_path):
    """``make_store(user="alice", clock=None)``: a new store instance of this test's
    backend on this test's file or database (a fresh instance reads everything back)."""
    made = []

    def factory(user="alice", clock=None):
        store = open_store(request, backend, store_path, user, clock)
        made.append(store)
        return store

    yield factory
    for store in made:
        if hasattr(store, "close"):
            store.close()


@pytest.fixture
def store(make_store):
    return make_store()


def test_errors_share_the_labmem_base():
    for error in (RemoteMemoryValidationError, RemoteMemoryDuplicateError,
                  RemoteMemoryScopeError, RemoteMemoryCorruptionError):
        assert issubclass(error, RemoteMemoryError) and issubclass(error, LabmemError)


def test_append_writes_scope_and_both_times(make_store):
    record = add(make_store(), "memory-42")
    assert record.user_scope == scope_digest("alice")
    assert record.stored_at == datetime.fromisoformat("2026-08-02T00:00:00+00:00")
    assert record.source.captured_at == datetime.fromisoformat("2026-08-01T12:00:00+00:00")
    assert make_store().get("memory-42") == record


def test_jsonl_line_holds_scope_and_both_times(path):
    add(jsonl_store(path), "memory-42")
    line = path.read_text(encoding="utf-8")
    assert f'"user_scope":"{scope_digest("alice")}"' in line
    assert '"stored_at":"2026-08-02T00:00:00Z"' in line
    assert '"captured_at":"2026-08-01T12:00:00Z"' in line


def test_fresh_instance_reads_back_exactly(make_store):
    store = make_store()
    written = [add(store, f"m-{i}", content=f"content {i} 记忆") for i in range(5)]
    written.append(add(store, kind="profile", content="likes tea", summary=""))
    fresh = make_store()
    assert fresh.read_all() == tuple(written)
    assert len(fresh) == 6
    assert fresh.get("m-3") == written[3]
    assert fresh.get("nope") is None


def test_read_all_follows_another_instances_appends(make_store):
    reader, writer = make_store(), make_store()
    assert reader.read_all() == ()
    first = add(writer, "m-1")
    assert reader.read_all() == (first,)
    second = add(writer, "m-2")
    assert reader.read_all() == (first, second)
    assert len(reader) == 2 and reader.get("m-2") == second


def test_derived_id_makes_a_retry_a_duplicate(make_store):
    store = make_store()
    first = add(store)
    assert first.memory_id.startswith("conversation-")
    with pytest.raises(RemoteMemoryDuplicateError, match=first.memory_id):
        add(store)
    assert add(store, content="other content").memory_id != first.memory_id
    assert len(make_store().read_all()) == 2


def test_duplicate_explicit_id_is_refused_and_nothing_changes(make_store):
    store = make_store()
    kept = add(store, "memory-42")
    with pytest.raises(RemoteMemoryDuplicateError, match="unchanged") as err:
        add(make_store(), "memory-42", content="different")
    assert "use a new id" in str(err.value)
    assert make_store().read_all() == (kept,)


def test_duplicate_leaves_the_jsonl_file_byte_identical(path):
    add(jsonl_store(path), "memory-42")
    before = path.read_bytes()
    with pytest.raises(RemoteMemoryDuplicateError):
        add(jsonl_store(path), "memory-42", content="different")
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
def test_invalid_input_is_refused_before_writing(make_store, store_path, kwargs, field):
    store = make_store()
    args = {"kind": MemoryKind.CONVERSATION, "content": "c", "summary": "s",
            "source": SOURCE, "memory_id": None, **kwargs}
    with pytest.raises(RemoteMemoryValidationError) as err:
        store.append(**args)
    assert err.value.field == field
    assert not store_path.exists()
    assert make_store().read_all() == ()


def test_limits_are_inclusive(make_store):
    add(make_store(), "m-1", content="x" * 20_000, summary="s" * 2_000)
    assert len(make_store()) == 1


def test_blank_user_id_is_refused(request, backend, store_path):
    with pytest.raises(RemoteMemoryValidationError, match="user_id"):
        open_store(request, backend, store_path, user=" ")


def test_repr_names_the_file_not_its_directory(store, store_path):
    assert repr(store) == (f"{type(store).__name__}({store_path.name!r}, "
                           f"user_scope={scope_digest('alice')!r})")
    assert str(store_path.parent) not in repr(store)


def test_other_scope_is_refused_on_every_read_path(path):
    add(jsonl_store(path, "alice"), "m-1")
    bob = jsonl_store(path, "bob")
    for read in (bob.read_all, lambda: bob.get("m-1"), bob.latest_profile, len,
                 lambda: add(bob, "m-2")):
        with pytest.raises(RemoteMemoryScopeError, match="line 1"):
            read(bob) if read is len else read()
    assert len(jsonl_store(path, "alice").read_all()) == 1


def test_torn_tail_is_ignored_then_repaired(path):
    store = jsonl_store(path)
    add(store, "m-1")
    add(store, "m-2")
    with open(path, "ab") as handle:
        handle.write(b'{"memory_id":"m-3","user_sc')
    fresh = jsonl_store(path)
    assert [r.memory_id for r in fresh.read_all()] == ["m-1", "m-2"]
    add(fresh, "m-4")
    assert [r.memory_id for r in jsonl_store(path).read_all()] == ["m-1", "m-2", "m-4"]
    assert path.read_bytes().endswith(b"\n") and path.read_bytes().count(b"\n") == 3


@pytest.mark.parametrize("bad", [
    b"not json",
    b'{"memory_id": "m-9"}',
    b'{"memory_id":"m-1","user_scope":"SCOPE","kind":"conversation","content":"c",'
    b'"summary":"","source":{"source_id":"s","source_type":"t","title":"x",'
    b'"captured_at":"2026-08-01T00:00:00Z"},"stored_at":"2026-08-01T00:00:00Z"}',
])
def test_complete_bad_line_raises_corruption_with_line_number(path, bad):
    store = jsonl_store(path)
    add(store, "m-1")
    with open(path, "ab") as handle:
        handle.write(bad.replace(b"SCOPE", store.user_scope.encode()) + b"\n")
    fresh = jsonl_store(path)
    with pytest.raises(RemoteMemoryCorruptionError, match="line 2"):
        fresh.read_all()
    with pytest.raises(RemoteMemoryCorruptionError, match="line 2"):
        fresh.get("m-1")


def test_latest_profile_by_captured_at_then_id(make_store):
    store = make_store()
    assert store.latest_profile() is None

    def profile(memory_id, at):
        return add(store, memory_id, kind="profile", content=f"profile {memory_id}",
                   source=MemorySource(f"snap-{memory_id}", "profile_snapshot", "p", at))

    profile("profile-b", "2026-07-01T00:00:00Z")
    newest = profile("profile-a", "2026-07-05T00:00:00Z")
    profile("profile-c", "2026-06-01T00:00:00Z")  # stored later, captured earlier
    add(store, "conversation-late", source=MemorySource("t", "conversation_transcript", "t",
                                                        "2026-12-01T00:00:00Z"))
    assert store.latest_profile() == newest
    assert profile("profile-a2", "2026-07-05T00:00:00.000001Z").memory_id == "profile-a2"
    tie = profile("profile-z", "2026-07-05T00:00:00.000001Z")
    assert make_store().latest_profile() == tie


def test_appends_do_not_reread_the_store(path):
    """Per-append bytes read is 0 whatever the size; only another writer's bytes are read."""
    store = jsonl_store(path, clock=FixedClock("2026-08-02T00:00:00Z"))
    for i in range(300):
        add(store, f"m-{i}")
    fresh = jsonl_store(path)
    fresh.read_all()
    assert fresh.bytes_read == path.stat().st_size  # the index is built once
    per_append = []
    for i in range(300, 400):
        before = fresh.bytes_read
        add(fresh, f"m-{i}")
        per_append.append(fresh.bytes_read - before)
    assert per_append == [0] * 100
    other = jsonl_store(path)
    other.read_all()
    size = path.stat().st_size
    add(other, "from-other")
    other_bytes = path.stat().st_size - size
    before = fresh.bytes_read
    add(fresh, "m-after")
    assert fresh.bytes_read - before == other_bytes
    assert fresh.get("from-other") is not None


def race(path, writers, *, noop_lock):
    outcomes = sorted(run_processes(
        workers.append_same_id,
        lambda i, s: (str(path), s.start, s.pause, noop_lock, s.results), writers))
    lines = [line for line in path.read_bytes().split(b"\n") if line]
    return outcomes, lines


WRITERS = 4


def test_concurrent_duplicate_appends_store_exactly_one(path):
    outcomes, lines = race(path, WRITERS, noop_lock=False)
    assert outcomes == ["duplicate"] * (WRITERS - 1) + ["stored"]
    assert len(lines) == 1
    assert jsonl_store(path).get("memory-42") is not None


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


# -- append_many: the same semantics on both backends ----------------------------------


def test_append_many_stores_the_batch_in_order_with_one_stored_at(make_store):
    store = make_store()
    first = add(store, "m-0")
    batch = store.append_many([draft("m-1"), draft(content="derived id"),
                               draft("p-1", kind="profile", content="likes tea")])
    last = add(store, "m-9")
    assert [r.memory_id for r in batch][::2] == ["m-1", "p-1"]
    assert batch[1].memory_id.startswith("conversation-")
    t0 = datetime.fromisoformat("2026-08-02T00:00:00+00:00")
    assert first.stored_at == t0
    assert {r.stored_at for r in batch} == {t0 + timedelta(seconds=1)}  # one clock.now()
    assert last.stored_at == t0 + timedelta(seconds=2)
    fresh = make_store()
    assert fresh.read_all() == (first, *batch, last)
    assert fresh.latest_profile() == batch[2]
    assert fresh.get(batch[1].memory_id) == batch[1]


def test_append_many_accepts_any_iterable_of_mappings(make_store):
    stored = make_store().append_many(draft(f"m-{i}") for i in range(3))
    assert [r.memory_id for r in make_store().read_all()] == ["m-0", "m-1", "m-2"]
    assert len(stored) == 3


def test_append_many_of_nothing_writes_nothing(make_store, store_path):
    store = make_store()
    assert store.append_many([]) == ()
    assert not store_path.exists() and len(make_store()) == 0
    assert add(store, "m-1").stored_at == datetime.fromisoformat("2026-08-02T00:00:00+00:00")


@pytest.mark.parametrize("bad, field", [
    (draft(content=" "), "drafts[1].content"),
    (draft(kind="diary"), "drafts[1].kind"),
    (draft(memory_id="no spaces"), "drafts[1].memory_id"),
    ({**draft(), "source": {**SOURCE.to_dict(), "title": " "}}, "drafts[1].source.title"),
    ({k: v for k, v in draft().items() if k != "summary"}, "drafts[1].summary"),
    (draft(tags=["x"]), "drafts[1]"),
    ("not a mapping", "drafts[1]"),
])
def test_append_many_names_the_bad_draft_and_writes_nothing(make_store, bad, field):
    store = make_store()
    kept = add(store, "m-0")
    with pytest.raises(RemoteMemoryValidationError) as err:
        store.append_many([draft("m-1"), bad, draft("m-3")])
    assert err.value.field == field
    assert make_store().read_all() == (kept,)
    assert len(store) == 1


@pytest.mark.parametrize("drafts", [draft("m-1"), "m-1", None])
def test_append_many_wants_a_list(store, drafts):
    with pytest.raises(RemoteMemoryValidationError) as err:
        store.append_many(drafts)
    assert err.value.field == "drafts"


def test_append_many_refuses_an_id_twice_in_the_batch(make_store, store_path):
    store = make_store()
    with pytest.raises(RemoteMemoryDuplicateError,
                       match=r"drafts\[2\]\.memory_id 'm-1' repeats drafts\[0\]"):
        store.append_many([draft("m-1"), draft("m-2"), draft("m-1", content="other")])
    assert make_store().read_all() == ()


def test_append_many_refuses_the_batch_if_any_id_is_stored(make_store):
    store = make_store()
    kept = add(store, "m-1")
    with pytest.raises(RemoteMemoryDuplicateError,
                       match=r"drafts\[1\]\.memory_id 'm-1' is already stored.*nothing from "
                             r"this batch was stored"):
        make_store().append_many([draft("m-2"), draft("m-1"), draft("m-3")])
    assert make_store().read_all() == (kept,)
    assert store.get("m-2") is None
    retried = store.append_many([draft("m-2"), draft("m-3")])
    assert make_store().read_all() == (kept, *retried)


def test_append_many_retry_of_a_derived_batch_is_a_duplicate(make_store):
    store = make_store()
    batch = [draft(content="first"), draft(content="second")]
    stored = store.append_many(batch)
    with pytest.raises(RemoteMemoryDuplicateError, match=r"drafts\[0\]"):
        make_store().append_many(batch)
    assert make_store().read_all() == stored


@pytest.mark.parametrize("other", ["sqlite", "postgres"])
def test_both_backends_store_the_same_records_and_refuse_the_same_way(request, tmp_path,
                                                                      other):
    """One script against JSONL and another backend: equal records, equal errors (bar the
    file or database name)."""
    def script(store):
        outcomes = [add(store, "m-1"), store.append_many([draft("m-2"), draft(content="x")])]
        for attempt in (lambda: add(store, "m-1"),
                        lambda: store.append_many([draft("m-3"), draft("m-2")]),
                        lambda: store.append_many([draft("m-4"), draft(content=42)])):
            with pytest.raises(RemoteMemoryError) as err:
                attempt()
            outcomes.append((type(err.value).__name__,
                             str(err.value).replace(name_of(store), "FILE")))
        return outcomes, store.read_all(), store.latest_profile(), len(store)

    results = [script(open_store(request, backend, tmp_path)) for backend in ("jsonl", other)]
    assert results[0] == results[1]


ids = st.sampled_from(["m-1", "m-2", "m-3", None])
draft_strategy = st.builds(
    draft, memory_id=ids, content=st.sampled_from(["a", "b", "记忆 c"]),
    kind=st.sampled_from(["conversation", "profile"]))
operations = st.lists(st.one_of(draft_strategy, st.lists(draft_strategy, max_size=3)),
                      max_size=8)


@pytest.mark.parametrize("other", ["sqlite", "postgres"])
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_any_sequence_of_appends_gives_both_backends_the_same_state(request, other, ops):
    """A draft is one append, a list is one append_many; outcomes and states must match
    the JSONL store's. Each example is a new user (PostgreSQL keeps one database)."""
    user = f"user-{next(_fresh_users)}"

    def play(backend, folder):
        store = open_store(request, backend, folder, user)
        outcomes = []
        for op in ops:
            try:
                outcomes.append(store.append_many(op) if isinstance(op, list)
                                else store.append(**op))
            except RemoteMemoryError as exc:
                outcomes.append((type(exc).__name__,
                                 str(exc).replace(name_of(store), "FILE")))
        fresh = open_store(request, backend, folder, user)
        return outcomes, fresh.read_all(), fresh.latest_profile(), len(fresh)

    with tempfile.TemporaryDirectory() as folder:
        assert play(other, Path(folder)) == play("jsonl", Path(folder))
