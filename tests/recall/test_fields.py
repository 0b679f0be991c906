"""The record context read back from a sidecar is the one built in memory — the same
snapshot arrays, lengths and thread count, before and after records are appended — and
the contextual scorer answers the same from either, whatever its weights. The sidecar's
string lists, kept packed (:class:`PackedStrings`), read and find exactly what the list
holds, and a packed list of another shape is refused."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.recall import ContextualScorer
from labmem.recall.fields import ContextArrays, record_context
from labmem.recall.sidecar import PackedStrings
from tests.recall.sidecar_workers import NOW, drafts, open_store, write_records
from tests.recall.sidecar_workers import engine as sidecar_engine

QUERIES = ["dog shelter may", "Ana crash thread", "记忆 分层 测试", "adopted 1 july 2026",
           "Chen 陈 note wal", "absent words only"]
WEIGHTS = [{}, {"b": 0.5}, {"analyzer": "plain", "date": 0.0},
           {"thread": 0.0, "previous": 0.0}, {"title": 0.0, "k1": 0.6, "next": 0.0}]


def engine(path, scorer="contextual", *, sidecar=True):
    return sidecar_engine(path, scorer, sidecar=sidecar)


@pytest.fixture
def records(tmp_path):
    path = write_records(tmp_path / "records.jsonl", 90, 30)
    engine(path).recall("dog")  # writes the sidecar
    return path


def snapshot(e):
    """Everything the scorer reads from the context, as plain lists."""
    e.recall("dog", limit=1, as_of=NOW)
    context = record_context(e.index)
    arrays = context.arrays()
    seen = {name: getattr(arrays, name) for name in ContextArrays.__dataclass_fields__}
    seen = {name: value.tolist() if isinstance(value, np.ndarray) else value
            for name, value in seen.items()}
    return seen, context.lengths().tolist(), context.threads, len(context.thread_names)


def test_a_context_read_back_from_the_sidecar_is_the_one_built_in_memory(records):
    loaded = engine(records)
    assert snapshot(loaded) == snapshot(engine(records, sidecar=False))
    assert loaded.index.sidecar_status == "loaded"
    # appended to the same threads: their last records get "next" links in memory
    open_store(records).append_many(drafts(120, 20, "n"))
    assert snapshot(loaded) == snapshot(engine(records, sidecar=False))


@pytest.mark.parametrize("weights", WEIGHTS)
def test_the_scorer_answers_the_same_from_the_sidecar(records, weights):
    def answers(e):
        return [e.recall(q, limit=5, as_of=NOW).to_json() for q in QUERIES]

    loaded = engine(records, ContextualScorer(**weights))
    assert answers(loaded) == answers(engine(records, ContextualScorer(**weights),
                                             sidecar=False))
    open_store(records).append_many(drafts(120, 20, "n"))
    assert answers(loaded) == answers(engine(records, ContextualScorer(**weights),
                                             sidecar=False))


# -- packed strings ------------------------------------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)  # UTF-8-encodable


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=12), texts)
def test_packed_strings_read_and_find_what_the_list_holds(strings, other):
    raw = json.dumps(strings, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    for packed in (PackedStrings.from_json(np.frombuffer(raw, dtype=np.uint8)),
                   PackedStrings.of(strings)):
        back = PackedStrings.from_arrays(packed.arrays("x_"), "x_")
        for each in (packed, back):
            assert len(each) == len(strings)
            assert list(each) == strings
            assert [each[i] for i in range(len(strings))] == strings
            for probe in [*strings, other]:
                assert each.find(probe) == (strings.index(probe) if probe in strings
                                            else None)


def test_a_packed_list_of_another_shape_is_refused():
    good = PackedStrings.of(["dog", "陈", "wal"]).arrays("x_")
    assert list(PackedStrings.from_arrays(good, "x_")) == ["dog", "陈", "wal"]

    def changed(**arrays):
        return PackedStrings.from_arrays({**good, **arrays}, "x_")

    assert PackedStrings.from_arrays({"x_utf8": good["x_utf8"]}, "x_") is None  # missing
    assert changed(x_ends=good["x_ends"] + 1) is None  # past the buffer
    assert changed(x_ends=np.array([3, 4, 8], dtype=np.int32)) is None  # inside 陈
    assert changed(x_starts=good["x_starts"].astype(np.float64)) is None  # not whole
    assert changed(x_starts=good["x_starts"][:2]) is None  # ranges of two lengths
    assert changed(x_utf8=np.frombuffer(b"dog\xff\xfe\xfdwal", dtype=np.uint8)) is None
