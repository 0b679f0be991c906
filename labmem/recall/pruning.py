"""s12 recall at scale: skip the terms that cannot change the top of the ranking (MaxScore).

Exhaustive scoring (:meth:`~labmem.recall.scorers.Scorer.estimate`) touches every posting
of every query term. A word that is in nearly every record ("the", a speaker's name) has
the longest postings and, under BM25, the smallest weight: it can reorder records that
already match rarer words, but it can almost never lift a record that matches nothing
else into the top ``k``.

MaxScore makes that exact. Each query term gets an upper bound on what it can add to any
record's score (:meth:`~labmem.recall.scorers.Scorer.term_bound`, from the term's largest
count and shortest record). Terms are taken in order of falling bound; after a term (the
first few, then once per doubling of the terms taken: :func:`_may_try`, so that a long
query's tries cost a constant times its terms, not their square), the
records found so far are scored in full — every query term looked up in its postings
(:func:`lookup_postings`), not scanned — and their ``k``-th best score is a threshold θ.
A record that holds *none* of the terms taken so far scores at most the scorer's
:meth:`~labmem.recall.scorers.Scorer.total_bound` of the remaining terms' bounds; once that
is below θ (less the shortlist's tolerance), no such record can reach the top ``k``, and
the remaining postings are never scored.

The estimates of the records it does score are computed by the same formula, term by term
in the same order, as the exhaustive ones — bit for bit the same numbers — so the engine's
shortlist, and the result, are identical to exhaustive scoring (a property test checks it
for every scorer). A scorer without bounds, or a query where the bound never drops below
θ, is scored exhaustively.

Only the fast backend (:mod:`labmem.recall.packed`) uses this module, through
:class:`MaxScore` (one per engine: the switch, and each term's bounds kept between
queries, read from an index that keeps them — :class:`~labmem.recall.protocols
.KeepsTermBounds`) and :func:`shortlist` (which estimates can still reach the top).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from labmem.recall.index import Postings, union_sorted
from labmem.recall.protocols import KeepsTermBounds, LendsPostings, offers
from labmem.recall.scorers import CorpusStats, Scorer, _Accumulated

__all__ = [
    "MaxScore", "PrunedEstimate", "kth_largest", "lookup_postings", "prune_estimate",
    "shortlist", "term_bits", "term_extremes",
]

#: Bounds are computed in floating point like the scores; this relative slack keeps a
#: bound that rounding made 1 ulp too small from pruning a record it should not.
BOUND_SLACK = 1e-9

#: Fewer postings than this left to skip: score them rather than try (a try scores what
#: was found so far; on a short query that costs more than it saves).
MIN_SKIPPED = 4096


@dataclass(frozen=True)
class PrunedEstimate:
    """What pruning scored: candidates (ascending), their estimates, and the count of every
    record that holds any query term (what exhaustive scoring would call its candidates)."""

    positions: np.ndarray
    estimates: np.ndarray
    candidate_records: int
    skipped_terms: tuple[str, ...]  # terms whose postings were only looked up, never scanned


#: Pruning tries (:func:`_may_try`): the first FREE_TRIES wherever worth it, then one per
#: doubling of the terms taken, at most MAX_TRIES in all, so its work is linear in terms.
FREE_TRIES = 6
MAX_TRIES = 12


#: From this many values on, :func:`kth_largest` partitions a sample first.
SAMPLED_KTH_MIN = 4096


def kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (1 ≤ k ≤ len), exactly what ``np.partition`` puts
    at ``len − k``, NaN counting as the largest.

    A query's candidates can be tens of thousands and ``k`` is ten: partitioning them all
    costs more than scoring them did. The ``k``-th largest of an evenly spaced sample is a
    lower bound on the answer (at least ``k`` values reach it), so only the values not below
    it — about ``k`` × the sampling step — are partitioned, after one comparison of all. A
    step of √(len ÷ k) makes the sample and what passes it both about √(len × k) values.
    """
    size = len(values)
    if size < SAMPLED_KTH_MIN or k * 64 > size:
        return np.partition(values, size - k)[size - k]
    sample = values[:: math.isqrt(size // k)]
    floor = np.partition(sample, len(sample) - k)[len(sample) - k]
    passed = values[~(values < floor)]  # (NaN passes, as it sorts last; a NaN floor: all)
    return np.partition(passed, len(passed) - k)[len(passed) - k]


def term_extremes(positions: np.ndarray, counts: np.ndarray,
                  lengths: np.ndarray) -> tuple[int, int]:
    """(largest count, shortest record length) over one term's postings."""
    return int(counts.max()), int(lengths[positions].min())


def term_bits(positions: np.ndarray) -> np.ndarray:
    """A term's records as packed bits, most significant first (``np.packbits``): bit
    ``p`` is set when record ``p`` holds the term. ⌈(last position + 1) / 8⌉ bytes — an
    eighth of a byte per record, so the union of long postings is a few ORs of bytes."""
    marks = np.zeros(int(positions[-1]) + 1 if len(positions) else 0, dtype=bool)
    marks[positions] = True
    return np.packbits(marks)


#: Candidates below 1/SEARCH_RATIO of the postings are found by binary search; more, by
#: one slot per record (a binary search per candidate costs more than one pass over both).
SEARCH_RATIO = 8


def lookup_postings(positions: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which candidates hold the term, where in ``positions`` those are); ``positions``
    ascending and distinct, ``candidates`` in any order.

    Few candidates: a binary search each. Many: each posting writes its index into a slot
    per record, and each candidate reads its slot back. The slots are not cleared first —
    a candidate's slot may hold anything — because either way a candidate holds the term
    exactly when the posting at the index it read is that candidate.
    """
    if not len(positions) or not len(candidates):
        return np.zeros(len(candidates), dtype=bool), np.zeros(0, dtype=np.intp)
    if len(candidates) * SEARCH_RATIO < len(positions):
        probe = candidates.astype(positions.dtype, copy=False)  # no copy of the postings
        at = np.minimum(np.searchsorted(positions, probe), len(positions) - 1)
        hit = positions[at] == probe
        return hit, at[hit]
    positions = positions.astype(np.intp, copy=False)  # (numpy indexes by intp fastest)
    slots = np.empty(max(int(positions[-1]), int(candidates.max())) + 1, dtype=np.int32)
    slots[positions] = np.arange(len(positions), dtype=np.int32)
    at = slots[candidates]
    np.maximum(np.minimum(at, len(positions) - 1, out=at), 0, out=at)  # (np.clip: slower)
    hit = positions[at] == candidates
    return hit, at[hit].astype(np.intp)


#: A scorer that weighs every posting alike reads which candidates hold a term from the
#: term's bits once they are at least 1/BITS_RATIO of the records up to the last of them
#: (unpacking a bit per record then costs less than a binary search per candidate).
BITS_RATIO = 256


def score_candidates(scorer: Scorer, query_terms: tuple[str, ...],
                     lists: Mapping[str, tuple[np.ndarray, np.ndarray]],
                     candidates: np.ndarray, lengths: np.ndarray, captured: np.ndarray, *,
                     as_of_seconds: float, stats: CorpusStats,
                     covered: frozenset[str] = frozenset(),
                     bits: Callable[[str], np.ndarray] | None = None) -> np.ndarray:
    """The estimates of ``candidates`` (ascending), exactly as :meth:`Scorer.estimate`
    computes them. A term in ``covered`` has all its postings among the candidates (it was
    taken to find them): where each one is, is a binary search of its postings alone.

    A scorer whose postings all weigh 1.0 (``weighs_postings`` false: coverage) needs only
    which candidates hold each term — with ``bits`` (a term's :func:`term_bits`, kept by the
    caller), many candidates read that from the term's bits — and its lexical sums are the
    matched counts (a sum of ones is exact)."""
    weighed = scorer.weighs_postings
    rows, counts, present, sizes = [], [], [], []
    for term in query_terms:  # the order Scorer.estimate adds them in: the same sums
        positions, term_counts = lists[term]
        if not len(positions):
            continue
        if term in covered:
            rows.append(np.searchsorted(candidates, positions))
            counts.append(term_counts)
        elif (not weighed and bits is not None
              and len(candidates) * BITS_RATIO > int(candidates[-1])):
            # one bit per record, unpacked as far as the last candidate (zeros past the
            # term's last record): no pass over the term's postings
            held = np.unpackbits(bits(term), count=int(candidates[-1]) + 1)[candidates]
            rows.append(np.flatnonzero(held))
        else:
            hit, at = lookup_postings(positions, candidates)
            rows.append(np.flatnonzero(hit))
            counts.append(term_counts[at])
        present.append(term)
        sizes.append(len(rows[-1]))
    rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp)
    matched = np.bincount(rows, minlength=len(candidates)).astype(np.int64)
    if weighed:
        held = candidates[rows]
        joined = Postings(held, np.concatenate(counts) if counts else rows, lengths[held],
                          captured[held])
        weights = scorer.posting_weights(present, sizes, joined, stats)
        lexical = np.bincount(rows, weights=weights, minlength=len(candidates))
    else:
        lexical = matched.astype(np.float64)
    acc = _Accumulated(candidates, lexical, matched, captured[candidates])
    return scorer.combine(acc, query_terms, as_of_seconds, stats)


def prune_estimate(scorer: Scorer, query_terms: tuple[str, ...],
                   lists: Mapping[str, tuple[np.ndarray, np.ndarray]], limit: int,
                   lengths: np.ndarray, captured: np.ndarray, *, as_of_seconds: float,
                   stats: CorpusStats, tolerance: float,
                   extremes: Callable[[str], tuple[int, int]],
                   bits: Callable[[str], np.ndarray] | None = None,
                   min_skipped: int = MIN_SKIPPED) -> PrunedEstimate | None:
    """MaxScore over ``lists`` (term → positions, counts); ``None`` when it cannot prune
    (no bounds, or every term might matter) — then score exhaustively.

    ``lengths`` and ``captured`` are every record's, by position; ``extremes(term)`` gives
    the term's (largest count, shortest length), and ``bits(term)`` its :func:`term_bits`,
    both of which the caller may keep between queries (by default the bits are made here).
    ``min_skipped`` only decides when trying is worth it; the result never depends on it.
    """
    present = [t for t in query_terms if len(lists[t][0])]
    if len(present) < 2 or scorer.total_bound(0.0, 0, query_terms, stats) is None:
        return None
    bounds: dict[str, float] = {}
    for term in present:
        bound = scorer.term_bound(term, *extremes(term), stats)
        if bound is None:
            return None
        bounds[term] = bound
    order = sorted(present, key=lambda t: (-bounds[t], len(lists[t][0]), t))
    rest_sizes = _suffix_sums([len(lists[t][0]) for t in order])
    found = np.zeros(0, dtype=np.int64)
    tries = last_try = 0
    for taken, term in enumerate(order[:-1], start=1):
        found = union_sorted((found, lists[term][0]))
        # worth a try only if the rest is long, and much longer than what scoring `found`
        # costs (short postings are cheaper scored than ruled out)
        if len(found) < limit or rest_sizes[taken] < max(min_skipped, 2 * len(found)):
            continue
        if not _may_try(tries, taken, last_try):
            continue
        tries, last_try = tries + 1, taken
        rest = order[taken:]  # (sliced only for a try: a slice per term is quadratic too)
        estimates = score_candidates(scorer, query_terms, lists, found, lengths, captured,
                                     as_of_seconds=as_of_seconds, stats=stats,
                                     covered=frozenset(order[:taken]), bits=bits)
        theta = kth_largest(estimates, limit)
        ceiling = scorer.total_bound(sum(bounds[t] for t in rest), len(rest), query_terms,
                                     stats)
        if ceiling + BOUND_SLACK * (1.0 + abs(ceiling)) < theta - tolerance:
            bits_of = bits or (lambda t: term_bits(lists[t][0]))
            return PrunedEstimate(found, estimates, _union_size(found, rest, bits_of),
                                  tuple(rest))
    return None


def _suffix_sums(sizes: list[int]) -> list[int]:
    """``out[i]`` = ``sum(sizes[i:])``, all at once: summing the rest anew at every step
    made a long query's loop quadratic in its terms."""
    out = [0] * (len(sizes) + 1)
    for i in range(len(sizes) - 1, -1, -1):
        out[i] = out[i + 1] + sizes[i]
    return out


def _may_try(tries: int, taken: int, last_try: int) -> bool:
    """May pruning try (score what it found) after ``taken`` terms? Each try looks every
    query term up, so a try at every step made a query's work grow with the square of
    its terms (a 1,000-term query tried ~190 times). The first :data:`FREE_TRIES` are
    taken wherever they are worth it (a short query keeps every chance it had); later
    ones only once the terms taken have doubled since the last, and never more than
    :data:`MAX_TRIES`: the tries' work stays a constant times the query's terms. When a
    try happens never changes the result, only how much was scanned to reach it."""
    if tries >= MAX_TRIES:
        return False
    return tries < FREE_TRIES or taken >= 2 * last_try


def _union_size(found: np.ndarray, rest: list[str],
                bits: Callable[[str], np.ndarray]) -> int:
    """How many records hold any query term: ``found`` (the records of the terms taken,
    ascending) plus those of the skipped ``rest`` not among them — the skipped terms' bits
    ORed, counted, and ``found``'s records whose bit is clear added (no scores computed,
    no long postings scattered)."""
    kept = [bits(term) for term in rest]
    words = np.zeros(max(max(len(b) for b in kept), (int(found[-1]) >> 3) + 1), dtype=np.uint8)
    for b in kept:
        words[:len(b)] |= b
    shift = (7 - (found & 7)).astype(np.uint8)
    held = (words[found >> 3] >> shift) & 1
    return int(np.bitwise_count(words).sum(dtype=np.int64)) + len(found) - int(held.sum())


def shortlist(positions: np.ndarray, estimates: np.ndarray, limit: int,
              tolerance: float) -> np.ndarray:
    """Positions whose estimated score could still make the top ``limit``.

    Everything within ``tolerance`` of the ``limit``-th best estimate is kept, so the
    rounding of the exact scores, and ties that the exact order breaks, cannot push a
    true top-``limit`` record out. Ascending positions, like the input.
    """
    if len(positions) <= limit:
        return positions
    return positions[estimates >= kth_largest(estimates, limit) - tolerance]


#: The skipped terms' bits (:func:`term_bits`) one :class:`MaxScore` keeps between
#: queries: the words skipped most are the commonest, asked again and again.
BITS_CACHE_BYTES = 4 << 20


class MaxScore:
    """MaxScore for one engine: whether to try it, when a try is worth it, and what it
    keeps between queries (each term's extremes and bits, keyed by the term and its
    postings' length: postings only grow, so the same length is the same postings).

    ``enabled = False`` scores every query exhaustively; ``min_skipped`` only decides when
    a try is worth it. Neither ever changes a result (a property test holds them equal).
    """

    def __init__(self, *, enabled: bool = True, min_skipped: int = MIN_SKIPPED) -> None:
        self.enabled = enabled
        self.min_skipped = min_skipped  # shorter rests are scored, not ruled out
        self.last_skipped_terms: tuple[str, ...] = ()  # what the last query did not scan
        self._extremes: dict[tuple[str, int], tuple[int, int]] = {}
        self._bits: dict[tuple[str, int], np.ndarray] = {}
        self._bits_bytes = 0

    def forget(self) -> None:
        """Drop what was kept (the index it came from was found lying and rebuilt)."""
        self._extremes.clear()
        self._bits.clear()
        self._bits_bytes = 0

    def estimate(self, scorer: Scorer, query_terms: tuple[str, ...], limit: int,
                 lists: Mapping[str, tuple[np.ndarray, np.ndarray]], stats: CorpusStats,
                 index: LendsPostings, *, as_of_seconds: float,
                 tolerance: float) -> PrunedEstimate | None:
        """:func:`prune_estimate` over the lent ``lists`` of ``index``; ``None``: score
        exhaustively. An index that keeps its terms' bounds (:class:`~labmem.recall
        .protocols.KeepsTermBounds`) is asked for them before they are computed."""
        self.last_skipped_terms = ()
        if not self.enabled or len(query_terms) < 2:
            return None
        sizes = [len(found[0]) for found in lists.values()]
        if sum(sizes) - min(sizes) < self.min_skipped:
            return None  # what could be skipped is too short to be worth a try
        lengths, captured = index.record_columns()
        kept = index if offers(index, KeepsTermBounds) else None

        def extremes(term: str) -> tuple[int, int]:
            positions, counts = lists[term]
            key = (term, len(positions))
            found = self._extremes.get(key)
            if found is None:
                if len(self._extremes) >= 1 << 16:
                    self._extremes.clear()
                found = kept.term_extremes(term) if kept is not None else None
                if found is None:
                    found = term_extremes(positions, counts, lengths)
                self._extremes[key] = found
            return found

        def bits(term: str) -> np.ndarray:
            positions = lists[term][0]
            key = (term, len(positions))
            found = self._bits.get(key)
            if found is None:
                if self._bits_bytes > BITS_CACHE_BYTES:
                    self._bits.clear()
                    self._bits_bytes = 0
                found = kept.term_bits(term) if kept is not None else None
                if found is None:
                    found = term_bits(positions)
                self._bits[key] = found
                self._bits_bytes += found.nbytes
            return found

        pruned = prune_estimate(scorer, query_terms, lists, limit, lengths, captured,
                                as_of_seconds=as_of_seconds, stats=stats,
                                tolerance=tolerance, extremes=extremes, bits=bits,
                                min_skipped=self.min_skipped)
        if pruned is not None:
            self.last_skipped_terms = pruned.skipped_terms
        return pruned
