"""Exercise checkers for the chapter notebooks.

A checker takes the learner's answer and returns :class:`Feedback`, which shows as
one line in the notebook: ``✓`` with why it is right, ``✗`` with a hint, or a
reminder when the answer is still ``None``. Checkers never raise on a wrong answer,
so a learner can try again in the same cell.

Two kinds of exercise: *predict* (the learner answers a question with a value) and *build*
(:mod:`labmem.exercises.build`: the learner writes a chapter's key mechanism as a function,
and the checker compares it with the library's own on generated inputs).
:func:`build_exercises` lists every build exercise of the series.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feedback:
    """The verdict on one exercise answer."""

    exercise: str
    ok: bool
    message: str

    def __repr__(self) -> str:
        mark = "✓" if self.ok else "✗"
        return f"{mark} {self.exercise}: {self.message}"

    def __bool__(self) -> bool:
        return self.ok


def not_answered(exercise: str) -> Feedback:
    return Feedback(exercise, False, "not answered yet — replace None with your answer")


CHAPTER_MODULES = ("s09", "s10", "s11", "s12", "s12b", "s13", "s14_compaction", "s14_mmu",
                   "walkthrough", "story", "s15")


def build_exercises() -> tuple:
    """Every chapter's build-it-yourself exercises (:class:`~labmem.exercises.build.BuildExercise`),
    in reading order; each module lists its own in ``BUILD``."""
    import importlib

    return tuple(exercise for name in CHAPTER_MODULES
                 for exercise in importlib.import_module(f"labmem.exercises.{name}").BUILD)
