"""s09 transcript: append-only evidence, derived replay state, explicit candidates."""

import copy
import json
import signal
import subprocess
import sys
import textwrap

import pytest

from labmem.core.clock import SteppingClock
from labmem.core.errors import LabmemError
from labmem.transcript import (
    MemorySelectionError,
    Transcript,
    TranscriptCorruptionError,
    TranscriptValidationError,
)
from tests import transcript_workers
from tests.procs import run_processes

SHA = "a" * 64


def clock():
    return SteppingClock("2026-08-01T09:00:00Z")


@pytest.fixture
def path(tmp_path):
    return tmp_path / "session-1.jsonl"


def conversation(t):
    t.append({"type": "message", "role": "user", "content": "Migrate the store to SQLite."})
    t.append({"type": "reasoning", "content": "Compare journal modes first."})
    t.append({"type": "function_call", "call_id": "c1", "name": "bash",
              "arguments": {"cmd": "sqlite3 --version"}})
    t.append({"type": "function_call_result", "call_id": "c1", "output": "3.45.1"})
    t.append({"type": "message", "role": "assistant", "content": "Chose WAL mode."})
    t.append({"type": "file-history-snapshot", "path": "db.py", "sha256": SHA})
    t.append({"type": "ai-title", "title": "SQLite migration"})
    return t


# -- 1. envelope and validation ------------------------------------------------------

def test_envelope_is_assigned(path):
    t = Transcript(path, clock=clock())
    record = t.append({"type": "message", "role": "user", "content": "hi"})
    assert record == {"schema_version": 1, "sequence": 1, "session_id": "session-1",
                      "event_id": "transcript:session-1:1",
                      "recorded_at": "2026-08-01T09:00:00Z",
                      "type": "message", "role": "user", "content": "hi"}
    assert json.loads(path.read_text(encoding="utf-8")) == record


def test_payload_is_never_mutated(path):
    event = {"type": "function_call", "call_id": "c1", "name": "bash",
             "arguments": {"cmd": ["ls", "-l"]}}
    before = copy.deepcopy(event)
    record = Transcript(path, clock=clock()).append(event)
    assert event == before
    record["arguments"]["cmd"].append("mutated")
    assert Transcript(path).lookup("transcript:session-1:1")["arguments"] == {"cmd": ["ls", "-l"]}


@pytest.mark.parametrize("event, field", [
    ({"type": "message", "role": "user", "content": "x", "sequence": 9}, "event.sequence"),
    ({"type": "message", "role": "user", "content": "x", "event_id": "e"}, "event.event_id"),
    ({"type": "message", "role": "user", "content": "x", "recorded_at": "2026"},
     "event.recorded_at"),
    ({"type": "message", "role": "system", "content": "x"}, "event.role"),
    ({"type": "message", "role": "user"}, "event.content"),
    ({"type": "message", "role": "user", "content": "x", "mood": "ok"}, "event.mood"),
    ({"type": "note", "content": "x"}, "event.type"),
    ({"type": "function_call", "call_id": " ", "name": "bash", "arguments": {}},
     "event.call_id"),
    ({"type": "function_call", "call_id": "c", "name": "bash", "arguments": [1]},
     "event.arguments"),
    ({"type": "function_call", "call_id": "c", "name": "bash", "arguments": "{oops"},
     "event.arguments"),
    ({"type": "file-history-snapshot", "path": "a.py", "sha256": "xyz"}, "event.sha256"),
    ({"type": "ai-title", "title": ""}, "event.title"),
    ("not a mapping", "event"),
])
def test_invalid_events_write_nothing(path, event, field):
    with pytest.raises(TranscriptValidationError) as err:
        Transcript(path, clock=clock()).append(event)
    assert err.value.field == field
    assert not path.exists()


def test_tool_protocol_is_enforced_at_append(path):
    t = Transcript(path, clock=clock())
    with pytest.raises(TranscriptValidationError, match="unknown"):
        t.append({"type": "function_call_result", "call_id": "c9", "output": "x"})
    t.append({"type": "function_call", "call_id": "c1", "name": "bash", "arguments": {}})
    with pytest.raises(TranscriptValidationError, match="already used"):
        t.append({"type": "function_call", "call_id": "c1", "name": "bash", "arguments": {}})
    t.append({"type": "function_call_result", "call_id": "c1", "output": "ok"})
    with pytest.raises(TranscriptValidationError, match="already answered"):
        t.append({"type": "function_call_result", "call_id": "c1", "output": "again"})
    assert len(Transcript(path)) == 2


@pytest.mark.parametrize("name", ["bad id.jsonl", "-x.jsonl", "session.json", ".jsonl"])
def test_session_id_is_the_validated_stem(tmp_path, name):
    with pytest.raises(TranscriptValidationError, match="path"):
        Transcript(tmp_path / name)


# -- 2. replay -----------------------------------------------------------------------

def test_replay_folds_events_into_model_ready_state(path):
    state = conversation(Transcript(path, clock=clock())).replay_state()
    assert state.messages == (
        {"role": "user", "content": "Migrate the store to SQLite."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "bash",
             "input": {"cmd": "sqlite3 --version"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "3.45.1"}]},
        {"role": "assistant", "content": "Chose WAL mode."},
    )
    assert state.title == "SQLite migration"
    assert dict(state.file_snapshots) == {"db.py": SHA}
    assert dict(state.counts) == {"ai-title": 1, "file-history-snapshot": 1, "function_call": 1,
                                  "function_call_result": 1, "message": 2, "reasoning": 1}
    assert state.next_sequence == 8 and not state.torn_tail_ignored
    assert all("Compare journal modes" not in json.dumps(m) for m in state.messages)


def test_replay_is_derived_and_never_written(path):
    t = conversation(Transcript(path, clock=clock()))
    before = path.read_bytes()
    for n in (1, 2, 3, 1000):
        t.replay_state(max_items=n)
    assert path.read_bytes() == before


def test_window_never_starts_with_an_orphaned_tool_result(path):
    t = conversation(Transcript(path, clock=clock()))
    state = t.replay_state(max_items=2)  # last two: [tool_result], [assistant text]
    assert state.messages == ({"role": "assistant", "content": "Chose WAL mode."},)
    assert state.messages_outside_window == 3
    assert t.replay_state(max_items=3).messages[0]["content"][0]["type"] == "tool_use"


def test_consecutive_same_role_events_merge_and_unanswered_calls_wait(path):
    t = Transcript(path, clock=clock())
    t.append({"type": "message", "role": "assistant", "content": "Let me look."})
    t.append({"type": "function_call", "call_id": "c1", "name": "ls", "arguments": {}})
    t.append({"type": "function_call", "call_id": "c2", "name": "cat", "arguments": {}})
    t.append({"type": "function_call_result", "call_id": "c1", "output": "a"})
    state = t.replay_state()
    assert state.messages == (
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": "a"}]},
    )
    assert state.pending_tool_calls == ("c2",)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True])
def test_max_items_is_validated(path, bad):
    with pytest.raises(TranscriptValidationError, match="max_items"):
        Transcript(path).replay_state(max_items=bad)


def test_replay_messages_are_owned_by_the_caller(path):
    t = conversation(Transcript(path, clock=clock()))
    state = t.replay_state()
    state.messages[1]["content"][0]["input"]["cmd"] = "rm -rf /"
    assert t.replay_state().messages[1]["content"][0]["input"] == {"cmd": "sqlite3 --version"}


# -- 3. crash rules ------------------------------------------------------------------

def test_torn_tail_is_ignored_reported_and_repaired(path):
    conversation(Transcript(path, clock=clock()))
    with open(path, "ab") as handle:
        handle.write(b'{"schema_version":1,"sequence":8,"sess')
    t = Transcript(path, clock=clock())
    state = t.replay_state()
    assert state.torn_tail_ignored and state.next_sequence == 8
    t.append({"type": "message", "role": "user", "content": "after the crash"})
    fresh = Transcript(path)
    assert len(fresh) == 8 and not fresh.replay_state().torn_tail_ignored
    for _ in range(3):  # any number of crashes
        with open(path, "ab") as handle:
            handle.write(b'{"half')
        Transcript(path, clock=clock()).append({"type": "reasoning", "content": "x"})
    assert len(Transcript(path)) == 11


@pytest.mark.parametrize("mangle, problem", [
    (lambda lines: lines[:2] + lines[3:], "line 3"),                          # a gap
    (lambda lines: lines[:1] + [b'{"truncated": '] + lines[2:], "line 2"),   # bad JSON
    (lambda lines: lines[:3] + [lines[3].replace(b"session-1", b"other")] + lines[4:],
     "line 4"),
])
def test_complete_bad_lines_are_corruption_naming_the_line(path, mangle, problem):
    conversation(Transcript(path, clock=clock()))
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"\n".join(mangle(lines)) + b"\n")
    with pytest.raises(TranscriptCorruptionError, match=problem):
        Transcript(path).replay_state()
    with pytest.raises(TranscriptCorruptionError, match=problem):
        Transcript(path).lookup("transcript:session-1:1")


def test_line_separator_round_trips(path):
    text = "first\u2028second\u2029third\x85fourth\r\nfifth"
    Transcript(path, clock=clock()).append({"type": "message", "role": "user", "content": text})
    assert Transcript(path).replay_state().messages[0]["content"] == text


WRITER = textwrap.dedent("""
    import sys
    from labmem.transcript import Transcript
    t = Transcript(sys.argv[1])
    n = 0
    while True:
        t.append({"type": "message", "role": "user", "content": "x" * 4000 + str(n)})
        n += 1
        if n == 20:
            print("ready", flush=True)
""")


def test_killed_writer_leaves_a_replayable_transcript(path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t = Transcript(path, clock=clock())
    n = len(t)
    assert n >= 20
    record = t.append({"type": "message", "role": "assistant", "content": "recovered"})
    assert record["sequence"] == n + 1
    assert Transcript(path).replay_state().next_sequence == n + 2


# -- 4. cost and restart -------------------------------------------------------------

def test_appends_do_not_reread_and_a_fresh_instance_continues(path):
    t = Transcript(path, clock=clock())
    for i in range(200):
        t.append({"type": "message", "role": "user", "content": f"m{i}"})
    assert t.bytes_read == 0
    fresh = Transcript(path, clock=clock())
    assert fresh.append({"type": "reasoning", "content": "x"})["sequence"] == 201
    assert fresh.bytes_read == path.stat().st_size - len(path.read_bytes().split(b"\n")[-2]) - 1
    before = fresh.bytes_read
    for _ in range(50):
        fresh.append({"type": "reasoning", "content": "y"})
    assert fresh.bytes_read == before


# -- 5. memory candidates ------------------------------------------------------------

def test_candidate_points_at_the_event_without_its_content(path):
    t = conversation(Transcript(path, clock=clock()))
    candidate = t.select_memory_candidate("transcript:session-1:5", summary="Chose SQLite WAL.",
                                          reason="a durable project decision")
    assert candidate.source.source_id == "transcript:session-1:5"
    assert candidate.source.captured_at.isoformat() == "2026-08-01T09:00:04+00:00"
    assert candidate.summary == "Chose SQLite WAL." and candidate.reason.startswith("a durable")
    assert "Chose WAL mode." not in json.dumps(candidate.to_dict())
    snap = t.select_memory_candidate("transcript:session-1:6", summary="db.py changed",
                                     reason="file state")
    assert snap.event_type == "file-history-snapshot"


def test_candidate_outside_the_window_is_still_selectable(path):
    t = conversation(Transcript(path, clock=clock()))
    assert t.replay_state(max_items=1).messages[0]["content"] == "Chose WAL mode."
    candidate = t.select_memory_candidate("transcript:session-1:1", summary="User asked.",
                                          reason="the original request")
    assert candidate.source.source_id == "transcript:session-1:1"


@pytest.mark.parametrize("event_id, summary, reason, match", [
    ("transcript:session-1:99", "s", "r", "not an event"),
    ("transcript:other:1", "s", "r", "not an event"),
    ("transcript:session-1:3", "s", "r", "'function_call' event"),
    ("transcript:session-1:2", "s", "r", "'reasoning' event"),
    ("transcript:session-1:5", " ", "r", "summary"),
    ("transcript:session-1:5", "s", "", "reason"),
    ("transcript:session-1:5", "s" * 2001, "r", "summary"),
])
def test_selection_errors(path, event_id, summary, reason, match):
    t = conversation(Transcript(path, clock=clock()))
    with pytest.raises(MemorySelectionError, match=match):
        t.select_memory_candidate(event_id, summary=summary, reason=reason)


def test_errors_share_the_base():
    for error in (TranscriptValidationError, TranscriptCorruptionError, MemorySelectionError):
        assert issubclass(error, LabmemError)


def test_concurrent_writers_get_one_gap_free_sequence(path):
    run_processes(transcript_workers.append_transcript_events,
                  lambda w, s: (str(path), w, 25, s.start), 4, expect=0)
    events = Transcript(path).events()
    assert [e["sequence"] for e in events] == list(range(1, 101))
    assert sorted(e["content"] for e in events) == sorted(f"w{w} #{i}" for w in range(4)
                                                         for i in range(25))
