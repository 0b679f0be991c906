"""The schema is created and upgraded only by an administrator, explicitly, by version.

``init_database`` on an empty database builds the newest schema; on one already at the
newest version it changes nothing; on an older one it refuses and names ``labmem db
upgrade``. ``upgrade_database`` runs the steps from a version-1 database kept as a fixture
(:mod:`tests.postgres.legacy_v1`), with its rows. A store never creates or alters a table:
on a missing or older schema it refuses, naming the command, and leaves the database as
it was.
"""

import psycopg
import pytest

from labmem.core.clock import FixedClock
from labmem.recall import SCORER_NAMES, RecallEngine, RemoteMemoryStore
from labmem.recall.postgres import (
    APP_ROLE,
    SCHEMA_VERSION,
    PostgresMemoryStore,
    RemoteMemoryConnectionError,
    RemoteMemorySchemaError,
    init_database,
    schema_version,
    upgrade_database,
)
from tests.postgres.cluster import admin_execute
from tests.postgres.legacy_v1 import draft, write_v1


def app_url(admin_url):
    return admin_url.replace("postgresql://postgres@", f"postgresql://{APP_ROLE}@", 1)


def tables(admin_url):
    return sorted(r[0] for r in admin_execute(
        admin_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))


def test_init_builds_the_newest_schema_and_again_changes_nothing(new_database):
    url = new_database()
    assert schema_version(url) == 0
    assert init_database(url) == SCHEMA_VERSION == 2
    built = tables(url)
    assert built == ["labmem_schema", "memories", "record_vectors", "scope_stats",
                     "vocabulary"]
    assert init_database(url) == SCHEMA_VERSION  # a no-op: safe on every deploy
    assert tables(url) == built and schema_version(url) == SCHEMA_VERSION


def test_init_on_an_older_schema_refuses_and_names_upgrade(new_database):
    url = new_database()
    init_database(url, version=1)
    with pytest.raises(RemoteMemorySchemaError, match="labmem db upgrade"):
        init_database(url)
    assert schema_version(url) == 1


def test_a_store_never_creates_the_schema(new_database):
    url = new_database()
    store = PostgresMemoryStore(app_url(url), user_id="alice")
    for read in (store.read_all, store.is_empty, len, lambda: store.get("m-1")):
        with pytest.raises(RemoteMemorySchemaError, match="labmem db init"):
            read(store) if read is len else read()
    assert tables(url) == [] and schema_version(url) == 0


def test_a_store_on_an_older_schema_names_upgrade_and_changes_nothing(new_database):
    url = new_database()
    write_v1(url, {"alice": [draft("Chose PostgreSQL for shared memory.")]})
    store = PostgresMemoryStore(app_url(url), user_id="alice")
    with pytest.raises(RemoteMemorySchemaError, match="labmem db upgrade"):
        store.read_all()
    assert schema_version(url) == 1


def test_upgrade_from_version_1_keeps_every_record_and_indexes_them(new_database, tmp_path):
    url = new_database()
    users = {"alice": [draft("Chose PostgreSQL for shared memory."),
                       draft("likes green tea", kind="profile", title="profile"),
                       draft("The unique index refuses duplicate memory ids.",
                             at="2026-07-01T00:00:00Z"),
                       draft("共享记忆放在数据库服务器上。")],
             "bob": [draft("Bob chose SQLite.")]}
    written = write_v1(url, users)
    assert upgrade_database(url) == (1, SCHEMA_VERSION)
    assert upgrade_database(url) == (SCHEMA_VERSION, SCHEMA_VERSION)
    for user, records in written.items():
        store = PostgresMemoryStore(app_url(url), user_id=user)
        assert store.read_all() == tuple(records)
    now = FixedClock("2026-08-03T00:00:00Z")
    alice = PostgresMemoryStore(app_url(url), user_id="alice", clock=now)
    jsonl = RemoteMemoryStore(tmp_path / "alice.jsonl", user_id="alice", clock=now)
    for record in written["alice"]:
        jsonl.append(kind=record.kind, content=record.content, summary=record.summary,
                     source=record.source)
    for scorer in SCORER_NAMES:
        for text in ("postgresql memory", "duplicate ids", "数据库", "tea"):
            got = RecallEngine(alice, scorer=scorer).recall(text)
            assert got == RecallEngine(jsonl, scorer=scorer).recall(text), (scorer, text)
    # the upgraded database takes new appends like a new one
    alice.append(kind="conversation", content="After the upgrade.", summary="",
                 source=written["alice"][0].source)
    assert len(PostgresMemoryStore(app_url(url), user_id="alice")) == 5


def test_upgrade_without_a_schema_names_init(new_database):
    url = new_database()
    with pytest.raises(RemoteMemorySchemaError, match="labmem db init"):
        upgrade_database(url)
    assert tables(url) == []


def test_a_newer_schema_is_refused_by_stores_and_admin(new_database):
    url = new_database()
    init_database(url)
    admin_execute(url, "UPDATE labmem_schema SET version = 99")
    with pytest.raises(RemoteMemorySchemaError, match="newer than this labmem"):
        PostgresMemoryStore(app_url(url), user_id="alice").read_all()
    with pytest.raises(RemoteMemorySchemaError, match="newer"):
        upgrade_database(url)


def test_a_failed_upgrade_step_leaves_the_old_version(new_database, monkeypatch):
    from labmem.recall.postgres import schema

    url = new_database()
    write_v1(url, {"alice": [draft("kept as it was")]})

    def broken(cur):
        cur.execute("ALTER TABLE memories ADD COLUMN half_done integer")
        raise RuntimeError("the step failed half-way")

    monkeypatch.setattr(schema, "MIGRATIONS", (schema.MIGRATIONS[0], broken))
    with pytest.raises(RuntimeError):
        upgrade_database(url)
    assert schema_version(url) == 1
    columns = [r[0] for r in admin_execute(
        url, "SELECT column_name FROM information_schema.columns "
        "WHERE table_name = 'memories'")]
    assert "half_done" not in columns and "terms" not in columns


def test_admin_functions_refuse_an_unreachable_server(tmp_path):
    url = f"postgresql://postgres@/postgres?host={tmp_path}&port=1"
    with pytest.raises(RemoteMemoryConnectionError, match="cannot connect"):
        init_database(url)
    with pytest.raises(RemoteMemoryConnectionError, match="cannot connect"):
        PostgresMemoryStore(url, user_id="alice").read_all()


def test_the_app_role_is_neither_superuser_nor_owner(pg_admin_url):
    role = admin_execute(pg_admin_url, "SELECT rolsuper, rolbypassrls FROM pg_roles "
                         f"WHERE rolname = '{APP_ROLE}'")
    assert role == [(False, False)]
    owners = admin_execute(pg_admin_url, "SELECT DISTINCT tableowner FROM pg_tables "
                           "WHERE schemaname = 'public'")
    assert owners == [("postgres",)]
    forced = admin_execute(pg_admin_url, "SELECT relname, relrowsecurity, relforcerowsecurity "
                           "FROM pg_class WHERE relkind = 'r' AND relnamespace = "
                           "'public'::regnamespace AND relname <> 'labmem_schema' "
                           "ORDER BY relname")
    assert forced == [(name, True, True) for name in
                      ("memories", "record_vectors", "scope_stats", "vocabulary")]
    with psycopg.connect(app_url(pg_admin_url)) as conn, pytest.raises(
            psycopg.errors.InsufficientPrivilege):
        conn.execute("CREATE TABLE sneaky (x int)")


def test_two_admins_running_init_at_once_build_one_schema(new_database):
    """Two hosts deploying at the same moment: the advisory lock lets one build the
    schema; the other then finds it built and changes nothing."""
    from concurrent.futures import ThreadPoolExecutor

    url = new_database()
    with ThreadPoolExecutor(2) as pool:
        versions = list(pool.map(lambda _: init_database(url), range(2)))
    assert versions == [SCHEMA_VERSION, SCHEMA_VERSION]
    assert admin_execute(url, "SELECT count(*) FROM labmem_schema") == [(1,)]


@pytest.mark.parametrize("url", ["not a url", "mysql://admin:hunter2@db/memory", ""])
def test_a_url_that_is_not_postgresql_is_refused_without_echoing_it(url):
    from labmem.recall.store import RemoteMemoryValidationError

    with pytest.raises(RemoteMemoryValidationError) as err:
        PostgresMemoryStore(url, user_id="alice")
    assert err.value.field == "url" and "hunter2" not in str(err.value)


def test_without_server_binaries_the_tests_skip_naming_the_install_command(monkeypatch):
    from labmem.recall.postgres.server import INSTALL_HINT
    from tests.postgres import cluster

    monkeypatch.setattr(cluster, "find_server_binaries", lambda: None)
    with pytest.raises(pytest.skip.Exception, match=INSTALL_HINT):
        cluster._skip_without_server()


def test_a_record_is_validated_before_anything_is_sent(tmp_path):
    """Validation needs no server: against an address where nothing listens, a bad draft
    is refused as invalid (not as a connection failure)."""
    from labmem.core.provenance import MemorySource
    from labmem.recall.store import RemoteMemoryValidationError

    store = PostgresMemoryStore(f"postgresql://{APP_ROLE}@/labmem?host={tmp_path}&port=1",
                                user_id="alice")
    source = MemorySource("t-1", "conversation_transcript", "x", "2026-08-01T00:00:00Z")
    with pytest.raises(RemoteMemoryValidationError) as err:
        store.append(kind="conversation", content="  ", summary="", source=source)
    assert err.value.field == "content"
    with pytest.raises(RemoteMemoryValidationError) as err:
        store.append_many([{"kind": "diary", "content": "c", "summary": "", "source": source}])
    assert err.value.field == "drafts[0].kind"
