"""Checkers for the story case-study exercises (upsert rules, compaction, the budget)."""

from __future__ import annotations

from collections.abc import Sequence

from labmem.core.clock import SteppingClock
from labmem.exercises import Feedback, not_answered
from labmem.story import CUT_TIERS, Scratchpad, compact

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


def check_first_cut(answer: str | None) -> Feedback:
    """Exercise 3: which tier does the budget cut first?"""
    name = "exercise 3 (first cut)"
    if answer is None:
        return not_answered(name)
    first = min(CUT_TIERS, key=CUT_TIERS.__getitem__)
    if answer == first:
        return Feedback(name, True, "recent index evidence goes first: the scratchpad already "
                                    "holds its conclusions")
    if answer not in CUT_TIERS:
        return Feedback(name, False, f"answer with one of {', '.join(sorted(CUT_TIERS))}")
    return Feedback(name, False, "look at CUT_TIERS in labmem.story.orchestrator: the lowest "
                                 "tier goes first")
