"""The s12b contract suite: an analyzer, an inverted index and BM25, judged as one layer.

Fourteen contracts, in the order chapter s12b builds the layer: what the analyzer makes of
a text, what the index stores, BM25's two formulas, and what a recall with BM25 returns.
Each check tries its cases smallest first and names the first one that breaks.

The suite runs on three kinds of implementation through one small interface (a *layer*):

* :data:`SCRATCH` — :mod:`labmem.scratch.s12b`, the chapter's own module;
* :data:`PRODUCTION` — :mod:`labmem.recall`: ``PlainAnalyzer`` / ``EnglishAnalyzer`` (an
  ``Analyzer`` subclass when a case brings its own stemmer: ``term`` is the library's hook),
  the in-memory term index of a ``RemoteMemoryStore``, ``bm25_idf`` / ``bm25_term_weight``,
  and ``RecallEngine`` with ``Bm25Scorer`` (plain terms) or, with an analyzer, the
  ``ContextualScorer`` reduced to BM25 (own text and title at weight 1, nothing else);
* the learner's layer: :func:`ScratchLayer` over :func:`~labmem.exercises.contracts.assemble`.

A case names records as small tuples ``(memory_id, text)`` (or a :class:`Doc` with a title,
a capture day and a user), so the same case runs on every implementation.
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import labmem.scratch.s12b
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite

USER = "lin"
OTHER_USER = "sam"
AS_OF = datetime(2026, 7, 1, tzinfo=UTC)
DAY0 = datetime(2026, 6, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Doc:
    """One record of a case: its id and text, and optionally a title, a capture day, a user."""

    memory_id: str
    text: str
    title: str = "-"  # a title with no terms (the library refuses a blank one)
    day: int = 0  # captured DAY0 + day days
    user: str = USER

    @property
    def captured_at(self) -> datetime:
        return DAY0 + timedelta(days=self.day)


def docs(items: Iterable[Doc | tuple[str, str]]) -> tuple[Doc, ...]:
    return tuple(item if isinstance(item, Doc) else Doc(*item) for item in items)


@dataclass(frozen=True)
class Hit:
    """What the contracts read of one hit, whatever the implementation."""

    memory_id: str
    rank: int
    total: float
    parts: dict[str, float]


@dataclass(frozen=True)
class Answer:
    hits: tuple[Hit, ...]
    candidate_records: int
    empty_reason: str | None

    @property
    def ids(self) -> list[str]:
        return [h.memory_id for h in self.hits]


@dataclass(frozen=True)
class IndexView:
    """What the contracts read of an index: postings as (memory_id, count) pairs."""

    postings: dict[str, tuple[tuple[str, int], ...]]
    lengths: dict[str, int]
    searched_records: int
    total_length: int


# -- the expected numbers, written out once for the checks ---------------------------------


def expected_idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def expected_weight(count, df, n, length, average, k1=1.2, b=0.75) -> float:
    ratio = length / average if average else 0.0
    return expected_idf(df, n) * count * (k1 + 1) / (count + k1 * (1 - b + b * ratio))


def _close(got: Any, want: float) -> bool:
    return isinstance(got, int | float) and not isinstance(got, bool) and (
        round(float(got), 6) == round(want, 6))


def _broken(case: str, want: Any, got: Any) -> ContractBroken:
    return ContractBroken(f"smallest case: {case} — expected {want!r}, got {got!r}")


def _fmt(records: Sequence[Doc | tuple[str, str]]) -> str:
    return "[" + ", ".join(
        f"{d.memory_id}: {d.text!r}" + (f" (title {d.title!r})" if d.title != "-" else "")
        + (f" (day {d.day})" if d.day else "") + (f" (user {d.user})" if d.user != USER
                                                   else "")
        for d in docs(records)) + "]"


def _stem_s(word: str) -> str:
    """The contracts' stemmer: cut one trailing 's' (cats → cat, as → a)."""
    return word[:-1] if word.endswith("s") and len(word) > 1 else word


# -- the analyzer ---------------------------------------------------------------------------


def plain_counts_every_term(layer) -> None:
    for text, want in [("", {}), ("cat", {"cat": 1}), ("Cat cat", {"cat": 2}),
                       ("the cat and the hat", {"the": 2, "cat": 1, "and": 1, "hat": 1})]:
        got = layer.analyze(text, layer.analyzer())
        if got != want:
            raise _broken(f"plain analyzer, {text!r}", want, got)


def stop_words_are_dropped(layer) -> None:
    stop = layer.analyzer(stop_words={"the"})
    for text, want in [("the", {}), ("the cat", {"cat": 1}),
                       ("the cat the cats", {"cat": 1, "cats": 1}),
                       ("The THE", {})]:
        got = layer.analyze(text, stop)
        if got != want:
            raise _broken(f"stop words {{'the'}}, {text!r}", want, got)


def stems_are_merged(layer) -> None:
    for stop, text, want in [((), "cats", {"cat": 1}), ((), "cat cats", {"cat": 2}),
                             ({"the"}, "the cats", {"cat": 1}),
                             ({"a"}, "as a", {"a": 1})]:
        got = layer.analyze(text, layer.analyzer(stop_words=stop, stem=_stem_s))
        if got != want:
            where = f"stem cuts a trailing 's', stop words {set(stop) or '{}'}, {text!r}"
            raise _broken(where, want, got)


# -- the inverted index ---------------------------------------------------------------------


def postings_once_with_counts(layer) -> None:
    cases = [
        ([("r1", "cat")], "cat", (("r1", 1),)),
        ([("r1", "cat cat")], "cat", (("r1", 2),)),
        ([("r1", "cat dog"), ("r2", "dog")], "dog", (("r1", 1), ("r2", 1))),
        ([("r2", "dog"), ("r1", "dog dog")], "dog", (("r2", 1), ("r1", 2))),
        ([("r1", "cat"), ("r2", "dog")], "bird", ()),
    ]
    for records, term, want in cases:
        got = layer.index(docs(records)).postings.get(term, ())
        if tuple(got) != want:
            raise _broken(f"records {_fmt(records)}, postings of {term!r}", want, tuple(got))


def lengths_count_occurrences(layer) -> None:
    cases = [
        ([("r1", "cat")], {"r1": 1}, 1, 1),
        ([("r1", "cat cat dog")], {"r1": 3}, 1, 3),
        ([("r1", "cat cat dog"), ("r2", "dog")], {"r1": 3, "r2": 1}, 2, 4),
        ([Doc("r1", "dog", title="Cat")], {"r1": 2}, 1, 2),
    ]
    for records, lengths, n, total in cases:
        view = layer.index(docs(records))
        got = (dict(view.lengths), view.searched_records, view.total_length)
        if got != (lengths, n, total):
            raise _broken(f"records {_fmt(records)}: (lengths, N, total length)",
                          (lengths, n, total), got)
    records = [Doc("r1", "dog", title="Cat")]
    got = layer.index(docs(records)).postings.get("cat", ())
    if tuple(got) != (("r1", 1),):
        raise _broken(f"records {_fmt(records)}, postings of 'cat' (the title counts)",
                      (("r1", 1),), tuple(got))


# -- BM25 -----------------------------------------------------------------------------------


def idf_formula(layer) -> None:
    for df, n in [(1, 1), (1, 2), (2, 2), (3, 40), (40, 40)]:
        want = expected_idf(df, n)
        got = layer.idf(df, n)
        if not _close(got, want):
            raise _broken(f"idf(df={df}, N={n})", round(want, 6), got)


def term_weight_formula(layer) -> None:
    cases = [(count, df, n, length, average, k1, b)  # smallest collection first
             for count, df, n, length, average in [(1, 1, 1, 1, 1.0), (1, 1, 1, 0, 0.0),
                                                   (2, 1, 2, 4, 2.0), (1, 2, 3, 6, 3.0),
                                                   (3, 1, 4, 3, 6.0)]
             for k1, b in [(1.2, 0.75), (0.0, 0.75), (1.2, 0.0), (1.2, 1.0), (2.0, 0.5)]]
    for count, df, n, length, average, k1, b in cases:
        want = expected_weight(count, df, n, length, average, k1, b)
        got = layer.term_weight(count, df, n, length, average, k1, b)
        if not _close(got, want):
            raise _broken(f"term_weight(count={count}, df={df}, N={n}, length={length}, "
                          f"average_length={average}, k1={k1}, b={b})", round(want, 6), got)


# -- recall with BM25 -----------------------------------------------------------------------


def candidates_share_a_term(layer) -> None:
    cases = [
        ([("r1", "cat")], "cat", ["r1"], 1),
        ([("r1", "cat"), ("r2", "dog")], "cat", ["r1"], 1),
        ([("r1", "cat"), ("r2", "dog")], "bird", [], 0),
        ([("r1", "cat"), ("r2", "dog"), ("r3", "bird")], "cat bird", None, 2),
    ]
    for records, text, ids, candidates in cases:
        answer = layer.recall(docs(records), text)
        got = (answer.ids if ids is not None else sorted(answer.ids), answer.candidate_records)
        want = (ids if ids is not None else ["r1", "r3"], candidates)
        if got != want:
            raise _broken(f"records {_fmt(records)}, query {text!r}: (hits, candidate_records)",
                          want, got)


def score_is_the_sum_of_parts(layer) -> None:
    cases = [
        ([("r1", "cat")], "cat"),
        ([("r1", "cat dog dog"), ("r2", "dog bird")], "cat dog"),
        ([("r1", "the xdist crash"), ("r2", "the the the"), ("r3", "the end")], "the xdist"),
    ]
    for records, text in cases:
        records = docs(records)
        analyzed = {d.memory_id: _plain(d) for d in records}
        n = len(records)
        average = sum(sum(c.values()) for c in analyzed.values()) / n
        terms = sorted(set(_plain_text(text)))
        df = {t: sum(t in c for c in analyzed.values()) for t in terms}
        answer = layer.recall(records, text)
        for hit in answer.hits:
            counts = analyzed[hit.memory_id]
            want = {t: round(expected_weight(counts[t], df[t], n, sum(counts.values()),
                                             average), 6) for t in terms if t in counts}
            total = round(sum(want.values()), 6)
            got = ({t: round(v, 6) for t, v in hit.parts.items()}, round(hit.total, 6))
            if got != (want, total):
                raise _broken(f"records {_fmt(records)}, query {text!r}: {hit.memory_id}'s "
                              "(parts, total)", (want, total), got)
        by_total = sorted(answer.hits, key=lambda h: -h.total)
        if [h.total for h in by_total] != [h.total for h in answer.hits]:
            raise _broken(f"records {_fmt(records)}, query {text!r}: hits best first",
                          [h.memory_id for h in by_total], answer.ids)


def ties_follow_the_rank_key(layer) -> None:
    cases = [
        ([Doc("r2", "cat"), Doc("r1", "cat")], ["r1", "r2"]),
        ([Doc("r1", "cat"), Doc("r2", "cat", day=1)], ["r2", "r1"]),
        ([Doc("b", "cat", day=1), Doc("a", "cat"), Doc("c", "cat", day=1)], ["b", "c", "a"]),
    ]
    for records, want in cases:
        for order in (records, records[::-1]):
            got = layer.recall(docs(order), "cat").ids
            if got != want:
                raise _broken(f"records {_fmt(order)}, query 'cat' (equal scores)", want, got)


def limit_and_ranks(layer) -> None:
    records = [("r1", "cat"), ("r2", "cat cat"), ("r3", "cat dog")]
    for limit in (1, 2, 3):
        answer = layer.recall(docs(records), "cat", limit=limit)
        got = [h.rank for h in answer.hits]
        if got != list(range(1, limit + 1)):
            raise _broken(f"records {_fmt(records)}, query 'cat', limit={limit}: ranks",
                          list(range(1, limit + 1)), got)


def other_users_are_refused(layer) -> None:
    records = [Doc("r1", "cat"), Doc("s1", "cat", user=OTHER_USER)]
    for order in (records, records[::-1]):
        try:
            answer = layer.recall(docs(order), "cat")
        except NotImplementedError:
            raise
        except Exception as exc:  # any refusal that says it is about scope
            if "scope" in type(exc).__name__.lower() or "scope" in str(exc).lower():
                continue
            raise _broken(f"records {_fmt(order)}, query 'cat'", "a scope error",
                          f"{type(exc).__name__}: {exc}") from None
        raise _broken(f"records {_fmt(order)}, query 'cat'", "a scope error",
                      f"hits {answer.ids}")


def analyzer_on_both_sides(layer) -> None:
    cases = [
        ([("r1", "cats"), ("r2", "dog")], "cat", (), ["r1"]),
        ([("r1", "cat"), ("r2", "dog")], "cats", (), ["r1"]),
        ([("r1", "the cat"), ("r2", "the dog")], "the cats", {"the"}, ["r1"]),
    ]
    for records, text, stop, want in cases:
        analyzer = layer.analyzer(stop_words=stop, stem=_stem_s)
        got = layer.recall(docs(records), text, analyzer=analyzer).ids
        if got != want:
            raise _broken(f"records {_fmt(records)}, query {text!r}, stem cuts a trailing "
                          f"'s', stop words {set(stop) or '{}'}", want, got)


def stop_words_only_is_empty(layer) -> None:
    records = [("r1", "the cat"), ("r2", "the dog")]
    analyzer = layer.analyzer(stop_words={"the", "a"})
    for text in ("the", "the a"):
        answer = layer.recall(docs(records), text, analyzer=analyzer)
        got = (answer.ids, answer.empty_reason)
        if got != ([], "only_stop_words"):
            raise _broken(f"records {_fmt(records)}, query {text!r}, stop words "
                          "{'the', 'a'}", ([], "only_stop_words"), got)


def _plain(doc: Doc):
    return _plain_text("\n".join((doc.title, "", doc.text)))


def _plain_text(text: str):
    from labmem.core.text import term_frequencies

    return term_frequencies(text)


SUITE = ContractSuite(N_("analyzer, index and BM25"), (
    Contract(N_("the plain analyzer counts every term of a text"), plain_counts_every_term),
    Contract(N_("a stop word is dropped and every other term keeps its count"),
             stop_words_are_dropped),
    Contract(N_("forms with one stem merge into one term (stop words are checked first)"),
             stems_are_merged),
    Contract(N_("a term's postings name each record holding it once, with its count, in "
                "store order"), postings_once_with_counts),
    Contract(N_("a record's length counts its term occurrences, title included"),
             lengths_count_occurrences),
    Contract(N_("idf is ln(1 + (N − df + ½) / (df + ½))"), idf_formula),
    Contract(N_("a term's part saturates with its count (k1) and is discounted by length (b)"),
             term_weight_formula),
    Contract(N_("the candidates are the records that share a term with the query"),
             candidates_share_a_term),
    Contract(N_("a hit's score is the sum of its terms' BM25 parts, each in the breakdown"),
             score_is_the_sum_of_parts),
    Contract(N_("equal scores are ordered newest first, then by id, whatever the store order"),
             ties_follow_the_rank_key),
    Contract(N_("a recall returns at most limit hits, ranked from 1"), limit_and_ranks),
    Contract(N_("another user's record is refused, never counted"), other_users_are_refused),
    Contract(N_("the analyzer applies to the records and the query alike"),
             analyzer_on_both_sides),
    Contract(N_("a query of stop words only has no hits and says why"),
             stop_words_only_is_empty),
))


# -- the implementations ------------------------------------------------------------------


class ScratchLayer:
    """The operations the contracts use, over a from-scratch module (or the learner's)."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def __repr__(self) -> str:
        return f"ScratchLayer({self.module.__name__})"

    def analyzer(self, stop_words=(), stem: Callable[[str], str] | None = None):
        return self.module.Analyzer(frozenset(stop_words), stem)

    def analyze(self, text: str, analyzer) -> dict[str, int]:
        return dict(self.module.analyze(text, analyzer))

    def records(self, items: Sequence[Doc]) -> list:
        m = self.module  # s12's records, which the s12b module re-exports
        return [m.StoredMemory(d.memory_id, d.user, m.CONVERSATION, d.text, "",
                               m.MemorySource(f"chat:{d.memory_id}", "conversation", d.title,
                                              d.captured_at), AS_OF) for d in items]

    def index(self, items: Sequence[Doc]) -> IndexView:
        index = self.module.build_index(self.records(items), USER)
        return IndexView({t: tuple((p.memory_id, p.count) for p in found)
                          for t, found in index.postings.items()},
                         dict(index.lengths), index.searched_records, index.total_length)

    def idf(self, df: int, n: int) -> float:
        return self.module.bm25_idf(df, n)

    def term_weight(self, count, df, n, length, average, k1, b) -> float:
        return self.module.bm25_term_weight(count, df, n, length, average, k1, b)

    def recall(self, items: Sequence[Doc], text: str, *, limit: int = 5,
               analyzer=None) -> Answer:
        module = self.module
        index = module.build_index(self.records(items), USER,
                                   module.PLAIN if analyzer is None else analyzer)
        result = module.recall_bm25(index, text, limit=limit, as_of=AS_OF)
        return Answer(tuple(Hit(h.memory_id, h.rank, h.score_breakdown.total,
                                dict(h.score_breakdown.term_contributions))
                            for h in result.hits),
                      result.candidate_records, result.empty_reason)


class ProductionLayer:
    """The same operations over :mod:`labmem.recall` (stores in a temporary directory)."""

    def __repr__(self) -> str:
        return "ProductionLayer(labmem.recall)"

    def analyzer(self, stop_words=(), stem: Callable[[str], str] | None = None):
        from labmem.recall import EnglishAnalyzer, PlainAnalyzer

        if stem is None:
            return PlainAnalyzer() if not stop_words else EnglishAnalyzer(
                stop_words=frozenset(stop_words), stem=False)
        return _stemming_analyzer_class()(frozenset(stop_words), stem)

    def analyze(self, text: str, analyzer) -> dict[str, int]:
        return dict(analyzer.terms(text))

    def _store(self, items: Sequence[Doc], directory: str):
        from labmem.core.clock import FixedClock
        from labmem.recall import MemorySource, RemoteMemoryStore

        path = Path(directory) / "records.jsonl"
        stores = {}
        for d in items:  # each record written by its own user's store, in case order
            if d.user not in stores:
                stores[d.user] = RemoteMemoryStore(path, user_id=d.user,
                                                   clock=FixedClock(AS_OF))
            stores[d.user].append(kind="conversation", content=d.text, summary="",
                                  memory_id=d.memory_id,
                                  source=MemorySource(f"chat:{d.memory_id}", "conversation",
                                                      d.title, d.captured_at))
        return RemoteMemoryStore(path, user_id=USER, clock=FixedClock(AS_OF))

    def index(self, items: Sequence[Doc]) -> IndexView:
        from labmem.recall import open_term_index, record_terms

        with tempfile.TemporaryDirectory() as directory:
            store = self._store(items, directory)
            index = open_term_index(store)
            index.refresh()
            records = store.read_all()
            vocabulary = sorted({t for r in records for t in record_terms(r)})
            postings, lengths = {}, {}
            for term in vocabulary:
                found = index.postings(term)
                pairs = []
                for position, count, length in zip(found.positions.tolist(),
                                                   found.counts.tolist(),
                                                   found.lengths.tolist(), strict=True):
                    memory_id = index.record(position).memory_id
                    pairs.append((memory_id, count))
                    lengths[memory_id] = length
                postings[term] = tuple(pairs)
            return IndexView(postings, lengths, index.searched_records, index.total_length)

    def idf(self, df: int, n: int) -> float:
        from labmem.recall import bm25_idf

        return bm25_idf(df, n)

    def term_weight(self, count, df, n, length, average, k1, b) -> float:
        from labmem.recall import bm25_term_weight

        return bm25_term_weight(count, df, n, length, average, k1, b)

    def recall(self, items: Sequence[Doc], text: str, *, limit: int = 5,
               analyzer=None) -> Answer:
        from labmem.recall import Bm25Scorer, ContextualScorer, PlainAnalyzer, RecallEngine

        if analyzer is None or isinstance(analyzer, PlainAnalyzer):
            scorer = Bm25Scorer()
        else:  # the contextual scorer with only the own text and the title, at weight 1
            scorer = ContextualScorer(analyzer=analyzer, k1=1.2, b=0.75, own=1.0, title=1.0,
                                      date=0.0, previous=0.0, next=0.0, thread=0.0)
        with tempfile.TemporaryDirectory() as directory:
            store = self._store(items, directory)
            result = RecallEngine(store, scorer=scorer).recall(text, limit=limit, as_of=AS_OF)
        return Answer(tuple(Hit(h.memory_id, h.rank, h.score_breakdown.total,
                                dict(h.score_breakdown.term_contributions))
                            for h in result.hits),
                      result.candidate_records, result.empty_reason)


@functools.cache
def _stemming_analyzer_class() -> type:
    """An analyzer of the library's kind (its ``term`` hook) with a case's own stemmer;
    made on first use, so that importing the suite does not import the library."""
    from labmem.recall import Analyzer

    @dataclass(frozen=True)
    class StemmingAnalyzer(Analyzer):
        stop_words: frozenset = frozenset()
        stem: Callable[[str], str] | None = None
        key = "contract-stemmer"

        def term(self, surface: str) -> str | None:
            if surface in self.stop_words:
                return None
            return self.stem(surface) if self.stem else surface

    return StemmingAnalyzer


SCRATCH = ScratchLayer(labmem.scratch.s12b)
PRODUCTION = ProductionLayer()
