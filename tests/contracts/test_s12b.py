"""The s12b contract suite on every implementation, and on the learner's plausible mistakes.

Every contract runs on the from-scratch module and on the library (one suite, two
implementations, as CPython tests ``_pyio`` and ``io``). Then each of the three pieces the
chapter's exercise asks for (``Analyzer.term``, ``build_index``, ``bm25_term_weight``) gets
plausible wrong versions that the checker must reject, naming the contract they break,
and a correct version written differently from the chapter's, which it must accept.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest

import labmem.scratch.s12b as scratch
from labmem.exercises import s12b as exercises
from labmem.exercises.suites.s12b import PRODUCTION, SCRATCH, SUITE

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}


@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.name)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_every_contract_holds_on_every_implementation(contract, implementation):
    contract.check(IMPLEMENTATIONS[implementation])


def test_the_suite_is_a_whole_layer_in_teaching_order():
    names = SUITE.names()
    assert 8 <= len(names) <= 15 and len(set(names)) == len(names)
    assert names[0].startswith("the plain analyzer") and "stop words only" in names[-1]


def layer(**pieces):
    mine = {"analyzer_term": scratch.Analyzer.term, "build_index": scratch.build_index,
            "bm25_term_weight": scratch.bm25_term_weight}
    mine.update(pieces)
    return exercises.check_layer(**mine)



def stub(*args, **kwargs):
    raise NotImplementedError


def test_the_stubs_are_reported_as_not_written():
    report = layer(analyzer_term=stub, build_index=stub, bm25_term_weight=stub)
    assert report.passed == 1 and len(report.results) == len(SUITE.contracts)
    text = repr(report)
    assert text.startswith("✗ your analyzer, index and BM25 passes 1 of 14 contracts; failing:")
    assert text.count("not written yet") == 13


def test_the_chapters_pieces_pass():
    report = layer()
    assert report.ok and repr(report) == "✓ your analyzer, index and BM25 passes all 14 contracts"


# -- Analyzer.term -------------------------------------------------------------------------

STEMS = "forms with one stem merge into one term (stop words are checked first)"
STOPS = "a stop word is dropped and every other term keeps its count"
BOTH_SIDES = "the analyzer applies to the records and the query alike"


def stem_first(self, surface):  # stems, then checks the stem against the stop words
    term = surface if self.stem is None else self.stem(surface)
    return None if term in self.stop_words else term


def forgets_the_stemmer(self, surface):
    return None if surface in self.stop_words else surface


def empty_string_for_stop_words(self, surface):  # "" is still a term
    if surface in self.stop_words:
        return ""
    return surface if self.stem is None else self.stem(surface)


def case_sensitive_stop_words(self, surface):  # checks the capitalized form too, and drops
    if surface.capitalize() in self.stop_words:  # nothing: the list is lower case
        return None
    return surface if self.stem is None else self.stem(surface)


@pytest.mark.parametrize("wrong, broken", [
    (stem_first, {STEMS}),
    (forgets_the_stemmer, {STEMS, BOTH_SIDES}),
    (empty_string_for_stop_words, {STOPS}),
    (case_sensitive_stop_words, {STOPS}),
])
def test_wrong_analyzers_are_rejected(wrong, broken):
    assert broken <= layer(analyzer_term=wrong).failing_names


def test_a_different_correct_analyzer_is_accepted():
    def term(self, surface):
        keep = surface not in self.stop_words
        stem = self.stem or (lambda word: word)
        return stem(surface) if keep else None

    assert layer(analyzer_term=term).ok


# -- build_index ---------------------------------------------------------------------------

POSTINGS = ("a term's postings name each record holding it once, with its count, in "
            "store order")
LENGTHS = "a record's length counts its term occurrences, title included"
SCOPE = "another user's record is refused, never counted"
SUM = "a hit's score is the sum of its terms' BM25 parts, each in the breakdown"


def index_with(records, user_scope, analyzer, *, length, text=scratch.searchable_text,
               check_scope=True, order=lambda postings: postings):
    kept, terms, lengths, postings = {}, {}, {}, {}
    for record in records:
        if check_scope and record.user_scope != user_scope:
            raise scratch.ScopeError("another user")
        if record.kind != scratch.CONVERSATION:
            continue
        counts = scratch.analyze(text(record), analyzer)
        kept[record.memory_id], terms[record.memory_id] = record, counts
        lengths[record.memory_id] = length(text(record), counts)
        for term, count in counts.items():
            postings.setdefault(term, []).append(scratch.Posting(record.memory_id, count))
    return scratch.InvertedIndex(user_scope, analyzer, kept, terms, lengths,
                                 sum(lengths.values()),
                                 {t: tuple(order(p)) for t, p in postings.items()})


def surface_length(text, counts):
    return sum(scratch.search_terms(text).values())


def distinct_terms_as_length(records, user_scope, analyzer=scratch.PLAIN):  # off by repeats
    return index_with(records, user_scope, analyzer, length=lambda text, counts: len(counts))


def postings_by_id(records, user_scope, analyzer=scratch.PLAIN):  # not store order
    return index_with(records, user_scope, analyzer, length=surface_length,
                      order=lambda p: sorted(p, key=lambda posting: posting.memory_id))


def no_scope_check(records, user_scope, analyzer=scratch.PLAIN):
    return index_with(records, user_scope, analyzer, length=surface_length,
                      check_scope=False)


def content_only(records, user_scope, analyzer=scratch.PLAIN):  # forgets title and summary
    return index_with(records, user_scope, analyzer, length=surface_length,
                      text=lambda record: record.content)


@pytest.mark.parametrize("wrong, broken", [
    (distinct_terms_as_length, {LENGTHS, SUM}),
    (postings_by_id, {POSTINGS}),
    (no_scope_check, {SCOPE}),
    (content_only, {LENGTHS}),
])
def test_wrong_indexes_are_rejected(wrong, broken):
    assert broken <= layer(build_index=wrong).failing_names


def test_a_different_correct_index_is_accepted():
    def build_index(records, user_scope, analyzer=scratch.PLAIN):
        searched = []
        for record in records:
            if record.user_scope != user_scope:
                raise scratch.ScopeError(f"{record.memory_id}: another user scope")
            if record.kind == scratch.CONVERSATION:
                searched.append(record)
        texts = {r.memory_id: scratch.searchable_text(r) for r in searched}
        terms = {i: Counter(scratch.analyze(t, analyzer)) for i, t in texts.items()}
        postings = defaultdict(list)
        for memory_id, counts in terms.items():
            for term in sorted(counts):
                postings[term].append(scratch.Posting(memory_id, counts[term]))
        lengths = {i: sum(scratch.search_terms(t).values()) for i, t in texts.items()}
        return scratch.InvertedIndex(
            user_scope, analyzer, {r.memory_id: r for r in searched}, terms, lengths,
            sum(lengths.values()), {term: tuple(found) for term, found in postings.items()})

    assert layer(build_index=build_index).ok


# -- bm25_term_weight ----------------------------------------------------------------------

WEIGHT = "a term's part saturates with its count (k1) and is discounted by length (b)"


def textbook_idf(count, df, n, length, average, k1=1.2, b=0.75):
    ratio = length / average if average else 0.0
    return math.log(n / df) * count * (k1 + 1) / (count + k1 * (1 - b + b * ratio))


def no_k1_plus_one(count, df, n, length, average, k1=1.2, b=0.75):
    ratio = length / average if average else 0.0
    return scratch.bm25_idf(df, n) * count / (count + k1 * (1 - b + b * ratio))


def divides_by_an_empty_average(count, df, n, length, average, k1=1.2, b=0.75):
    return scratch.bm25_idf(df, n) * count * (k1 + 1) / (
        count + k1 * (1 - b + b * length / average))


def b_on_the_wrong_side(count, df, n, length, average, k1=1.2, b=0.75):
    ratio = length / average if average else 0.0
    return scratch.bm25_idf(df, n) * count * (k1 + 1) / (count + k1 * (b + (1 - b) * ratio))


@pytest.mark.parametrize("wrong", [textbook_idf, no_k1_plus_one, divides_by_an_empty_average,
                                   b_on_the_wrong_side])
def test_wrong_weights_are_rejected(wrong):
    report = layer(bm25_term_weight=wrong)
    assert WEIGHT in report.failing_names
    [result] = [r for r in report.failing if r.contract == WEIGHT]
    assert "term_weight(count=1, df=1, N=1" in result.detail or "raised" in result.detail


def test_textbook_idf_names_the_smallest_collection():
    [result] = [r for r in layer(bm25_term_weight=textbook_idf).failing
                if r.contract == WEIGHT]
    assert result.detail == ("smallest case: term_weight(count=1, df=1, N=1, length=1, "
                             "average_length=1.0, k1=1.2, b=0.75) — expected 0.287682, got 0.0")


def test_a_different_correct_weight_is_accepted():
    def weight(count, document_frequency, searched_records, length, average_length,
               k1=1.2, b=0.75):
        idf = math.log((searched_records + 1) / (document_frequency + 0.5))  # = ln(1 + …)
        if average_length == 0:
            length, average_length = 0, 1
        saturation = count * (k1 + 1) / (count + k1 * (1 - b) + k1 * b * length
                                          / average_length)
        return idf * saturation

    assert layer(bm25_term_weight=weight).ok
