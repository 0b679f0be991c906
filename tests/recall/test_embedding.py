"""The embedding model behind dense recall: the packaged WordLlama model loads offline, a
larger model's files load through the same path, vectors are unit rows, and a cosine
splits exactly over the query's words."""

import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from labmem.core.errors import InvalidInputError
from labmem.recall.embedding import (
    PACKAGED_MODEL,
    Embedder,
    EmbedderUnavailable,
    WordLlamaEmbedder,
    default_embedder,
    record_text,
)
from labmem.recall.store import MemoryKind, MemorySource, StoredMemory

TEXTS = ["I adopted a puppy from the shelter in May", "We painted the kitchen blue",
         "记忆系统的设计", "", "   "]


def packaged_files():
    import wordllama

    root = Path(wordllama.__file__).parent
    return (root / "weights" / "l2_supercat_256.safetensors",
            root / "tokenizers" / "l2_supercat_tokenizer_config.json")


def test_the_packaged_model_loads_offline_once_per_process():
    model = default_embedder()
    assert model is default_embedder()
    assert isinstance(model, Embedder)
    assert (model.name, model.dimensions) == (PACKAGED_MODEL, 256)
    assert model.table.shape == (32000, 256)


def test_vectors_are_unit_rows_and_a_text_without_tokens_is_zero():
    vectors = default_embedder().embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 256)
    assert np.allclose(np.linalg.norm(vectors[[0, 1, 2, 4]], axis=1), 1.0, atol=1e-6)
    assert not vectors[3].any()  # no token at all (whitespace is a token for Llama's)
    one_by_one = np.vstack([default_embedder().embed([t]) for t in TEXTS])
    assert np.array_equal(vectors, one_by_one)  # batching changes nothing


def test_a_larger_model_loads_from_its_files_by_the_same_path():
    weights, tokenizer = packaged_files()
    other = WordLlamaEmbedder.from_files(weights, tokenizer, name="my-model")
    assert other.name == "my-model" and other.dimensions == 256
    assert np.array_equal(other.embed(TEXTS), default_embedder().embed(TEXTS))
    named = WordLlamaEmbedder.from_files(weights, tokenizer, name="m", tensor="embedding.weight")
    assert np.array_equal(named.table, other.table)


@pytest.mark.parametrize("change, field", [
    ({"weights": "missing.safetensors"}, "weights"),
    ({"tokenizer": "missing.json"}, "tokenizer"),
    ({"tensor": "no.such.tensor"}, "tensor"),
    ({"name": " "}, "name"),
])
def test_bad_model_files_name_the_argument(tmp_path, change, field):
    weights, tokenizer = packaged_files()
    args = {"weights": weights, "tokenizer": tokenizer, "name": "m"}
    for key, value in change.items():
        args[key] = tmp_path / value if key in ("weights", "tokenizer") else value
    with pytest.raises(InvalidInputError) as err:
        WordLlamaEmbedder.from_files(**args)
    assert err.value.field == field


def test_texts_must_be_a_sequence_of_strings():
    for bad in ("one string", [1, 2], ["ok", None]):
        with pytest.raises(InvalidInputError) as err:
            default_embedder().embed(bad)
        assert err.value.field == "texts"


def test_without_the_package_the_error_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "wordllama", None)  # import wordllama fails
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'labmem\[dense\]'"):
        WordLlamaEmbedder.packaged()


@pytest.mark.parametrize("query", ["Where did Caroline get her dog?", "记忆 系统",
                                   "the the the kitchen"])
def test_word_contributions_add_up_to_the_cosine(query):
    model = default_embedder()
    stored = model.embed(TEXTS[:3]).astype(np.float64)
    q = model.embed([query])[0].astype(np.float64)
    for row in stored:
        parts = model.word_contributions(query, row)
        assert set(parts) <= set(query.split())
        assert sum(parts.values()) == pytest.approx(float(q @ row), abs=1e-5)
    assert model.word_contributions("", stored[0]) == {}


def test_record_text_is_title_summary_content_without_a_repeated_summary():
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def record(summary, content):
        return StoredMemory(memory_id="m1", user_scope="u", kind=MemoryKind.CONVERSATION,
                            content=content, summary=summary, stored_at=at,
                            source=MemorySource("s:1", "chat", "Ana", at))

    assert record_text(record("dog", "we adopted a dog")) == "Ana\ndog\nwe adopted a dog"
    assert record_text(record("we adopted", "we adopted a dog")) == "Ana\nwe adopted a dog"
    assert record_text(record("", "x")) == "Ana\nx"
