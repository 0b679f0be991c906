"""Contract 8: `labmem story …` over a project directory (parser built here; the lead wires
``register`` into labmem.cli.COMMANDS)."""

import argparse
import json
import subprocess
import sys

import pytest

from labmem.core.errors import LabmemError
from labmem.story.cli import register_story_commands as register
from labmem.story.errors import StoryCorruptionError, StoryNotFoundError, StoryProjectError
from labmem.story.sample import sample_story_dir

DATA = sample_story_dir()

# what labmem.cli.main does once ``register`` is in COMMANDS
MAIN = """
import argparse, sys
from labmem.core.errors import LabmemError
from labmem.story.cli import register_story_commands as register
parser = argparse.ArgumentParser(prog="labmem")
register(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
try:
    sys.exit(args.handler(args))
except LabmemError as exc:
    print(f"labmem: error: {exc}", file=sys.stderr)
    sys.exit(2)
"""


def run(*argv):
    parser = argparse.ArgumentParser(prog="labmem")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["story", *argv])
    return args.handler(args)


def cli(*argv):
    return subprocess.run([sys.executable, "-c", MAIN, "story", *argv], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "novel"
    root.mkdir()
    for n in range(1, 13):
        name = f"ch{n:02d}"
        argv = ["update", str(DATA / "results" / f"{name}.json"), "--project", str(root),
                "--summary", str(DATA / "summaries" / f"{name}.json")]
        if (DATA / "outlines" / f"{name}.md").exists():
            argv += ["--outline", str(DATA / "outlines" / f"{name}.md")]
        assert run(*argv) == 0
    return root


def test_8_update_prints_actions_and_warnings(tmp_path, capsys):
    root = tmp_path / "novel"
    root.mkdir()
    assert run("update", str(DATA / "results" / "ch06.json"), "--project", str(root),
               "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["chapter"] == 6 and out["actions"] == {"contradicted": 1, "created": 4}
    assert out["warnings"][0].startswith("contradiction in character_state Ilse Korr.location")


def test_8_stats(project, capsys):
    capsys.readouterr()
    assert run("stats", "--project", str(project), "--json") == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["last_chapter"] == 12 and stats["open_loops"] == 2
    assert stats["contradictions"] == 2
    assert stats["items"] == sum(sum(v.values()) for v in stats["by_category"].values())
    assert run("stats", "--project", str(project)) == 0
    assert "last chapter 12, 2 open loops, 2 contradicted" in capsys.readouterr().out


def test_8_query_dump_conflicts(project, capsys):
    capsys.readouterr()
    run("query", "Tobin Venn", "--project", str(project), "--json")
    rows = json.loads(capsys.readouterr().out)
    assert {(r["field"], r["value"]) for r in rows if r["status"] == "active"} >= {
        ("health", "recovering")}
    run("dump", "--project", str(project), "--category", "world_rules", "--json")
    assert {r["subject"] for r in json.loads(capsys.readouterr().out)} == {
        "tide-oil", "causeway", "lamplighter oath"}
    run("conflicts", "--project", str(project))
    out = capsys.readouterr().out
    assert "Sable.allegiance = the harbor council" in out and "contradicted" in out


def test_8_bootstrap_dry_run_and_write(project, capsys):
    capsys.readouterr()
    (project / "memory_scratchpad.json").unlink()
    (project / "index.db").touch(exist_ok=True)
    run("bootstrap", "--project", str(project), "--json")
    diff = json.loads(capsys.readouterr().out)
    assert diff["written"] is False and diff["matching"] == [] and len(diff["only_rebuilt"]) == 14
    assert not (project / "memory_scratchpad.json").exists()
    run("bootstrap", "--project", str(project), "--write")
    assert "(written)" in capsys.readouterr().out
    run("bootstrap", "--project", str(project), "--json")
    assert len(json.loads(capsys.readouterr().out)["matching"]) == 14


def test_8_errors_are_labmem_errors(tmp_path, project):
    with pytest.raises(StoryProjectError, match="does not exist"):
        run("stats", "--project", str(tmp_path / "nope"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StoryProjectError, match="commit a chapter first"):
        run("stats", "--project", str(empty))
    with pytest.raises(StoryNotFoundError):
        run("query", "Nobody", "--project", str(project))
    (project / "memory_scratchpad.json").write_text("{torn")
    with pytest.raises(StoryCorruptionError, match="memory_scratchpad.json"):
        run("dump", "--project", str(project))
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(LabmemError, match="result: is not valid JSON"):
        run("update", str(bad), "--project", str(project))


def test_8_subprocess_exit_codes_and_messages(tmp_path):
    root = tmp_path / "novel"
    root.mkdir()
    done = cli("update", str(DATA / "results" / "ch01.json"), "--project", str(root))
    assert done.returncode == 0 and done.stdout.startswith("chapter 1 committed: created=7")
    done = cli("stats", "--project", str(root), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["items"] == 7
    (root / "memory_scratchpad.json").write_text("not json")
    done = cli("stats", "--project", str(root))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("labmem: error: memory_scratchpad.json: not a valid JSON")
    done = cli("stats", "--project", str(tmp_path / "missing"))
    assert done.returncode == 2 and "directory does not exist" in done.stderr
