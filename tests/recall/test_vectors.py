"""Stored vectors: computed when records are indexed, never for a stored record at query
time, and — like the recall sidecar — refused with the reason and rebuilt when stale
(appended, rewritten, another scope, another model) or tampered with (a flipped byte, a
truncated file, a lying header); SQLite rows likewise."""

import os
import shutil
import sqlite3

import numpy as np
import pytest

from labmem.core.arrayfile import read_arrays, write_arrays
from labmem.core.errors import InvalidInputError
from labmem.recall import RecallEngine, RemoteMemoryStore, SqliteMemoryStore
from labmem.recall.dense import DenseScorer
from labmem.recall.embedding import default_embedder
from labmem.recall.vectors import (
    MAGIC,
    StoredVectors,
    encode_vectors,
    store_vectors,
    vectors_path,
)
from tests.recall.sidecar_workers import NOW, PROFILE, drafts


class Counting:
    """The packaged model, counting every text it embeds."""

    def __init__(self, name=None):
        self.model = default_embedder()
        self.name = name or self.model.name
        self.dimensions = self.model.dimensions
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.model.embed(texts)

    def word_contributions(self, text, unit):
        return self.model.word_contributions(text, unit)


def open_store(directory, backend="jsonl", user="alice"):
    from labmem.core.clock import FixedClock

    if backend == "sqlite":
        return SqliteMemoryStore(directory / "records.sqlite", user_id=user,
                                 clock=FixedClock(NOW))
    return RemoteMemoryStore(directory / "records.jsonl", user_id=user, clock=FixedClock(NOW))


def filled(directory, backend="jsonl", n=30):
    store = open_store(directory, backend)
    store.append_many(drafts(0, n))
    store.append_many([PROFILE])
    return store


def fresh(store, embedder):
    """A new StoredVectors over a new store object: what a new process opens."""
    reopened = open_store(store.path.parent, "sqlite" if store.path.suffix == ".sqlite"
                          else "jsonl")
    vectors = StoredVectors(reopened, embedder)
    vectors.refresh()
    return vectors


def reference_rows(store):
    vectors = StoredVectors(store, default_embedder())
    vectors.refresh()
    return vectors.rows()


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_vectors_are_computed_once_and_kept(tmp_path, backend):
    store = filled(tmp_path, backend)
    model = Counting()
    first = StoredVectors(store, model)
    first.refresh()
    assert (first.status, first.embedded, first.covered) == ("built", 31, 31)
    codes, inv, conversation = first.rows()
    assert codes.dtype == np.int8 and codes.shape == (31, 256)
    assert conversation.tolist() == [True] * 30 + [False]
    again = fresh(store, model)
    assert (again.status, again.embedded) == ("loaded", 0)
    assert all(np.array_equal(a, b) for a, b in zip(again.rows(), first.rows(), strict=True))


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_a_query_never_embeds_a_stored_record(tmp_path, backend):
    store = filled(tmp_path, backend)
    model = Counting()
    engine = RecallEngine(store, scorer=DenseScorer(embedder=model))
    engine.recall("dog shelter", as_of=NOW)
    indexed = model.texts
    assert indexed == 31 + 1  # every record once when indexed, and the query
    for text in ("wal sqlite", "记忆 测试", "crash append"):
        engine.recall(text, as_of=NOW)
    assert model.texts == indexed + 3  # only the queries
    reference = RecallEngine(store, scorer=DenseScorer(embedder=model), backend="reference")
    reference.recall("budget", as_of=NOW)
    assert model.texts == indexed + 4


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_appended_records_get_vectors_incrementally(tmp_path, backend):
    store = filled(tmp_path, backend)
    model = Counting()
    vectors = StoredVectors(store, model)
    vectors.refresh()
    writer = open_store(tmp_path, backend)  # another process appends
    writer.append_many(drafts(100, 5))
    vectors.refresh()
    assert (vectors.embedded, vectors.covered) == (36, 36)
    reopened = fresh(store, model)  # kept: a new process embeds none of them again
    assert reopened.status == "loaded" and reopened.embedded == 0
    assert reopened.covered == 36
    assert all(np.array_equal(a, b)
               for a, b in zip(reopened.rows(), reference_rows(writer), strict=True))


# -- the JSONL file: stale or tampered, refused with the reason, rebuilt -----------------

def kept_file(store):
    vectors = StoredVectors(store, default_embedder())
    vectors.refresh()
    return vectors_path(store.path, vectors.model_key)


def reopen_status(store):
    again = fresh(store, default_embedder())
    want = reference_rows(open_store(store.path.parent))
    assert all(np.array_equal(a, b) for a, b in zip(again.rows(), want, strict=True))
    return again.status


def rewrite_meta(path, **changes):
    meta, arrays = read_arrays(path, MAGIC)
    arrays = {name: np.array(values) for name, values in arrays.items()}
    write_arrays(path, MAGIC, {**meta, **changes}, arrays)


def test_a_rewritten_records_file_is_refused(tmp_path):
    store = filled(tmp_path)
    kept_file(store)
    data = store.path.read_bytes()
    store.path.write_bytes(data.replace(b"wal", b"WAL", 1))  # same inode, edited prefix
    assert reopen_status(store) == "rebuilt: the records it covers were changed (checksum)"


def test_a_replaced_records_file_is_refused(tmp_path):
    store = filled(tmp_path)
    kept_file(store)
    shutil.copy(store.path, tmp_path / "copy")
    os.replace(tmp_path / "copy", store.path)  # another inode
    assert reopen_status(store).startswith("rebuilt: made for another file")


@pytest.mark.parametrize("key, value, reason", [
    ("user_scope", "someone-else", "made for user_scope"),
    ("model", "another-model", "made for model"),
    ("dimensions", 128, "made for dimensions"),
    ("encoding", "float16", "made for encoding"),
    ("covered_lines", 40, "damaged ('codes' is not"),
    ("covered_bytes", 10**9, "newer than the records"),
])
def test_a_lying_header_is_refused(tmp_path, key, value, reason):
    store = filled(tmp_path)
    rewrite_meta(kept_file(store), **{key: value})
    assert reopen_status(store).startswith(f"rebuilt: {reason}")


def test_another_models_file_is_never_read_as_this_models(tmp_path):
    store = filled(tmp_path)
    theirs = kept_file(store)
    mine = StoredVectors(store, Counting(name="another-model"))
    assert vectors_path(store.path, mine.model_key) != theirs
    shutil.copy(theirs, vectors_path(store.path, mine.model_key))
    mine.refresh()
    assert mine.status.startswith("rebuilt: made for model")


def test_a_flipped_byte_and_a_truncated_file_are_refused(tmp_path):
    store = filled(tmp_path)
    path = kept_file(store)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01
    path.write_bytes(bytes(data))
    assert reopen_status(store) == "rebuilt: damaged (the body's checksum does not match)"
    assert kept_file(store) == path and reopen_status(store) == "loaded"  # rebuilt, kept
    path.write_bytes(path.read_bytes()[:-50])
    assert reopen_status(store).startswith("rebuilt: torn")


def test_a_file_of_another_format_is_refused(tmp_path):
    store = filled(tmp_path)
    kept_file(store).write_bytes(b"not vectors at all")
    assert reopen_status(store).startswith("rebuilt: ")


# -- SQLite rows ---------------------------------------------------------------------------

def sqlite_status(store, statement, *params):
    kept_file_sqlite = StoredVectors(store, default_embedder())
    kept_file_sqlite.refresh()
    with sqlite3.connect(store.path) as db:
        db.execute(statement, params)
    again = fresh(store, default_embedder())
    want = reference_rows(open_store(store.path.parent, "sqlite"))
    assert all(np.array_equal(a, b) for a, b in zip(again.rows(), want, strict=True))
    assert fresh(store, default_embedder()).status == "loaded"  # the rebuild was kept
    return again.status


def test_sqlite_rows_that_were_tampered_with_are_refused(tmp_path):
    store = filled(tmp_path, "sqlite")
    assert sqlite_status(store, "UPDATE record_vectors SET codes = zeroblob(256) "
                         "WHERE ordinal = 3") == (
        "rebuilt: the vector at ordinal 3 is damaged (checksum)")
    assert sqlite_status(store, "UPDATE record_vectors SET memory_id = 'x' "
                         "WHERE ordinal = 4") == (
        "rebuilt: the vector at ordinal 4 names 'x', not the record stored there")
    assert sqlite_status(store, "DELETE FROM record_vectors WHERE ordinal = 5") == (
        "rebuilt: no vector for ordinal 5 (next is 6)")
    assert sqlite_status(store, "UPDATE record_vectors SET inv_norm = inv_norm * 2 "
                         "WHERE ordinal = 0").endswith("damaged (checksum)")


def test_sqlite_keeps_each_scope_and_model_apart(tmp_path):
    alice = filled(tmp_path, "sqlite")
    bob = open_store(tmp_path, "sqlite", user="bob")
    bob.append_many(drafts(500, 3))
    for store in (alice, bob):
        StoredVectors(store, default_embedder()).refresh()
    for store, count in ((bob, 3), (alice, 31)):
        again = StoredVectors(store, default_embedder())
        again.refresh()
        assert (again.status, again.covered) == ("loaded", count)
    other = StoredVectors(alice, Counting(name="another-model"))
    other.refresh()
    assert other.status == "built" and other.embedded == 31


# -- encodings -----------------------------------------------------------------------------

def test_int8_and_float16_keep_the_cosine_close_and_zero_rows_zero():
    vectors = default_embedder().embed(["dog shelter", "kitchen blue", ""])
    query = default_embedder().embed(["a puppy"])[0].astype(np.float64)
    exact = vectors.astype(np.float64) @ query
    for encoding, bound in (("int8", 5e-3), ("float16", 1e-3)):
        codes, inv = encode_vectors(vectors, encoding)
        cosines = (codes.astype(np.float64) @ query) * inv
        assert np.allclose(cosines, exact, atol=bound), encoding
        assert inv[2] == 0 and cosines[2] == 0


def test_a_bad_encoding_names_the_field(tmp_path):
    store = filled(tmp_path, n=2)
    with pytest.raises(InvalidInputError) as err:
        StoredVectors(store, default_embedder(), "int4")
    assert err.value.field == "encoding"
    with pytest.raises(InvalidInputError) as err:
        DenseScorer(encoding="float64")
    assert err.value.field == "encoding"


def test_store_vectors_is_one_object_per_store_and_model(tmp_path):
    store = filled(tmp_path, n=2)
    assert store_vectors(store) is store_vectors(store)
    assert store_vectors(store, encoding="float16") is not store_vectors(store)
