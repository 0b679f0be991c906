"""The contextual BM25: fields, neighbours, the thread rule, exact breakdowns, two backends."""

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import MemorySource
from labmem.core.text import term_frequencies
from labmem.recall import (
    SCORER_NAMES,
    Bm25Scorer,
    ContextualBreakdown,
    ContextualScorer,
    EnglishAnalyzer,
    RecallEngine,
    RemoteMemoryStore,
    SqliteMemoryStore,
    TeachingScorer,
    date_words,
    render_recalled_context,
    resolve_scorer,
    thread_of,
)
from labmem.recall.contextual import EMPTY_ONLY_STOP_WORDS, rank_contextual_reference
from labmem.recall.fields import record_context
from labmem.recall.scorers import bm25_idf
from labmem.recall.store import MemoryKind

UTC = timezone.utc
NOW = datetime(2026, 8, 1, 12, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
# one field at a time: own text only, with the title and everything else off
OWN_ONLY = ContextualScorer(title=0, date=0, previous=0, next=0, thread=0)


def make_store(directory, backend="jsonl"):
    if backend == "sqlite":
        return SqliteMemoryStore(Path(directory) / "records.sqlite", user_id="alice",
                                 clock=FixedClock(NOW))
    return RemoteMemoryStore(Path(directory) / "records.jsonl", user_id="alice",
                             clock=FixedClock(NOW))


def add(store, memory_id, content, *, thread="chat:s1", title="notes", at=NOW,
        kind=MemoryKind.CONVERSATION, summary=""):
    return store.append(kind=kind, content=content, summary=summary, memory_id=memory_id,
                        source=MemorySource(f"{thread}:{memory_id}", "conversation_transcript",
                                            title, at))


def recall(store, text, scorer=None, limit=10):
    return RecallEngine(store, scorer=scorer or ContextualScorer()).recall(
        text, limit=limit, as_of=NOW)


def ids(result):
    return [h.memory_id for h in result.hits]


def part(hit, term):
    return next(p for p in hit.score_breakdown.terms if p.term == term)


# -- the thread rule and the date words ------------------------------------------------

@pytest.mark.parametrize("source_id, thread", [
    ("transcript:session-1:7", "transcript:session-1"),
    ("conv-26:D1:3", "conv-26:D1"),
    ("a:b", "a"),
    ("no-colon", "no-colon"),
    (":x", ""),
])
def test_a_thread_is_the_source_id_up_to_its_last_colon(source_id, thread):
    assert thread_of(source_id) == thread


def test_the_date_in_words_is_day_month_name_year_in_utc():
    assert date_words(datetime(2023, 5, 8, 13, 56, tzinfo=UTC)) == "8 may 2023"
    later = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    assert date_words(later) == "9 may 2023"  # 01:30 UTC the next day


def test_neighbours_are_adjacent_conversation_records_of_the_same_thread(tmp_path):
    store = make_store(tmp_path)
    add(store, "a1", "x", thread="s:a")
    add(store, "b1", "x", thread="s:b")
    add(store, "p", "x", thread="s:a", kind=MemoryKind.PROFILE)  # not in any thread
    add(store, "a2", "x", thread="s:a")
    add(store, "solo", "x", thread="solo")  # "solo:solo" → thread "solo"
    add(store, "a3", "x", thread="s:a")
    engine = RecallEngine(store, scorer="contextual")
    engine.recall("x")
    arrays = record_context(engine.index).arrays()
    end = arrays.records  # the sentinel: no neighbour
    assert arrays.previous.tolist()[:6] == [end, end, end, 0, end, 3]
    assert arrays.next.tolist()[:6] == [3, end, end, 5, end, end]
    assert arrays.threads == 3


# -- each field ---------------------------------------------------------------------------

def test_own_text_is_summary_and_content_stemmed_without_stop_words(tmp_path):
    store = make_store(tmp_path)
    add(store, "m1", "We adopted two dogs", summary="Adopting dogs")
    add(store, "m2", "unrelated chatter about the weather")
    result = recall(store, "What about the adoption of a dog?", OWN_ONLY)
    assert ids(result) == ["m1"]  # m2 shares only stop words with the query ("about", "the")
    hit = result.hits[0]
    adopt = part(hit, "adopt")
    assert adopt.words == ("adoption",) and adopt.tf == {"own": 2}
    assert adopt.surfaces == {"own": ("adopted", "adopting")}
    words = {w.word: w.term for w in hit.score_breakdown.query_words}
    assert words["what"] is None and words["the"] is None and words["dog"] == "dog"


def test_the_title_field_counts_the_source_title_at_its_weight(tmp_path):
    store = make_store(tmp_path)
    add(store, "m1", "I painted a sunrise", title="Melanie")
    add(store, "m2", "I painted a sunset", title="Caroline")
    result = recall(store, "what did Melanie paint", replace(OWN_ONLY, title=2.0))
    assert ids(result) == ["m1", "m2"]
    melanie = part(result.hits[0], "melani")
    assert melanie.tf == {"title": 1} and melanie.weighted_tf == {"title": 2.0}
    # with title weight 0 the name matches nothing: the title is not part of "own"
    assert [p.term for p in recall(store, "Melanie", OWN_ONLY).hits] == []


def test_the_date_field_matches_day_month_and_year_words(tmp_path):
    store = make_store(tmp_path)
    add(store, "may", "went hiking", at=datetime(2023, 5, 8, 13, tzinfo=UTC))
    add(store, "june", "went hiking", at=datetime(2023, 6, 9, 13, tzinfo=UTC))
    result = recall(store, "hiking in May 2023", replace(OWN_ONLY, date=1.5))
    assert ids(result) == ["may", "june"]
    may = part(result.hits[0], "may")
    assert may.tf == {"date": 1} and may.weighted_tf == {"date": 1.5}
    assert may.surfaces == {"date": ("may",)}
    assert "may" not in result.hits[1].score_breakdown.term_contributions


def test_neighbours_lend_their_words_at_lower_weight_previous_more_than_next(tmp_path):
    store = make_store(tmp_path)
    add(store, "q", "Did you get a new puppy")
    add(store, "answer", "Yes, last spring!")
    add(store, "after", "Her name is Luna")
    add(store, "other", "Nothing to do with it", thread="chat:s2")
    scorer = replace(OWN_ONLY, previous=0.5, next=0.25)
    result = recall(store, "puppy", scorer)
    assert ids(result) == ["q", "answer"]  # "after" is two turns away; "other" another thread
    answer = part(result.hits[1], "puppi")
    assert answer.tf == {"previous": 1} and answer.weighted_tf == {"previous": 0.5}
    assert answer.surfaces == {"previous": ("puppy",)}
    luna = recall(store, "Luna", scorer)
    assert ids(luna) == ["after", "answer"]
    assert part(luna.hits[1], "luna").weighted_tf == {"next": 0.25}
    assert luna.hits[1].score < result.hits[1].score  # next weighs less than previous


def test_the_thread_bonus_is_the_thread_scored_among_threads(tmp_path):
    store = make_store(tmp_path)
    add(store, "a1", "we talked about kayaks", thread="chat:a")
    add(store, "a2", "and kayaks again", thread="chat:a")
    add(store, "a3", "then lunch", thread="chat:a")
    add(store, "b1", "kayaks once", thread="chat:b")
    add(store, "c1", "nothing here", thread="chat:c")
    scorer = replace(OWN_ONLY, thread=0.5)
    hits = {h.memory_id: h for h in recall(store, "kayaks", scorer).hits}
    assert set(hits) == {"a1", "a2", "b1"}  # a3 shares no word, even through its thread
    bonus_a = hits["a1"].score_breakdown.thread
    assert bonus_a == hits["a2"].score_breakdown.thread  # one line per thread
    assert bonus_a.thread == "chat:a" and bonus_a.tf == {"kayak": 2}
    assert bonus_a.idf == {"kayak": round(bm25_idf(2, 3), 6)}  # in 2 of 3 threads
    saturated = 2 * (scorer.k1 + 1) / (2 + scorer.k1)
    assert bonus_a.bonus == round(0.5 * bm25_idf(2, 3) * saturated, 6)
    assert hits["b1"].score_breakdown.thread.bonus < bonus_a.bonus


# -- the breakdown adds up ----------------------------------------------------------------

def check_sums(hit):
    b = hit.score_breakdown
    assert isinstance(b, ContextualBreakdown) and b.scorer == "contextual_bm25"
    assert b.lexical_contribution == round(sum(b.term_contributions.values()), 6)
    assert b.contributions["terms"] == b.lexical_contribution
    thread = 0.0 if b.thread is None else b.thread.bonus
    if b.thread is not None:
        assert b.thread.bonus == round(sum(b.thread.contributions.values()), 6)
    assert b.contributions["thread"] == thread
    assert b.total == hit.score == round(b.lexical_contribution + thread, 6)
    assert [p.term for p in b.terms] == list(b.matched_terms) == list(b.term_contributions)
    for p in b.terms:
        assert p.contribution == b.term_contributions[p.term]
        assert p.weighted_tf == {f: round(b.weights[f] * n, 6) for f, n in p.tf.items()}
        assert p.tf_total == pytest.approx(sum(b.weights[f] * n for f, n in p.tf.items()))
        assert set(p.surfaces) == set(p.tf) and all(p.surfaces.values())
        assert p.words and all(w.term == p.term for w in b.query_words if w.word in p.words)
    data = b.to_dict()
    assert data["total"] == b.total and len(data["terms"]) == len(b.terms)
    json.dumps(data)


def test_the_parts_sum_to_the_score(tmp_path):
    store = make_store(tmp_path)
    add(store, "a", "Caroline went to the LGBTQ support group", title="Caroline",
        at=datetime(2023, 5, 8, tzinfo=UTC))
    add(store, "b", "That sounds supportive! Which group?", title="Melanie")
    add(store, "c", "The support group for transgender people", title="Caroline")
    add(store, "d", "Groups help", title="Melanie", thread="chat:s2")
    result = recall(store, "When did Caroline go to the LGBTQ support group in May?")
    assert len(result.hits) == 4
    for hit in result.hits:
        check_sums(hit)
    assert render_recalled_context(result).count("<hit ") == 4
    json.loads(result.to_json())


def test_a_query_of_stop_words_only_is_empty_and_says_why(tmp_path):
    store = make_store(tmp_path)
    add(store, "a", "what is it")
    result = recall(store, "What is it?")
    assert result.hits == () and result.empty_reason == EMPTY_ONLY_STOP_WORDS
    assert recall(store, "zebras").empty_reason == "no_matching_terms"


# -- the library's plain formula (labmem.recall.contextual.rank_contextual_reference) ------

def reference_ranking(records, text, scorer, limit):
    return rank_contextual_reference(records, tuple(term_frequencies(text)), scorer, limit)


VOCABULARY = ["dog", "dogs", "adopted", "adopting", "the", "what", "may", "painting",
              "painted", "记忆", "Luna", "don't"]
records_strategy = st.lists(
    st.tuples(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=8),
              st.sampled_from(["chat:s1", "chat:s2", "solo"]),  # thread
              st.sampled_from(["Caroline", "Melanie dog"]),  # title
              st.integers(0, 40),  # days old: dates repeat
              st.booleans()),  # a profile instead
    min_size=1, max_size=14)
scorers_strategy = st.builds(
    ContextualScorer,
    analyzer=st.sampled_from(["english", "plain"]), k1=st.sampled_from([0.6, 1.2, 2.0]),
    b=st.sampled_from([0.0, 0.5]), title=st.sampled_from([0.0, 2.0]),
    date=st.sampled_from([0.0, 1.5]), previous=st.sampled_from([0.0, 0.5]),
    next=st.sampled_from([0.0, 0.25]), thread=st.sampled_from([0.0, 0.5]))


def fill(store, specs):
    for n, spec in enumerate(specs):
        fill_one(store, n, spec)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records_strategy, scorer=scorers_strategy,
       query=st.lists(st.sampled_from(VOCABULARY + ["Caroline", "absent"]), min_size=1,
                      max_size=4),
       split=st.integers(0, 14))
def test_engine_matches_the_reference_on_both_backends(specs, scorer, query, split,
                                                       tmp_path_factory):
    text = " ".join(query)
    directory = tmp_path_factory.mktemp("contextual")
    stores = [make_store(directory, "jsonl"), make_store(directory, "sqlite")]
    engines = [RecallEngine(s, scorer=scorer) for s in stores]
    for store in stores:
        fill(store, specs[:split])
    if split:
        for engine in engines:  # index part of the store now, the rest after appends
            engine.recall("dog", as_of=NOW)
    for store in stores:
        for n, spec in enumerate(specs[split:], start=split):
            fill_one(store, n, spec)
    records = stores[0].read_all()
    if not any(r.kind is MemoryKind.CONVERSATION for r in records):
        return
    results = [engine.recall(text, limit=10, as_of=NOW) for engine in engines]
    got = [(h.memory_id, h.score) for h in results[0].hits]
    assert got == [(h.memory_id, h.score) for h in results[1].hits]  # JSONL = SQLite
    assert [h.score_breakdown.to_dict() for h in results[0].hits] == [
        h.score_breakdown.to_dict() for h in results[1].hits]
    if any(scorer.analyzer.term(w) for w in term_frequencies(text)):
        assert got == reference_ranking(records, text, scorer, 10)
    for hit in results[0].hits:
        check_sums(hit)


def fill_one(store, n, spec):
    words, thread, title, days, is_profile = spec
    add(store, f"m{n:02d}", " ".join(words), thread=thread, title=title,
        at=NOW - timedelta(days=days),
        kind=MemoryKind.PROFILE if is_profile else MemoryKind.CONVERSATION)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=records_strategy,
       query=st.lists(st.sampled_from(VOCABULARY + ["Caroline"]), min_size=1, max_size=4))
def test_with_plain_terms_and_only_the_text_it_is_bm25(specs, query, tmp_path_factory):
    store = make_store(tmp_path_factory.mktemp("bm25"))
    fill(store, specs)
    text = " ".join(query)
    plain = ContextualScorer(analyzer="plain", k1=1.2, b=0.75, title=1.0, date=0.0,
                             previous=0.0, next=0.0, thread=0.0)
    ours = recall(store, text, plain)
    theirs = RecallEngine(store, scorer=Bm25Scorer()).recall(text, limit=10, as_of=NOW)
    assert {h.memory_id: h.score for h in ours.hits} == pytest.approx(
        {h.memory_id: h.score for h in theirs.hits}, abs=2e-6)
    assert ours.candidate_records == theirs.candidate_records


# -- appending never rewrites a neighbour ---------------------------------------------------

@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_an_append_gives_the_last_record_a_next_neighbour_without_rewriting_it(tmp_path,
                                                                             backend):
    store = make_store(tmp_path, backend)
    add(store, "a", "where is the kayak")
    engine = RecallEngine(store, scorer="contextual")
    assert ids(engine.recall("harbour")) == []
    before = _stored_bytes(tmp_path, backend)
    add(store, "b", "at the harbour")
    assert _stored_bytes(tmp_path, backend)[:len(before)] == before  # the old rows: as they were
    hits = {h.memory_id: h for h in engine.recall("harbour").hits}
    assert part(hits["a"], "harbour").tf == {"next": 1}
    assert part(hits["b"], "harbour").tf == {"own": 1}


def _stored_bytes(directory, backend):
    if backend == "jsonl":
        return (directory / "records.jsonl").read_bytes()
    import sqlite3

    from labmem.core.provenance import scope_digest
    from tests.recall.legacy_sqlite import read_packed

    with sqlite3.connect(directory / "records.sqlite") as db:
        rows = db.execute("SELECT ordinal, record FROM memories ORDER BY ordinal").fetchall()
        postings, columns = read_packed(db, scope_digest("alice"))
    rows += sorted((ordinal, term, tf) for term, posted in postings.items()
                   for ordinal, tf in posted)
    rows += [(ordinal, *column) for ordinal, column in enumerate(columns)]
    return [row for row in rows if row[0] == 0]


# -- the scorer as a name, its settings, its limits --------------------------------------

def test_the_contextual_scorer_is_one_of_the_scorer_names(tmp_path):
    assert SCORER_NAMES == ("teaching", "bm25", "bm25_recency", "contextual", "dense",
                            "fused")
    assert isinstance(resolve_scorer("contextual"), ContextualScorer)
    store = make_store(tmp_path)
    add(store, "a", "memory")
    for name in SCORER_NAMES:
        assert RecallEngine(store, scorer=name).recall("memory").hits
    assert isinstance(RecallEngine(store).scorer, TeachingScorer)  # chapter s12's default
    with pytest.raises(InvalidInputError, match="'contextual'"):
        resolve_scorer("tfidf")


def test_the_defaults_are_the_recorded_tuning():
    chosen = json.loads((ROOT / "bench/results/tune_contextual.json").read_text())["chosen"]
    scorer = ContextualScorer()
    assert {name: getattr(scorer, name) for name in chosen} == chosen
    assert scorer.analyzer == EnglishAnalyzer()
    assert scorer.previous > scorer.next and scorer.b == 0


@pytest.mark.parametrize("kwargs, field", [
    ({"k1": 0}, "k1"), ({"b": 1.5}, "b"), ({"own": 0}, "own"), ({"title": -1}, "title"),
    ({"next": "x"}, "next"), ({"thread": True}, "thread"), ({"analyzer": "porter"}, "analyzer"),
])
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(InvalidInputError) as refused:
        ContextualScorer(**kwargs)
    assert refused.value.field == field


def test_one_candidate_alone_is_not_enough_context():
    with pytest.raises(InvalidInputError) as refused:
        ContextualScorer().explain((), {}, 0, NOW, as_of=NOW, stats=None)
    assert refused.value.field == "scorer" and "RecallEngine" in str(refused.value)


def test_the_tool_and_the_command_default_to_the_contextual_scorer(tmp_path, monkeypatch,
                                                                    capsys):
    from labmem.cli import main
    from labmem.recall import DEFAULT_SCORER, default_runtime, recall_history

    monkeypatch.setenv("LABMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LABMEM_USER_ID", raising=False)
    assert DEFAULT_SCORER == "contextual"
    assert isinstance(default_runtime(with_examples=True).engine.scorer, ContextualScorer)
    data = json.loads(recall_history("SQLite persistence decision", limit=2))
    assert data["hits"][0]["memory_id"] == "conversation-002"
    assert data["hits"][0]["score_breakdown"]["scorer"] == "contextual_bm25"
    assert data["hits"][0]["score_breakdown"]["terms"]  # the per-term detail is in the JSON
    assert main(["recall", "layered memory", "--json", "--limit", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hits"][0]["score_breakdown"]["scorer"] == "contextual_bm25"
    for name in SCORER_NAMES:
        assert main(["recall", "memory", "--json", "--scorer", name]) == 0
        capsys.readouterr()


def test_the_ablation_ladder_goes_from_bm25_to_the_default_one_change_at_a_time():
    import dataclasses

    from labmem.recall import ablation_ladder

    steps = ablation_ladder()
    first, last = steps[0][1], steps[-1][1]
    assert last == ContextualScorer()
    assert (first.analyzer.key, first.k1, first.b) == ("plain", Bm25Scorer.k1, Bm25Scorer.b)
    assert (first.title, first.date, first.previous, first.next, first.thread) == (1, 0, 0, 0, 0)
    names = [f.name for f in dataclasses.fields(ContextualScorer)]
    for (_, before), (_, after) in zip(steps, steps[1:], strict=False):
        changed = [n for n in names if getattr(before, n) != getattr(after, n)]
        assert 1 <= len(changed) <= 2, changed  # title and date, previous and next go in pairs
    # the committed LoCoMo report names its ladder rows exactly so (chapter s12b reads them)
    report = Path(__file__).resolve().parents[2] / "bench" / "results" / "locomo_eval.json"
    if report.exists():
        recorded = [n for n in json.loads(report.read_text())["ablation"]["odd"]
                    if n.startswith("ladder: ")]
        assert recorded == [f"ladder: {name}" for name, _ in steps]
