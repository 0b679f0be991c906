"""Contract suites: a whole layer judged contract by contract, on any implementation.

A *contract* is one sentence a layer must keep ("a torn last line is repaired before the
next append") with a check that tries it on an implementation, smallest case first, and
raises :class:`ContractBroken` naming the smallest case that breaks it. A
:class:`ContractSuite` is every contract of one layer. The same suite runs on three kinds
of implementation:

* the chapter's from-scratch module (``labmem.scratch.s09``),
* the production layer (``labmem.transcript``), through a small adapter that offers the
  operations the contracts use under the same names,
* the learner's layer: the from-scratch module with the learner's own functions put in
  place of its key pieces (:func:`assemble`).

The tests run every suite on the first two (``tests/contracts/``); a chapter's exercise
runs it on the third and prints a :class:`ContractReport`::

    ✗ your transcript passes 9 of 12 contracts; failing:
      · a torn last line is repaired before the next append — smallest case: …
"""

from __future__ import annotations

import inspect
import itertools
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labmem.core.i18n import N_, _, label

_COPIES = itertools.count(1)

#: whose implementation a report names (``SUITE.run(impl, who=...)``), for the catalogue;
#: the report shows ``who`` in the reader's language
WHO = (N_("your"), N_("the library's"), N_("the from-scratch"), N_("the chapter's"),
       N_("the production"))


class ContractBroken(AssertionError):
    """A contract does not hold; the message names the smallest case and what went wrong."""


@dataclass(frozen=True)
class Contract:
    """One promise of a layer: ``name`` is the sentence, ``check(impl)`` tries it."""

    name: str
    check: Callable[[Any], None]


@dataclass(frozen=True)
class ContractResult:
    """How one contract went: kept, or broken with the detail of the smallest case."""

    contract: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class ContractReport:
    """Every contract's result on one implementation; shows as a few lines in a notebook."""

    layer: str
    results: tuple[ContractResult, ...]
    who: str = "your"

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def passed(self) -> int:
        return sum(r.ok for r in self.results)

    @property
    def failing(self) -> tuple[ContractResult, ...]:
        return tuple(r for r in self.results if not r.ok)

    @property
    def failing_names(self) -> frozenset[str]:
        """The names of the broken contracts (what a test asserts a wrong piece breaks)."""
        return frozenset(r.contract for r in self.failing)

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        # the report is rendered in the reader's language; the results (and failing_names,
        # which tests compare) keep the contracts' English names
        total = len(self.results)
        subject = _spaced(label(self.who), label(self.layer))
        if self.ok:
            return _("✓ {subject} passes all {total} contracts").format(subject=subject,
                                                                        total=total)
        lines = [_("✗ {subject} passes {passed} of {total} contracts; failing:")
                 .format(subject=subject, passed=self.passed, total=total)]
        lines += [f"  · {label(r.contract)} — {r.detail}" for r in self.failing]
        return "\n".join(lines)


def _spaced(first: str, second: str) -> str:
    """Two words of a report: a space between them, except between two CJK characters
    (Chinese writes 你的会话记录 but 你的 Context MMU)."""
    def cjk(char: str) -> bool:
        return "\u3400" <= char <= "\u9fff"

    if first and second and cjk(first[-1]) and cjk(second[0]):
        return first + second
    return f"{first} {second}"


@dataclass(frozen=True)
class ContractSuite:
    """The contracts of one layer, in the order a learner meets them."""

    layer: str
    contracts: tuple[Contract, ...]

    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.contracts)

    def run(self, impl: Any, *, who: str = "your") -> ContractReport:
        """Try every contract on ``impl``; never raises for the implementation's sake."""
        return ContractReport(self.layer, tuple(_attempt(c, impl) for c in self.contracts),
                              who)


def expect(case: str, got: Any, want: Any, *, show: Callable[[Any], str] = repr) -> None:
    """Raise :class:`ContractBroken` naming ``case`` when ``got`` is not ``want``."""
    if got != want:
        raise ContractBroken(_("smallest case: {case} — expected {want}, got {got}")
                             .format(case=case, want=show(want), got=show(got)))


def is_a(exc: BaseException, error: type) -> bool:
    """``exc`` is an ``error`` by class name: a learner's piece raises the chapter's own
    class, which in an :func:`assemble` copy is a class of the same name, not the same class."""
    return any(cls.__name__ == error.__name__ for cls in type(exc).__mro__)


def _attempt(contract: Contract, impl: Any) -> ContractResult:
    try:
        contract.check(impl)
    except NotImplementedError:
        where = _innermost_function(sys.exc_info()[2])
        return ContractResult(contract.name, False,
                              _("not written yet ({where} raises NotImplementedError)")
                              .format(where=where))
    except ContractBroken as exc:
        return ContractResult(contract.name, False, str(exc))
    except AssertionError as exc:
        return ContractResult(contract.name, False,
                              str(exc) or _("an expectation did not hold"))
    except Exception as exc:  # the implementation's bug is data here, not a crash
        where = _innermost_function(sys.exc_info()[2])
        message = str(exc).splitlines()[0][:160] if str(exc) else ""
        error = type(exc).__name__
        if not message:
            return ContractResult(contract.name, False, _("{where} raised {error}")
                                  .format(where=where, error=error))
        return ContractResult(contract.name, False, _("{where} raised {error}: {message}")
                              .format(where=where, error=error, message=message).rstrip(": "))
    return ContractResult(contract.name, True)


def _innermost_function(tb: types.TracebackType | None) -> str:
    frames = traceback.extract_tb(tb)
    return f"{frames[-1].name}()" if frames else _("the layer")


def assemble(module: types.ModuleType, pieces: dict[str, Any]) -> types.ModuleType:
    """A fresh copy of ``module`` in which each of ``pieces`` replaces the name it is keyed by
    (``{"replay_window": my_replay_window, "Transcript.append": my_append}``).

    The copy runs the module's own source, so its other functions call the learner's
    pieces through the module's globals; the original module is untouched. A name the
    module does not define is refused (a typo would otherwise test the module's own code).
    """
    name = f"{module.__name__}.yours{next(_COPIES)}"
    copy = types.ModuleType(name, module.__doc__)
    copy.__file__ = module.__file__
    sys.modules[name] = copy  # dataclasses look their module up by name
    exec(compile(inspect.getsource(module), module.__file__ or name, "exec"), copy.__dict__)
    for key, piece in pieces.items():
        *path, attribute = key.split(".")
        owner = copy
        for part in path:
            owner = getattr(owner, part, None)
        if owner is None or not hasattr(owner, attribute):
            raise ValueError(f"{module.__name__} has no {key!r} to replace; name a function "
                             "or method the chapter wrote")
        setattr(owner, attribute, piece)
    return copy
