"""What recall may ask beyond the minimum: one protocol per trick.

The recall engine needs only :class:`~labmem.recall.index.TermIndex` from an index (the
records, their postings, the corpus totals), only the :class:`~labmem.recall.scorers
.Scorer` methods from a scorer, and only :class:`~labmem.recall.store.RecallStore` from a
store. Everything below is optional. A class offers a trick by *declaring* the protocol
(it names it among its bases, so a reader sees the promise where the class is defined),
and the code that can use the trick checks for it with :func:`offers`, once per class,
instead of probing attribute names:

==============================  ============================================  ======================
protocol                        what it offers                                who uses it
==============================  ============================================  ======================
:class:`LendsPostings`          a term's (positions, counts) arrays without   packed estimates,
                                a copy; every record's length and time        MaxScore pruning
:class:`NamesPositions`         a position's memory id without decoding the   tie-breaks in the
                                record                                        shortlist
:class:`KeepsTermBounds`        a term's (largest count, shortest length)     MaxScore pruning
                                and its records as bits, kept between
                                processes
:class:`KeepsRecordContext`     the records' threads, titles and dates, kept  the contextual
                                (and persisted) by the index itself           scorer's fields
:class:`KeepsAnalyzedGroups`    the vocabulary grouped by an analyzer, kept   an analyzed view of
                                between processes                             the index
:class:`ReadsInBulk`            every record decoded in one read (else one    the contextual
                                by one)                                       scorer's fields
:class:`RanksIndex`             a scorer that ranks over the whole index      the contextual scorer
                                itself (it reads a record's neighbours)
:class:`KeepsTermIndex`         a store that keeps its own inverted index     the engine
                                (written with every append)                   (open_term_index)
:class:`AppendsInBatches`       a store that stores many drafts in one        loading a labeled set
                                transaction: all of them or none              (evaluation)
:class:`KeepsVectors`           a store that keeps dense vectors in its own   stored vectors
                                database, by ordinal (else: a file beside     (labmem.recall
                                its records)                                  .vectors)
:class:`SplitsCosine`           an embedder that splits a cosine over the     dense breakdowns
                                query's words                                 (labmem.recall.dense)
==============================  ============================================  ======================

Who offers what: the JSONL index (:class:`~labmem.recall.index.InMemoryTermIndex`) lends
postings, names positions, keeps term bounds, its record context and analyzed groups in
its sidecar; the SQLite index lends postings and reads in bulk; the contextual scorer
ranks the index (so do the dense and fused ones); the SQLite store keeps its own index and
its vectors; both stores append in batches; the packaged embedder splits its cosines.

An index that declares none of them is still searched, exactly, through
:meth:`TermIndex.postings`; the answers never depend on which tricks are offered (tests
run every scorer through a wrapper that hides them all).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: the protocols import nothing (not even numpy)
    import numpy as np

    from labmem.recall.analyzers import Analyzer, PackedGroups
    from labmem.recall.fields import RecordContext
    from labmem.recall.index import TermIndex
    from labmem.recall.pipeline import RecallQuery, RecallResult
    from labmem.recall.store import StoredMemory

__all__ = ["LendsPostings", "NamesPositions", "KeepsTermBounds", "KeepsRecordContext",
           "KeepsAnalyzedGroups", "ReadsInBulk", "RanksIndex", "KeepsTermIndex",
           "AppendsInBatches", "KeepsVectors", "SplitsCosine", "offers"]


@runtime_checkable
class LendsPostings(Protocol):
    """An index that lends the arrays it already holds: no copy per query."""

    def term_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions ascending, counts) of ``term``; empty arrays when no record has it."""

    def record_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(length in terms, captured time in POSIX seconds) of every record, by position."""


@runtime_checkable
class NamesPositions(Protocol):
    """An index that knows each position's memory id without decoding the record: ties
    in the shortlist are broken by id, so only the records that make the top are read."""

    def memory_id(self, position: int) -> str:
        """The memory id of the record at ``position``."""


@runtime_checkable
class KeepsTermBounds(Protocol):
    """An index that keeps, per term, what MaxScore bounds it by (a persisted sidecar
    does): computed once when the index was written, not again in every process."""

    def term_extremes(self, term: str) -> tuple[int, int] | None:
        """(largest count, shortest record length) over ``term``'s postings; ``None``: not
        kept, compute it."""

    def term_bits(self, term: str) -> np.ndarray | None:
        """``term``'s records as packed bits (:func:`~labmem.recall.pruning.term_bits`);
        ``None``: not kept, compute them."""


@runtime_checkable
class KeepsRecordContext(Protocol):
    """An index that keeps its records' context (threads, titles, dates) itself and
    persists it beside its own files; optional: for any other index the context is built
    from the records and kept on the index object (:func:`~labmem.recall.fields
    .record_context`)."""

    def record_context(self) -> RecordContext:
        """The :class:`~labmem.recall.fields.RecordContext` of this index's records."""


@runtime_checkable
class KeepsAnalyzedGroups(Protocol):
    """An index that keeps its vocabulary grouped by an analyzer between processes (the
    JSONL sidecar's companion file); optional: otherwise each process groups it again."""

    def analyzed_groups(self, analyzer: Analyzer,
                        group: Callable[[Iterable[str]], dict[str, list[str]]],
                        ) -> tuple[int, PackedGroups] | None:
        """(how many terms of the vocabulary it covers, their groups: analyzed term → its
        surface terms) for ``analyzer``; ``group(terms)`` computes the groups when none
        are kept yet. ``None``: nothing can be kept for this analyzer, group them
        yourself."""


@runtime_checkable
class ReadsInBulk(Protocol):
    """An index whose :meth:`~labmem.recall.index.TermIndex.record` decodes one row per
    call (SQLite), but which can decode them all in one read; optional: an index that
    holds its records already gains nothing from it."""

    def read_records(self) -> None:
        """Decode every stored record at once, so the ``record`` calls that follow are
        lookups."""


@runtime_checkable
class RanksIndex(Protocol):
    """A scorer that needs more than one candidate's counts (a record's neighbours, its
    thread): it runs stages 2–4 over the index itself."""

    def rank_index(self, index: TermIndex, query: RecallQuery, *,
                   as_of: datetime) -> RecallResult:
        """Candidates, scores and a stable top ``query.limit`` from ``index``."""


@runtime_checkable
class KeepsTermIndex(Protocol):
    """A store that keeps its own inverted index (SQLite writes the postings with every
    append); optional: for any other store the engine builds an
    :class:`~labmem.recall.index.InMemoryTermIndex` over its records."""

    def term_index(self) -> TermIndex:
        """This store's index of its user's records (one per store)."""


@runtime_checkable
class AppendsInBatches(Protocol):
    """A store that stores many drafts in one transaction; optional: any store can take
    them one :meth:`append` at a time (slower, and a bad draft leaves the earlier ones)."""

    def append_many(self, drafts: Iterable[Mapping[str, Any]]) -> tuple[StoredMemory, ...]:
        """Store every draft, or — on an invalid draft or a duplicate id — none."""


@runtime_checkable
class KeepsVectors(Protocol):
    """A store that keeps dense vectors in its own database, one row per scope, model and
    ordinal (SQLite); optional: for any other store they live in a file beside its
    records (:mod:`labmem.recall.vectors`)."""

    def vector_rows(self, model: str) -> list[tuple[Any, ...]]:
        """(ordinal, memory_id, conversation, inv_norm, codes, crc32) rows of ``model``."""

    def write_vector_rows(self, model: str, rows: Iterable[tuple[Any, ...]], *,
                          replace_all: bool = False) -> None:
        """Store rows (as :meth:`vector_rows` gives them) in one transaction."""

    def records_from(self, ordinal: int, end: int) -> tuple[StoredMemory, ...]:
        """The records at ordinals ``ordinal`` to ``end`` − 1."""

    def memory_ids_below(self, end: int) -> list[str]:
        """The memory ids of ordinals 0 to ``end`` − 1, in order."""


@runtime_checkable
class SplitsCosine(Protocol):
    """An embedder whose cosine splits exactly over the query's words (an average of token
    vectors does); optional: a dense breakdown then shows no words."""

    def word_contributions(self, text: str, unit: np.ndarray) -> dict[str, float]:
        """Each word of ``text`` with its part of the cosine with the unit vector ``unit``."""


def offers(thing: object, protocol: type) -> bool:
    """Does ``thing`` offer ``protocol``? Answered once per class (the fast path asks per
    query; a runtime protocol check looks up every member each time)."""
    return _class_offers(type(thing), protocol)


@functools.cache
def _class_offers(cls: type, protocol: type) -> bool:
    return issubclass(cls, protocol)
