"""Tampering with the SQLite store on disk (issue item 8): an edited record is noticed.

A record's JSON is the source of truth; its id may be derived from its content, and its
postings (written in the same transaction) say which terms recall finds it by. An edit
to the record column behind the store's back used to be served as if it had been stored
that way. Now:

* a content-derived id is re-derived on every read — an edited body under it is
  corruption, on ``get``, ``read_all``, ``record_at`` and recall alike;
* a record found through the postings is checked against them once — an edited body
  under a caller-chosen id (or edited postings) is corruption on recall;
* the shape of a derived id is reserved, so an untouched store never trips the check.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from labmem.core.clock import FixedClock
from labmem.recall import (
    RecallEngine,
    RemoteMemoryCorruptionError,
    RemoteMemoryValidationError,
    SqliteMemoryStore,
)

NOW = "2026-08-01T12:00:00Z"
SOURCE = {"source_id": "chat-1", "source_type": "chat", "title": "storage chat",
          "captured_at": "2026-07-01T00:00:00Z"}
SCORERS = ("teaching", "bm25", "bm25_recency", "contextual")


@pytest.fixture
def path(tmp_path):
    path = tmp_path / "records.db"
    with SqliteMemoryStore(path, user_id="alice", clock=FixedClock(NOW)) as store:
        store.append(kind="conversation", content="We chose WAL mode for the SQLite store",
                     summary="storage decision", source=SOURCE)
        store.append(kind="conversation", content="The deploy uses blue green releases",
                     summary="", source={**SOURCE, "source_id": "chat-2"},
                     memory_id="deploy-note")
        store.append(kind="profile", content="prefers short answers", summary="",
                     source={**SOURCE, "source_id": "profile-1"})
    return path


def edit_record(path, memory_id, **changes):
    with sqlite3.connect(path) as db:
        (payload,) = db.execute("SELECT record FROM memories WHERE memory_id = ?",
                                (memory_id,)).fetchone()
        record = {**json.loads(payload), **changes}
        db.execute("UPDATE memories SET record = ? WHERE memory_id = ?",
                   (json.dumps(record, ensure_ascii=False), memory_id))


def derived_id(path, kind="conversation"):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT memory_id FROM memories WHERE kind = ? AND memory_id LIKE ?",
                          (kind, f"{kind}-%")).fetchone()[0]


def open_store(path):
    return SqliteMemoryStore(path, user_id="alice", clock=FixedClock(NOW))


def untouched_store_reads_and_recalls(path):
    """The control: before any edit, every read and every scorer works."""
    store = open_store(path)
    assert len(store.read_all()) == 3
    for scorer in SCORERS:
        hits = RecallEngine(store, scorer=scorer).recall("WAL deploy").hits
        assert {h.memory_id for h in hits} == {derived_id(path), "deploy-note"}


@pytest.mark.parametrize("change", [
    {"content": "We chose DELETE mode for the SQLite store"},
    {"summary": "storage decision (edited)"},  # the summary is not in the id: postings
    {"source": {**SOURCE, "title": "another chat"}},
    {"kind": "profile"},
])
def test_an_edited_body_under_a_derived_id_is_corruption(path, change):
    untouched_store_reads_and_recalls(path)
    memory_id = derived_id(path)
    edit_record(path, memory_id, **change)
    store = open_store(path)
    if "summary" in change:  # the id does not cover the summary; the postings do
        reads = [lambda s=s: RecallEngine(store, scorer=s).recall("WAL").hits
                 for s in SCORERS]
    else:
        reads = [lambda: store.get(memory_id), store.read_all, lambda: store.record_at(0),
                 *(lambda s=s: RecallEngine(open_store(path), scorer=s).recall("WAL").hits
                   for s in SCORERS)]
    for read in reads:
        with pytest.raises(RemoteMemoryCorruptionError, match="edited"):
            read()


def test_an_edited_profile_under_a_derived_id_is_corruption(path):
    memory_id = derived_id(path, "profile")
    edit_record(path, memory_id, content="prefers long answers")
    with pytest.raises(RemoteMemoryCorruptionError, match="edited"):
        open_store(path).latest_profile()


@pytest.mark.parametrize("scorer", SCORERS)
def test_an_edited_body_under_a_chosen_id_is_caught_by_its_postings(path, scorer):
    untouched_store_reads_and_recalls(path)
    edit_record(path, "deploy-note", content="The deploy uses canary releases")
    with pytest.raises(RemoteMemoryCorruptionError, match="postings do not match"):
        RecallEngine(open_store(path), scorer=scorer).recall("deploy releases")


def add_one_to_the_last_byte(blob):
    """The postings row of a term in one record ends with its count; the record columns'
    lengths blob holds one uint32 per record (the deploy note is record 1)."""
    return blob[:-1] + bytes([blob[-1] + 1])


def add_one_to_length_1(blob):
    return blob[:4] + (int.from_bytes(blob[4:8], "little") + 1).to_bytes(4, "little") + blob[8:]


@pytest.mark.parametrize("edit", [
    ("UPDATE postings SET data = ? WHERE term = 'deploy'",
     "SELECT data FROM postings WHERE term = 'deploy'", add_one_to_the_last_byte),  # tf + 1
    ("UPDATE record_columns SET lengths = ? WHERE segment = 0",
     "SELECT lengths FROM record_columns WHERE segment = 0", add_one_to_length_1),  # its length + 1
    ("DELETE FROM postings WHERE term = 'green'", None, None),
])
def test_edited_postings_are_caught_too(path, edit):
    update, select, change = edit
    with sqlite3.connect(path) as db:
        if select is None:
            db.execute(update)
        else:
            (blob,) = db.execute(select).fetchone()
            db.execute(update, (change(blob),))
    with pytest.raises(RemoteMemoryCorruptionError, match="postings do not match"):
        RecallEngine(open_store(path), scorer="bm25").recall("deploy")


def test_a_chosen_id_may_not_take_the_shape_of_a_derived_one(path):
    store = open_store(path)
    with pytest.raises(RemoteMemoryValidationError) as caught:
        store.append(kind="conversation", content="new", summary="", source=SOURCE,
                     memory_id="conversation-0123456789abcdef")
    assert caught.value.field == "memory_id"
    record = store.append(kind="conversation", content="newer", summary="", source=SOURCE)
    again = store.append_many([{"kind": "conversation", "content": "newest", "summary": "",
                                "source": SOURCE, "memory_id": None}])
    assert len(open_store(path).read_all()) == 5
    assert record.memory_id.startswith("conversation-") and again[0].memory_id != record.memory_id
