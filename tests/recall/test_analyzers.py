"""Analyzers: stop words and stems over one index that stores surface terms only."""

import sqlite3
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import MemorySource
from labmem.recall import (
    AnalyzedIndex,
    EnglishAnalyzer,
    PlainAnalyzer,
    QueryWord,
    RemoteMemoryStore,
    SqliteMemoryStore,
    analyzers,
    english_stop_words,
    open_term_index,
    record_terms,
    resolve_analyzer,
)
from labmem.recall.analyzers import default_stop_words_path, load_stop_words
from labmem.recall.sqlite_store import SCHEMA_VERSION
from labmem.recall.store import MemoryKind
from tests.recall.legacy_sqlite import write_legacy

UTC = timezone.utc
NOW = datetime(2026, 8, 1, 12, tzinfo=UTC)
ENGLISH = EnglishAnalyzer()


def make_store(directory, backend="jsonl"):
    if backend == "sqlite":
        return SqliteMemoryStore(Path(directory) / "records.sqlite", user_id="alice",
                                 clock=FixedClock(NOW))
    return RemoteMemoryStore(Path(directory) / "records.jsonl", user_id="alice",
                             clock=FixedClock(NOW))


def add(store, memory_id, content, *, title="notes", kind=MemoryKind.CONVERSATION):
    return store.append(kind=kind, content=content, summary="", memory_id=memory_id,
                        source=MemorySource(f"chat:{memory_id}", "conversation_transcript",
                                            title, NOW - timedelta(days=1)))


# -- the analyzers ---------------------------------------------------------------------

def test_plain_terms_are_the_surface_terms():
    assert PlainAnalyzer().terms("The runner was Running") == Counter(
        {"the": 1, "runner": 1, "was": 1, "running": 1})


@pytest.mark.parametrize("surface, term", [
    ("running", "run"), ("runs", "run"), ("adoption", "adopt"), ("adopted", "adopt"),
    ("july", "juli"), ("2023", "2023"),
    ("the", None), ("what", None), ("when", None), ("who", None), ("whose", None),
    ("how", None),
    # the pieces of contractions, as the extractor splits them at the apostrophe
    ("don", None), ("t", None), ("s", None), ("ll", None), ("re", None), ("ve", None),
    ("d", None), ("m", None), ("isn", None), ("didn", None),
    # content words that look like stop words stay (Snowball's choices, and ours)
    ("may", "may"), ("will", "will"), ("can", "can"), ("us", "us"), ("won", "won"),
    # CJK and kana bigrams and other scripts pass unchanged
    ("记忆", "记忆"), ("ひら", "ひら"), ("русский", "русский"), ("한국어", "한국어"),
])
def test_english_terms(surface, term):
    assert ENGLISH.term(surface) == term


def test_english_counts_merge_the_forms_of_a_stem():
    assert ENGLISH.terms("I don't run; she runs, they ran, we're running") == Counter(
        {"run": 3, "ran": 1})


def test_query_words_say_what_each_word_became():
    assert ENGLISH.query_words("When did Caroline adopt the dogs?") == (
        QueryWord("adopt", "adopt"), QueryWord("caroline", "carolin"),
        QueryWord("did", None), QueryWord("dogs", "dog"), QueryWord("the", None),
        QueryWord("when", None))
    assert QueryWord("did", None).dropped and QueryWord("did", None).to_dict() == {
        "word": "did", "term": None}


def test_each_half_of_the_english_analyzer_alone():
    assert EnglishAnalyzer(stem=False).term("running") == "running"
    assert EnglishAnalyzer(stem=False).term("the") is None
    assert EnglishAnalyzer(stop_words=frozenset()).term("the") == "the"
    assert EnglishAnalyzer(stop_words=frozenset({"running"})).term("running") is None


def test_the_stop_list_is_a_documented_project_file():
    path = default_stop_words_path()
    assert path == Path(__file__).resolve().parents[2] / "data/analysis/english_stop_words.txt"
    header = path.read_text(encoding="utf-8")
    assert "snowballstem.org" in header and "BSD" in header
    words = english_stop_words()
    assert words == load_stop_words(path) and words == ENGLISH.stop_words
    assert {"what", "which", "who", "whom", "whose", "when", "where", "why", "how"} <= words
    assert {"don", "t", "s", "ll", "re", "ve", "d", "m"} <= words
    assert not {"may", "will", "can", "us", "won", "#", ""} & words
    assert len(words) > 100  # a full list: issue 16 measured that a 33-word one hurts
    assert all(w == w.lower().strip() and " " not in w for w in words)


def test_analyzers_resolve_by_name_and_refuse_unknown_ones(tmp_path):
    assert resolve_analyzer("plain") == PlainAnalyzer()
    assert resolve_analyzer("english") == ENGLISH
    assert resolve_analyzer(ENGLISH) is ENGLISH
    with pytest.raises(InvalidInputError) as refused:
        resolve_analyzer("porter")
    assert refused.value.field == "analyzer" and "'english'" in str(refused.value)
    with pytest.raises(InvalidInputError) as refused:
        EnglishAnalyzer(stop_words="the a an")
    assert refused.value.field == "stop_words"
    with pytest.raises(InvalidInputError) as refused:
        load_stop_words(tmp_path / "missing.txt")
    assert refused.value.field == "stop_words" and "missing.txt" in str(refused.value)
    assert repr(ENGLISH) == f"EnglishAnalyzer(stop_words={len(ENGLISH.stop_words)} words, " \
                            "stem=True)"


# -- one index, every analyzer ----------------------------------------------------------

def brute_force(store, analyzer):
    """Analyzed term → {position: count}, from the records themselves."""
    out: dict[str, dict[int, int]] = {}
    for position, record in enumerate(store.read_all()):
        if record.kind is not MemoryKind.CONVERSATION:
            continue
        for surface, count in record_terms(record).items():
            term = analyzer.term(surface)
            if term is not None:
                out.setdefault(term, {})
                out[term][position] = out[term].get(position, 0) + count
    return out


def assert_agrees(view, store, analyzer):
    expected = brute_force(store, analyzer)
    for term, where in expected.items():
        postings = view.postings(term)
        assert dict(zip(postings.positions.tolist(), postings.counts.tolist(),
                        strict=True)) == where, term
        assert list(postings.positions) == sorted(where)
        lengths = {p: sum(record_terms(store.read_all()[p]).values()) for p in where}
        assert dict(zip(postings.positions.tolist(), postings.lengths.tolist(),
                        strict=True)) == lengths
    assert len(view.postings("absent-term")) == 0


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_a_stem_merges_the_postings_of_its_surface_forms(tmp_path, backend):
    store = make_store(tmp_path, backend)
    add(store, "a", "We adopted a dog")
    add(store, "b", "The adoption went well; adopting again")
    add(store, "p", "adopt profile", kind=MemoryKind.PROFILE)  # never searched
    add(store, "c", "Nothing related", title="Adopt day")
    view = AnalyzedIndex(open_term_index(store), ENGLISH)
    view.refresh()
    assert view.surfaces("adopt") == ("adopt", "adopted", "adopting", "adoption")
    postings = view.postings("adopt")
    assert postings.positions.tolist() == [0, 1, 3] and postings.counts.tolist() == [1, 2, 1]
    assert view.document_frequency("adopt") == 3
    assert view.surfaces("the") == () and len(view.postings("the")) == 0  # a stop word
    assert_agrees(view, store, ENGLISH)


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_appends_later_extend_the_groups(tmp_path, backend):
    store = make_store(tmp_path, backend)
    add(store, "a", "running late")
    view = AnalyzedIndex(open_term_index(store), ENGLISH)
    view.refresh()
    assert view.surfaces("run") == ("running",) and len(view.postings("run")) == 1
    add(store, "b", "she runs daily")
    other = make_store(tmp_path, backend)  # another writer, same file
    add(other, "c", "we run, they ran")
    view.refresh()
    assert view.surfaces("run") == ("run", "running", "runs")
    assert view.postings("run").positions.tolist() == [0, 1, 2]
    # the analyzed terms that records from position 1 on brought in (stop words dropped)
    assert set(view.vocabulary(1)) == {"run", "daili", "ran"}
    assert_agrees(view, store, ENGLISH)


def test_surfaces_kept_between_look_ups_see_new_groups_at_once(tmp_path, monkeypatch):
    """A term's surface forms are kept for the next look-up (a query asks for each term more
    than once); a surface grouped since (a derived field's word) shows at once, and no more
    than SURFACES_KEPT terms are kept."""
    store = make_store(tmp_path)
    add(store, "a", "running late")
    view = AnalyzedIndex(open_term_index(store), ENGLISH)
    view.refresh()
    assert view.surfaces("run") == ("running",)
    view.add_surfaces(["runs"])  # e.g. a word of a date or a title
    assert view.surfaces("run") == ("running", "runs")
    monkeypatch.setattr(analyzers, "SURFACES_KEPT", 2)
    assert [view.surfaces(t) for t in ("late", "absent", "run")] == [
        ("late",), (), ("running", "runs")]
    assert len(view._surfaces) <= 2


def test_the_sqlite_vocabulary_lists_each_term_once_with_its_first_record(tmp_path):
    store = make_store(tmp_path, "sqlite")
    add(store, "a", "alpha beta")
    add(store, "p", "gamma profile", kind=MemoryKind.PROFILE)
    store.append_many([
        {"kind": "conversation", "content": "beta gamma", "summary": "", "memory_id": "b",
         "source": MemorySource("s:b", "t", "notes", NOW)},
        {"kind": "conversation", "content": "gamma delta", "summary": "", "memory_id": "c",
         "source": MemorySource("s:c", "t", "notes", NOW)},
    ])
    index = store.term_index()
    index.refresh()
    assert index.vocabulary() == ("alpha", "beta", "notes", "gamma", "delta")
    assert index.vocabulary(2) == ("gamma", "delta")
    assert index.vocabulary(3) == ("delta",) and index.vocabulary(4) == ()


def test_a_version_1_database_gets_its_vocabulary_on_open(tmp_path):
    store = make_store(tmp_path, "sqlite")
    add(store, "a", "alpha beta")
    add(store, "b", "beta gamma")
    expected = store.term_index().vocabulary()
    store.close()
    current = tmp_path / "records.sqlite"
    current.rename(tmp_path / "current.sqlite")
    write_legacy(tmp_path / "current.sqlite", current, 1)  # what version 1 looked like
    reopened = make_store(tmp_path, "sqlite")
    index = reopened.term_index()
    index.refresh()
    assert index.vocabulary() == expected
    with sqlite3.connect(current) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    add(reopened, "c", "delta")
    index.refresh()
    assert index.vocabulary(2) == ("delta",)


WORDS = ["run", "runs", "running", "ran", "the", "what", "dog", "dogs", "记忆", "Café",
         "cafés", "don't", "may"]


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(contents=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8),
                         min_size=1, max_size=12),
       split=st.integers(0, 12))
def test_analyzed_postings_match_a_brute_force_scan(tmp_path_factory, backend, contents, split):
    directory = tmp_path_factory.mktemp("analyzed")
    store = make_store(directory, backend)
    views = [AnalyzedIndex(open_term_index(store), a) for a in (PlainAnalyzer(), ENGLISH)]
    for n, words in enumerate(contents):
        add(store, f"m{n}", " ".join(words))
        if n == split:
            for view in views:
                view.refresh()  # part of the store indexed, the rest appended later
    for view in views:
        view.refresh()
        assert_agrees(view, store, view.analyzer)
        assert np.all(np.diff(view.postings("run").positions) > 0)


# -- the groups kept beside a JSONL sidecar ------------------------------------------------

def sidecar_view(store):
    from labmem.recall.index import InMemoryTermIndex

    view = AnalyzedIndex(InMemoryTermIndex(store, sidecar_min_records=1), ENGLISH)
    view.refresh()
    return view


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(contents=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8),
                         min_size=1, max_size=10),
       more=st.lists(st.lists(st.sampled_from([*WORDS, "runner", "新词"]), min_size=1,
                              max_size=6), max_size=4))
def test_groups_read_back_beside_the_sidecar_are_the_groups(tmp_path_factory, contents, more):
    """A view over a loaded sidecar takes the base vocabulary's groups from the companion
    (packed, never decoded as a whole) and groups what was appended since on top: the
    same surfaces and postings as grouping everything afresh."""
    from labmem.recall.sidecar import load_companion

    store = make_store(tmp_path_factory.mktemp("kept"))
    for n, words in enumerate(contents):
        add(store, f"m{n}", " ".join(words))

    def check(view):
        assert view._kept is not None
        fresh = AnalyzedIndex(open_term_index(store), ENGLISH)
        fresh.refresh()
        for term in {*fresh._groups, "absent-term"}:
            assert view.surfaces(term) == fresh.surfaces(term), term
        assert_agrees(view, store, ENGLISH)

    sidecar_view(store)  # writes the sidecar
    for _ in range(2):  # the first groups its vocabulary and keeps that; the next reads it
        check(sidecar_view(store))
    for n, words in enumerate(more, start=len(contents)):
        add(store, f"m{n}", " ".join(words))
    for _ in range(3):  # appended: grouped on top, then a new sidecar and its groups
        view = sidecar_view(store)
        check(view)
    assert load_companion(view.index._base, store.path, ENGLISH.cache_key) is not None


def test_packed_groups_are_the_groups():
    from labmem.recall.analyzers import PackedGroups

    groups = {"run": ["running", "run", "runs"], "记忆": ["记忆"], "dog": ["dogs", "dog"]}
    for packed in (PackedGroups.of(groups),
                   PackedGroups.from_arrays(PackedGroups.of(groups).arrays())):
        assert {t: packed.group(t) for t in groups} == {t: tuple(sorted(s))
                                                         for t, s in groups.items()}
        assert packed.group("absent") == () and len(packed) == 3
    arrays = PackedGroups.of(groups).arrays()
    assert PackedGroups.from_arrays({**arrays, "group_ends": arrays["group_ends"] + 1}) is None
    ends = arrays["group_ends"]
    assert PackedGroups.from_arrays({**arrays, "group_ends": ends[[0, 2]]}) is None  # 2 of 3
    assert PackedGroups.from_arrays({**arrays, "group_ends": arrays["group_ends"][::-1]}) is None
    assert PackedGroups.from_arrays({k: v for k, v in arrays.items() if k != "terms_utf8"}) is None


def test_a_companion_of_another_version_is_never_trusted(tmp_path):
    """A companion with the right sidecar and checksum but another format version (here:
    groups that are all wrong) is not read: the groups are made again, and kept."""
    import json

    from labmem.recall.analyzers import PackedGroups
    from labmem.recall.sidecar import COMPANION_VERSION, load_companion, write_companion

    store = make_store(tmp_path)
    for n, text in enumerate(["We adopted a dog", "dogs and running", "the runner ran"]):
        add(store, f"m{n}", text)
    expected = {t: sidecar_view(store).surfaces(t) for t in ("dog", "run", "adopt")}
    index = sidecar_view(store).index
    key = ENGLISH.cache_key
    count = len(index.vocabulary())
    wrong = PackedGroups.of({"dog": ["adopted"], "run": ["we"], "adopt": ["the"]})
    write_companion(index._base, store.path, key, {"terms": count}, wrong.arrays())
    # a kept one is read, but each group is checked against the analyzer when a query asks
    # for it (labmem.recall.index): 'adopted' is not a form of 'dog', so it is not taken
    assert sidecar_view(store).surfaces("dog") == ()
    path = tmp_path / f"records.jsonl.recall-index.{key}"
    head, _, body = path.read_bytes().partition(b"\n")
    meta = json.loads(head)
    meta["version"] = COMPANION_VERSION - 1
    path.write_bytes(json.dumps(meta).encode() + b"\n" + body)
    assert {t: sidecar_view(store).surfaces(t) for t in expected} == expected
    assert load_companion(index._base, store.path, key)[0]["version"] == COMPANION_VERSION
