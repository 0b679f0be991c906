"""s12 recall, the fast backend: stages 2–4 over packed postings, every candidate at once.

The reference backend (:mod:`labmem.recall.reference`) reads every record and scores one
candidate at a time. This one answers the same query from an inverted index
(:mod:`labmem.recall.index`): a query term's postings are parallel numpy arrays (record
positions, counts), so the scorer estimates every candidate in one vectorized pass
(:meth:`~labmem.recall.scorers.Scorer.estimate`); only the shortlist that can still reach
the top ``limit`` (:func:`~labmem.recall.pruning.shortlist`) is explained exactly, and only
the records that make the top are decoded. What it may ask of the index beyond
:class:`~labmem.recall.index.TermIndex` is declared in :mod:`labmem.recall.protocols`:
lent arrays (no copies), ids by position (no decoding for tie-breaks), kept term bounds
(for MaxScore, :mod:`labmem.recall.pruning`). A scorer that ranks over the index itself
(:class:`~labmem.recall.protocols.RanksIndex`: the contextual one) is handed the index.

The result is identical to the reference's — hits, scores, breakdowns, counts — for every
scorer (property tests in ``tests/recall`` and ``tests/contracts``). Its measured speed is
in ``bench/results/recall_scale.md``, ``recall_cold.md`` and ``recall_backends.md``.
"""

from __future__ import annotations

import functools
import heapq
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from types import MappingProxyType

import numpy as np

from labmem.recall.index import CacheDisagreed, Postings, TermIndex, merge_postings, record_terms
from labmem.recall.pipeline import (
    EMPTY_NO_MATCHING_TERMS,
    RecallCandidate,
    RecallQuery,
    RecallResult,
    _candidate,
    _check_scope,
    order_key,
    ranked_hits,
)
from labmem.recall.protocols import LendsPostings, NamesPositions, RanksIndex, offers
from labmem.recall.pruning import MaxScore, shortlist
from labmem.recall.scorers import CorpusStats, RecallScoreBreakdown, Scorer
from labmem.recall.store import StoredMemory

__all__ = ["PackedRecall"]

Lists = Mapping[str, tuple[np.ndarray, np.ndarray]]


class PackedRecall:
    """Stages 2–4 of recall over one index with one scorer (the engine's fast backend)."""

    def __init__(self, index: TermIndex, scorer: Scorer) -> None:
        self.scorer = scorer
        self.pruner = MaxScore()  # labmem.recall.pruning; pruner.enabled = False: exhaustive
        self.index = index

    @property
    def index(self) -> TermIndex:
        return self._index

    @index.setter
    def index(self, index: TermIndex) -> None:
        """A new index: what it offers is looked up once, here, not per query."""
        self._index = index
        self._lends = offers(index, LendsPostings)
        self._names = offers(index, NamesPositions)
        # the top hits of one query are often the top hits of the next: keep their terms
        self._terms_of = functools.lru_cache(maxsize=4096)(self._record_terms_at)
        self.pruner.forget()

    def answer(self, query: RecallQuery, as_of: datetime) -> RecallResult:
        """Stages 2–4 for a normalized query. If the index finds that a cache it read
        lied (:class:`~labmem.recall.index.CacheDisagreed`), it has rebuilt itself from
        the records; what was derived from the cache is dropped and the query answered
        again, once."""
        try:
            return self._answer(query, as_of)
        except CacheDisagreed:
            self.pruner.forget()
            self._terms_of.cache_clear()
            return self._answer(query, as_of)

    def _answer(self, query: RecallQuery, as_of: datetime) -> RecallResult:
        self.pruner.last_skipped_terms = ()
        if offers(self.scorer, RanksIndex):  # it reads a record's neighbours (contextual)
            return self.scorer.rank_index(self.index, query, as_of=as_of)
        tolerance = 1e-5 + 1e-6 * len(query.terms)
        self.index.refresh()
        lists, stats, postings = self._term_lists(query)
        positions, estimates, candidate_records = self._estimate(query, lists, stats,
                                                                 postings, as_of, tolerance)
        top = shortlist(positions, estimates, query.limit, tolerance).astype(np.int64)
        hits = ranked_hits(query, self._explained_top(query, top, lists, stats, as_of))
        return RecallResult(
            query=query,
            hits=hits,
            searched_records=self.index.searched_records,
            candidate_records=candidate_records,
            empty_reason=None if hits else EMPTY_NO_MATCHING_TERMS,
        )

    # -- stage 2: candidates, as postings --------------------------------------------

    def postings(self, query: RecallQuery) -> tuple[dict[str, Postings], CorpusStats]:
        """Each query term's :class:`~labmem.recall.index.Postings` and the corpus
        statistics, from a refreshed index."""
        self.index.refresh()
        postings = {term: self.index.postings(term) for term in query.terms}
        stats = CorpusStats(self.index.searched_records, self.index.total_length,
                            MappingProxyType({t: len(p) for t, p in postings.items()}))
        return postings, stats

    def candidates(self, query: RecallQuery) -> tuple[RecallCandidate, ...]:
        """Stage 2 through the index; the same result as
        :func:`~labmem.recall.pipeline.build_recall_candidates` over every record."""
        postings, _ = self.postings(query)
        return tuple(self._candidate_at(query, int(p))
                     for p in merge_postings(postings.values()))

    def _candidate_at(self, query: RecallQuery, position: int) -> RecallCandidate:
        record = self.index.record(position)
        _check_scope(query, record)
        return _candidate(query, record, self._terms_of(position))

    def _record_terms_at(self, position: int) -> Counter[str]:
        return record_terms(self.index.record(position))

    def _term_lists(self, query: RecallQuery
                    ) -> tuple[Lists, CorpusStats, dict[str, Postings] | None]:
        """Each query term's (positions, counts), the statistics, and the terms'
        :class:`~labmem.recall.index.Postings` if they had to be built to get the lists
        (an index that does not lend its arrays)."""
        postings = None
        index = self._index
        if self._lends:
            lists = {term: index.term_postings(term) for term in query.terms}
        else:
            postings = {term: index.postings(term) for term in query.terms}
            lists = {term: (p.positions, p.counts) for term, p in postings.items()}
        stats = CorpusStats(index.searched_records, index.total_length,
                            MappingProxyType({t: len(found[0]) for t, found in lists.items()}))
        return lists, stats, postings

    # -- stage 3: every candidate estimated at once ----------------------------------

    def _estimate(self, query: RecallQuery, lists: Lists, stats: CorpusStats,
                  postings: dict[str, Postings] | None, as_of: datetime, tolerance: float
                  ) -> tuple[np.ndarray, np.ndarray, int]:
        """(candidate positions ascending, their estimates, how many records hold a query
        term): MaxScore if it can prune, else every posting of every term scored."""
        seconds = as_of.timestamp()
        if postings is not None:  # built per term: the scorer reads them as they are
            positions, estimates = self.scorer.estimate(query.terms, postings,
                                                        as_of_seconds=seconds, stats=stats)
            return positions, estimates, len(positions)
        pruned = self.pruner.estimate(self.scorer, query.terms, query.limit, lists, stats,
                                      self.index, as_of_seconds=seconds, tolerance=tolerance)
        if pruned is not None:
            return pruned.positions, pruned.estimates, pruned.candidate_records
        positions, estimates = self.scorer.joined_estimate(
            query.terms, *self._joined(query.terms, lists), as_of_seconds=seconds,
            stats=stats)
        return positions, estimates, len(positions)

    def _joined(self, terms: tuple[str, ...], lists: Lists):
        """(terms with postings, their sizes, their postings joined end to end): the lent
        lists with each record's length and time gathered from the index's columns."""
        present = [term for term in terms if len(lists[term][0])]
        positions = np.concatenate([lists[term][0] for term in present]) if present else (
            np.zeros(0, dtype=np.int64))
        counts = np.concatenate([lists[term][1] for term in present]) if present else positions
        lengths, captured = self.index.record_columns()
        rows = positions.astype(np.intp, copy=False)  # (a sidecar's are uint32: cast once)
        joined = Postings(positions, counts, lengths[rows], captured[rows])
        return present, [len(lists[term][0]) for term in present], joined

    # -- stages 3–4 for the shortlist: exact breakdowns, a stable top ----------------

    def _explained_top(self, query: RecallQuery, top: np.ndarray, lists: Lists,
                       stats: CorpusStats, as_of: datetime
                       ) -> Iterator[tuple[StoredMemory, RecallScoreBreakdown]]:
        """The best ``query.limit`` of the shortlist, as (record, breakdown), best first.

        A position's term counts are looked up in the postings it was found in, its length
        and time are the index's columns, so a record is not tokenized again (the index
        counted its terms with :func:`~labmem.recall.index.record_terms` when it was
        indexed). Only the records that make the top are decoded, when the index can name
        a position's memory id.
        """
        counts: list[dict[str, int]] = [{} for _ in range(len(top))]
        wanted = top.tolist()
        for term in query.terms:  # query order, as a candidate keeps its matched terms
            term_positions, term_counts = lists[term]
            size = len(term_positions)
            if not size:
                continue
            # a shortlist is a handful of records: one binary search for all of them, then
            # a look at each one's slot (cheaper than more whole-array steps)
            probe = top.astype(term_positions.dtype, copy=False)  # no copy of the postings
            for row, at in enumerate(np.searchsorted(term_positions, probe).tolist()):
                if at < size and term_positions[at] == wanted[row]:
                    counts[row][term] = int(term_counts[at])
        index = self._index
        from_index = self._lends and self._names
        if self._lends:
            lengths, captured = (column[top].tolist() for column in index.record_columns())
        keyed = []
        for row, position in enumerate(wanted):
            if from_index:  # the record is decoded only if it makes the top
                record, name, seconds = None, index.memory_id(position), captured[row]
                when = datetime.fromtimestamp(seconds, UTC)
            else:
                record = index.record(position)
                _check_scope(query, record)
                name, when = record.memory_id, record.source.captured_at
                seconds = when.timestamp()
            length = (lengths[row] if self._lends
                      else sum(self._terms_of(position).values()))
            breakdown = self.scorer.explain(query.terms, counts[row], length, when,
                                            as_of=as_of, stats=stats)
            keyed.append((order_key(breakdown.total, breakdown.lexical_coverage, seconds,
                                    name), position, record, breakdown))
        best = heapq.nsmallest(query.limit, keyed, key=lambda item: item[0])
        for _, position, record, breakdown in best:
            if record is None:
                record = index.record(position)
                _check_scope(query, record)
            yield record, breakdown
