"""Checkers for the story case-study exercises (upsert rules, compaction, the budget).

Three predict-the-value exercises and one build exercise: the decision of an upsert,
judged against :func:`labmem.story.claim_action`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypothesis import strategies as st

from labmem.core.clock import FixedClock, SteppingClock
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.story import (
    CUT_TIERS,
    MemoryContractAdapter,
    MemoryItem,
    Scratchpad,
    claim_action,
    compact,
    load_sample_story,
)

T0 = "2026-09-01T00:00:00Z"

#: Exercise 1: claims (chapter, value) for the key ``Ilse Korr.location``, in arrival order.
EXERCISE_1_CLAIMS: tuple[tuple[int, str], ...] = (
    (4, "the harbor office"),
    (6, "the north pier"),
    (6, "the lighthouse"),
    (5, "the fish market"),
    (8, "the council hall"),
    (8, "the council hall"),
)

#: Exercise 2: timeline events (chapter, event); compacted at chapter 10 with a window of 4.
EXERCISE_2_EVENTS: tuple[tuple[int, str], ...] = (
    (1, "lamps lit"), (1, "tide early"), (3, "bell rings"), (5, "pier lit"),
    (6, "the crossing"), (9, "fever"),
)
EXERCISE_2_CHAPTER, EXERCISE_2_WINDOW = 10, 4

#: Exercise 3: the pack for this chapter of the sample serial (built before the chapter is
#: committed, as in the chapter's commit loop), with this budget instead of the loop's 220.
EXERCISE_3_CHAPTER, EXERCISE_3_BUDGET = 10, 400
#: The commit loop's settings, repeated here so that the replay matches the notebook's run.
COMMIT_LOOP_CLOCK, COMMIT_LOOP_MAX_ITEMS = "2026-09-01T09:00:00Z", 45


def replay_exercise_1() -> list[str]:
    """The upsert action of each claim of :data:`EXERCISE_1_CLAIMS`, run for real."""
    pad = Scratchpad(clock=SteppingClock(T0))
    return [pad.upsert(category="character_state", subject="Ilse Korr", field="location",
                       value=value, source_chapter=chapter).action
            for chapter, value in EXERCISE_1_CLAIMS]


def replay_exercise_2() -> tuple[int, int]:
    """(summary facts created, timeline items left) after compacting the exercise events."""
    pad = Scratchpad(clock=SteppingClock(T0))
    for n, (chapter, event) in enumerate(EXERCISE_2_EVENTS):
        pad.upsert(category="timeline", subject=f"chapter {chapter}", field=f"event {n}",
                   value=event, source_chapter=chapter)
    report = compact(pad, current_chapter=EXERCISE_2_CHAPTER, max_items=0,
                     timeline_window=EXERCISE_2_WINDOW)
    return len(report.folded), sum(item.category == "timeline" for item in pad.items)


def check_upsert_actions(answer: Sequence[str] | None) -> Feedback:
    """Exercise 1: the action of each claim: created/superseded/contradicted/late/unchanged."""
    name = "exercise 1 (upsert actions)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, "answer with a list of actions, one per claim")
    expected = replay_exercise_1()
    got = list(answer)
    if got == expected:
        return Feedback(name, True, "story order decides: an older chapter arriving late is "
                                    "filed as history, two values in one chapter contradict")
    if len(got) != len(expected):
        return Feedback(name, False, f"there are {len(expected)} claims; you gave {len(got)}")
    first = next(i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e)
    return Feedback(name, False, f"claim {first + 1} is wrong — compare its chapter with the "
                                 "newest chapter already claimed for the key")


def check_folded_summaries(answer: int | None) -> Feedback:
    """Exercise 2: how many summary facts does the compactor create?"""
    name = "exercise 2 (folded summaries)"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, int) or isinstance(answer, bool):
        return Feedback(name, False, "answer with a whole number")
    folded, left = replay_exercise_2()
    if answer == folded:
        return Feedback(name, True, f"one per old chapter, the lone events too; {left} recent "
                                    "events stay as timeline items")
    return Feedback(name, False, "events older than chapter − window fold into one summary per "
                                 "chapter — does a chapter with a single event count?")


def replay_exercise_3() -> tuple[str, ...]:
    """The tiers that lose a line, in cut order: the sample serial's chapters before
    :data:`EXERCISE_3_CHAPTER` committed in a scratch project, then the pack built for real."""
    story = load_sample_story()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "novel"
        memory = MemoryContractAdapter(root, clock=SteppingClock(COMMIT_LOOP_CLOCK),
                                       max_items=COMMIT_LOOP_MAX_ITEMS)
        root.mkdir()
        for chapter in story:
            if chapter.chapter == EXERCISE_3_CHAPTER:
                pack = memory.load_context(chapter.chapter, budget=EXERCISE_3_BUDGET,
                                           outline=chapter.outline)
                return tuple(dict.fromkeys(line["tier"] for line in pack.cut))
            memory.commit_chapter(chapter.result, summary=chapter.summary,
                                  outline=chapter.outline)
    raise LookupError(f"the sample serial has no chapter {EXERCISE_3_CHAPTER}")


def check_cut_tiers(answer: Sequence[str] | None) -> Feedback:
    """Exercise 3: with a budget of 400, which tiers of the chapter-10 pack lose a line?"""
    name = "exercise 3 (cut tiers)"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, (set, frozenset, list, tuple)):
        return Feedback(name, False, "answer with a set of tier names, e.g. {\"warnings\"}")
    got = set(answer)
    if got - set(CUT_TIERS):
        return Feedback(name, False, f"{sorted(got - set(CUT_TIERS))} are not tiers; the "
                                     f"tiers are {', '.join(CUT_TIERS)}")
    expected = replay_exercise_3()
    if got == set(expected):
        return Feedback(name, True, "whole tiers go in CUT_TIERS order, and the cut stops "
                                    "inside the first tier that brings the pack under budget")
    if set(expected) < got:
        return Feedback(name, False, "too many: the cut stops as soon as the pack fits — "
                                     "subtract the tiers' tokens in order and stop at the budget")
    return Feedback(name, False, "too few: after a whole tier is gone, is the pack under the "
                                 "budget yet? If not, the next tier loses lines too")


# -- build it yourself: the decision of an upsert ------------------------------------------

_LOOP = {"category": "open_loops", "subject": "the drowned bell", "field": ""}
_CHAPTER = st.integers(1, 4)
_VALUE = st.sampled_from(("who rings it?", "the keeper rings it"))
_PAYLOAD = st.sampled_from(({}, {"closed": True}))


@st.composite
def _claim_inputs(draw) -> tuple:
    """Items a real scratchpad stored for one key (any history), and the next claim for it."""
    pad = Scratchpad(clock=FixedClock(T0))
    history = draw(st.lists(st.tuples(_CHAPTER, _VALUE, _PAYLOAD), max_size=4))
    for chapter, value, payload in history:
        pad.upsert(**_LOOP, value=value, source_chapter=chapter, payload=payload)
    chapter, value, payload = draw(_CHAPTER), draw(_VALUE), draw(_PAYLOAD)
    claim = MemoryItem(id=f"mem-{pad.next_id:04d}", layer="semantic", value=value,
                       payload=payload, status="active", source_chapter=chapter,
                       evidence=(f"chapter:{chapter}",), updated_at=T0, **_LOOP)
    return tuple(pad.items), claim


def _show_item(item: MemoryItem) -> str:
    marks = "".join(f" {{{key}}}" for key in sorted(item.payload))
    return f"{item.id} ch{item.source_chapter} {item.value!r}{marks} {item.status}"


def _describe_claim(args: tuple) -> str:
    stored, claim = args
    shown = "; ".join(_show_item(item) for item in stored) or "nothing"
    marks = "".join(f" {{{key}}}" for key in sorted(claim.payload))
    return (f"stored [{shown}] and the claim ch{claim.source_chapter} "
            f"{claim.value!r}{marks}")


BUILD = (
    BuildExercise(
        chapter="case study", name="the upsert decision", reference=claim_action,
        inputs=_claim_inputs(),
        hint="apply the rules of 'The upsert decision' in their order: a restatement first, "
             "then the claim's chapter against the live rivals",
        describe=_describe_claim),
)
