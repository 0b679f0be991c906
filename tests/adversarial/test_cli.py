"""The ``labmem`` command under bad environments and readers (issue item 6).

Every failure is one line on stderr and exit status 2 — never a traceback; a reader
that closes the pipe early ends the command quietly. Each attack runs the real console
entry point in a child process, as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.fake_messages_api import FakeMessagesAPI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def labmem(args, *, env=None, stdin="", stdout=subprocess.PIPE, cwd=None):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC", "LABMEM", "MODEL_ID"))}
    base["PYTHONPATH"] = ROOT + os.pathsep + base.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "labmem.cli", *args], input=stdin,
                          env={**base, **(env or {})}, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, cwd=cwd or ROOT)


def one_line_failure(done, *needles):
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("labmem")
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.fixture
def home_file(tmp_path):
    path = tmp_path / "not-a-directory"
    path.write_text("I am a file")
    return path


def test_labmem_home_pointing_at_a_file_is_one_line(home_file):
    for home in (home_file, home_file / "below"):
        done = labmem(["recall", "SQLite persistence"], env={"LABMEM_HOME": str(home)})
        one_line_failure(done, "LABMEM_HOME", "labmem: error:")
    assert home_file.read_text() == "I am a file"


def test_chat_with_labmem_home_pointing_at_a_file_is_one_line(home_file, tmp_path):
    with FakeMessagesAPI() as api:
        done = labmem(["chat", "--workdir", str(tmp_path)], stdin="hello\n",
                      env={"LABMEM_HOME": str(home_file), "ANTHROPIC_API_KEY": "k",
                           "MODEL_ID": "m", "ANTHROPIC_BASE_URL": api.url})
    one_line_failure(done, "LABMEM_HOME")
    assert api.requests == []


def test_a_closed_pipe_ends_quietly(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -1` that has already gone: every write fails with EPIPE
    try:
        done = labmem(["recall", "memory", "--json", "--with-examples"], stdout=write_end,
                      env={"LABMEM_HOME": str(tmp_path / "home")})
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_chat_on_a_missing_workdir_refuses_before_starting(tmp_path):
    with FakeMessagesAPI() as api:
        done = labmem(["chat", "--workdir", str(tmp_path / "missing")], stdin="hello\n",
                      env={"LABMEM_HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": "k",
                           "MODEL_ID": "m", "ANTHROPIC_BASE_URL": api.url})
        (tmp_path / "a-file").write_text("x")
        on_file = labmem(["chat", "--workdir", str(tmp_path / "a-file")], stdin="hello\n",
                         env={"LABMEM_HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": "k",
                              "MODEL_ID": "m", "ANTHROPIC_BASE_URL": api.url})
    one_line_failure(done, "--workdir", "does not exist")
    one_line_failure(on_file, "--workdir", "is not a directory")
    assert done.stdout == "" and api.requests == []  # no banner, no model call
    assert not (tmp_path / "home").exists()


def test_a_usage_error_is_one_line():
    one_line_failure(labmem(["recall"]), "query")
    one_line_failure(labmem(["recall", "x", "--limit", "many"]), "--limit")
    one_line_failure(labmem(["story", "stats"]), "--project")


def test_a_story_result_nested_too_deep_is_one_line(tmp_path):
    project = tmp_path / "novel"
    project.mkdir()
    result = tmp_path / "ch01.json"
    result.write_text("[" * 100_000 + "]" * 100_000)
    one_line_failure(labmem(["story", "update", "--project", str(project), str(result)]),
                     "result", "levels deep")


def test_an_unreadable_input_file_is_one_line(tmp_path):
    project = tmp_path / "novel"
    project.mkdir()
    folder = tmp_path / "ch01.json"
    folder.mkdir()  # a directory where the result file should be
    one_line_failure(labmem(["story", "update", "--project", str(project), str(folder)]),
                     "ch01.json")
