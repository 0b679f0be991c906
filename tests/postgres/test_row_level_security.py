"""Scope is enforced by the server: row-level security, tested with raw SQL on the
store's own connection.

Each store's connection carries its user scope in the session setting
``labmem.user_scope``; the policies compare every row with it. So a hand-written
``SELECT * FROM memories`` on Alice's connection returns Alice's rows only, an ``INSERT``
of Bob's row is refused by the server, and records cannot be changed or deleted at all.
"""

import psycopg
import pytest

from labmem.core.clock import SteppingClock
from labmem.core.provenance import MemorySource, scope_digest
from labmem.recall.postgres import PostgresMemoryStore
from labmem.recall.store import RemoteMemoryScopeError

SOURCE = MemorySource("t-1", "conversation_transcript", "Shared memory", "2026-08-01T12:00:00Z")


def store(url, user):
    return PostgresMemoryStore(url, user_id=user, clock=SteppingClock("2026-08-02T00:00:00Z"))


def add(s, memory_id, content="Chose PostgreSQL."):
    return s.append(kind="conversation", content=content, summary="", source=SOURCE,
                    memory_id=memory_id)


@pytest.fixture
def alice_and_bob(pg_url):
    alice, bob = store(pg_url, "alice"), store(pg_url, "bob")
    add(alice, "a-1")
    add(alice, "a-2", "Alice's second record about tea.")
    add(bob, "b-1", "Bob's secret: he prefers coffee.")
    yield alice, bob
    alice.close()
    bob.close()


def sql(s, statement, params=None):
    cur = s.connection.execute(statement, params)
    return cur.fetchall() if cur.description else None


def test_a_raw_select_returns_only_the_connections_scope(alice_and_bob):
    alice, bob = alice_and_bob
    assert sorted(r[0] for r in sql(alice, "SELECT memory_id FROM memories")) == ["a-1", "a-2"]
    assert [r[0] for r in sql(bob, "SELECT memory_id FROM memories")] == ["b-1"]
    # even asking for Bob's scope by name, on Alice's connection
    assert sql(alice, "SELECT * FROM memories WHERE user_scope = %s",
               (scope_digest("bob"),)) == []
    assert sql(alice, "SELECT count(*) FROM memories WHERE record LIKE '%coffee%'") == [(0,)]
    for table in ("scope_stats", "vocabulary"):
        scopes = {r[0] for r in sql(alice, f"SELECT user_scope FROM {table}")}
        assert scopes == {scope_digest("alice")}, table


def test_an_insert_of_another_scopes_row_is_refused_by_the_server(alice_and_bob):
    alice, bob = alice_and_bob
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        sql(alice, "INSERT INTO memories (user_scope, ordinal, memory_id, kind, captured_at, "
            "record) VALUES (%s, 99, 'forged', 'conversation', 0, '{}')",
            (scope_digest("bob"),))
    assert [r.memory_id for r in bob.read_all()] == ["b-1"]


def test_records_cannot_be_changed_or_deleted_by_the_app_role(alice_and_bob):
    alice, _ = alice_and_bob
    for statement in ("UPDATE memories SET record = '{}'", "DELETE FROM memories",
                      "TRUNCATE memories"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            sql(alice, statement)
    assert [r.memory_id for r in store(alice.url, "alice").read_all()] == ["a-1", "a-2"]


def test_a_connection_without_a_scope_sees_nothing(alice_and_bob, pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)


def test_the_store_reports_a_refused_row_as_a_scope_error(alice_and_bob):
    """The setting is the scope's only carrier: a client that changes it on purpose
    (the limit of one role for every user) reads another scope's nothing, and its own
    writes are refused, as a labmem error."""
    alice, _ = alice_and_bob
    sql(alice, "SELECT set_config('labmem.user_scope', %s, false)", (scope_digest("bob"),))
    assert alice.get("a-1") is None
    with pytest.raises(RemoteMemoryScopeError, match="another user scope"):
        add(alice, "a-3")


def test_postings_read_around_the_policies_keep_to_the_scope(alice_and_bob):
    """``labmem_postings`` runs as the schema owner (so that its GIN index is usable) and
    applies the connection's scope itself: Bob's term is nowhere for Alice."""
    alice, bob = alice_and_bob
    assert sql(alice, "SELECT * FROM labmem_postings('coffee', 0, 100)") == [([], [])]
    assert sql(bob, "SELECT * FROM labmem_postings('coffee', 0, 100)") == [([0], [1])]
    assert sql(alice, "SELECT * FROM labmem_postings('tea', 0, 100)") == [([1], [1])]
    with psycopg.connect(alice.url, autocommit=True) as conn:  # no scope set: nothing
        assert conn.execute("SELECT * FROM labmem_postings('tea', 0, 100)").fetchall() == [
            ([], [])]


def test_postings_are_found_through_the_gin_index(alice_and_bob, pg_admin_url):
    """The plan of the postings query, as the server ran it (auto_explain): a bitmap scan
    of the index keyed by scope and term, not a scan of the table."""
    alice, _ = alice_and_bob
    notices = []
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        for statement in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                          "SET auto_explain.log_nested_statements = on",
                          "SET auto_explain.log_level = notice"):
            conn.execute(statement)
        conn.execute("SELECT set_config('labmem.user_scope', %s, false)", (alice.user_scope,))
        found = conn.execute("SELECT * FROM labmem_postings('tea', 0, 100)").fetchall()
        assert found == [([1], [1])]
    plans = "\n".join(notices)
    assert "Bitmap Index Scan on memories_terms" in plans
    assert "Seq Scan on memories" not in plans
