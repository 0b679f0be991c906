"""Scorer.estimate sums a query's postings either in one slot per record (dense) or by
sorting them (sparse, for few postings in a long store): the same numbers, bit for bit."""

from types import MappingProxyType

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import labmem.recall.scorers as scorers
from labmem.recall.index import Postings
from labmem.recall.scorers import SCORERS, CorpusStats

TERMS = ("alpha", "beta", "gamma", "delta")


@st.composite
def postings_of_a_query(draw):
    size = draw(st.integers(1, 3000))
    lists = {}
    for term in TERMS[:draw(st.integers(1, len(TERMS)))]:
        chosen = draw(st.sets(st.integers(0, size - 1), max_size=60))
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


@settings(max_examples=150)
@given(postings_of_a_query(), st.sampled_from(sorted(set(SCORERS) - {"contextual"})))
def test_sparse_and_dense_sums_are_identical(query_postings, scorer_key):
    size, lists = query_postings
    scorer = SCORERS[scorer_key]()
    stats = CorpusStats(size, size * 50,
                        MappingProxyType({t: len(p) for t, p in lists.items()}))
    query = tuple(lists) + ("absent",)
    results = []
    for ratio in (0, 10**9):  # 0: always dense; huge: always sparse
        saved, scorers.SPARSE_RATIO = scorers.SPARSE_RATIO, ratio
        try:
            results.append(scorer.estimate(query, lists, as_of_seconds=1.8e9, stats=stats))
        finally:
            scorers.SPARSE_RATIO = saved
    (dense_positions, dense), (sparse_positions, sparse) = results
    assert np.array_equal(dense_positions, sparse_positions)
    assert dense.tobytes() == sparse.tobytes()  # not approximately: the same floats
