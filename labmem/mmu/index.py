"""The one term index of a memory service, shared with the Context MMU.

Every version of a record's searchable text (title + text) is a *document* with an
integer id, in the order it was written; each term keeps the ascending list of the
documents holding it. Only a record's latest document is live, so revising a text never
edits a posting list: the new document is appended, and the old one is skipped when a
query meets it (a purge, which rewrites the log, starts the index again).

Tokenizing is the costly part of reading a log, so documents are tokenized on the first
query that needs them, not when the log is opened: opening costs the JSON and the fold,
and a service that is never queried never tokenizes.

A service restored from its fold snapshot (:mod:`labmem.mmu.snapshot`) starts from
:class:`BasePostings` — the snapshot's postings, memory-mapped ``int32`` arrays of record
rows, one live document per row — and keeps the documents written after it in the
in-memory lists above; a write to a record retires its base document.
:meth:`KeyedTermIndex.export` writes both back as one set of arrays, live documents only.

Why not the recall engine's :class:`labmem.recall.index.TermIndex` (which the JSONL and the
SQLite recall indexes both implement): that one serves BM25 over an append-only store, so
it answers by record *position* with counts, lengths and corpus totals, and a record never
changes. This one is keyed by record id, its documents are revised and retired, and the
MMU asks only how many query terms each live record holds. Sharing one protocol would
mean giving one of them methods it has no use for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from itertools import chain

import numpy as np

from labmem.core.storage import paused_gc
from labmem.core.text import extract_terms
from labmem.core.validation import parse_json


class BasePostings:
    """The term index a fold snapshot restored: row ``r`` is the live document of
    ``keys[r]`` while ``alive[r]``; a term's rows are
    ``postings[term_starts[t]:term_starts[t + 1]]``. The term list and the key → row map
    are built on first use (a service that is never queried or written builds neither)."""

    def __init__(self, keys: list[str], terms: np.ndarray, term_starts: np.ndarray,
                 postings: np.ndarray, alive: np.ndarray) -> None:
        self.keys, self.term_starts, self.postings, self.alive = keys, term_starts, postings, alive
        self.live = int(np.count_nonzero(alive))
        self._terms_json: np.ndarray | None = terms
        self._term_ids: dict[str, int] = {}
        self._row_of: dict[str, int] | None = None

    @property
    def term_ids(self) -> dict[str, int]:
        if self._terms_json is not None:
            try:  # the one validating parser: bounded nesting, never a RecursionError
                terms = parse_json(self._terms_json.tobytes())
            except ValueError:
                terms = None
            if (not isinstance(terms, list) or len(terms) != len(self.term_starts) - 1
                    or not all(type(term) is str for term in terms)):
                from labmem.mmu.errors import MemoryCorruptionError

                raise MemoryCorruptionError(  # not a term list a fold wrote: never guessed
                    "records.jsonl.fold", None, "its term list is damaged; delete the fold "
                    "snapshot and open the service again (the log is folded)")
            self._term_ids = {term: i for i, term in enumerate(terms)}
            self._terms_json = None
        return self._term_ids

    def retire(self, key: str) -> None:
        """``key``'s base document is no longer its live one."""
        if self._row_of is None:
            self._row_of = {k: row for row, k in enumerate(self.keys)}
        row = self._row_of.get(key)
        if row is not None and self.alive[row]:
            self.alive[row] = False
            self.live -= 1

    def count(self, terms: list[str], counts: Counter[str]) -> None:
        ids = [i for i in map(self.term_ids.get, terms) if i is not None]
        if not ids:
            return
        starts, postings = self.term_starts, self.postings
        rows = np.concatenate([postings[starts[i]:starts[i + 1]] for i in ids])
        rows = rows[self.alive[rows]]
        keys = self.keys
        found, held = np.unique(rows, return_counts=True)
        for row, n in zip(found.tolist(), held.tolist(), strict=True):
            counts[keys[row]] = n

    def live_postings(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(terms, term id per posting, row per posting)`` of the live rows."""
        terms = list(self.term_ids)
        per_term = np.diff(self.term_starts)
        term_of = np.repeat(np.arange(len(terms), dtype=np.int64), per_term)
        keep = self.alive[self.postings]
        return terms, term_of[keep], np.asarray(self.postings[keep], dtype=np.int64)


class KeyedTermIndex:
    """term → ascending integer document ids; one live document per key (a record id).

    ``text_of(key)`` gives a key's current searchable text; it is asked only when the
    document is tokenized, so the index holds no copy of any text.
    """

    def __init__(self, text_of: Callable[[str], str], base: BasePostings | None = None) -> None:
        self._text_of = text_of
        self._base = base
        self._postings: defaultdict[str, list[int]] = defaultdict(list)
        self._keys: list[str] = []  # document id -> key
        self._live: dict[str, int] = {}  # key -> its live document id
        self._untokenized: list[int] = []  # documents not yet in the postings
        self.tokenized = 0  # instrumentation: documents tokenized so far

    def __len__(self) -> int:
        """Live documents."""
        return len(self._live) + (self._base.live if self._base is not None else 0)

    def put(self, key: str) -> None:
        """``key``'s text changed (or is new): it gets a new live document id."""
        if self._base is not None:
            self._base.retire(key)
        doc = len(self._keys)
        self._keys.append(key)
        self._live[key] = doc
        self._untokenized.append(doc)

    def remove(self, key: str) -> None:
        """``key`` has no live document any more (its postings are skipped from now on)."""
        if self._base is not None:
            self._base.retire(key)
        self._live.pop(key, None)

    def _tokenize_pending(self) -> None:
        postings, live, keys = self._postings, self._live, self._keys
        for doc in self._untokenized:
            key = keys[doc]
            if live.get(key) != doc:
                continue  # replaced or removed before anyone asked: never tokenized
            for term in extract_terms(self._text_of(key)):
                postings[term].append(doc)
            self.tokenized += 1
        self._untokenized.clear()

    def match_counts(self, terms: Iterable[str]) -> Counter[str]:
        """For each key whose live document holds some of ``terms``: how many of them."""
        if self._untokenized:
            with paused_gc():
                self._tokenize_pending()
        live, keys = self._live, self._keys
        counts: Counter[str] = Counter()
        terms = list(dict.fromkeys(terms))
        if self._base is not None:
            self._base.count(terms, counts)
        for term in terms:
            for doc in self._postings.get(term, ()):  # get: a miss adds no empty list
                key = keys[doc]
                if live.get(key) == doc:
                    counts[key] += 1
        return counts

    def export(self, row_of: Mapping[str, int], rows: int
               ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """The live documents as arrays over record rows (``row_of``: key → row; a base
        row keeps its number): ``(terms, term_starts, postings, alive)``. Terms that only
        dead documents held are left out. Tokenizes what was not yet."""
        if self._untokenized:
            with paused_gc():
                self._tokenize_pending()
        vocab: dict[str, int] = {}
        term_parts, row_parts = [], []
        alive = np.zeros(rows, dtype=bool)
        if self._base is not None:
            terms, term_of, base_rows = self._base.live_postings()
            vocab = {term: i for i, term in enumerate(terms)}
            term_parts.append(term_of)
            row_parts.append(base_rows)
            alive[: len(self._base.alive)] = self._base.alive
        live, keys = self._live, self._keys
        doc_row = np.array([row_of[key] if live.get(key) == doc else -1
                            for doc, key in enumerate(keys)], dtype=np.int64)
        alive[doc_row[doc_row >= 0]] = True
        lengths = [len(docs) for docs in self._postings.values()]
        ids = [vocab.setdefault(term, len(vocab)) for term in self._postings]
        docs = np.fromiter(chain.from_iterable(self._postings.values()), dtype=np.int64,
                           count=sum(lengths))
        term_of = np.repeat(np.asarray(ids, dtype=np.int64), lengths)
        mapped = doc_row[docs] if len(docs) else docs
        keep = mapped >= 0
        term_parts.append(term_of[keep])
        row_parts.append(mapped[keep])
        term_of = np.concatenate(term_parts)
        row_of_posting = np.concatenate(row_parts)
        if self._base is not None:  # base and new documents interleave per term
            order = np.argsort(term_of, kind="stable")
            term_of, row_of_posting = term_of[order], row_of_posting[order]
        per_term = np.bincount(term_of, minlength=len(vocab))
        used = per_term > 0  # a term only dead documents held is not written
        names = list(vocab)
        terms = [names[i] for i in np.flatnonzero(used).tolist()]
        starts = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(per_term[used], out=starts[1:])
        return terms, starts, row_of_posting.astype(np.int32), alive
