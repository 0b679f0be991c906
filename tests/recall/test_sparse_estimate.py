"""Scorer.estimate sums a query's postings by sorting them, not in one slot per record:
the same numbers, bit for bit, as the obvious dense sums."""

from types import MappingProxyType

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.recall.index import Postings
from labmem.recall.protocols import RanksIndex
from labmem.recall.scorers import SCORERS, CorpusStats, _Accumulated

TERMS = ("alpha", "beta", "gamma", "delta")


@st.composite
def postings_of_a_query(draw):
    size = draw(st.integers(1, 3000))
    lists = {}
    span = min(size, draw(st.sampled_from((8, 64, size))))  # small spans: shared records
    for term in TERMS[:draw(st.integers(1, len(TERMS)))]:
        chosen = draw(st.sets(st.integers(0, span - 1), max_size=60))
        positions = np.array(sorted(chosen), dtype=np.int64)
        n = len(positions)
        lists[term] = Postings(
            positions=positions,
            counts=np.array(draw(st.lists(st.integers(1, 9), min_size=n, max_size=n)),
                            dtype=np.int64),
            lengths=np.array(draw(st.lists(st.integers(1, 400), min_size=n, max_size=n)),
                             dtype=np.int64),
            captured_at=1.7e9 + positions * 3600.0)  # one capture time per record
    return size, lists


def dense_estimate(scorer, query, lists, *, as_of_seconds, stats):
    """The reference: one slot per record, each term's weights added in query order."""
    present = [(t, p) for t, p in lists.items() if len(p)]
    size = max(int(p.positions[-1]) for _, p in present) + 1
    lexical, matched, captured = np.zeros(size), np.zeros(size, dtype=np.int64), np.zeros(size)
    for term in query:
        p = lists.get(term)
        if p is None or not len(p):
            continue
        lexical[p.positions] += scorer.term_weights(term, p, stats)
        matched[p.positions] += 1
        captured[p.positions] = p.captured_at
    positions = np.flatnonzero(matched)
    acc = _Accumulated(positions, lexical[positions], matched[positions], captured[positions])
    return positions, scorer.combine(acc, query, as_of_seconds, stats)


@settings(max_examples=150)
@given(postings_of_a_query(),  # the scorers that estimate postings (not whole-index rankers)
       st.sampled_from(sorted(k for k, cls in SCORERS.items() if not issubclass(cls, RanksIndex))))
def test_sorted_sums_are_the_dense_sums(query_postings, scorer_key):
    size, lists = query_postings
    scorer = SCORERS[scorer_key]()
    stats = CorpusStats(size, size * 50,
                        MappingProxyType({t: len(p) for t, p in lists.items()}))
    query = tuple(lists) + ("absent",)
    positions, sums = scorer.estimate(query, lists, as_of_seconds=1.8e9, stats=stats)
    if not any(len(p) for p in lists.values()):
        assert len(positions) == len(sums) == 0
        return
    dense_positions, dense = dense_estimate(scorer, query, lists, as_of_seconds=1.8e9,
                                            stats=stats)
    assert np.array_equal(dense_positions, positions)
    assert dense.tobytes() == sums.tobytes()  # not approximately: the same floats
