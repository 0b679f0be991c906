"""Exercise checkers for the chapter notebooks.

A checker takes the learner's answer and returns :class:`Feedback`, which shows as
one line in the notebook: ``✓`` with why it is right, ``✗`` with a hint, or a
reminder when the answer is still ``None``. Checkers never raise on a wrong answer,
so a learner can try again in the same cell.
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
