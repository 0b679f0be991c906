"""Checkers for the s14 Context MMU exercises.

Five predict-the-value exercises (the factor score, recency, the budget boundary, what the
L1 overview loses, which claim is current) and one build exercise: the eviction choice,
judged against :func:`labmem.mmu.choose_evictions`.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone

from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.mmu import (
    STATUSES,
    Factors,
    FactorWeights,
    FileMemoryService,
    LossRow,
    MemoryRecord,
    ResidentPage,
    choose_evictions,
    factor_score,
    information_loss,
    recency,
)

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
    name = "exercise 1 (factor score)"
    if answer is None:
        return not_answered(name)
    expected = factor_score(Factors(**EXERCISE_1_FACTORS), FactorWeights())
    if not _number(answer):
        return Feedback(name, False, f"expected a number, got {type(answer).__name__}")
    if abs(answer - expected) <= 1e-6:
        return Feedback(name, True, f"{expected:.4f}: Σ weight·factor / Σ weight")
    return Feedback(name, False, "multiply each factor by its weight (relevance 0.35, "
                                 "importance 0.15, the rest 0.10) and divide by their sum")


def check_recency(answer: float | None) -> Feedback:
    """Exercise 2: the recency factor of a page one day old, with a six-hour half-life."""
    name = "exercise 2 (recency)"
    if answer is None:
        return not_answered(name)
    if not _number(answer):
        return Feedback(name, False, f"expected a number between 0 and 1, "
                                     f"got {type(answer).__name__}")
    expected = recency(EXERCISE_2_AGE, EXERCISE_2_HALF_LIFE)
    if abs(answer - expected) <= 1e-6:
        return Feedback(name, True, f"{expected}: one day is four six-hour half-lives, "
                                    "and each one halves the factor")
    if abs(answer - recency(EXERCISE_2_AGE)) <= 1e-6:
        return Feedback(name, False, "that is the default one-day half-life; this MMU "
                                     "was built with six hours")
    return Feedback(name, False, "recency is 2 ** (-age / half_life): count how many "
                                 "half-lives fit in the age first")


def check_budget_fits(answer: tuple[bool, bool, bool] | None) -> Feedback:
    """Exercise 3: budget 100, used 60. Does a promotion needing 40, 41, 39 tokens fit?"""
    name = "exercise 3 (budget boundary)"
    if answer is None:
        return not_answered(name)
    expected = (True, False, True)
    if isinstance(answer, (tuple, list)) and tuple(answer) == expected:
        return Feedback(name, True, "exactly equal fits; one over is rejected")
    return Feedback(name, False, "the check is need <= budget and used <= budget - need")


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
    name = "exercise 4 (information loss)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, (set, list, tuple, frozenset)):
        return Feedback(name, False, "answer with a set of case ids, e.g. {\"backups\"}")
    expected = {row.case_id for row in exercise_4_rows() if row.needs_l2}
    got = set(answer)
    known = {case_id for case_id, _, _ in EXERCISE_4_CASES}
    if got - known:
        return Feedback(name, False, f"unknown case ids {sorted(got - known)}; "
                                     f"the cases are {sorted(known)}")
    if got == expected:
        return Feedback(name, True, "a phrase that reaches past the cut is gone from L1, even "
                                    "when only its last word does")
    if expected - got:
        return Feedback(name, False, "a note longer than 160 characters is cut at the last "
                                     "space before character 160 — check where that space is")
    return Feedback(name, False, "a note of at most 160 characters is kept whole, and a phrase "
                                 "that ends before the cut survives")


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
    name = "exercise 6 (what is true now)"
    if answer is None:
        return not_answered(name)
    labels = [label for label, _, _ in EXERCISE_6_CLAIMS]
    if not isinstance(answer, dict) or sorted(answer) != labels:
        return Feedback(name, False, f"answer with a dict from each of {labels} to a status")
    unknown = sorted({v for v in answer.values() if v not in STATUSES}, key=str)
    if unknown:
        return Feedback(name, False, f"{unknown} is not a status; statuses are "
                                     f"{list(STATUSES)}")
    expected = exercise_6_statuses()
    if answer == expected:
        return Feedback(name, True, "a claim replaces only claims of equal or lower rank; a "
                                    "lower-ranked one waits as a pending conflict")
    wrong = [label for label in labels if answer[label] != expected[label]]
    first = wrong[0]
    source = dict((label, src) for label, src, _ in EXERCISE_6_CLAIMS)[first]
    return Feedback(name, False, f"claim {first!r} ({source}) is not {answer[first]!r}: compare "
                                 "its source's rank with the rank of the claim that was "
                                 "current when it arrived")


# -- build it yourself: the eviction choice --------------------------------------------------

_FLAG = st.sampled_from((False, False, True))
_RESIDENT = st.builds(
    ResidentPage, record_id=st.integers(1, 9).map(lambda n: f"m-{n:06d}"),
    keep_score=st.sampled_from((0.5, 0.25, 0.75)),
    last_access=st.integers(0, 3).map(lambda minutes: _T0 + timedelta(minutes=minutes)),
    tokens=st.integers(1, 60), pinned=_FLAG, protected=_FLAG, age=st.integers(0, 3))
#: A few resident pages (ties in score and access time on purpose), an amount, an age rule.
_EVICTION_INPUTS = st.tuples(
    st.lists(_RESIDENT, unique_by=lambda page: page.record_id, max_size=6).map(tuple),
    st.integers(0, 150), st.integers(0, 2))


def _show_page(page: ResidentPage) -> str:
    flags = "".join(f", {name}" for name, on in (("pinned", page.pinned),
                                                 ("protected", page.protected)) if on)
    return (f"{page.record_id} (keep {page.keep_score}, last {page.last_access:%H:%M}, "
            f"{page.tokens} tok, age {page.age}{flags})")


def _describe_eviction(args: tuple) -> str:
    pages, tokens_to_free, min_residency = args
    shown = "; ".join(_show_page(page) for page in pages)
    return f"pages [{shown}], tokens_to_free={tokens_to_free}, min_residency={min_residency}"


def _as_ids(value: object) -> tuple:
    return tuple(value)


BUILD = (
    BuildExercise(
        chapter="s14 MMU", name="the eviction choice", reference=choose_evictions,
        inputs=_EVICTION_INPUTS,
        hint="re-read 'The eviction choice': which pages may go, in what order, when to stop, "
             "and when to evict nothing at all",
        project=_as_ids, describe=_describe_eviction),
)
