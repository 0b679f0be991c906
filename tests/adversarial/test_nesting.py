"""Deeply nested JSON (issue item 4): one depth bound, in the core, both ways.

Arguments nested 100,000 levels (or a stored line nested that deep) used to escape as
``RecursionError`` from the JSON encoder or decoder. The core bounds the nesting once
(:data:`labmem.core.validation.MAX_JSON_DEPTH`): on write a layer's validation error
naming the field, before anything is written; on read a corruption error naming the
line. The bound also holds for depths Python itself could still handle (150 levels).
"""

from __future__ import annotations

import sqlite3

import pytest

from labmem.core.clock import FixedClock
from labmem.core.errors import CorruptionError, InvalidInputError
from labmem.core.storage import JsonlLog, read_snapshot, write_snapshot
from labmem.recall import RemoteMemoryCorruptionError, RemoteMemoryStore, SqliteMemoryStore
from labmem.story import MemoryWriter
from labmem.story.errors import StoryValidationError
from labmem.transcript import Transcript, TranscriptCorruptionError, TranscriptValidationError
from labmem.workspace import WorkspaceCorruptionError, WorkspaceMemory

NOW = "2026-08-01T12:00:00Z"
SOURCE = {"source_id": "s1", "source_type": "chat", "title": "a chat",
          "captured_at": "2026-07-01T00:00:00Z"}
VERY_DEEP = 100_000
JUST_TOO_DEEP = 150  # json handles it; the project's bound refuses it all the same
WITHIN = 99  # labmem.core.validation.MAX_JSON_DEPTH is 100; an event line adds one level


def nested(depth, leaf="x"):
    """``{"a": {"a": … leaf …}}`` ``depth`` objects deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_text(depth):
    return "[" * depth + "]" * depth


def call(arguments, call_id="c1"):
    return {"type": "function_call", "call_id": call_id, "name": "search",
            "arguments": arguments}


# -- on write: a validation error naming the field, nothing written ---------------------

@pytest.mark.parametrize("arguments", [nested(VERY_DEEP), nested_text(VERY_DEEP),
                                       nested(JUST_TOO_DEEP)],
                         ids=["dict-100000", "json-text-100000", "dict-150"])
def test_transcript_arguments_nested_too_deep_are_refused(tmp_path, arguments):
    path = tmp_path / "s1.jsonl"
    transcript = Transcript(path, clock=FixedClock(NOW))
    transcript.append(call({"q": "fine"}))
    before = path.read_bytes()
    with pytest.raises(TranscriptValidationError) as caught:
        transcript.append(call(arguments, "c2"))
    assert caught.value.field == "event.arguments" and "levels deep" in caught.value.problem
    assert path.read_bytes() == before
    within = nested(WITHIN)  # the bound itself is fine, and round-trips
    transcript.append(call(within, "c3"))
    assert Transcript(path).events()[-1]["arguments"] == within


def test_the_core_log_and_snapshot_refuse_a_deep_document(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl", decode=lambda line, obj: obj)
    log.append({"ok": 1})
    before = log.path.read_bytes()
    for depth in (VERY_DEEP, JUST_TOO_DEEP):
        with pytest.raises(InvalidInputError) as caught:
            log.append({"payload": nested(depth)})
        assert caught.value.field == "record" and "levels deep" in caught.value.problem
    assert log.path.read_bytes() == before
    snapshot = tmp_path / "doc.json"
    write_snapshot(snapshot, {"ok": 1})
    before = snapshot.read_bytes()
    for records in (None, ("items",)):
        with pytest.raises(InvalidInputError, match="levels deep"):
            write_snapshot(snapshot, {"items": [nested(VERY_DEEP)]}, records=records)
    assert snapshot.read_bytes() == before


def test_a_story_result_nested_too_deep_is_refused_naming_the_result(tmp_path):
    writer = MemoryWriter(tmp_path / "pad.json", clock=FixedClock(NOW))
    with pytest.raises(StoryValidationError) as caught:
        writer.update_from_chapter_result({"chapter": 1, "extra": nested(VERY_DEEP)})
    assert caught.value.field == "result"
    assert not (tmp_path / "pad.json").exists()


def test_require_json_walks_any_depth_without_recursion():
    from labmem.core.validation import MAX_JSON_DEPTH, parse_json, require_json

    assert WITHIN == MAX_JSON_DEPTH - 1
    with pytest.raises(InvalidInputError) as caught:
        require_json(nested(VERY_DEEP), "arguments")
    assert caught.value.field == "arguments"
    assert require_json(nested(MAX_JSON_DEPTH), "arguments") is not None
    with pytest.raises(ValueError, match="levels deep"):
        parse_json(nested_text(VERY_DEEP))


# -- on read: a corruption error naming the line ---------------------------------------

def deeper(line, depth):
    """A copy of a complete JSON line with ``"x": [[[…]]]`` (``depth`` levels) added."""
    return line.rstrip(b"\n")[:-1] + b',"x":' + nested_text(depth).encode() + b"}\n"


@pytest.mark.parametrize("depth", [VERY_DEEP, JUST_TOO_DEEP])
def test_a_deep_line_in_a_transcript_is_corruption_naming_the_line(tmp_path, depth):
    path = tmp_path / "s1.jsonl"
    transcript = Transcript(path, clock=FixedClock(NOW))
    transcript.append({"type": "message", "role": "user", "content": "hello"})
    transcript.append(call({"q": "fine"}))
    first, second = path.read_bytes().splitlines(keepends=True)
    # the deep part sits inside the arguments, where any JSON value is allowed
    path.write_bytes(first + second.replace(b'"arguments":{', b'"arguments":{"deep":'
                                            + nested_text(depth).encode() + b",", 1))
    with pytest.raises(TranscriptCorruptionError) as caught:
        Transcript(path).events()
    assert caught.value.line == 2 and "levels deep" in str(caught.value)


@pytest.mark.parametrize("depth", [VERY_DEEP, JUST_TOO_DEEP])
def test_a_deep_line_in_the_remote_store_is_corruption_naming_the_line(tmp_path, depth):
    path = tmp_path / "records.jsonl"
    store = RemoteMemoryStore(path, user_id="alice", clock=FixedClock(NOW))
    store.append(kind="conversation", content="one", summary="", source=SOURCE)
    store.append(kind="conversation", content="two", summary="", source=SOURCE)
    first, second = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + deeper(second, depth))  # still a whole record, plus "x"
    with pytest.raises(RemoteMemoryCorruptionError) as caught:
        RemoteMemoryStore(path, user_id="alice").read_all()
    assert caught.value.line == 2 and "levels deep" in str(caught.value)


def test_the_core_log_reports_the_line_for_any_depth(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"ok":1}\n' + b'{"x":' + nested_text(VERY_DEEP).encode() + b"}\n")
    with pytest.raises(CorruptionError) as caught:
        JsonlLog(path, decode=lambda line, obj: obj).refresh()
    assert caught.value.line == 2 and "levels deep" in str(caught.value)


def test_a_deep_snapshot_is_corruption_naming_the_file(tmp_path):
    project = tmp_path / "project"
    WorkspaceMemory(project, workspace_id="w", clock=FixedClock(NOW))
    (project / "workspace.json").write_text('{"format": ' + nested_text(VERY_DEEP) + "}")
    with pytest.raises(WorkspaceCorruptionError, match="workspace.json"):
        WorkspaceMemory(project, clock=FixedClock(NOW))
    (tmp_path / "doc.json").write_text(nested_text(JUST_TOO_DEEP))
    with pytest.raises(CorruptionError, match="levels deep"):
        read_snapshot(tmp_path / "doc.json")


def test_a_deep_record_in_sqlite_is_corruption(tmp_path):
    path = tmp_path / "records.db"
    store = SqliteMemoryStore(path, user_id="alice", clock=FixedClock(NOW))
    record = store.append(kind="conversation", content="one", summary="", source=SOURCE)
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE memories SET record = ? WHERE memory_id = ?",
                   ('{"x":' + nested_text(VERY_DEEP) + "}", record.memory_id))
    with pytest.raises(RemoteMemoryCorruptionError, match="levels deep"):
        SqliteMemoryStore(path, user_id="alice").get(record.memory_id)
