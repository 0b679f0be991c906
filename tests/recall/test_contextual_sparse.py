"""The contextual scorer computes only at its candidates; a dense reference — every number
over every record, terms × records matrices, as the scorer first did — agrees bit for bit:
the same hits in the same order, the same breakdowns, the same candidate counts, and
estimates that add the terms in term order.

(The dense code's own column sums are not always in term order: numpy adds a column of a
matrix laid out by columns pairwise once it has 8 rows or more — the thread bonus, gathered
by thread, is such a matrix. The last bit of an estimate may differ there; the shortlist's
tolerance absorbs it, so the hits do not. The reference therefore checks the estimates
against term-order sums of its matrices, and the hits against what the dense code did.)"""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.provenance import MemorySource
from labmem.recall import (
    ContextualScorer,
    RecallEngine,
    RemoteMemoryStore,
    SqliteMemoryStore,
    contextual,
)
from labmem.recall.contextual import _Columns
from labmem.recall.fields import ContextArrays, _ValueField, record_context
from labmem.recall.scorers import bm25_idf
from labmem.recall.store import MemoryKind

UTC = timezone.utc
NOW = datetime(2026, 8, 1, 12, tzinfo=UTC)


# -- the dense reference: every field of every term over every record ----------------------

@dataclass(frozen=True, eq=False)
class DenseScored:
    terms: tuple
    field_names: tuple
    idf: tuple
    thread_idf: tuple
    positions: np.ndarray
    estimates: np.ndarray
    arrays: ContextArrays
    fields: dict
    tf: np.ndarray
    matched: np.ndarray
    part: np.ndarray
    thread_tf: np.ndarray | None
    bonus: np.ndarray | None
    in_term_order: np.ndarray  # the estimates, each column added row by row


def term_by_term(matrix: np.ndarray) -> np.ndarray:
    total = np.zeros(matrix.shape[1])
    for row in matrix:
        total = total + row
    return total


@dataclass(frozen=True)
class DenseReference(ContextualScorer):
    """The scorer with its first, dense scoring: terms × (records + 1) matrices."""

    def _score(self, view, context, terms):
        arrays = context.arrays()
        width = arrays.records + 1  # the last column is the sentinel: always 0
        own = np.zeros((len(terms), width))
        title = np.zeros((len(terms), width))
        date = np.zeros((len(terms), width)) if self.date else None
        for row, term in enumerate(terms):
            postings = view.postings(term)
            own[row, postings.positions] = postings.counts
            surfaces = view.surfaces(term)
            title[row] = context.titles.counts(surfaces)[arrays.title]
            if date is not None:
                date[row] = context.dates.counts(surfaces)[arrays.date]
        own -= title
        fields = {"own": own, "title": title}
        if date is not None:
            fields["date"] = date
        if self.previous:
            fields["previous"] = own[:, arrays.previous]
        if self.next:
            fields["next"] = own[:, arrays.next]
        tf = sum(getattr(self, name) * counts for name, counts in fields.items())
        matched = tf > 0
        searched = view.searched_records
        idf = tuple(bm25_idf(int(df), searched) for df in matched.sum(axis=1))
        if self.b:
            average = view.total_length / searched if searched else 0.0
            ratio = context.lengths() / average if average else np.zeros(width)
            norm = 1.0 - self.b + self.b * ratio
        else:
            norm = 1.0
        saturated = np.divide(tf * (self.k1 + 1), tf + self.k1 * norm,
                              out=np.zeros_like(tf), where=matched)
        part = np.asarray(idf)[:, None] * saturated
        estimates = part.sum(axis=0)
        in_term_order = term_by_term(part)
        thread_tf = bonus = None
        thread_idf = ()
        if self.thread:
            threads = arrays.threads
            thread_tf = np.stack([np.bincount(arrays.thread, weights=row, minlength=threads + 1)
                                  for row in own])
            thread_tf[:, threads] = 0.0
            thread_idf = tuple(bm25_idf(int(df), threads)
                               for df in (thread_tf > 0).sum(axis=1))
            thread_part = np.asarray(thread_idf)[:, None] * np.divide(
                thread_tf * (self.k1 + 1), thread_tf + self.k1, out=np.zeros_like(thread_tf),
                where=thread_tf > 0)
            bonus = self.thread * thread_part[:, arrays.thread]
            estimates = estimates + bonus.sum(axis=0)
            in_term_order = in_term_order + term_by_term(bonus)
        positions = np.flatnonzero(matched.any(axis=0))
        return DenseScored(terms, tuple(fields), idf, thread_idf, positions,
                           estimates[positions], arrays, fields, tf, matched, part,
                           thread_tf, bonus, in_term_order[positions])

    def _columns(self, scored, positions):
        threads = scored.arrays.thread[positions]
        return _Columns(
            {int(p): c for c, p in enumerate(positions)},
            {name: counts[:, positions] for name, counts in scored.fields.items()},
            scored.tf[:, positions], scored.matched[:, positions], scored.part[:, positions],
            None if scored.thread_tf is None else scored.thread_tf[:, threads],
            None if scored.bonus is None else scored.bonus[:, positions])


# -- random stores ---------------------------------------------------------------------------

VOCABULARY = ["dog", "dogs", "adopted", "adopting", "adoption", "the", "what", "is", "may",
              "painting", "painted", "paint", "记忆", "记", "Luna", "don't", "kayak",
              "harbour", "sunrise", "2026", "7", "july", "Caroline", "shelter", "walk"]
TITLES = ["Caroline", "Melanie dog", "notes", "Luna walk", "the"]
THREADS = ["chat:s1", "chat:s2", "chat:s3", "solo", "other:x:y"]

records = st.lists(
    st.tuples(st.lists(st.sampled_from(VOCABULARY), min_size=0, max_size=8),  # content
              st.lists(st.sampled_from(VOCABULARY), max_size=3),  # summary
              st.sampled_from(THREADS), st.sampled_from(TITLES),
              st.integers(0, 60),  # days before NOW: dates repeat, months change
              st.booleans()),  # a profile instead of a conversation record
    min_size=1, max_size=16)
scorers = st.builds(
    dict,
    analyzer=st.sampled_from(["english", "plain"]), k1=st.sampled_from([0.6, 1.5, 2.0]),
    b=st.sampled_from([0.0, 0.5, 1.0]), own=st.sampled_from([1.0, 0.3]),
    title=st.sampled_from([0.0, 2.0]), date=st.sampled_from([0.0, 1.5]),
    previous=st.sampled_from([0.0, 0.5]), next=st.sampled_from([0.0, 0.25]),
    thread=st.sampled_from([0.0, 0.5]))
queries = st.lists(st.lists(st.sampled_from(VOCABULARY + ["absent", "june", "8"]),
                            min_size=1, max_size=12), min_size=1, max_size=3)


def make_store(directory: Path, backend: str):
    if backend == "sqlite":
        return SqliteMemoryStore(directory / "records.sqlite", user_id="alice",
                                 clock=FixedClock(NOW))
    return RemoteMemoryStore(directory / "records.jsonl", user_id="alice",
                             clock=FixedClock(NOW))


def append(store, n, spec):
    content, summary, thread, title, days, profile = spec
    store.append(kind=MemoryKind.PROFILE if profile else MemoryKind.CONVERSATION,
                 content=" ".join(content) or "-", summary=" ".join(summary),
                 memory_id=f"m{n:02d}",
                 source=MemorySource(f"{thread}:{n}", "conversation_transcript", title,
                                     NOW - timedelta(days=days, hours=n)))


def seen(result):
    """Everything a result says, breakdown detail included (to_dict reads it all)."""
    return (result.searched_records, result.candidate_records, result.empty_reason,
            [(h.memory_id, h.rank, h.snippet, h.score_breakdown.to_dict())
             for h in result.hits])


def estimated(engine, result):
    """The candidates and their estimates (what the shortlist is cut from), as bytes."""
    scorer = engine.scorer
    terms = tuple(sorted({scorer.analyzer.term(w) for w in result.query.terms} - {None}))
    if not terms:
        return None
    context = record_context(engine.index)
    scored = scorer._score(context.analyzed(engine.index, scorer.analyzer), context, terms)
    estimates = getattr(scored, "in_term_order", scored.estimates)
    return scored.positions.tolist(), estimates.tobytes(), scored.idf, scored.thread_idf


def assert_same(engines, texts):
    for text in texts:
        sparse, dense = (e.recall(text, limit=5, as_of=NOW) for e in engines)
        assert seen(sparse) == seen(dense), text
        assert estimated(engines[0], sparse) == estimated(engines[1], dense), text


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records, weights=scorers, texts=queries, split=st.integers(0, 16),
       backend=st.sampled_from(["jsonl", "sqlite"]), slots=st.sampled_from([0, 4, 10**9]),
       batch=st.sampled_from([0, 3, 1 << 14]))
def test_the_sparse_scorer_is_the_dense_one_bit_for_bit(specs, weights, texts, split, backend,
                                                        slots, batch, tmp_path_factory):
    saved = contextual.SLOT_SUMS, contextual.BATCH_POSTINGS
    # SLOT_SUMS 0: sums always by sorting; BATCH_POSTINGS 0: every term scored alone, 3: a
    # few short ones together, 1 << 14: all of them as one array
    contextual.SLOT_SUMS, contextual.BATCH_POSTINGS = slots, batch
    try:
        check_store(tmp_path_factory.mktemp("sparse"), backend, specs, weights, texts, split)
    finally:
        contextual.SLOT_SUMS, contextual.BATCH_POSTINGS = saved


def check_store(directory, backend, specs, weights, texts, split):
    store = make_store(directory, backend)
    engines = [RecallEngine(store, scorer=ContextualScorer(**weights)),
               RecallEngine(store, scorer=DenseReference(**weights))]
    texts = [" ".join(words) for words in texts]
    for n, spec in enumerate(specs[:split]):
        append(store, n, spec)
    if split:  # the engines index part of the store now, the rest after appends
        assert_same(engines, texts)
    for n, spec in enumerate(specs[split:], start=split):
        append(store, n, spec)
    assert_same(engines, texts)


def test_a_term_counted_in_a_title_but_not_in_the_index_is_still_a_candidate(
        tmp_path, monkeypatch):
    """The index counts a record's title with its text, so a title's words always have
    postings; should a title count one the index did not (its own count is then below 0),
    the sparse scorer still scores that record, as the dense one does."""
    store = make_store(tmp_path, "jsonl")
    for n, (thread, title, text) in enumerate([
            ("chat:a", "notes", "the ghost walked"), ("chat:a", "Caroline", "a kayak"),
            ("chat:b", "Caroline", "the harbour"), ("chat:b", "notes", "ghost again")]):
        append(store, n, ([text], [], thread, title, n, False))
    sparse_counts = _ValueField.sparse_counts

    def with_ghost_in_caroline(self, surfaces):
        ids, counts = sparse_counts(self, surfaces)
        if "ghost" in surfaces and "Caroline" in self.ids:
            caroline = self.ids["Caroline"]  # "Caroline" now "has" ghost, the index not
            dense = dict(zip(ids.tolist(), counts.tolist(), strict=True))
            dense[caroline] = dense.get(caroline, 0.0) + 1
            ids = np.array(sorted(dense), dtype=np.int64)
            counts = np.array([dense[i] for i in ids.tolist()])
        return ids, counts

    # the dense reference reads ``counts``, which is made from ``sparse_counts``
    monkeypatch.setattr(_ValueField, "sparse_counts", with_ghost_in_caroline)
    weights = {"analyzer": "plain"}
    engines = [RecallEngine(store, scorer=ContextualScorer(**weights)),
               RecallEngine(store, scorer=DenseReference(**weights))]
    result = engines[0].recall("ghost", as_of=NOW)
    assert result.candidate_records == 4  # the two Caroline records, by their title alone
    assert_same(engines, ["ghost", "ghost harbour", "kayak"])


@pytest.mark.parametrize("slots", [0, 10**9])
@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_many_terms_and_one_candidate_sum_in_the_same_order(tmp_path, backend, slots,
                                                            monkeypatch):
    """Twelve terms matching one record: a column sum of one column can be summed
    pairwise by numpy; the sparse sums add term by term, as the dense matrix does."""
    monkeypatch.setattr(contextual, "SLOT_SUMS", slots)
    store = make_store(tmp_path, backend)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima"]
    append(store, 0, (words * 2, words[:5], "chat:s1", "notes", 0, False))
    append(store, 1, (["zulu"], [], "chat:s1", "notes", 1, False))
    engines = [RecallEngine(store, scorer=ContextualScorer()),
               RecallEngine(store, scorer=DenseReference())]
    assert_same(engines, [" ".join(words), " ".join(words + ["zulu"])])


@pytest.mark.parametrize("slots", [0, 10**9])
def test_sums_add_a_repeated_key_in_the_order_given(monkeypatch, slots):
    """A batch of terms adds one position once per term: each key's sum takes its values in
    the order added, from 0.0, with slots or without (what a Python loop gives)."""
    monkeypatch.setattr(contextual, "SLOT_SUMS", slots)
    rng = np.random.default_rng(7)
    keys = [np.array([3, 1, 3, 0]), np.array([1, 1, 4]), np.array([0])]
    values = [rng.random(len(k)) * 10.0 ** rng.integers(-8, 8, len(k)) for k in keys]
    expected = {}
    for ks, vs in zip(keys, values, strict=True):
        for k, v in zip(ks.tolist(), vs.tolist(), strict=True):
            expected[k] = expected.get(k, 0.0) + v
    sums = contextual._Sums(6)
    for ks, vs in zip(keys, values, strict=True):
        sums.add(ks, vs)
    found, totals = sums.result()
    assert found.tolist() == sorted(expected)
    assert totals.tolist() == [expected[k] for k in sorted(expected)]
    assert sums.at(np.array([4, 2, 6, 3])).tolist() == [expected[4], 0.0, 0.0, expected[3]]


def test_terms_are_batched_in_order_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(contextual, "BATCH_POSTINGS", 10)
    assert contextual._batches([3, 4, 5, 20, 1, 1]) == [slice(0, 2), slice(2, 3), slice(3, 4),
                                                        slice(4, 6)]
    assert contextual._batches([]) == []
    monkeypatch.setattr(contextual, "BATCH_POSTINGS", 0)  # every term alone
    assert contextual._batches([0, 2]) == [slice(0, 1), slice(1, 2)]
