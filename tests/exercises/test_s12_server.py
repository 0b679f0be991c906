"""Chapter s12's server section: the duplicate-id race helper and the exercise-5 checker,
against a real throwaway PostgreSQL server (skipped without the server binaries)."""

from __future__ import annotations

import pytest

from labmem.core.errors import InvalidInputError
from labmem.exercises import s12 as exercises
from labmem.recall.postgres import (
    APP_ROLE,
    INSTALL_HINT,
    LocalPostgres,
    find_server_binaries,
    init_database,
)
from labmem.recall.postgres.demo import RACE_ID, race_same_id

needs_server = pytest.mark.skipif(find_server_binaries() is None,
                                  reason=f"no PostgreSQL server binaries: `{INSTALL_HINT}`")

OWN_SCOPE = "user_scope = current_setting('labmem.user_scope', true)"
RIGHT = f"CREATE POLICY own ON memories USING ({OWN_SCOPE}) WITH CHECK ({OWN_SCOPE})"


@pytest.fixture(scope="module")
def server():
    with LocalPostgres() as running:
        init_database(running.url)
        yield running


def test_the_file_race_without_a_lock_stores_copies(tmp_path):
    outcome = race_same_id("file, no lock", tmp_path / "records.jsonl", writers=4)
    assert outcome.copies > 1 and outcome.count("stored") == outcome.copies


def test_the_file_race_with_the_lock_stores_one(tmp_path):
    outcome = race_same_id("file + lock", tmp_path / "records.jsonl", writers=4)
    assert outcome.told == (("refused: RemoteMemoryDuplicateError", 3), ("stored", 1))
    assert outcome.copies == 1
    assert outcome.row()[f"copies of {RACE_ID}"] == 1 and outcome.row()["refused as duplicate"] == 3


@needs_server
def test_the_server_race_stores_one_and_refuses_the_rest(server):
    outcome = race_same_id("postgres", server.url_for(user=APP_ROLE), writers=4)
    assert outcome.told == (("refused: RemoteMemoryDuplicateError", 3), ("stored", 1))
    assert outcome.copies == 1


@pytest.mark.parametrize("backend, writers", [("file", 4), ("postgres", 1)])
def test_a_race_is_checked_before_anything_starts(tmp_path, backend, writers):
    with pytest.raises(InvalidInputError, match="backend|writers"):
        race_same_id(backend, tmp_path / "r.jsonl", writers=writers)


@needs_server
def test_the_right_policy_passes_every_contract(server):
    report = exercises.check_policy(server.url, RIGHT)
    assert report.ok, report
    using_only = f"CREATE POLICY own ON memories USING ({OWN_SCOPE.replace(', true', '')})"
    assert exercises.check_policy(server.url, using_only).ok  # an unset scope errors: closed


@needs_server
@pytest.mark.parametrize("policy, failing", [
    ("CREATE POLICY own ON memories USING (true)",
     {"a connection sees exactly the rows of its own scope",
      "a connection that never set its scope sees no row",
      "a connection cannot insert a row of another scope"}),
    (f"CREATE POLICY own ON memories FOR SELECT USING ({OWN_SCOPE})",
     {"a connection may insert a row of its own scope"}),
    (f"CREATE POLICY r ON memories FOR SELECT USING ({OWN_SCOPE}); "
     "CREATE POLICY w ON memories FOR INSERT WITH CHECK (true)",
     {"a connection cannot insert a row of another scope"}),
])
def test_a_wrong_policy_breaks_the_contracts_it_should(server, policy, failing):
    report = exercises.check_policy(server.url, policy)
    assert report.failing_names == failing
    assert "smallest case:" in repr(report)


@needs_server
def test_unanswered_and_unusable_answers_get_feedback(server):
    assert "not answered" in repr(exercises.check_policy(server.url, None))
    assert "as a string" in repr(exercises.check_policy(server.url, "  "))
    refused = exercises.check_policy(server.url, "CREATE POLICY p ON nowhere USING (true)")
    assert not refused and "the server refused your SQL" in repr(refused)


def test_a_stopped_server_gets_feedback_not_an_exception(tmp_path):
    gone = f"postgresql://postgres@/postgres?host={tmp_path}&port=5432"
    feedback = exercises.check_policy(gone, RIGHT)
    assert not feedback and "cannot reach the server" in repr(feedback)


@needs_server
def test_the_checker_leaves_no_database_behind(server):
    import psycopg

    exercises.check_policy(server.url, RIGHT)
    with psycopg.connect(server.url) as admin:
        left = admin.execute("SELECT datname FROM pg_database "
                             "WHERE datname LIKE 'policy_exercise_%'").fetchall()
    assert left == []
