"""Checkers for the s12b exercises (choosing a ranker).

Three predict exercises (an idf by hand, saturation, which of the four lexical scorers
survive a shorter question), the layer build and one build-one-function exercise:

* the layer: the learner rewrites three pieces of the from-scratch module
  (:mod:`labmem.scratch.s12b`: the analyzer's ``Analyzer.term``, the index's ``build_index``
  and BM25's ``bm25_term_weight``); :func:`check_layer` puts them in a fresh copy of the
  module and runs the layer's contract suite (:mod:`labmem.exercises.suites.s12b`) on it;
* the fusion rule (:data:`BUILD`): the learner writes weighted reciprocal-rank fusion of a
  lexical and a dense ranking; :func:`check_fusion` compares it with the library's
  :func:`~labmem.recall.dense.fuse_rankings` on generated pairs of rankings (ties, disjoint
  lists, an empty list, a repeated id) and answers with the smallest one they disagree on.
"""

from __future__ import annotations

import inspect
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from labmem.core.i18n import N_, _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.exercises.contracts import ContractReport, assemble
from labmem.exercises.suites.s12b import SUITE, ScratchLayer
from labmem.recall import Bm25Scorer, bm25_idf, fuse_rankings

EXERCISE_1 = {"searched_records": 40, "document_frequency": 3}
IDF_TOLERANCE = 1e-4  # an answer within 0.0001 of the idf is right (4 decimals suffice)
EXERCISE_2_SHARE = 0.9
EXERCISE_3_QUERY = "what did we decide about the Idempotency-Key"  # q02 without "header"
EXERCISE_3_GOLD = "api-idempotency"
#: the scorers exercise 3 asks about: the four lexical ones of "One question, four scorers"
LEXICAL_SCORERS = ("teaching", "bm25", "bm25_recency", "contextual")


def _number(answer) -> bool:
    return isinstance(answer, int | float) and not isinstance(answer, bool)


def check_idf(answer: float | None) -> Feedback:
    """Exercise 1: BM25's idf of a term found in 3 of 40 records."""
    name = _("exercise 1 (idf by hand)")
    if answer is None:
        return not_answered(name)
    if not _number(answer):
        return Feedback(name, False, _("expected a number, got {kind}")
                                     .format(kind=type(answer).__name__))
    n, df = EXERCISE_1["searched_records"], EXERCISE_1["document_frequency"]
    expected = bm25_idf(df, n)
    if abs(answer - expected) <= IDF_TOLERANCE:
        return Feedback(name, True, _("ln(1 + (40 − 3 + 0.5) / (3 + 0.5)) = {expected:.4f}")
                                    .format(expected=expected))
    if abs(answer - math.log(n / df)) <= IDF_TOLERANCE:
        return Feedback(name, False, _("that is the textbook ln(N/df); BM25's idf adds ½ "
                                       "to both counts and 1 inside the log"))
    return Feedback(name, False, _("idf = ln(1 + (N − df + 0.5) / (df + 0.5)) with N = 40, df = 3 "
                                   "(answers within 0.0001 count)"))


def saturation_count(share: float = EXERCISE_2_SHARE, k1: float = Bm25Scorer.k1) -> int:
    """Smallest term count whose BM25 part reaches ``share`` of its ceiling (average length)."""
    count = 1
    while count / (count + k1) < share:  # tf·(k1+1)/(tf+k1) ÷ (k1+1)
        count += 1
    return count


def check_saturation(answer: int | None) -> Feedback:
    """Exercise 2: how many repeats reach 90% of a term's maximum contribution (k1 = 1.2)."""
    name = _("exercise 2 (saturation)")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, int) or isinstance(answer, bool):
        return Feedback(name, False, _("answer with a whole number of occurrences"))
    expected = saturation_count()
    if answer == expected:
        return Feedback(name, True, _("{expected}/(11 + 1.2) ≥ 0.9 but 10/(10 + 1.2) < 0.9: the "
                                      "11th repeat is worth ~1% of the first")
                                    .format(expected=expected))
    direction = _("more") if answer < expected else _("fewer")
    return Feedback(name, False, _("not quite — {direction}; at average length the part is idf · "
                                   "tf·(k1+1)/(tf+k1), so solve tf/(tf+1.2) ≥ 0.9")
                                 .format(direction=direction))


def scorers_with_gold_first(text: str = EXERCISE_3_QUERY,
                            gold: str = EXERCISE_3_GOLD) -> tuple[str, ...]:
    """Which of the four lexical scorers (:data:`LEXICAL_SCORERS`) rank ``gold`` first for
    ``text`` (computed, never stored)."""
    from labmem.recall import load_into_store, load_labeled_set, scorer_engines

    labeled = load_labeled_set()
    with tempfile.TemporaryDirectory() as tmp:
        store = load_into_store(labeled, tmp)
        return tuple(name for name, engine in scorer_engines(store, LEXICAL_SCORERS).items()
                     if [h.memory_id for h in engine.recall(text, limit=1,
                                                            as_of=labeled.as_of).hits]
                     == [gold])


def check_winners(answer) -> Feedback:
    """Exercise 3: the set of scorers that still rank api-idempotency first without "header"."""
    name = _("exercise 3 (who still wins)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        answer = {answer}
    try:
        got = set(answer)
    except TypeError:
        return Feedback(name, False, _("answer with a set of scorer names, e.g. {'bm25'}, "
                                       "or set() for none"))
    unknown = got - set(LEXICAL_SCORERS)
    if unknown:
        return Feedback(name, False, _("unknown scorer(s) {unknown}; use {scorers}")
                                     .format(unknown=sorted(unknown),
                                             scorers=", ".join(map(repr, LEXICAL_SCORERS))))
    expected = set(scorers_with_gold_first())
    if got == expected:
        if expected == {"contextual"}:
            return Feedback(name, True, _("only contextual — for bm25 and bm25_recency idf makes "
                                          "the question words cheap, not free, and five of them "
                                          "in one chat outweigh 'idempotency' and 'key'; the "
                                          "english analyzer drops them, so they add nothing"))
        return Feedback(name, True, str(sorted(expected)))
    if "contextual" in expected and "contextual" not in got:
        return Feedback(name, False, _("look at the contextual rows: which of the question's "
                                       "words does its analyzer keep?"))
    return Feedback(name, False, _("add up {gold}'s BM25 parts without 'header' (the "
                                   "per-term table) and compare them with the total of the "
                                   "record that came second for the full question")
                                 .format(gold=EXERCISE_3_GOLD))


# -- the layer build: analyzer, index and BM25 -------------------------------------------

PIECES = ("Analyzer.term", "build_index", "bm25_term_weight")


def check_layer(*, analyzer_term: Callable, build_index: Callable,
                bm25_term_weight: Callable) -> ContractReport:
    """Your three pieces in a fresh copy of :mod:`labmem.scratch.s12b`, judged by the
    layer's contract suite: one line per contract that fails, with its smallest case."""
    import labmem.scratch.s12b as module

    layer = assemble(module, {"Analyzer.term": analyzer_term, "build_index": build_index,
                              "bm25_term_weight": bm25_term_weight})
    return SUITE.run(ScratchLayer(layer))


# -- build one function: the fusion rule ---------------------------------------------------

#: the library's own settings (the defaults of ``fuse_rankings``) are among the generated ones
_DEFAULTS = {name: p.default for name, p in inspect.signature(fuse_rankings).parameters.items()
             if p.default is not inspect.Parameter.empty}
_IDS = ("m1", "m2", "m3", "m4")
_RANKING = st.lists(st.sampled_from(_IDS), max_size=4)  # empty, disjoint, shared, repeated
FUSION_INPUTS = st.tuples(_RANKING, _RANKING, st.sampled_from((1.0, 10.0, _DEFAULTS["k"])),
                          st.sampled_from((0.5, 0.0, 0.25, _DEFAULTS["dense_weight"], 1.0)))


def _row(fused) -> tuple:
    """One fused record as compared: (id, total, lexical part, dense part, ranks), from a
    ``FusedRank`` or a tuple in that order."""
    if hasattr(fused, "memory_id"):
        return (fused.memory_id, fused.total, fused.lexical_part, fused.dense_part,
                fused.lexical_rank, fused.dense_rank)
    return tuple(fused)


def _fused_rows(value) -> list[tuple]:
    return [_row(fused) for fused in value]


def _describe_fusion(args: tuple) -> str:
    lexical, dense, k, weight = args
    return f"lexical {list(lexical)}, dense {list(dense)}, k={k:g}, dense_weight={weight:g}"


def _keywords_or_positions(fn: Callable) -> Callable:
    """``fn`` called as the library is (``k=`` and ``dense_weight=`` by keyword) when its
    signature takes them so, else with all four arguments by position."""
    try:
        inspect.signature(fn).bind([], [], k=1.0, dense_weight=0.5)
    except (TypeError, ValueError):
        return lambda lexical, dense, k, weight: fn(lexical, dense, k, weight)
    return lambda lexical, dense, k, weight: fn(lexical, dense, k=k, dense_weight=weight)


@dataclass(frozen=True)
class FusionExercise(BuildExercise):
    """The fusion rule: the learner's function and the library's, each called with
    ``(lexical, dense, k=…, dense_weight=…)`` on generated rankings."""

    def check(self, fn: Callable) -> Feedback:
        if not callable(fn):
            return super().check(fn)
        calls = BuildExercise(self.chapter, self.name, _keywords_or_positions(self.reference),
                              self.inputs, self.hint, self.project, self.describe)
        return calls.check(_keywords_or_positions(fn))


BUILD = (
    FusionExercise(
        chapter="s12b", name=N_("the fusion rule"), reference=fuse_rankings,
        inputs=FUSION_INPUTS, project=_fused_rows, describe=_describe_fusion,
        hint=N_("ranks start at 1; a part is weight·(k + 1)/(k + rank) rounded to 6 places, 0 "
                "for an id not in that list; a repeated id counts at its first rank; keep every "
                "id of either list; best total first, equal totals by memory id")),
)


def check_fusion(fn: Callable[..., Sequence]) -> Feedback:
    """Exercise 5: your fusion rule against the library's ``fuse_rankings``."""
    return BUILD[0].check(fn)
