"""The one term index of a memory service, shared with the Context MMU.

Every version of a record's searchable text (title + text) is a *document* with an
integer id, in the order it was written; each term keeps the ascending list of the
documents holding it. Only a record's latest document is live, so revising a text never
edits a posting list: the new document is appended, and the old one is skipped when a
query meets it (a purge, which rewrites the log, starts the index again).

Tokenizing is the costly part of reading a log, so documents are tokenized on the first
query that needs them, not when the log is opened: opening costs the JSON and the fold,
and a service that is never queried never tokenizes.
"""

from __future__ import annotations

import gc
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from labmem.core.text import extract_terms


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside: replaying or indexing 100k records allocates
    millions of acyclic objects, and each batch of them would make the collector walk all
    the ones before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class TermIndex:
    """term → ascending integer document ids; one live document per key (a record id).

    ``text_of(key)`` gives a key's current searchable text; it is asked only when the
    document is tokenized, so the index holds no copy of any text.
    """

    def __init__(self, text_of: Callable[[str], str]) -> None:
        self._text_of = text_of
        self._postings: defaultdict[str, list[int]] = defaultdict(list)
        self._keys: list[str] = []  # document id -> key
        self._live: dict[str, int] = {}  # key -> its live document id
        self._untokenized: list[int] = []  # documents not yet in the postings
        self.tokenized = 0  # instrumentation: documents tokenized so far

    def __len__(self) -> int:
        """Live documents."""
        return len(self._live)

    def put(self, key: str) -> None:
        """``key``'s text changed (or is new): it gets a new live document id."""
        doc = len(self._keys)
        self._keys.append(key)
        self._live[key] = doc
        self._untokenized.append(doc)

    def remove(self, key: str) -> None:
        """``key`` has no live document any more (its postings are skipped from now on)."""
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
        for term in dict.fromkeys(terms):
            for doc in self._postings.get(term, ()):  # get: a miss adds no empty list
                key = keys[doc]
                if live.get(key) == doc:
                    counts[key] += 1
        return counts
