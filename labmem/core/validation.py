"""Argument checks shared by every layer: each refusal names the field and the fix.

Layers call these and re-raise the refusal as their own validation error with
:func:`labmem.core.errors.validated_as`, so a caller catches one layer-specific class.
"""

from __future__ import annotations

from typing import Any

from labmem.core.errors import InvalidInputError


def require_text(value: Any, field: str, *, max_chars: int | None = None,
                 allow_blank: bool = False) -> str:
    """Validate a string argument and return it unchanged."""
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}")
    if not allow_blank and not value.strip():
        raise InvalidInputError(field, "must not be blank")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInputError(
            field, f"has {len(value):,} characters, more than the limit of {max_chars:,}",
            "shorten it or store the long body elsewhere and keep a pointer",
        )
    return value


def require_int(value: Any, field: str, *, minimum: int | None = None,
                maximum: int | None = None) -> int:
    """Validate an integer argument (``bool`` is not an integer here) within bounds."""
    low_ok = minimum is None or (isinstance(value, int) and value >= minimum)
    high_ok = maximum is None or (isinstance(value, int) and value <= maximum)
    if isinstance(value, bool) or not isinstance(value, int) or not (low_ok and high_ok):
        if minimum is not None and maximum is not None:
            wanted = f"an integer from {minimum} to {maximum}"
        elif minimum is not None:
            wanted = f"an integer >= {minimum}"
        elif maximum is not None:
            wanted = f"an integer <= {maximum}"
        else:
            wanted = "an integer"
        raise InvalidInputError(field, f"must be {wanted}, got {value!r}")
    return value
