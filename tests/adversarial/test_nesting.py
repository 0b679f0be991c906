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
from labmem.core.errors import InvalidInputError
from labmem.recall import RemoteMemoryCorruptionError, SqliteMemoryStore
from labmem.story import MemoryWriter
from labmem.story.errors import StoryValidationError

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
