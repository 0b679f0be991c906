"""Build-it-yourself exercises: the learner writes a chapter's key mechanism, the library judges.

A :class:`BuildExercise` pairs the library callable the learner re-implements
(``reference``) with a hypothesis strategy of inputs. :meth:`BuildExercise.check` runs the
learner's function and the reference on generated inputs and answers with one
:class:`~labmem.exercises.Feedback` line:

* a stub that raises ``NotImplementedError`` is "not written yet";
* a mismatch names the *smallest* input on which the two disagree (hypothesis shrinks it),
  what each returned, and the exercise's hint — never a traceback;
* otherwise ✓, with how many inputs agreed.

Generation is derandomized, so the same function always gets the same verdict (the
committed notebooks stay reproducible).
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from labmem.core.i18n import _
from labmem.exercises import Feedback

MAX_EXAMPLES = 300
_SHOW = reprlib.Repr()
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlist, _SHOW.maxtuple, _SHOW.maxdict = 80, 80, 8, 8, 6
_SETTINGS = settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                     suppress_health_check=list(HealthCheck), report_multiple_bugs=False)


def show(value: Any) -> str:
    """A short, address-free rendering of a value for feedback lines."""
    return _SHOW.repr(value)


@dataclass(frozen=True)
class _Outcome:
    """What one call did: returned a value, or raised (type name and message)."""

    value: Any = None
    error: str | None = None

    def __str__(self) -> str:
        if self.error:
            return _("raised {error}").format(error=self.error)
        return _("returned {value}").format(value=show(self.value))


def _call(fn: Callable, args: tuple) -> _Outcome:
    try:
        return _Outcome(value=fn(*args))
    except NotImplementedError:
        raise
    except Exception as exc:  # the learner's bug is data here, not a crash
        return _Outcome(error=type(exc).__name__)


@dataclass(frozen=True)
class BuildExercise:
    """One exercise in which the learner writes ``reference`` again.

    ``inputs`` generates argument tuples; ``project`` maps a return value to what is
    compared (e.g. only the fields the exercise asks for); ``hint`` is shown on a mismatch.
    ``describe`` renders a counterexample's arguments (default: their ``repr``).
    """

    chapter: str
    name: str
    reference: Callable[..., Any]
    inputs: st.SearchStrategy[tuple]
    hint: str
    project: Callable[[Any], Any] = field(default=lambda value: value)
    describe: Callable[[tuple], str] = field(default=lambda args: _describe(args))

    @property
    def title(self) -> str:
        """The exercise's name as a learner reads it (in the notebook's language)."""
        return _("{chapter} build: {name}").format(chapter=self.chapter, name=_(self.name))

    @property
    def reference_name(self) -> str:
        """Where a learner finds the library's version: the public package that exports it."""
        import importlib

        parts = self.reference.__module__.split(".")
        for end in range(2, len(parts) + 1):
            module = importlib.import_module(".".join(parts[:end]))
            if getattr(module, self.reference.__name__, None) is self.reference:
                return f"{module.__name__}.{self.reference.__name__}"
        return f"{self.reference.__module__}.{self.reference.__qualname__}"

    def _same(self, fn: Callable, args: tuple) -> bool:
        mine, ours = _call(fn, args), _call(self.reference, args)
        if mine.error or ours.error:
            return mine.error == ours.error
        try:
            return self.project(mine.value) == self.project(ours.value)
        except Exception:  # a projection that cannot read the learner's value: a mismatch
            return False

    def check(self, fn: Callable[..., Any]) -> Feedback:
        """Compare ``fn`` with the library on generated inputs; one line of feedback."""
        if not callable(fn):
            return Feedback(self.title, False, _("pass your function itself, not {value}")
                                               .format(value=show(fn)))
        simplest = _simplest_input(self)
        try:
            # the simplest input first: a stub or a function wrong everywhere is answered at
            # once, with no search (and that input is already as small as it gets)
            example = simplest if not self._same(fn, simplest) else find(
                self.inputs, lambda args: not self._same(fn, args), settings=_SETTINGS)
        except NotImplementedError:
            return Feedback(self.title, False, _("not written yet — replace the "
                                                 "`raise NotImplementedError` with your code"))
        except NoSuchExample:
            return Feedback(self.title, True,
                            _("matches the library on {count} generated inputs")
                            .format(count=MAX_EXAMPLES))
        mine, ours = _call(fn, example), _call(self.reference, example)
        mine_p = mine if mine.error else _Outcome(value=_safe_project(self.project, mine.value))
        ours_p = ours if ours.error else _Outcome(value=self.project(ours.value))
        return Feedback(self.title, False,
                        _("on {example} yours {mine}, the library's {ours}. Hint: {hint}")
                        .format(example=self.describe(example), mine=mine_p, ours=ours_p,
                                hint=_(self.hint)))


def _simplest_input(exercise: BuildExercise) -> tuple:
    """The input hypothesis shrinks every search toward (computed once per exercise)."""
    cached = exercise.__dict__.get("_simplest")
    if cached is None:
        cached = find(exercise.inputs, lambda args: True, settings=_SETTINGS)
        object.__setattr__(exercise, "_simplest", cached)  # a cache, not a field
    return cached


def _describe(args: tuple) -> str:
    """Arguments as the learner would write them: one argument bare, several comma-separated."""
    return ", ".join(show(arg) for arg in args)


def _safe_project(project: Callable[[Any], Any], value: Any) -> Any:
    try:
        return project(value)
    except Exception:
        return value
