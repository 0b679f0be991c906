"""What the fast recall path may ask of an index or a scorer: one protocol per trick.

The recall engine needs only :class:`~labmem.recall.index.TermIndex` from an index (the
records, their postings, the corpus totals) and only the :class:`~labmem.recall.scorers
.Scorer` methods from a scorer. Everything below is optional. A class offers a trick by
*declaring* the protocol (it names it among its bases, so a reader sees the promise where
the class is defined), and the fast path (:mod:`labmem.recall.packed`) checks for it with
:func:`offers`, once per index or scorer, instead of probing attribute names:

=======================  ==============================================  =====================
protocol                 what it offers                                  who uses it
=======================  ==============================================  =====================
:class:`LendsPostings`   a term's (positions, counts) arrays without a   packed estimates,
                         copy; every record's length and time            MaxScore pruning
:class:`NamesPositions`  a position's memory id without decoding the     tie-breaks in the
                         record                                          shortlist
:class:`KeepsTermBounds` a term's (largest count, shortest length) and   MaxScore pruning
                         its records as bits, kept between processes
:class:`RanksIndex`      a scorer that ranks over the whole index        the contextual scorer
                         itself (it reads a record's neighbours)
=======================  ==============================================  =====================

An index that declares none of them is still searched, exactly, through
:meth:`TermIndex.postings`; the answers never depend on which tricks are offered (tests
run every scorer through a wrapper that hides them all).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # annotations only: the protocols import nothing of the engine
    from labmem.recall.index import TermIndex
    from labmem.recall.pipeline import RecallQuery, RecallResult

__all__ = ["LendsPostings", "NamesPositions", "KeepsTermBounds", "RanksIndex", "offers"]


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
class RanksIndex(Protocol):
    """A scorer that needs more than one candidate's counts (a record's neighbours, its
    thread): it runs stages 2–4 over the index itself."""

    def rank_index(self, index: TermIndex, query: RecallQuery, *,
                   as_of: datetime) -> RecallResult:
        """Candidates, scores and a stable top ``query.limit`` from ``index``."""


def offers(thing: object, protocol: type) -> bool:
    """Does ``thing`` offer ``protocol``? Answered once per class (the fast path asks per
    query; a runtime protocol check looks up every member each time)."""
    return _class_offers(type(thing), protocol)


@functools.cache
def _class_offers(cls: type, protocol: type) -> bool:
    return issubclass(cls, protocol)
