"""A row that cannot be trusted is refused when read back, naming the row — the same
rules as the other backends. Each case is an edit made behind the store's back by an
administrator (row-level security does not bind a superuser)."""

import pytest

from labmem.core.clock import SteppingClock
from labmem.core.provenance import MemorySource, scope_digest
from labmem.recall import RecallEngine
from labmem.recall.postgres import PostgresMemoryStore
from labmem.recall.store import RemoteMemoryCorruptionError, RemoteMemoryValidationError
from tests.postgres.cluster import admin_execute

SOURCE = MemorySource("t-1", "conversation_transcript", "Decision", "2026-08-01T12:00:00Z")
SCOPE = scope_digest("alice")


@pytest.fixture
def store(pg_url, pg_admin_url):
    s = PostgresMemoryStore(pg_url, user_id="alice", clock=SteppingClock("2026-08-02T00:00:00Z"))
    s.append(kind="conversation", content="Chose PostgreSQL for shared memory.", summary="",
             source=SOURCE, memory_id="m-1")
    s.append(kind="conversation", content="The constraint refuses duplicates.", summary="",
             source=SOURCE)
    yield s
    s.close()


def fresh(store):
    return PostgresMemoryStore(store.url, user_id="alice")


def tamper(admin_url, statement, *params):
    admin_execute(admin_url, statement.replace("SCOPE", f"'{SCOPE}'"))


@pytest.mark.parametrize("edit, message", [
    ("UPDATE memories SET record = 'not json' WHERE ordinal = 0", "row 0 .*'m-1'"),
    ("UPDATE memories SET record = '{\"memory_id\": \"m-1\"}' WHERE ordinal = 0",
     "row 0 .*not a stored memory"),
    ("UPDATE memories SET record = replace(record, '\"m-1\"', '\"m-9\"') WHERE ordinal = 0",
     "row 0 .*disagree"),
    ("UPDATE memories SET record = replace(record, 'constraint', 'CONSTRAINT') "
     "WHERE ordinal = 1", "row 1 .*edited after it was stored"),
    ("UPDATE memories SET ordinal = 5 WHERE ordinal = 1", "no row 1 .*dense"),
])
def test_a_tampered_row_is_refused_naming_it(store, pg_admin_url, edit, message):
    tamper(pg_admin_url, edit + " AND user_scope = SCOPE")
    with pytest.raises(RemoteMemoryCorruptionError, match=message):
        fresh(store).read_all()


def test_a_row_read_by_id_is_checked_too(store, pg_admin_url):
    tamper(pg_admin_url, "UPDATE memories SET record = replace(record, 'PostgreSQL', 'MySQL') "
           "WHERE memory_id = 'm-1' AND user_scope = SCOPE")
    assert fresh(store).get("m-1").content == "Chose MySQL for shared memory."  # a given id
    tamper(pg_admin_url, "UPDATE memories SET memory_id = 'm-2' WHERE memory_id = 'm-1' "
           "AND user_scope = SCOPE")
    with pytest.raises(RemoteMemoryCorruptionError, match="disagree"):
        fresh(store).get("m-2")


def test_edited_terms_are_refused_when_recall_returns_the_record(store, pg_admin_url):
    tamper(pg_admin_url, "UPDATE memories SET terms = array_append(terms, 'coffee'), "
           "term_counts = array_append(term_counts, 1) WHERE memory_id = 'm-1' "
           "AND user_scope = SCOPE")
    with pytest.raises(RemoteMemoryCorruptionError, match="row 0 .*indexed terms"):
        RecallEngine(fresh(store), scorer="bm25").recall("coffee")


def test_a_counter_that_disagrees_with_the_rows_is_corruption(store, pg_admin_url):
    tamper(pg_admin_url, "UPDATE scope_stats SET records = 1 WHERE user_scope = SCOPE")
    with pytest.raises(RemoteMemoryCorruptionError, match="ordinal 1, which is already"):
        fresh(store).append(kind="conversation", content="x", summary="", source=SOURCE)
    assert len(fresh(store).read_all()) == 2
    tamper(pg_admin_url, "UPDATE scope_stats SET records = 0, conversation_records = 5 "
           "WHERE user_scope = SCOPE")
    with pytest.raises(RemoteMemoryCorruptionError, match="scope_stats"):
        len(fresh(store))


def test_an_ordinal_past_the_end_is_a_validation_error(store):
    with pytest.raises(RemoteMemoryValidationError, match="ordinal"):
        store.record_at(7)
