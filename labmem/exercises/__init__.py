"""Exercise checkers for the chapter notebooks.

A checker takes the learner's answer and returns :class:`Feedback`, which shows as
one line in the notebook: ``✓`` with why it is right, ``✗`` with a hint, or a
reminder when the answer is still ``None``. Checkers never raise on a wrong answer,
so a learner can try again in the same cell.

Three kinds of exercise: *predict* (the learner answers a question with a value); *build
the layer* (the learner writes the key pieces of the chapter's from-scratch module, and the
layer's contract suite, :mod:`labmem.exercises.contracts`, judges the assembled layer
contract by contract); and *build one function* (:mod:`labmem.exercises.build`: the learner
writes one mechanism, and the checker compares it with the library's own on generated
inputs). :func:`layer_exercises` and :func:`build_exercises` list them for the series.
"""

from __future__ import annotations

from dataclasses import dataclass

from labmem.core.i18n import _


@dataclass(frozen=True)
class Feedback:
    """The verdict on one exercise answer."""

    exercise: str
    ok: bool
    message: str

    def __repr__(self) -> str:
        mark = "✓" if self.ok else "✗"
        return _("{mark} {exercise}: {message}").format(mark=mark, exercise=self.exercise,
                                                         message=self.message)

    def __bool__(self) -> bool:
        return self.ok


def not_answered(exercise: str) -> Feedback:
    return Feedback(exercise, False, _("not answered yet — replace None with your answer"))


CHAPTER_MODULES = ("s09", "s10", "s11", "s12", "s12b", "s13", "s14_compaction", "s14_mmu",
                   "walkthrough", "story", "s15")


def build_exercises() -> tuple:
    """Every chapter's build-it-yourself exercises (:class:`~labmem.exercises.build.BuildExercise`),
    in reading order; each module lists its own in ``BUILD``."""
    import importlib

    return tuple(exercise for name in CHAPTER_MODULES
                 for exercise in importlib.import_module(f"labmem.exercises.{name}").BUILD)


#: the exercise modules with a build-the-layer exercise, in reading order, and how the
#: chapter map names them
LAYER_CHAPTERS = {"s09": "s09", "s10": "s10", "s11": "s11", "s12": "s12", "s12b": "s12b",
                  "s13": "s13", "s14_compaction": "s14", "s14_mmu": "s14 MMU",
                  "walkthrough": "walkthrough",
                  "story": "case study", "s15": "s15"}


@dataclass(frozen=True)
class LayerExercise:
    """One chapter's build-the-layer exercise: the pieces the learner writes (as
    :func:`~labmem.exercises.contracts.assemble` names them) and the suite that judges it."""

    module: str
    chapter: str
    pieces: tuple[str, ...]
    suite: object  # a ContractSuite

    @property
    def contracts(self) -> int:
        return len(self.suite.contracts)


def layer_exercises() -> tuple[LayerExercise, ...]:
    """Every chapter's build-the-layer exercise, in reading order."""
    import importlib

    return tuple(LayerExercise(name, label,
                               tuple(importlib.import_module(f"labmem.exercises.{name}").PIECES),
                               importlib.import_module(f"labmem.exercises.suites.{name}").SUITE)
                 for name, label in LAYER_CHAPTERS.items())
