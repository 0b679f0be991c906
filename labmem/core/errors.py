"""One exception hierarchy for the whole library.

Every error a ``labmem`` layer raises on purpose derives from :class:`LabmemError`,
so a caller can catch "anything labmem refused" in one place. Each layer subclasses
the generic kinds below (``RemoteMemoryValidationError(InvalidInputError)`` and so
on), and every message names the offending field or value and what to do about it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class LabmemError(Exception):
    """Base class of every error raised on purpose by labmem."""


class InvalidInputError(LabmemError, ValueError):
    """A caller passed a value that a public entry point refuses.

    ``field`` names the argument (or ``record.field``) that was wrong, so that tools
    and tests can check *which* input was refused, not just that something was.
    """

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f"; {fix}"
        super().__init__(message)


class CorruptionError(LabmemError):
    """A stored file holds a complete line or document that cannot be trusted.

    ``line`` counts from 1; it is ``None`` for whole-document (snapshot) errors.
    """

    def __init__(self, path_name: str, line: int | None, problem: str) -> None:
        self.path_name = path_name
        self.line = line
        self.problem = problem
        where = f"{path_name} line {line}" if line is not None else path_name
        super().__init__(
            f"{where}: {problem}; the file was not changed — inspect or restore it "
            "before writing again"
        )


class ScopeError(LabmemError):
    """A record belongs to another owner (user or workspace) than the reader."""


class DuplicateError(LabmemError):
    """An id that must be unique is already taken."""


def validated_as(error: type[InvalidInputError], check: Callable[..., T], *args: Any,
                 **kwargs: Any) -> T:
    """Run a core validator; re-raise its refusal as a layer's own validation error.

    Layers call core checks (``require_text``, ``parse_timestamp`` …) and let callers
    catch one layer-specific error class, with the same field, problem and fix.
    """
    try:
        return check(*args, **kwargs)
    except InvalidInputError as exc:
        if isinstance(exc, error):
            raise
        raise error(exc.field, exc.problem, exc.fix) from None
