"""Checkers for the story case-study exercises (upsert rules, compaction, the budget).

Three predict-the-value exercises and one build exercise: the learner writes two pieces of
the chapter's from-scratch scratchpad (:mod:`labmem.scratch.story`): the upsert decision
and the upsert with its four statuses; :func:`check_layer` puts them into the module and
runs the layer's contract suite (:mod:`labmem.exercises.suites.story`) on it. Then the
chapter's measured comparison of the module with :mod:`labmem.story`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from labmem import story as library
from labmem.core.clock import SteppingClock
from labmem.core.i18n import _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.contracts import ContractReport, assemble
from labmem.scratch import story as scratch
from labmem.story import (
    CUT_TIERS,
    MemoryContractAdapter,
    Scratchpad,
    StoryMemoryError,
    chapter_claims,
    compact,
    load_sample_story,
    load_scratchpad,
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
    name = _("exercise 1 (upsert actions)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, _("answer with a list of actions, one per claim"))
    expected = replay_exercise_1()
    got = list(answer)
    if got == expected:
        return Feedback(name, True, _("story order decides: an older chapter arriving late is "
                                      "filed as history, two values in one chapter contradict"))
    if len(got) != len(expected):
        return Feedback(name, False, _("there are {count} claims; you gave {count2}")
                                     .format(count=len(expected), count2=len(got)))
    first = next(i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e)
    return Feedback(name, False, _("claim {first} is wrong — compare its chapter with the newest "
                                   "chapter already claimed for the key").format(first=first + 1))


def check_folded_summaries(answer: int | None) -> Feedback:
    """Exercise 2: how many summary facts does the compactor create?"""
    name = _("exercise 2 (folded summaries)")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, int) or isinstance(answer, bool):
        return Feedback(name, False, _("answer with a whole number"))
    folded, left = replay_exercise_2()
    if answer == folded:
        return Feedback(name, True, _("one per old chapter, the lone events too; {left} recent "
                                      "events stay as timeline items").format(left=left))
    return Feedback(name, False, _("events older than chapter − window fold into one summary per "
                                   "chapter — does a chapter with a single event count?"))


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
    name = _("exercise 3 (cut tiers)")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str) or not isinstance(answer, (set, frozenset, list, tuple)):
        return Feedback(name, False, _("answer with a set of tier names, e.g. {\"warnings\"}"))
    got = set(answer)
    if got - set(CUT_TIERS):
        return Feedback(name, False, _("{unknown} are not tiers; the tiers are {tiers}")
                                     .format(unknown=sorted(got - set(CUT_TIERS)),
                                             tiers=", ".join(CUT_TIERS)))
    expected = replay_exercise_3()
    if got == set(expected):
        return Feedback(name, True, _("whole tiers go in CUT_TIERS order, and the cut stops "
                                      "inside the first tier that brings the pack under budget"))
    if set(expected) < got:
        return Feedback(name, False, _("too many: the cut stops as soon as the pack fits — "
                                       "subtract the tiers' tokens in order and stop at the "
                                       "budget"))
    return Feedback(name, False, _("too few: after a whole tier is gone, is the pack under the "
                                   "budget yet? If not, the next tier loses lines too"))


# -- building the layer ------------------------------------------------------------------

#: The pieces of the chapter's module the learner writes in Exercise 4, in order.
PIECES = ("claim_action", "Scratchpad.upsert")


def check_layer(*, claim_action: Callable[..., str] | None = None,
                upsert: Callable[..., Any] | None = None) -> ContractReport:
    """Exercise 4: the chapter's from-scratch scratchpad with the learner's own pieces
    (``claim_action=...``, ``upsert=...``, the method ``Scratchpad.upsert``) put in place of
    the module's, judged by the layer's whole contract suite. A piece left as ``None``
    keeps the module's own version."""
    from labmem.exercises.suites.story import SUITE

    pieces = {"claim_action": claim_action, "Scratchpad.upsert": upsert}
    yours = assemble(scratch, {name: f for name, f in pieces.items() if f is not None})
    return SUITE.run(yours, who="your")


#: Single-function build exercises: none. The upsert decision is one of the two pieces of
#: Exercise 4, judged with the rest of the scratchpad by its contract suite.
BUILD: tuple = ()


# -- from scratch vs the library, measured -------------------------------------------------

MEASURE_CLOCK, MEASURE_MAX_ITEMS, MEASURE_WINDOW = "2026-09-01T09:00:00Z", 45, 4


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def measure_work(directory: Path) -> tuple[dict[str, dict[str, int]], dict[str, bool]]:
    """Commit the sample serial's twelve chapters twice: into the from-scratch scratchpad
    (each result's claims upserted, compacted over 45 items with a window of 4, the pad
    saved) and into the library (``MemoryContractAdapter.commit_chapter`` with the same
    settings). Then lose each scratchpad and ask what can be rebuilt.

    Returns the counts per implementation and whether the two agreed (same action for
    every claim, same items after the last chapter)."""
    story = load_sample_story()
    root = Path(directory)
    counts: dict[str, dict[str, int]] = {}

    mine_root = root / "from-scratch"
    pad = scratch.Scratchpad(clock=SteppingClock(MEASURE_CLOCK))
    mine_actions, compactions = [], 0
    for chapter in story:
        number, claims = chapter_claims(chapter.result)
        for claim in claims:
            claim = {k: v for k, v in claim.items() if k != "reported_chapter"}
            mine_actions.append(pad.upsert(**claim).action)
        if len(pad.items) > MEASURE_MAX_ITEMS:
            scratch.compact(pad, current_chapter=number, max_items=MEASURE_MAX_ITEMS,
                            timeline_window=MEASURE_WINDOW)
            compactions += 1
        pad.save(mine_root / "memory_scratchpad.json")
    mine_items = _fingerprint(pad.items)
    counts["from scratch"] = _row(mine_actions, compactions, len(pad.items), mine_root,
                                  rebuilt=0)

    library_root = root / "library"
    library_root.mkdir(parents=True)
    memory = MemoryContractAdapter(library_root, clock=SteppingClock(MEASURE_CLOCK),
                                   max_items=MEASURE_MAX_ITEMS)
    library_actions, compactions = [], 0
    for chapter in story:
        report = memory.commit_chapter(chapter.result, summary=chapter.summary,
                                       outline=chapter.outline)
        library_actions += [outcome.action for outcome in report.memory.outcomes]
        compactions += report.memory.compaction is not None
    library_items = _fingerprint(load_scratchpad(memory.project.scratchpad_path).items)
    row = _row(library_actions, compactions, len(library_items), library_root, rebuilt=0)
    memory.project.scratchpad_path.unlink()  # the scratchpad is lost
    _, diff = library.bootstrap(memory.project)
    row["keys a rebuild restores"] = len(diff.only_rebuilt)
    counts["library"] = row
    agreed = {"same action for every claim": mine_actions == library_actions,
              "same items after the last chapter": mine_items == library_items}
    return counts, agreed


def _fingerprint(items: Any) -> list[tuple]:
    return sorted((i.id, i.category, i.subject, i.field, i.value, i.status, i.source_chapter)
                  for i in items)


def _row(actions: list[str], compactions: int, items: int, root: Path, *,
         rebuilt: int) -> dict[str, int]:
    files = _files(root)
    return {"claims upserted": len(actions),
            "late claims filed as history": actions.count("late"),
            "contradictions raised": actions.count("contradicted"),
            "compactions run": compactions, "items after the last chapter": items,
            "files in the project": len(files),
            "bytes on disk": sum(p.stat().st_size for p in files),
            "keys a rebuild restores": rebuilt}


#: claims the module's ``check_claim`` lets through and the library refuses
HARD_CLAIMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("a 300-character subject", {"subject": "S" * 300}),
    ("a 5,000-character value", {"value": "v" * 5_000}),
    ("a lone surrogate in the value", {"value": "half \ud800 a character"}),
)


def validation_outcomes(directory: Path) -> list[dict[str, str]]:
    """What each implementation does with :data:`HARD_CLAIMS` (upsert, then save): the
    error it raises (by class name) or ``stored``."""
    rows = []
    for n, (what, change) in enumerate(HARD_CLAIMS):
        claim = {"category": "character_state", "subject": "Mara Venn", "field": "location",
                 "value": "the pier", "source_chapter": 3, **change}
        row = {"claim": what}
        for label, make in (("from scratch", scratch.Scratchpad), ("library", Scratchpad)):
            pad = make(clock=SteppingClock(MEASURE_CLOCK))
            try:
                pad.upsert(**claim)
                pad.save(Path(directory) / "hard" / label.replace(" ", "-") / f"pad-{n}.json")
                row[label] = "stored"
            except (StoryMemoryError, ValueError) as exc:
                row[label] = type(exc).__name__
        rows.append(row)
    return rows
