"""`labmem db` and `labmem recall` / `labmem examples` with a database URL, on a real server.

The flag beats the variable (``--database-url`` > ``$LABMEM_DATABASE_URL``); a bad URL,
an unreachable server or a database without the schema is one line on stderr naming the
flag or the variable and the fix, exit status 2, and never the URL's password.
"""

import io
import json
import subprocess
import sys

import pytest

conninfo_to_dict = pytest.importorskip("psycopg.conninfo").conninfo_to_dict

from labmem.cli import main  # noqa: E402
from labmem.core.provenance import scope_digest  # noqa: E402
from labmem.recall import SCORER_NAMES, TEACHING_RECORDS  # noqa: E402
from labmem.recall.postgres import APP_ROLE, SCHEMA_VERSION, schema_version  # noqa: E402
from tests.postgres.legacy_v1 import draft, write_v1  # noqa: E402
from tests.test_cli import SECRET, assert_one_line_error  # noqa: E402


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No ambient database URL or home: each test says what it uses."""
    monkeypatch.delenv("LABMEM_DATABASE_URL", raising=False)
    monkeypatch.delenv("LABMEM_USER_ID", raising=False)
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))


def app_url(admin_url: str) -> str:
    return admin_url.replace("postgresql://postgres@", f"postgresql://{APP_ROLE}@", 1)


def dbname(url: str) -> str:
    return conninfo_to_dict(url)["dbname"]


def with_password(url: str) -> str:
    """The same URL spelling a password (the test server trusts its socket and ignores
    it; a real server would check it)."""
    return url.replace("@/", f":{SECRET}@/", 1)


def run(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


# -- labmem db ---------------------------------------------------------------------------

def test_db_init_status_and_init_again(new_database, capsys):
    url = new_database()
    name = dbname(url)
    status, out, _ = run(capsys, "db", "status", "--database-url", url)
    assert status == 1
    assert out == (f"database {name!r}: no labmem schema; an administrator runs "
                   "`labmem db init --database-url ADMIN_URL`\n")
    assert run(capsys, "db", "init", "--database-url", url)[:2] == (
        0, f"database {name!r}: created labmem schema version {SCHEMA_VERSION}\n")
    assert run(capsys, "db", "init", "--database-url", url)[:2] == (
        0, f"database {name!r}: already at labmem schema version {SCHEMA_VERSION}; "
           "nothing changed\n")
    assert run(capsys, "db", "status", "--database-url", url)[:2] == (
        0, f"database {name!r}: labmem schema version {SCHEMA_VERSION} (up to date)\n")
    # status only reads, and the application role may ask too
    assert run(capsys, "db", "status", "--database-url", app_url(url))[0] == 0


def test_db_upgrade_from_version_1_keeps_the_rows(new_database, capsys):
    url = new_database()
    write_v1(url, {"alice": [draft("v1 record about lighthouses")]})
    status, out, _ = run(capsys, "db", "status", "--database-url", url)
    assert status == 1 and "version 1, this labmem needs" in out and "labmem db upgrade" in out
    status, _, err = run(capsys, "db", "init", "--database-url", url)  # init never migrates
    assert status == 2
    assert_one_line_error(err, "--database-url", "labmem db upgrade")
    assert run(capsys, "db", "upgrade", "--database-url", url)[:2] == (
        0, f"database {dbname(url)!r}: upgraded the labmem schema "
           f"from version 1 to {SCHEMA_VERSION}\n")
    assert schema_version(url) == SCHEMA_VERSION
    status, out, _ = run(capsys, "recall", "lighthouses", "--json", "--user", "alice",
                         "--database-url", app_url(url))
    assert status == 0 and json.loads(out)["hits"][0]["snippet"].startswith("v1 record")


def test_db_upgrade_without_a_schema_names_init(new_database, capsys):
    status, _, err = run(capsys, "db", "upgrade", "--database-url", new_database())
    assert status == 2
    assert_one_line_error(err, "--database-url", "labmem db init")


def test_db_takes_the_variable_and_the_flag_wins(new_database, monkeypatch, capsys):
    url = new_database()
    monkeypatch.setenv("LABMEM_DATABASE_URL", url)
    assert run(capsys, "db", "init")[0] == 0
    assert schema_version(url) == SCHEMA_VERSION
    monkeypatch.setenv("LABMEM_DATABASE_URL", "postgresql://nobody@/nowhere?host=/nonexistent")
    assert run(capsys, "db", "status", "--database-url", url)[0] == 0  # the flag wins
    status, _, err = run(capsys, "db", "status")
    assert status == 2
    assert_one_line_error(err, "$LABMEM_DATABASE_URL", "cannot connect")


# -- recall and examples against the server ------------------------------------------------

def hit_ids(out: str) -> list[str]:
    return [h["memory_id"] for h in json.loads(out)["hits"]]


def test_recall_on_the_server_ranks_as_the_home_does(pg_url, tmp_path, capsys):
    status, out, _ = run(capsys, "examples", "add", "--database-url", pg_url, "--user", "alice")
    assert status == 0
    assert out == (f"added {len(TEACHING_RECORDS)} example records to database "
                   f"'labmem_tests' (user scope {scope_digest('alice')})\n")
    assert run(capsys, "examples", "add", "--home", str(tmp_path / "h"), "--user", "alice")[0] == 0
    for query in ("SQLite persistence", "分层记忆", "test strategy processes"):
        for scorer in SCORER_NAMES:
            on_server = run(capsys, "recall", query, "--json", "--scorer", scorer,
                            "--user", "alice", "--database-url", pg_url)
            in_home = run(capsys, "recall", query, "--json", "--scorer", scorer,
                          "--user", "alice", "--home", str(tmp_path / "h"))
            assert on_server[0] == in_home[0] == 0
            assert hit_ids(on_server[1]) == hit_ids(in_home[1]), (query, scorer)
    assert hit_ids(run(capsys, "recall", "SQLite persistence", "--json", "--limit", "1",
                       "--user", "alice", "--database-url", pg_url)[1]) == ["conversation-002"]
    # another user on the same database has nothing
    status, out, err = run(capsys, "recall", "SQLite persistence", "--user", "bob",
                           "--database-url", pg_url)
    assert status == 0 and out == ""
    assert err.startswith("labmem: no records yet in database 'labmem_tests': ")


def test_recall_reads_the_variable_and_the_flag_wins(pg_url, monkeypatch, capsys):
    monkeypatch.setenv("LABMEM_DATABASE_URL", pg_url)
    assert run(capsys, "examples", "add")[0] == 0  # $LABMEM_USER_ID unset: learner
    assert hit_ids(run(capsys, "recall", "tokenizer estimate", "--json")[1])[0] == \
        "conversation-006"
    monkeypatch.setenv("LABMEM_DATABASE_URL", "postgresql://x@/nowhere?host=/nonexistent")
    assert run(capsys, "recall", "tokenizer", "--json", "--database-url", pg_url)[0] == 0


def test_nothing_is_written_under_the_home_with_a_url(pg_url, tmp_path, capsys):
    home = tmp_path / "home"
    assert run(capsys, "examples", "add", "--home", str(home), "--database-url", pg_url)[0] == 0
    assert run(capsys, "recall", "SQLite", "--home", str(home), "--database-url", pg_url)[0] == 0
    assert not home.exists()


def test_a_password_in_the_url_is_never_printed(pg_url, capsys):
    good = with_password(pg_url)
    assert run(capsys, "examples", "add", "--database-url", good)[0] == 0
    status, out, err = run(capsys, "recall", "SQLite persistence", "--database-url", good)
    assert status == 0 and SECRET not in out + err
    wrong_db = good.replace("/labmem_tests?", "/no_such_db?")
    status, _, err = run(capsys, "recall", "x", "--database-url", wrong_db)
    assert status == 2
    assert_one_line_error(err, "--database-url 'postgresql://labmem_app:***@/no_such_db?",
                          "cannot connect", "check that the server is running")


def test_a_database_without_the_schema_names_db_init(new_database, capsys):
    status, _, err = run(capsys, "recall", "x", "--database-url", app_url(new_database()))
    assert status == 2
    assert_one_line_error(err, "--database-url", "labmem db init --database-url <admin URL>")


def test_an_unreachable_server_from_the_console_script(pg_server, tmp_path):
    """The real command in its own process: status 2, one line, no traceback."""
    url = f"postgresql://{APP_ROLE}:{SECRET}@/labmem?host={tmp_path}&port=1"
    env = {"PATH": "/usr/bin:/bin", "LABMEM_HOME": str(tmp_path / "home"),
           "LABMEM_DATABASE_URL": url}
    done = subprocess.run([sys.executable, "-m", "labmem.cli", "recall", "anything"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert_one_line_error(done.stderr, "$LABMEM_DATABASE_URL 'postgresql://labmem_app:***@/",
                          "cannot connect")


def test_chat_recalls_from_the_server(pg_url, tmp_path, monkeypatch, capsys):
    """`labmem chat --database-url`: recall_history and the session's profile come from
    the server (the real SDK against a scripted Messages API on 127.0.0.1)."""
    pytest.importorskip("anthropic")
    from labmem.agents import LocalMessagesAPI, scripted

    turns = [[{"type": "tool_use", "id": "toolu_1", "name": "recall_history",
               "input": {"query": "SQLite persistence decision", "limit": 1}}],
             [{"type": "text", "text": "SQLite in WAL mode."}]]
    (tmp_path / "work").mkdir()
    with LocalMessagesAPI(scripted(turns)) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("MODEL_ID", "m-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setattr("sys.stdin", io.StringIO("Which database did we pick?\n"))
        status = main(["chat", "--workdir", str(tmp_path / "work"), "--with-examples",
                       "--database-url", pg_url])
    assert status == 0
    assert "assistant> SQLite in WAL mode." in capsys.readouterr().out
    first, second = (request["body"] for request in api.requests)
    assert 'memory_id="profile-001"' in first["system"]  # the profile, read from the server
    result = next(b for b in second["messages"][-1]["content"] if b["type"] == "tool_result")
    assert [h["memory_id"] for h in json.loads(result["content"])["hits"]] == [
        "conversation-002"]
    assert not (tmp_path / "home").exists()  # the records went to the server
