"""Dense recall, part 1: text → a unit vector, by a small static embedding model.

An :class:`Embedder` maps texts to L2-normalized float32 vectors (one row per text), so
that the cosine of two texts is the dot product of their rows. The one shipped with labmem
is :class:`WordLlamaEmbedder`: WordLlama's packaged ``l2_supercat`` model, a table of
32,000 token vectors of 256 dimensions (float16, 16 MB) that comes *inside* the
``wordllama`` wheel with its tokenizer, so it loads offline in about half a second. A
text's vector is the average of its tokens' vectors (Llama-2's tokenizer; a rare Chinese
character falls back to its UTF-8 bytes), normalized. Because the pooling is an average,
a query's cosine with a stored vector splits exactly into one part per token, hence per
query word (:meth:`WordLlamaEmbedder.word_contributions`): a dense hit can say which of
the query's words pulled it up.

Install it with ``pip install 'labmem[dense]'``; without it, asking for an embedder raises
:class:`EmbedderUnavailable` naming that command.

**Using a larger model.** Any static (token-table) model in the same two-file shape works:
a ``tokenizer.json`` in Hugging Face ``tokenizers`` format and a ``safetensors`` file
with one (vocabulary × dimensions) table — WordLlama's larger ``l3_supercat`` models, or a
Model2Vec model (``model.safetensors``, tensor ``embeddings``). Download the two files once
(on a machine that can), then::

    from labmem.recall.embedding import WordLlamaEmbedder
    from labmem.recall.dense import DenseScorer
    big = WordLlamaEmbedder.from_files("model.safetensors", "tokenizer.json",
                                       name="potion-base-8M")
    engine = RecallEngine(store, scorer=DenseScorer(embedder=big))

Stored vectors are kept per model name and dimensions (:mod:`labmem.recall.vectors`), so
switching models recomputes them once and never mixes two models' vectors.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from labmem.core.errors import InvalidInputError, LabmemError
from labmem.recall.protocols import SplitsCosine

if TYPE_CHECKING:
    from labmem.recall.store import StoredMemory

__all__ = ["Embedder", "WordLlamaEmbedder", "EmbedderUnavailable", "default_embedder",
           "record_text", "PACKAGED_MODEL"]

PACKAGED_MODEL = "wordllama-l2_supercat-256"
_PACKAGED_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_PACKAGED_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_TABLE_NAMES = ("embedding.weight", "embeddings")  # WordLlama's, Model2Vec's
_BATCH = 512  # texts tokenized and pooled at a time (bounds the padded token matrix)
_WORD = re.compile(r"\S+")


class EmbedderUnavailable(LabmemError):
    """The embedding model cannot be loaded (package missing, files unreadable)."""


@runtime_checkable
class Embedder(Protocol):
    """Texts → unit vectors: what dense recall needs of a model."""

    name: str  # names the model: stored vectors are kept per name (and dimensions)
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A float32 array (len(texts), dimensions), each row of norm 1 (or all zeros for
        a text with no tokens)."""


def record_text(record: StoredMemory) -> str:
    """What is embedded of a stored record: its source title (a speaker, a document), its
    summary and its content, one per line — the summary left out when the content starts
    with it (an average of token vectors counts repeated words twice: on LoCoMo's even
    half, repeating a 200-character prefix cost 0.04 of dense recall@10)."""
    summary = record.summary.strip()
    if summary and record.content.lstrip().startswith(summary):
        summary = ""
    return "\n".join(part for part in (record.source.title, summary, record.content)
                     if part.strip())


class WordLlamaEmbedder(SplitsCosine):
    """A static embedding model: average of token vectors, L2-normalized."""

    def __init__(self, table: np.ndarray, tokenizer, *, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("name", "must name the model",
                                    "pass name='…' (stored vectors are kept per model)")
        table = np.asarray(table)
        if table.ndim != 2 or not table.shape[0] or not table.shape[1]:
            raise InvalidInputError("weights", f"holds an array of shape {table.shape}, not a "
                                    "(vocabulary × dimensions) table",
                                    "pass a static model's token table")
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.tokenizer = tokenizer
        self.name = name
        self.dimensions = int(table.shape[1])

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(name={self.name!r}, dimensions={self.dimensions})"

    @classmethod
    def packaged(cls) -> WordLlamaEmbedder:
        """The model inside the ``wordllama`` wheel, loaded from its files (no network)."""
        try:
            import wordllama
        except ImportError:
            raise EmbedderUnavailable(_missing("wordllama")) from None
        root = Path(wordllama.__file__).parent
        return cls.from_files(root.joinpath(*_PACKAGED_WEIGHTS),
                              root.joinpath(*_PACKAGED_TOKENIZER), name=PACKAGED_MODEL)

    @classmethod
    def from_files(cls, weights: str | Path, tokenizer: str | Path, *, name: str,
                   tensor: str | None = None) -> WordLlamaEmbedder:
        """A static model from a ``safetensors`` token table and a ``tokenizer.json``.

        ``tensor`` names the table; by default the one tensor in the file, or the one
        called ``embedding.weight`` (WordLlama) or ``embeddings`` (Model2Vec)."""
        try:
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError:
            raise EmbedderUnavailable(_missing("safetensors and tokenizers")) from None
        for field, path in (("weights", weights), ("tokenizer", tokenizer)):
            if not Path(path).is_file():
                raise InvalidInputError(field, f"{Path(path).name!r} is not a file",
                                        "pass the path of the downloaded model file")
        with safe_open(str(weights), framework="np") as handle:
            keys = list(handle.keys())
            chosen = tensor or (keys[0] if len(keys) == 1 else
                                next((k for k in _TABLE_NAMES if k in keys), None))
            if chosen not in keys:
                raise InvalidInputError("tensor", f"{chosen!r} is not among {keys}",
                                        "pass tensor= naming the token table")
            table = handle.get_tensor(chosen)
        tok = Tokenizer.from_file(str(tokenizer))
        tok.no_padding()
        tok.no_truncation()
        return cls(table, tok, name=name)

    # -- embedding ----------------------------------------------------------------

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids (ids past the table are clipped to its last row)."""
        encoded = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        last = self.table.shape[0] - 1
        return [[min(i, last) for i in e.ids] for e in encoded]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (float32, one row each; zeros for a text without
        tokens), ``_BATCH`` texts at a time."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts", "must be a sequence of strings",
                                    "pass a list of texts, e.g. [query]")
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), _BATCH):
            ids = self.token_ids(texts[start:start + _BATCH])
            for row, token_ids in enumerate(ids, start):
                if token_ids:
                    out[row] = self.table[token_ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def word_contributions(self, text: str, unit: np.ndarray) -> dict[str, float]:
        """Each word of ``text`` (split on whitespace) with its part of the cosine between
        ``text``'s vector and the unit vector ``unit``: the vector is the average of the
        tokens' vectors over its norm, so the cosine is the sum over tokens of
        ``token · unit / (tokens · norm)``, and a word's part is the sum of its tokens'.
        The parts add up to the cosine (before rounding); a repeated word sums its
        occurrences."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        if not encoding.ids:
            return {}
        last = self.table.shape[0] - 1
        vectors = self.table[[min(i, last) for i in encoding.ids]].astype(np.float64)
        norm = float(np.linalg.norm(vectors.mean(axis=0)))
        if norm == 0.0:
            return {}
        token_parts = vectors @ np.asarray(unit, dtype=np.float64) / (len(vectors) * norm)
        spans = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
        parts: dict[str, float] = {}
        for (start, _), part in zip(encoding.offsets, token_parts.tolist(), strict=True):
            # a token belongs to the word it overlaps, or (a lone word-boundary mark such
            # as Llama's "▁" before a word) to the next word; else to the last word
            word = next((w for s, e, w in spans if e > start), spans[-1][2] if spans else "")
            parts[word] = parts.get(word, 0.0) + part
        return parts


def _missing(what: str) -> str:
    return (f"dense recall needs {what}, which is not installed; install it with "
            "pip install 'labmem[dense]'")


@functools.cache
def default_embedder() -> WordLlamaEmbedder:
    """The packaged WordLlama model, loaded once per process."""
    return WordLlamaEmbedder.packaged()
