"""Checkers for the s14 Context MMU exercises.

Five predict-the-value exercises (the factor score, recency, the budget boundary, what the
L1 overview loses, which claim is current) and one build exercise: the learner writes three
pieces of the chapter's from-scratch Context MMU (:mod:`labmem.scratch.s14_mmu`): the keep
score, the eviction choice and the rule for what is current; :func:`check_layer` puts them
into the module and runs the layer's contract suite (:mod:`labmem.exercises.suites.s14_mmu`).
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from labmem.core.clock import SteppingClock
from labmem.core.i18n import _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.contracts import ContractReport, assemble
from labmem.exercises.suites.s14_mmu import SUITE
from labmem.mmu import (
    STATUSES,
    ContextMMU,
    Factors,
    FactorWeights,
    FileMemoryService,
    LossRow,
    MemoryRecord,
    factor_score,
    information_loss,
    recency,
)
from labmem.scratch import s14_mmu as scratch

# Exercise 1: a page with these factors, under the default weights.
EXERCISE_1_FACTORS = dict(relevance=0.5, importance=0.8, confidence=0.5, utility=0.5,
                          recency=0.25, salience=0.5, scope=1.0)

# Exercise 2: an MMU built with this half-life; the page was last accessed this long ago.
EXERCISE_2_HALF_LIFE = timedelta(hours=6)
EXERCISE_2_AGE = timedelta(days=1)

# Exercise 4: four new notes, each with the phrase a decision depends on (case_id, text, fact).
EXERCISE_4_CASES: tuple[tuple[str, str, str], ...] = (
    ("backups", "Nightly backups of the billing database are kept for 30 days.",
     "kept for 30 days"),
    ("paging", "The on-call engineer reads the alert, checks the queue dashboards, opens an "
               "incident channel and pages the owner of the service; the secondary is paged "
               "only after 15 minutes.", "only after 15 minutes"),
    ("failover", "Failover drills for the billing database are planned with the platform "
                 "team, announced in the operations channel, rehearsed on staging and run "
                 "never on a Friday, so that a failed drill never meets a weekend.",
     "never on a Friday"),
    ("refunds", "Refunds above 500 euros need a manager's approval; the support console shows "
                "the order history, the customer's previous tickets and the payment method on "
                "file for every single order.", "500 euros"),
)
_T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def _number(answer: object) -> bool:
    return not isinstance(answer, bool) and isinstance(answer, (int, float))


def check_factor_score(answer: float | None) -> Feedback:
    """Exercise 1: the default-weight score of :data:`EXERCISE_1_FACTORS`."""
    name = _("exercise 1 (factor score)")
    if answer is None:
        return not_answered(name)
    expected = factor_score(Factors(**EXERCISE_1_FACTORS), FactorWeights())
    if not _number(answer):
        return Feedback(name, False, _("expected a number, got {kind}")
                                     .format(kind=type(answer).__name__))
    if abs(answer - expected) <= 1e-6:
        return Feedback(name, True, _("{expected:.4f}: Σ weight·factor / Σ weight")
                                    .format(expected=expected))
    return Feedback(name, False, _("multiply each factor by its weight (relevance 0.35, "
                                   "importance 0.15, the rest 0.10) and divide by their sum"))


def check_recency(answer: float | None) -> Feedback:
    """Exercise 2: the recency factor of a page one day old, with a six-hour half-life."""
    name = _("exercise 2 (recency)")
    if answer is None:
        return not_answered(name)
    if not _number(answer):
        return Feedback(name, False, _("expected a number between 0 and 1, got {kind}")
                                     .format(kind=type(answer).__name__))
    expected = recency(EXERCISE_2_AGE, EXERCISE_2_HALF_LIFE)
    if abs(answer - expected) <= 1e-6:
        return Feedback(name, True, _("{expected}: one day is four six-hour half-lives, and each "
                                      "one halves the factor").format(expected=expected))
    if abs(answer - recency(EXERCISE_2_AGE)) <= 1e-6:
        return Feedback(name, False, _("that is the default one-day half-life; this MMU "
                                       "was built with six hours"))
    return Feedback(name, False, _("recency is 2 ** (-age / half_life): count how many "
                                   "half-lives fit in the age first"))


def check_budget_fits(answer: tuple[bool, bool, bool] | None) -> Feedback:
    """Exercise 3: budget 100, used 60. Does a promotion needing 40, 41, 39 tokens fit?"""
    name = _("exercise 3 (budget boundary)")
    if answer is None:
        return not_answered(name)
    expected = (True, False, True)
    if isinstance(answer, (tuple, list)) and tuple(answer) == expected:
        return Feedback(name, True, _("exactly equal fits; one over is rejected"))
    return Feedback(name, False, _("the check is need <= budget and used <= budget - need"))


def exercise_4_records() -> list[tuple[str, str, str, MemoryRecord]]:
    """The exercise-4 notes as ``(case_id, kind, fact, record)``, ready for
    :func:`~labmem.mmu.information_loss` (no service, no files)."""
    return [(case_id, "exercise", fact, MemoryRecord(
        record_id=f"x-{n:06d}", memory_type="semantic", scope="alice", title="Ops note",
        text=text, status="provisional", importance=0.5, confidence=0.5, utility=0.5,
        salience=0.5, source_kind="user_stated", origin_key=case_id, evidence=("ev",),
        version=1, created_at=_T0, updated_at=_T0))
        for n, (case_id, text, fact) in enumerate(EXERCISE_4_CASES, start=1)]


def exercise_4_table() -> list[dict[str, object]]:
    """What the learner may read: each note's length and where its decisive phrase sits."""
    rows = []
    for case_id, text, fact in EXERCISE_4_CASES:
        start = text.find(fact)
        rows.append({"case_id": case_id, "chars": len(text), "fact": fact,
                     "fact_starts_at": start, "fact_ends_before": start + len(fact)})
    return rows


def exercise_4_rows() -> list[LossRow]:
    """The library's verdict on the exercise-4 notes, computed from their real L1 overviews."""
    return information_loss(exercise_4_records())


def check_needs_l2(answer: set[str] | None) -> Feedback:
    """Exercise 4: which of the exercise-4 notes must be loaded at L2 before a decision?"""
    name = _("exercise 4 (information loss)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, (set, list, tuple, frozenset)):
        return Feedback(name, False, _("answer with a set of case ids, e.g. {\"backups\"}"))
    expected = {row.case_id for row in exercise_4_rows() if row.needs_l2}
    got = set(answer)
    known = {case_id for case_id, _, _ in EXERCISE_4_CASES}
    if got - known:
        return Feedback(name, False, _("unknown case ids {unknown}; the cases are {cases}")
                                     .format(unknown=sorted(got - known), cases=sorted(known)))
    if got == expected:
        return Feedback(name, True, _("a phrase that reaches past the cut is gone from L1, even "
                                      "when only its last word does"))
    if expected - got:
        return Feedback(name, False, _("a note longer than 160 characters is cut at the last "
                                       "space before character 160 — check where that space is"))
    return Feedback(name, False, _("a note of at most 160 characters is kept whole, and a phrase "
                                   "that ends before the cut survives"))


# Exercise 6: four claims about one thing (same scope and origin key), written in this order.
EXERCISE_6_CLAIMS: tuple[tuple[str, str, str], ...] = (
    ("a", "tool_observed", "The cache TTL of the billing API is 300 seconds."),
    ("b", "model_inferred", "The cache TTL of the billing API is probably 60 seconds."),
    ("c", "user_stated", "The cache TTL of the billing API is 600 seconds."),
    ("d", "tool_observed", "The cache TTL of the billing API is 900 seconds."),
)


def exercise_6_statuses() -> dict[str, str]:
    """The library's answer: write the four claims to a fresh service, read each status."""
    with tempfile.TemporaryDirectory(prefix="labmem-ex6-") as root:
        service = FileMemoryService(root, clock=SteppingClock(_T0))
        ids = {label: service.remember(
            "semantic", scope="alice", title="Billing API cache TTL", text=text,
            outcome="succeeded", evidence=[f"ev:{label}"], source_kind=source,
            origin_key="billing-cache-ttl").record_id
            for label, source, text in EXERCISE_6_CLAIMS}
        return {label: service.recall_key(record_id, scope="alice").status
                for label, record_id in ids.items()}


def check_current_claim(answer: dict[str, str] | None) -> Feedback:
    """Exercise 6: the status of each claim of :data:`EXERCISE_6_CLAIMS` after all four."""
    name = _("exercise 6 (what is true now)")
    if answer is None:
        return not_answered(name)
    labels = [label for label, _, _ in EXERCISE_6_CLAIMS]
    if not isinstance(answer, dict) or sorted(answer) != labels:
        return Feedback(name, False, _("answer with a dict from each of {labels} to a status")
                                     .format(labels=labels))
    unknown = sorted({v for v in answer.values() if v not in STATUSES}, key=str)
    if unknown:
        return Feedback(name, False, _("{unknown} is not a status; statuses are {statuses}")
                                     .format(unknown=unknown, statuses=list(STATUSES)))
    expected = exercise_6_statuses()
    if answer == expected:
        return Feedback(name, True, _("a claim replaces only claims of equal or lower rank; a "
                                      "lower-ranked one waits as a pending conflict"))
    wrong = [label for label in labels if answer[label] != expected[label]]
    first = wrong[0]
    source = dict((label, src) for label, src, _ in EXERCISE_6_CLAIMS)[first]
    return Feedback(name, False, _("claim {first!r} ({source}) is not {answer!r}: compare its "
                                   "source's rank with the rank of the claim that was current "
                                   "when it arrived")
                                 .format(first=first, source=source, answer=answer[first]))


# -- building the layer ------------------------------------------------------------------

#: The pieces of the chapter's module the learner writes in Exercise 5, in order.
PIECES = ("keep_score", "choose_evictions", "settle_claim")


def check_layer(**pieces: Any) -> ContractReport:
    """Exercise 5: the chapter's from-scratch Context MMU with the learner's own pieces
    (``keep_score=...``, ``choose_evictions=...``, ``settle_claim=...``) put in place of
    the module's, judged by the whole layer's contract suite. A piece left as ``None``
    keeps the module's own version."""
    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        raise TypeError(f"check_layer() takes {', '.join(PIECES)}; not {unknown[0]!r}")
    given = {name: piece for name, piece in pieces.items() if piece is not None}
    return SUITE.run(assemble(scratch, given), who="your")


#: Single-function build exercises: none. The eviction choice is one of the three pieces of
#: Exercise 5, judged with the rest of the layer by its contract suite.
BUILD: tuple = ()


# -- from scratch vs the library, measured -------------------------------------------------

TOPIC_WORDS = tuple(f"topic{n}" for n in range(40))


def measure_work(records: int = 1_000, recalls: int = 10) -> list[dict[str, object]]:
    """``records`` short notes in one scope (on 40 topics), then ``recalls`` recalls, each
    about one topic: the work each implementation does, counted in the same run.

    * ``records scored per recall``: candidates whose keep score was computed;
    * ``records read per recall``: records the recall looked at to find its candidates
      (the module scans every current record of the scope; the library asks its term
      index, which hands it the matching records only);
    * ``records after a restart``: what a new process opening the same memory sees.
    """
    counts = {"scored": 0, "read": 0}

    def counting_score(factors: dict[str, float], weights: dict[str, float]) -> float:
        counts["scored"] += 1
        return scratch.keep_score(factors, weights)

    def counting_terms(text: str) -> frozenset[str]:
        counts["read"] += 1
        return scratch.terms(text)

    module = assemble(scratch, {"keep_score": counting_score, "terms": counting_terms})
    notes = [(f"note-{n}", f"Note {n}", f"Observation {n} on {TOPIC_WORDS[n % 40]}.")
             for n in range(records)]
    queries = [f"which {TOPIC_WORDS[n % 40]} settings" for n in range(recalls)]
    store = module.MemoryStore()
    for key, title, text in notes:
        store.remember(scope="alice", origin_key=key, title=title, text=text,
                       source_kind="tool_observed")
    mmu = module.ContextMMU(store, token_budget=400)
    counts.update(scored=0, read=0)
    for query in queries:
        mmu.recall(query, scope="alice")
    # terms() ran once per recall on the query, once per record scanned, once per record scored
    rows = [{"implementation": "from scratch",
             "records scored per recall": counts["scored"] // recalls,
             "records read per recall": (counts["read"] - counts["scored"]) // recalls - 1,
             "records after a restart": 0}]
    with tempfile.TemporaryDirectory(prefix="labmem-s14-measure-") as root:
        clock = SteppingClock(_T0, step=timedelta(seconds=1))
        service = FileMemoryService(Path(root) / "memory", clock=clock)
        for key, title, text in notes:
            service.remember("semantic", scope="alice", title=title, text=text,
                             outcome="succeeded", evidence=[f"ev:{key}"],
                             source_kind="tool_observed", origin_key=key)
        library = ContextMMU(service, token_budget=400, clock=clock)
        library.scored = 0
        for query in queries:
            library.recall(query, scope="alice")
        candidates = library.scored
        service.close()
        reopened = FileMemoryService(Path(root) / "memory", clock=clock)
        rows.append({"implementation": "library",
                     "records scored per recall": candidates // recalls,
                     "records read per recall": candidates // recalls,
                     "records after a restart": len(reopened.records())})
        reopened.close()
    return rows
