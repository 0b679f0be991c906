"""The `labmem` command and the recall_history tool's default runtime."""

import json
import os
import subprocess
import sys

import pytest

from labmem.cli import main
from labmem.core.provenance import scope_digest
from labmem.recall.tool import TEACHING_RECORDS, default_runtime, recall_history


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LABMEM_USER_ID", raising=False)
    monkeypatch.delenv("LABMEM_DATABASE_URL", raising=False)
    return tmp_path / "home"


def test_demo_prints_the_five_stages(capsys):
    assert main(["demo", "s12"]) == 0
    out = capsys.readouterr().out
    for stage in ("[1] normalize", "[2] candidate", "[3] score", "[4] rank", "[5] render"):
        assert stage in out
    assert "searched_records=6 candidate_records=2" in out
    # the store line says why 7 stored records give 6 searched ones
    assert "7 records" in out and "6 conversation records (searched by recall) and 1 profile" in out
    assert "0.85*1.000000 + 0.15*0.967742 = 0.995161" in out
    assert "<remote_profile memory_id=\"profile-001\"" in out


def test_demo_is_deterministic(capsys):
    main(["demo", "s12"])
    first = capsys.readouterr().out
    main(["demo", "s12"])
    assert capsys.readouterr().out == first


@pytest.fixture
def examples(home):
    """The default home holding the chapter's example records, added the one way there is:
    by asking for them."""
    assert main(["examples", "add"]) == 0
    return home


def test_opening_the_default_store_writes_nothing(home):
    assert not home.exists()
    runtime = default_runtime()
    path = home / "remote-memory" / f"{scope_digest('learner')}.jsonl"
    assert runtime.store.path == path and runtime.store.is_empty()
    assert runtime.engine.recall("layered memory").searched_records == 0
    assert not home.exists()  # no folder, no file, no lock: nothing was asked to be stored


def test_example_records_go_in_only_when_asked_and_once(home, capsys):
    runtime = default_runtime(with_examples=True)
    assert [r.memory_id for r in runtime.store.read_all()] == [
        r["memory_id"] for r in TEACHING_RECORDS]
    default_runtime(with_examples=True)  # asking again adds nothing twice
    assert len(default_runtime().store.read_all()) == len(TEACHING_RECORDS)
    assert main(["examples", "add"]) == 0
    assert f"added 0 example records to {runtime.store.path}" in capsys.readouterr().out


def test_examples_list_prints_them_and_writes_nothing(home, capsys):
    assert main(["examples", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == [r["memory_id"] for r in TEACHING_RECORDS]
    assert not home.exists()


def test_examples_go_to_the_home_and_user_named(tmp_path, home):
    other = tmp_path / "elsewhere"
    assert main(["examples", "add", "--home", str(other), "--user", "alice"]) == 0
    assert [p.name for p in (other / "remote-memory").glob("*.jsonl")] == [
        f"{scope_digest('alice')}.jsonl"]
    assert not home.exists()


def test_users_get_separate_default_stores(home, monkeypatch):
    default_runtime().store.append(kind="conversation", memory_id="learner-only",
                                   content="private note about zebras", summary="",
                                   source={"source_id": "s", "source_type": "t", "title": "zebra",
                                           "captured_at": "2026-08-01T00:00:00Z"})
    monkeypatch.setenv("LABMEM_USER_ID", "someone-else")
    data = json.loads(recall_history("zebras"))
    assert data["hits"] == [] and data["empty_reason"] == "no_matching_terms"


def test_recall_history_returns_the_json_contract(examples):
    data = json.loads(recall_history("layered memory", limit=2))
    assert data["hits"][0]["memory_id"] == "conversation-003"
    assert len(data["hits"]) <= 2
    assert set(data["hits"][0]) == {"memory_id", "rank", "snippet", "scope", "provenance",
                                    "score", "score_breakdown"}  # provenance once, not twice


def test_cli_recall_json_and_text(home, capsys):
    assert main(["recall", "SQLite persistence", "--json", "--limit", "1",
                 "--with-examples"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [h["memory_id"] for h in data["hits"]] == ["conversation-002"]
    assert main(["recall", "分层记忆"]) == 0
    assert "<recalled_context" in capsys.readouterr().out
    assert main(["recall", "kubernetes"]) == 0
    assert "no hits (no_matching_terms)" in capsys.readouterr().out


def test_cli_recall_scorer_is_one_option(examples, capsys):
    assert main(["recall", "SQLite persistence", "--json", "--scorer", "bm25"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert hits and {h["score_breakdown"]["scorer"] for h in hits} == {"bm25"}
    assert sum(hits[0]["score_breakdown"]["term_contributions"].values()) == pytest.approx(
        hits[0]["score"], abs=1e-5)
    with pytest.raises(SystemExit):
        main(["recall", "memory", "--scorer", "tfidf"])


@pytest.mark.parametrize("args, message", [
    (["recall", "   "], "must not be empty"),
    (["recall", "memory", "--limit", "11"], "limit"),
])
def test_cli_errors_exit_2_with_one_line(home, capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("labmem: error:") and message in err and "Traceback" not in err


def test_console_script_runs(tmp_path):
    env = {**os.environ, "LABMEM_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "labmem.cli", "demo", "s12"], env=env,
                         capture_output=True, text=True, check=True)
    assert "[5] render" in out.stdout


# -- a fast start: emptiness by size, the recall index from its sidecar ------------------

def _fill_default_store(home, count):
    from tests.recall.sidecar_workers import drafts

    runtime = default_runtime(home=home)
    runtime.store.append_many(drafts(0, count))
    return runtime.store.path


def test_default_runtime_never_decodes_a_store_that_has_records(home):
    path = _fill_default_store(home, 50)
    runtime = default_runtime()
    assert runtime.store.bytes_read == 0  # emptiness known from the file, not a decode
    assert runtime.store.path == path


def test_a_store_with_only_a_torn_line_counts_as_empty(home):
    path = home / "remote-memory" / f"{scope_digest('learner')}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"memory_id": "torn')  # a writer died mid-line: no record
    store = default_runtime(with_examples=True).store
    assert [r.memory_id for r in store.read_all()] == [r["memory_id"] for r in TEACHING_RECORDS]


def test_cli_recall_writes_the_sidecar_once_and_answers_the_same(home, capsys):
    from labmem.recall.sidecar import sidecar_path

    path = _fill_default_store(home, 1100)
    def ranked():  # the clock is the wall clock here: compare what does not depend on it
        assert main(["recall", "dog shelter", "--json"]) == 0
        hits = json.loads(capsys.readouterr().out)["hits"]
        return [(h["memory_id"], h["score"], h["score_breakdown"]["terms"]) for h in hits]

    first = ranked()
    assert sidecar_path(path).exists() and first
    assert ranked() == first


def test_cli_recall_imports_only_what_recall_needs(home):
    _fill_default_store(home, 20)
    code = ("import sys\nfrom labmem.cli import main\nmain(['recall', 'dog'])\n"
            "heavy = {'pandas', 'matplotlib', 'anthropic', 'openai', 'httpx', 'nbformat',"
            " 'scipy', 'hypothesis', 'labmem.story', 'numpy.ma', 'labmem.mmu'}\n"
            "loaded = set(sys.modules) | {m.split('.')[0] for m in sys.modules}\n"
            "print(sorted(heavy & loaded))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "LABMEM_HOME": str(home)}, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


# -- a database URL in place of a home (the refusals that need no server) -----------------
# (the server itself: tests/postgres/test_cli_db.py and test_hosts.py)

SECRET = "hunter2"


def assert_one_line_error(err: str, *needles: str) -> None:
    assert err.startswith("labmem: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and SECRET not in err
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.mark.parametrize("url, needles", [
    ("mysql://u:hunter2@db/labmem", ["--database-url: 'mysql://u:***@db/labmem' is not a "
                                     "PostgreSQL URL", "write it as postgresql://USER"]),
    ("postgresql://u:hunter2@db/labmem?nonsense", ["is not a PostgreSQL URL",
                                                   "URI query parameter"]),
    ("postgresql://u:hun ter2@db/labmem", ["is not a PostgreSQL URL"]),
    ("", ["--database-url: must be a PostgreSQL URL"]),
])
@pytest.mark.parametrize("command", [["recall", "x"], ["examples", "add"], ["db", "status"]])
def test_a_bad_database_url_is_refused_before_connecting(home, capsys, command, url, needles):
    pytest.importorskip("psycopg")
    assert main([*command, "--database-url", url]) == 2
    assert_one_line_error(capsys.readouterr().err, *needles)
    assert not home.exists()


def test_a_bad_database_url_in_the_environment_names_the_variable(home, capsys, monkeypatch):
    pytest.importorskip("psycopg")
    monkeypatch.setenv("LABMEM_DATABASE_URL", "http://u:hunter2@db/labmem")
    assert main(["recall", "x"]) == 2
    assert_one_line_error(capsys.readouterr().err, "$LABMEM_DATABASE_URL: 'http://u:***@db/"
                                                   "labmem' is not a PostgreSQL URL")
    monkeypatch.setenv("LABMEM_DATABASE_URL", "")  # empty: unset, the home's store
    assert main(["recall", "x"]) == 0


def test_masked_url_hides_every_spelling_of_the_password():
    from labmem.recall import masked_url

    assert masked_url("postgresql://app:s%40cret@db:5432/mem") == "postgresql://app:***@db:5432/mem"
    assert masked_url("postgresql://app:a@b@db/mem") == "postgresql://app:***@db/mem"
    assert masked_url("postgresql://app@db/mem?password=x1&sslmode=require") == \
        "postgresql://app@db/mem?password=***&sslmode=require"
    assert masked_url("postgresql://app@/mem?host=/run/pg") == "postgresql://app@/mem?host=/run/pg"


def test_db_needs_a_url(home, capsys, monkeypatch):
    monkeypatch.delenv("LABMEM_DATABASE_URL", raising=False)
    assert main(["db", "status"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--database-url: is required",
                          "$LABMEM_DATABASE_URL")


def test_mcp_needs_a_home_or_a_database(home, capsys, monkeypatch):
    pytest.importorskip("mcp")
    monkeypatch.delenv("LABMEM_DATABASE_URL", raising=False)
    assert main(["mcp", "--user", "alice"]) == 2
    assert capsys.readouterr().err == (
        "labmem: error: --home: is required without a database URL; pass --home DIR, "
        "--database-url URL (or set $LABMEM_DATABASE_URL), or both\n")
