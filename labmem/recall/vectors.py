"""Dense recall, part 2: every stored record's vector, computed once and kept beside it.

A record's vector (:func:`~labmem.recall.embedding.record_text` through an
:class:`~labmem.recall.embedding.Embedder`) is computed when the record is first indexed
— by whichever process first refreshes after it was written — and kept; a query embeds
only its own text. :class:`StoredVectors` follows a store the way its term index does:
:meth:`StoredVectors.refresh` embeds only the records appended since (by any process).

**Compact.** A vector is kept as int8 codes — each coordinate rounded to one of 255
steps of the row's largest coordinate — and the inverse norm of those codes, so the cosine
with a unit query vector q is ``(codes · q) × inv_norm``: exact for the rounded vector,
with no scale to undo. 256 dimensions cost 260 bytes a record (float32: 1,024; float16:
512 + 4). What the rounding costs in recall was measured on LoCoMo with the packaged
model: nothing measurable — dense recall@10 0.496 (int8), 0.495 (float16), 0.495 (float32)
on the even half (bench/results/tune_fused.md), 0.460 vs 0.459 (float16) on all ten
(bench/results/locomo_eval.md). ``encoding="float16"`` is the other choice offered.

**Trusted like the recall sidecar.** For a JSONL store the vectors live in one file beside
the records (``records.jsonl.vectors-<model>-<dims>-<encoding>``, the array-file format of
:mod:`labmem.core.arrayfile`), refused — with the reason in :attr:`StoredVectors.status` —
and rebuilt from the records when it is torn or damaged (its checksums), was made for
another user scope, model, dimensions or encoding, or does not describe this records file
(its device and inode, at least as long as the prefix it covers, that prefix unchanged:
:func:`~labmem.recall.sidecar.check_records_file`), or its arrays are not the shape its
header claims. For a SQLite store they live in the database, table ``record_vectors``, one
row per scope, model and ordinal, with a CRC-32 of the row's memory id and bytes: a row
set that skips an ordinal, names another record than the one at its ordinal, or fails
its checksum is dropped and rebuilt. Records in SQLite are never rewritten, so a covered
row stays valid; new records get new rows at the next refresh.
"""

from __future__ import annotations

import os
import re
import struct
import weakref
import zlib
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from labmem.core.arrayfile import ArrayFileRefused, prefix_crc32, read_arrays, write_arrays
from labmem.core.errors import InvalidInputError
from labmem.core.storage import JsonlLog
from labmem.recall.embedding import Embedder, default_embedder, record_text
from labmem.recall.protocols import KeepsVectors, offers
from labmem.recall.store import (
    MemoryKind,
    RemoteMemoryCorruptionError,
    StoredMemory,
    decode_stored_line,
)

__all__ = ["StoredVectors", "store_vectors", "encode_vectors", "ENCODINGS", "VectorsRefused",
           "vectors_path", "exact_cosine", "scan_cosines"]

ENCODINGS = {"int8": np.int8, "float16": np.float16}
MAGIC = b"LMVECS01"
VERSION = 1
_INT8_STEPS = 127.0
_GROWTH = 1.5


class VectorsRefused(Exception):
    """Why stored vectors cannot be used (they are rebuilt; nothing reaches the user)."""


def encode_vectors(vectors: np.ndarray, encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, inverse norms of the codes) of float vectors: int8 — each row scaled so
    its largest coordinate is ±127 and rounded; float16 — rounded to half precision. A
    zero row gets inverse norm 0 (its cosine with anything is 0)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if encoding == "int8":
        peak = np.abs(vectors).max(axis=1, keepdims=True) if len(vectors) else vectors[:, :1]
        scaled = np.divide(vectors * _INT8_STEPS, peak, out=np.zeros_like(vectors),
                           where=peak > 0)
        codes = np.rint(scaled).astype(np.int8)
    else:
        codes = vectors.astype(np.float16)
    norms = np.linalg.norm(codes.astype(np.float64), axis=1)
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return codes, inv.astype(np.float32)


def exact_cosine(codes: np.ndarray, inv_norm: float, query: np.ndarray) -> float:
    """The cosine of one stored row with the unit ``query`` (float64): the number every
    backend shows (estimates may differ from it in the last bits; this never does)."""
    return float(np.dot(codes.astype(np.float64), query)) * float(inv_norm)


def scan_cosines(codes: np.ndarray, inv_norms: np.ndarray, query: np.ndarray,
                 chunk: int = 1024) -> np.ndarray:
    """Every row's estimated cosine with the unit ``query``: float32 products, ``chunk``
    rows at a time (a chunk of 1,024 × 256 floats stays in the CPU cache; no float copy of
    the whole matrix is ever made). An exact scan: what
    bench/locomo_eval.py times at growing store sizes."""
    q = np.asarray(query, dtype=np.float32)
    out = np.empty(len(inv_norms), dtype=np.float64)
    for start in range(0, len(inv_norms), chunk):
        stop = min(len(inv_norms), start + chunk)
        out[start:stop] = (codes[start:stop].astype(np.float32) @ q) * inv_norms[start:stop]
    return out


def vectors_path(records_path: str | Path, model_key: str) -> Path:
    """Where a JSONL store's vectors for ``model_key`` live: beside the records."""
    records_path = Path(records_path)
    return records_path.with_name(f"{records_path.name}.vectors-{model_key}")


def _model_key(embedder: Embedder, encoding: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", embedder.name)
    return f"{name}-{embedder.dimensions}-{encoding}"


class StoredVectors:
    """The vectors of one store's records for one model and encoding, by position (the
    store's order: a JSONL line, a SQLite ordinal — the term index's positions)."""

    def __init__(self, store, embedder: Embedder, encoding: str = "int8") -> None:
        if encoding not in ENCODINGS:
            raise InvalidInputError("encoding", f"{encoding!r} is not a vector encoding",
                                    f"use one of {sorted(ENCODINGS)}")
        self.store = store
        self.embedder = embedder
        self.encoding = encoding
        self.model_key = _model_key(embedder, encoding)
        self.dimensions = embedder.dimensions
        self.status = "not opened"  # "built", "loaded", "rebuilt: <why the kept ones were refused>"
        self.embedded = 0  # record texts this instance embedded (tests count them)
        self.covered = 0  # records (of any kind) with a vector
        self._codes = np.zeros((0, self.dimensions), dtype=ENCODINGS[encoding])
        self._inv = np.zeros(0, dtype=np.float32)
        self._conversation = np.zeros(0, dtype=bool)
        self._persisted = 0
        self._opened = False
        self._shelf = (_SqliteShelf(self) if offers(store, KeepsVectors)
                       else _FileShelf(self))

    def __repr__(self) -> str:
        return (f"StoredVectors(model={self.model_key!r}, covered={self.covered}, "
                f"status={self.status!r})")

    # -- following the store ----------------------------------------------------------

    def refresh(self) -> None:
        """Open (or rebuild) the kept vectors on first use; then embed only the records
        appended since, and keep them."""
        if not self._opened:
            self._opened = True
            try:
                codes, inv, conversation = self._shelf.load()
            except VectorsRefused as refused:
                self.status = ("built" if str(refused) == "missing"
                               else f"rebuilt: {refused}")
                self._shelf.restart()
            else:
                self.status = "loaded"
                self._append(codes, inv, conversation)
                self._persisted = self.covered
        fresh = self._shelf.follow()
        if fresh:
            texts = [record_text(r) for r in fresh]
            self.embedded += len(texts)
            codes, inv = encode_vectors(self.embedder.embed(texts), self.encoding)
            conversation = np.array([r.kind is MemoryKind.CONVERSATION for r in fresh])
            start = self.covered
            self._append(codes, inv, conversation)
            self._shelf.keep(start, fresh)

    def _append(self, codes: np.ndarray, inv: np.ndarray, conversation: np.ndarray) -> None:
        """Add rows, growing the buffers by half their size when full (amortized O(1))."""
        end = self.covered + len(inv)
        if end > len(self._inv):
            size = max(end, int(len(self._inv) * _GROWTH) + 64)
            for name in ("_codes", "_inv", "_conversation"):
                old = getattr(self, name)
                grown = np.zeros((size, *old.shape[1:]), dtype=old.dtype)
                grown[:self.covered] = old[:self.covered]
                setattr(self, name, grown)
        self._codes[self.covered:end] = codes
        self._inv[self.covered:end] = inv
        self._conversation[self.covered:end] = conversation
        self.covered = end

    # -- reading ----------------------------------------------------------------------

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, inverse norms, is-a-conversation-record) of every covered position."""
        n = self.covered
        return self._codes[:n], self._inv[:n], self._conversation[:n]

    def cosines(self, query: np.ndarray, end: int | None = None) -> np.ndarray:
        """Estimated cosines of positions 0 to ``end`` − 1 with the unit ``query``
        (:func:`scan_cosines`)."""
        end = self.covered if end is None else end
        return scan_cosines(self._codes[:end], self._inv[:end], query)

    def cosine(self, position: int, query: np.ndarray) -> float:
        """The exact cosine of ``position`` (:func:`exact_cosine`)."""
        return exact_cosine(self._codes[position], self._inv[position],
                            np.asarray(query, dtype=np.float64))

    def unit(self, position: int) -> np.ndarray:
        """The stored (rounded) vector of ``position`` scaled to norm 1, float64."""
        return self._codes[position].astype(np.float64) * float(self._inv[position])


class _FileShelf:
    """A JSONL store's vectors: one array file beside the records, rewritten atomically
    when enough new records were embedded (an eighth of what it holds, at least one)."""

    def __init__(self, owner: StoredVectors) -> None:
        self.owner = owner
        self.path = vectors_path(owner.store.path, owner.model_key)
        self.log: JsonlLog | None = None

    def _follow_from(self, offset: int, lines: int) -> None:
        store = self.owner.store
        name, scope = store.path.name, store.user_scope
        self.log = JsonlLog(store.path, decode=lambda line, obj: decode_stored_line(
            name, scope, line, obj), corruption_error=RemoteMemoryCorruptionError,
            lock_factory=lambda path: nullcontext(), start=(offset, lines))

    def load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from labmem.recall.sidecar import SidecarRefused, check_records_file

        owner = self.owner
        if not self.path.exists():
            raise VectorsRefused("missing")
        try:
            meta, arrays = read_arrays(self.path, MAGIC)
        except ArrayFileRefused as refused:
            raise VectorsRefused(str(refused)) from None
        expected = {"version": VERSION, "user_scope": owner.store.user_scope,
                    "model": owner.embedder.name, "dimensions": owner.dimensions,
                    "encoding": owner.encoding}
        for key, value in expected.items():
            if meta.get(key) != value:
                raise VectorsRefused(f"made for {key} {meta.get(key)!r}, not {value!r}")
        lines = meta.get("covered_lines")
        if type(lines) is not int or lines < 0:
            raise VectorsRefused(f"damaged metadata (covered_lines is {lines!r})")
        shapes = {"codes": (np.dtype(ENCODINGS[owner.encoding]), lines * owner.dimensions),
                  "inv_norms": (np.dtype(np.float32), lines),
                  "conversation": (np.dtype(np.uint8), lines)}
        for key, (dtype, count) in shapes.items():
            found = arrays.get(key)
            if found is None or found.dtype != dtype or found.size != count:
                raise VectorsRefused(f"damaged ({key!r} is not {count} {dtype} values)")
        try:
            check_records_file(owner.store.path, meta)
        except SidecarRefused as refused:
            raise VectorsRefused(str(refused)) from None
        self._follow_from(int(meta["covered_bytes"]), lines)
        return (arrays["codes"].reshape(lines, owner.dimensions), arrays["inv_norms"],
                arrays["conversation"].astype(bool))

    def restart(self) -> None:
        self._follow_from(0, 0)

    def follow(self) -> list[StoredMemory]:
        return self.log.refresh()

    def keep(self, start: int, fresh: Sequence[StoredMemory]) -> None:
        owner = self.owner
        if owner.covered - owner._persisted < max(1, owner._persisted // 8):
            return
        codes, inv, conversation = owner.rows()
        covered = self.log.offset
        try:
            with open(owner.store.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                crc = prefix_crc32(handle.fileno(), covered)
            meta = {"version": VERSION, "user_scope": owner.store.user_scope,
                    "model": owner.embedder.name, "dimensions": owner.dimensions,
                    "encoding": owner.encoding, "device": stat.st_dev, "inode": stat.st_ino,
                    "covered_bytes": covered, "covered_lines": owner.covered,
                    "covered_crc32": crc}
            write_arrays(self.path, MAGIC, meta, {
                "codes": codes.reshape(-1), "inv_norms": inv,
                "conversation": conversation.astype(np.uint8)})
        except OSError as exc:
            owner.status += f"; not kept ({exc.strerror or exc})"
            return
        owner._persisted = owner.covered


class _SqliteShelf:
    """A SQLite store's vectors: rows of ``record_vectors`` in the same database, written
    as soon as they are computed."""

    def __init__(self, owner: StoredVectors) -> None:
        self.owner = owner
        self.replace_all = False

    def load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        owner, store = self.owner, self.owner.store
        rows = store.vector_rows(owner.model_key)
        if not rows:
            raise VectorsRefused("missing")
        dtype = np.dtype(ENCODINGS[owner.encoding])
        ids = store.memory_ids_below(len(rows))
        codes = np.zeros((len(rows), owner.dimensions), dtype=dtype)
        inv = np.zeros(len(rows), dtype=np.float32)
        conversation = np.zeros(len(rows), dtype=bool)
        for at, (ordinal, memory_id, kind, inv_norm, blob, crc) in enumerate(rows):
            if ordinal != at:
                raise VectorsRefused(f"no vector for ordinal {at} (next is {ordinal})")
            if at >= len(ids) or memory_id != ids[at]:
                raise VectorsRefused(f"the vector at ordinal {at} names {memory_id!r}, "
                                     "not the record stored there")
            if (not isinstance(blob, bytes) or len(blob) != owner.dimensions * dtype.itemsize
                    or type(inv_norm) is not float or kind not in (0, 1)
                    or _row_crc(memory_id, kind, inv_norm, blob) != crc):
                raise VectorsRefused(f"the vector at ordinal {at} is damaged (checksum)")
            codes[at] = np.frombuffer(blob, dtype=dtype)
            inv[at] = inv_norm
            conversation[at] = kind
        return codes, inv, conversation

    def restart(self) -> None:
        self.replace_all = True

    def follow(self) -> list[StoredMemory]:
        start = self.owner.covered
        return list(self.owner.store.records_from(start, len(self.owner.store)))

    def keep(self, start: int, fresh: Sequence[StoredMemory]) -> None:
        owner = self.owner
        codes, inv, conversation = owner.rows()
        rows = []
        for at, record in enumerate(fresh, start):
            blob, inv_norm, kind = codes[at].tobytes(), float(inv[at]), int(conversation[at])
            rows.append((at, record.memory_id, kind, inv_norm, blob,
                         _row_crc(record.memory_id, kind, inv_norm, blob)))
        owner.store.write_vector_rows(owner.model_key, rows, replace_all=self.replace_all)
        self.replace_all = False
        owner._persisted = owner.covered


def _row_crc(memory_id: str, conversation: int, inv_norm: float, blob: bytes) -> int:
    return zlib.crc32(memory_id.encode("utf-8") + struct.pack("<Bd", conversation, inv_norm)
                      + blob)


_OPEN: weakref.WeakKeyDictionary[Any, dict[str, StoredVectors]] = weakref.WeakKeyDictionary()


def store_vectors(store, embedder: Embedder | None = None,
                  encoding: str = "int8") -> StoredVectors:
    """The :class:`StoredVectors` of ``store`` for ``embedder`` (default: the packaged
    model) and ``encoding``: one per store object, so every engine over it shares them.
    Not refreshed: call :meth:`StoredVectors.refresh`."""
    embedder = default_embedder() if embedder is None else embedder
    kept = _OPEN.setdefault(store, {})
    key = _model_key(embedder, encoding) if encoding in ENCODINGS else encoding
    found = kept.get(key)
    if found is None or found.embedder is not embedder:
        found = kept[key] = StoredVectors(store, embedder, encoding)
    return found
