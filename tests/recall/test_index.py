"""Recall at scale: the inverted index agrees with a brute-force scan, and every scorer
ranks the same through the engine's fast path as through the by-hand stage functions."""

import math
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import MemorySource
from labmem.recall.index import InMemoryTermIndex, open_term_index, record_terms
from labmem.recall.pipeline import (
    RecallEngine,
    assemble_result,
    build_recall_candidates,
    corpus_stats,
    count_searched_records,
    normalize_recall_query,
    score_recall_candidate,
)
from labmem.recall.pruning import shortlist
from labmem.recall.scorers import (
    Bm25RecencyScorer,
    Bm25Scorer,
    CorpusStats,
    TeachingScorer,
    bm25_idf,
    bm25_term_weight,
    resolve_scorer,
)
from labmem.recall.sqlite_store import SqliteMemoryStore
from labmem.recall.store import MemoryKind, RemoteMemoryStore

UTC = timezone.utc
NOW = datetime(2026, 8, 1, 12, tzinfo=UTC)
VOCABULARY = ["wal", "sqlite", "memory", "layered", "budget", "recall", "记忆", "分层"]
SCORER_NAMES = ["teaching", "bm25", "bm25_recency"]

records_strategy = st.lists(
    st.tuples(
        st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=12),  # content words
        st.integers(0, 3),  # days old: few values, so recency ties happen
        st.booleans(),  # a profile instead of a conversation record
    ),
    min_size=1, max_size=25,
)
queries_strategy = st.lists(st.lists(st.sampled_from(VOCABULARY + ["absent"]),
                                     min_size=1, max_size=4), min_size=1, max_size=4)


def fill(store, specs):
    for n, (words, days_old, is_profile) in enumerate(specs):
        store.append(
            kind=MemoryKind.PROFILE if is_profile else MemoryKind.CONVERSATION,
            content=" ".join(words), summary="", memory_id=f"m-{n:03d}",
            source=MemorySource(f"s-{n}", "conversation_transcript", "notes",
                                captured(n, days_old)),
        )


def captured(n, days_old):
    """Whole days back, plus one of three sub-second offsets (ties still happen, and the
    engine's times from the index must be the records' to the microsecond)."""
    return NOW - timedelta(days=days_old, microseconds=(n % 3) * 123_457)


def make_store(directory, backend="jsonl"):
    if backend == "sqlite":
        return SqliteMemoryStore(Path(directory) / "records.sqlite", user_id="alice",
                                 clock=FixedClock(NOW))
    return RemoteMemoryStore(Path(directory) / "records.jsonl", user_id="alice",
                             clock=FixedClock(NOW))


# -- the index against a brute-force scan -------------------------------------------------

@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records_strategy, split=st.integers(0, 25))
def test_index_matches_a_brute_force_scan(backend, specs, split):
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(tmp, backend)
        index = open_term_index(store)
        fill(store, specs[:split])
        index.refresh()  # built once on open ...
        fill_rest = [(w, d, p) for w, d, p in specs[split:]]
        for n, (words, days_old, is_profile) in enumerate(fill_rest, start=len(specs[:split])):
            store.append(kind=MemoryKind.PROFILE if is_profile else MemoryKind.CONVERSATION,
                         content=" ".join(words), summary="", memory_id=f"m-{n:03d}",
                         source=MemorySource(f"s-{n}", "conversation_transcript", "notes",
                                             captured(n, days_old)))
        index.refresh()  # ... then extended with only the new records
        records = store.read_all()
        conversations = [(i, r) for i, r in enumerate(records)
                         if r.kind is MemoryKind.CONVERSATION]
        assert all(index.record(i) == r for i, r in conversations)
        assert index.searched_records == len(conversations)
        assert index.total_length == sum(sum(record_terms(r).values()) for _, r in conversations)
        for term in VOCABULARY + ["notes", "absent"]:
            expected = [(i, record_terms(r)[term], sum(record_terms(r).values()),
                         r.source.captured_at.timestamp())
                        for i, r in conversations if term in record_terms(r)]
            p = index.postings(term)
            got = list(zip(p.positions.tolist(), p.counts.tolist(), p.lengths.tolist(),
                           p.captured_at.tolist(), strict=True))
            assert got == expected, term


class ProtocolOnly:
    """An index with only what the TermIndex protocol promises: no lent arrays, no record
    columns, no memory ids (the engine's fallbacks)."""

    def __init__(self, index):
        self._index = index

    def refresh(self):
        self._index.refresh()

    searched_records = property(lambda self: self._index.searched_records)
    total_length = property(lambda self: self._index.total_length)
    records = property(lambda self: self._index.records)

    def postings(self, term):
        return self._index.postings(term)

    def record(self, position):
        return self._index.record(position)

    def vocabulary(self, start=0):
        return self._index.vocabulary(start)


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "protocol only"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records_strategy, queries=queries_strategy, limit=st.integers(1, 10))
def test_engine_equals_the_by_hand_pipeline_for_every_scorer(backend, specs, queries, limit):
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(tmp, "sqlite" if backend == "sqlite" else "jsonl")
        fill(store, specs)
        records = store.read_all()
        for name in SCORER_NAMES:
            engine = RecallEngine(store, scorer=name)
            if backend == "protocol only":
                engine.index = ProtocolOnly(engine.index)
            for words in queries:
                got = engine.recall(" ".join(words), limit=limit, as_of=NOW)
                q = got.query
                by_hand = assemble_result(
                    q, build_recall_candidates(q, records), count_searched_records(records),
                    as_of=NOW, scorer=name, stats=corpus_stats(q, records))
                assert got == by_hand, (name, words)
                assert engine.candidates(q) == build_recall_candidates(q, records)


def test_each_backend_gets_its_own_index(tmp_path):
    assert isinstance(open_term_index(make_store(tmp_path)), InMemoryTermIndex)
    assert type(open_term_index(make_store(tmp_path, "sqlite"))).__name__ == "SqliteTermIndex"


def test_engine_sees_records_appended_after_its_first_recall(tmp_path):
    store = make_store(tmp_path)
    fill(store, [(["wal", "sqlite"], 1, False)])
    engine = RecallEngine(store, scorer="bm25")
    assert [h.memory_id for h in engine.recall("wal", as_of=NOW).hits] == ["m-000"]
    other = make_store(tmp_path)  # a second writer on the same file
    other.append(kind="conversation", content="wal wal wal", summary="", memory_id="late",
                 source=MemorySource("s", "t", "notes", NOW))
    result = engine.recall("wal", as_of=NOW)
    assert [h.memory_id for h in result.hits] == ["late", "m-000"]
    assert result.searched_records == 2


# -- the shortlist that lets the engine explain only a few candidates ----------------------

def test_shortlist_keeps_ties_at_the_cut():
    positions = np.arange(6)
    estimates = np.array([0.1, 0.9, 0.5, 0.5, 0.5, 0.2])
    assert shortlist(positions, estimates, 2, 1e-6).tolist() == [1, 2, 3, 4]
    assert shortlist(positions, estimates, 1, 1e-6).tolist() == [1]
    assert shortlist(positions, estimates, 10, 1e-6).tolist() == list(range(6))


# -- scorers ------------------------------------------------------------------------------

def candidate_for(store, text, memory_id):
    q = normalize_recall_query(text, user_scope=store.user_scope, limit=10)
    records = store.read_all()
    [c] = [c for c in build_recall_candidates(q, records) if c.record.memory_id == memory_id]
    return q, c, corpus_stats(q, records)


def test_bm25_by_hand(tmp_path):
    store = make_store(tmp_path)
    fill(store, [(["wal", "wal", "sqlite"], 0, False), (["sqlite", "budget"], 0, False),
                 (["budget"], 0, False)])
    q, c, stats = candidate_for(store, "wal sqlite", "m-000")
    b = score_recall_candidate(q, c, as_of=NOW, scorer="bm25", stats=stats)
    # record m-000 "notes wal wal sqlite": 4 terms; average length (4 + 3 + 2) / 3 = 3
    norm = 1 - 0.75 + 0.75 * 4 / 3
    wal = math.log1p((3 - 1 + 0.5) / 1.5) * 2 * 2.2 / (2 + 1.2 * norm)
    sqlite = math.log1p((3 - 2 + 0.5) / 2.5) * 1 * 2.2 / (1 + 1.2 * norm)
    assert dict(b.term_contributions) == {"sqlite": round(sqlite, 6), "wal": round(wal, 6)}
    assert b.total == round(round(wal, 6) + round(sqlite, 6), 6)
    assert b.scorer == "bm25" and b.recency_contribution == 0.0
    assert dict(b.contributions) == {"bm25": b.total, "recency": 0.0}


def test_idf_prefers_rare_terms_and_is_never_negative():
    assert bm25_idf(1, 100) > bm25_idf(50, 100) > bm25_idf(100, 100) > 0


def test_bm25_saturates_repetition_and_discounts_length():
    scorer = Bm25Scorer()
    once, twice, many = (scorer.term_part(n, 10, 1.0, 10.0) for n in (1, 2, 50))
    assert once < twice < many < scorer.k1 + 1  # more helps, ever less, never past k1 + 1
    assert scorer.term_part(1, 40, 1.0, 10.0) < scorer.term_part(1, 5, 1.0, 10.0)
    assert Bm25Scorer(b=0).term_part(1, 40, 1.0, 10.0) == Bm25Scorer(b=0).term_part(1, 5, 1, 10)


# -- one BM25 term weight: the formula that explain and estimate share ---------------------

def test_bm25_term_weight_by_hand():
    # tf 2 in a 40-term record; the term is in 5 of 98 records, which average 48.8 terms
    idf = math.log1p((98 - 5 + 0.5) / (5 + 0.5))
    norm = 1 - 0.75 + 0.75 * 40 / 48.8
    expected = idf * 2 * 2.2 / (2 + 1.2 * norm)
    assert bm25_term_weight(2, 5, 98, 40, 48.8) == pytest.approx(expected, rel=1e-15)
    assert bm25_term_weight(2, 5, 98, 40, 48.8) == bm25_term_weight(2, 5, 98, 40, 48.8, 1.2, 0.75)


def test_bm25_term_weight_knobs():
    idf = bm25_idf(3, 40)
    assert bm25_term_weight(7, 3, 40, 90, 30.0, k1=0.0) == pytest.approx(idf)  # count ignored
    assert (bm25_term_weight(1, 3, 40, 90, 30.0, b=0.0)
            == bm25_term_weight(1, 3, 40, 5, 30.0, b=0.0))  # length ignored
    assert (bm25_term_weight(2, 3, 40, 30, 30.0, b=0.0)
            == bm25_term_weight(2, 3, 40, 30, 30.0, b=1.0))  # average length: b is moot
    weights = [bm25_term_weight(n, 3, 40, 30, 30.0) for n in (1, 2, 5, 50)]
    assert weights == sorted(weights) and weights[-1] < idf * (1.2 + 1)  # saturates
    assert bm25_term_weight(1, 3, 40, 60, 30.0) < bm25_term_weight(1, 3, 40, 15, 30.0)
    assert bm25_term_weight(1, 1, 40, 30, 30.0) > bm25_term_weight(1, 30, 40, 30, 30.0)
    assert bm25_term_weight(1, 3, 40, 30, 0.0) > 0  # an empty collection does not divide by 0


def test_bm25_term_weight_takes_arrays_with_the_same_result():
    counts, lengths = np.array([1.0, 2.0, 5.0, 3.0]), np.array([10, 40, 7, 3])
    got = bm25_term_weight(counts, 4, 50, lengths, 20.0, 1.5, 0.6)
    assert got.tolist() == [bm25_term_weight(int(c), 4, 50, int(n), 20.0, 1.5, 0.6)
                            for c, n in zip(counts, lengths, strict=True)]


def test_term_part_is_the_term_weight_for_a_given_idf():
    for k1, b in ((1.2, 0.75), (0.0, 1.0), (2.0, 0.0)):
        assert (Bm25Scorer(k1, b).term_part(3, 25, bm25_idf(4, 50), 20.0)
                == bm25_term_weight(3, 4, 50, 25, 20.0, k1, b))


def test_bm25_term_weight_is_public():
    from labmem import recall

    assert recall.bm25_term_weight is bm25_term_weight and "bm25_term_weight" in recall.__all__


@pytest.mark.parametrize("scorer", [Bm25Scorer(), Bm25Scorer(k1=0.9, b=0.4), Bm25RecencyScorer()])
def test_explain_shows_bm25_term_weights(tmp_path, scorer):
    store = make_store(tmp_path)
    fill(store, [(["wal", "wal", "sqlite", "budget"], 0, False), (["sqlite", "budget"], 0, False),
                 (["budget"], 0, False)])
    q, c, stats = candidate_for(store, "wal sqlite budget", "m-000")
    b = score_recall_candidate(q, c, as_of=NOW, scorer=scorer, stats=stats)
    weights = {t: bm25_term_weight(c.term_counts[t], stats.document_frequency[t],
                                   stats.searched_records, c.document_length,
                                   stats.average_length, scorer.k1, scorer.b)
               for t in c.matched_terms}
    if isinstance(scorer, Bm25Scorer):
        assert dict(b.term_contributions) == {t: round(w, 6) for t, w in weights.items()}
    else:  # bm25_recency shows each weight as a share of the query's best possible BM25
        ceiling = scorer.best_possible(q.terms, stats)
        assert dict(b.term_contributions) == {
            t: round((1 - scorer.recency_weight) * round(w, 6) / ceiling, 6)
            for t, w in weights.items()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records_strategy, queries=queries_strategy,
       k1=st.sampled_from([1.2, 0.0, 2.0]), b=st.sampled_from([0.75, 0.0, 1.0]))
def test_bm25_estimate_is_the_sum_of_bm25_term_weights(specs, queries, k1, b):
    """The numpy path the engine prunes by is bm25_term_weight, term by term."""
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(tmp)
        fill(store, specs)
        records = store.read_all()
        scorer = Bm25Scorer(k1, b)
        engine = RecallEngine(store, scorer=scorer)
        for words in queries:
            q = normalize_recall_query(" ".join(words), user_scope=store.user_scope, limit=10)
            postings, stats = engine.fast.postings(q)
            positions, estimates = scorer.estimate(q.terms, postings,
                                                   as_of_seconds=NOW.timestamp(), stats=stats)
            by_term = {c.record.memory_id: sum(
                bm25_term_weight(c.term_counts[t], stats.document_frequency[t],
                                 stats.searched_records, c.document_length,
                                 stats.average_length, k1, b) for t in c.matched_terms)
                for c in build_recall_candidates(q, records)}
            got = {records[p].memory_id: e for p, e in zip(positions, estimates, strict=True)}
            assert got.keys() == by_term.keys()
            for memory_id, total in by_term.items():
                assert got[memory_id] == pytest.approx(total, rel=1e-12, abs=1e-12)


def test_teaching_and_bm25_disagree_for_a_reason(tmp_path):
    """Teaching counts matched terms; BM25 weighs the rare one higher."""
    store = make_store(tmp_path)
    fill(store, [(["memory", "budget"], 0, False)]
         + [(["memory", "recall"], 0, False)] * 8 + [(["wal"], 0, False)])
    hits = {name: [h.memory_id for h in RecallEngine(store, scorer=name)
                   .recall("memory wal", as_of=NOW, limit=1).hits]
            for name in ("teaching", "bm25")}
    assert hits["teaching"] == ["m-000"]  # ties on one matched term; newest, then id
    assert hits["bm25"] == ["m-009"]  # 'wal' is in 1 record, 'memory' in 9


def test_bm25_recency_lexical_share_is_bounded_and_recency_counts(tmp_path):
    store = make_store(tmp_path)
    fill(store, [(["wal"] * 12, 0, False), (["wal"], 120, False)])
    result = RecallEngine(store, scorer="bm25_recency").recall("wal", as_of=NOW)
    for hit in result.hits:
        b = hit.score_breakdown
        assert 0 <= b.contributions["bm25_share"] <= b.weights["bm25_share"] == 0.9
        assert b.total == round(b.lexical_contribution + b.recency_contribution, 6)
        assert sum(b.term_contributions.values()) == pytest.approx(b.lexical_contribution,
                                                                   abs=1e-5)
    assert [h.memory_id for h in result.hits] == ["m-000", "m-001"]
    assert result.hits[1].score_breakdown.recency == 0.2


def test_bm25_needs_statistics_by_hand(tmp_path):
    store = make_store(tmp_path)
    fill(store, [(["wal"], 0, False)])
    q, c, _ = candidate_for(store, "wal", "m-000")
    with pytest.raises(InvalidInputError) as err:
        score_recall_candidate(q, c, as_of=NOW, scorer="bm25")
    assert err.value.field == "stats" and "corpus_stats" in str(err.value)


@pytest.mark.parametrize("bad, field", [
    (lambda: resolve_scorer("tfidf"), "scorer"),
    (lambda: Bm25Scorer(k1=-1), "k1"),
    (lambda: Bm25Scorer(b=1.5), "b"),
    (lambda: Bm25RecencyScorer(recency_weight=2), "recency_weight"),
    (lambda: Bm25RecencyScorer(b=-0.1), "b"),
])
def test_scorer_arguments_are_checked(bad, field):
    with pytest.raises(InvalidInputError) as err:
        bad()
    assert err.value.field == field


def test_scorer_choice_is_one_argument(tmp_path):
    store = make_store(tmp_path)
    assert isinstance(RecallEngine(store).scorer, TeachingScorer)
    assert isinstance(RecallEngine(store, scorer="bm25").scorer, Bm25Scorer)
    custom = Bm25RecencyScorer(k1=0.9, b=0.4, recency_weight=0.3)
    assert RecallEngine(store, scorer=custom).scorer is custom


def test_corpus_stats_average_length():
    assert CorpusStats(4, 10, {}).average_length == 2.5
    assert CorpusStats(0, 0, {}).average_length == 0.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records_strategy, queries=queries_strategy)
def test_estimates_match_the_exact_scores(specs, queries):
    """The vectorized estimate and the shown breakdown are one formula, up to rounding."""
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(tmp)
        fill(store, specs)
        records = store.read_all()
        for name in SCORER_NAMES:
            engine = RecallEngine(store, scorer=name)
            for words in queries:
                q = normalize_recall_query(" ".join(words), user_scope=store.user_scope,
                                           limit=10)
                postings, stats = engine.fast.postings(q)
                positions, estimates = engine.scorer.estimate(
                    q.terms, postings, as_of_seconds=NOW.timestamp(), stats=stats)
                exact = {c.record.memory_id: score_recall_candidate(
                    q, c, as_of=NOW, scorer=name, stats=corpus_stats(q, records)).total
                    for c in build_recall_candidates(q, records)}
                got = {records[p].memory_id: e for p, e in zip(positions, estimates, strict=True)}
                assert got.keys() == exact.keys()
                for memory_id, total in exact.items():
                    assert got[memory_id] == pytest.approx(total, abs=1e-5), (name, memory_id)
