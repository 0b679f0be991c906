"""The fast recall backend equals the reference: ids, ranks, scores and breakdowns.

On generated stores (few words, so terms repeat and ties are common; capture times that
tie too) and generated queries, ``RecallEngine(store, backend="fast")`` and
``backend="reference"`` (the chapter's from-scratch stages, :mod:`labmem.scratch.s12`) give
identical results for the teaching scorer. The from-scratch tokenizer is held equal to the
library's too, on any text.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.text import normalize_text, term_frequencies
from labmem.recall import MemorySource, RecallEngine, RemoteMemoryStore
from labmem.scratch import s12 as scratch

AS_OF = datetime(2026, 8, 1, 12, tzinfo=UTC)
WORDS = ["alpha", "beta", "gamma", "delta", "分层", "记忆", "café", "Beta"]
_DIRS = itertools.count()

records = st.lists(st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
    st.integers(-2, 90),  # days before as_of (negative: captured after it)
    st.sampled_from(["conversation", "conversation", "profile"]),
), max_size=12)
queries = st.lists(st.sampled_from(WORDS + ["zeta"]), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records, queries, st.integers(1, 10))
def test_fast_and_reference_backends_agree(tmp_path, stored, text, limit):
    store = RemoteMemoryStore(tmp_path / f"s{next(_DIRS)}" / "r.jsonl", user_id="alice",
                              clock=FixedClock(AS_OF))
    for i, (content, days, kind) in enumerate(stored):
        store.append(kind=kind, memory_id=f"m{i:02d}", content=content, summary="",
                     source=MemorySource(f"t{i}", "conversation_transcript", "note",
                                         AS_OF - timedelta(days=days)))
    fast = RecallEngine(store, scorer="teaching", backend="fast").recall(
        text, limit=limit, as_of=AS_OF)
    reference = RecallEngine(store, scorer="teaching", backend="reference").recall(
        text, limit=limit, as_of=AS_OF)
    assert [h.memory_id for h in fast.hits] == [h.memory_id for h in reference.hits]
    assert [h.score_breakdown for h in fast.hits] == [h.score_breakdown for h in reference.hits]
    assert fast == reference


@settings(max_examples=2000, deadline=None)
@given(st.text())
def test_the_from_scratch_terms_are_the_library_terms(text):
    assert scratch.normalize_text(text) == normalize_text(text)
    assert scratch.search_terms(text) == term_frequencies(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.sampled_from("aé\u0301分层记忆メモリの ーb1_\u3099\u0300İß\u2028\n\x1c"
                                       "\u00a0-")))
def test_the_terms_agree_on_the_tricky_characters(text):
    assert scratch.search_terms(text) == term_frequencies(text)
