"""Injectable clocks and the one timestamp format.

Nothing in labmem reads the wall clock directly: every component takes a ``clock``
(any object with ``now() -> datetime``), so tests and notebooks can pin time and get
the same output on every run. In memory, timestamps are timezone-aware UTC
``datetime``s; on disk and in ``to_dict()`` they are ISO-8601 strings ending in ``Z``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, runtime_checkable

from labmem.core.errors import InvalidInputError

UTC = timezone.utc


@runtime_checkable
class Clock(Protocol):
    """Anything that can tell the current time as an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real wall clock, for production runs (never in notebooks or tests)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


@dataclass
class FixedClock:
    """Always answers the same instant, until you :meth:`advance` it."""

    at: datetime

    def __post_init__(self) -> None:
        self.at = parse_timestamp(self.at, field="at")

    def now(self) -> datetime:
        return self.at

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward (e.g. to age records past a TTL) and return the new time."""
        if not isinstance(delta, timedelta) or delta < timedelta(0):
            raise InvalidInputError("delta", f"must be a non-negative timedelta, got {delta!r}")
        try:
            self.at = self.at + delta
        except OverflowError:  # past 9999-12-31: a refusal naming delta, not a bare error
            raise InvalidInputError(
                "delta", f"{delta!r} moves the clock past the year 9999",
                "advance by less") from None
        return self.at

    def __repr__(self) -> str:
        return f"FixedClock({format_timestamp(self.at)!r})"


@dataclass
class SteppingClock:
    """Answers ``start``, ``start + step``, ``start + 2*step`` … on successive calls.

    Useful when every event needs a distinct but predictable time.
    """

    start: datetime
    step: timedelta = timedelta(seconds=1)
    calls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.start = parse_timestamp(self.start, field="start")
        if not isinstance(self.step, timedelta) or self.step < timedelta(0):
            raise InvalidInputError("step", f"must be a non-negative timedelta, got {self.step!r}")

    def now(self) -> datetime:
        at = self.start + self.step * self.calls
        self.calls += 1
        return at

    def __repr__(self) -> str:
        return (
            f"SteppingClock({format_timestamp(self.start)!r}, step={self.step!r}, "
            f"calls={self.calls})"
        )


def resolve_clock(clock: Clock | None) -> Clock:
    """Return ``clock``, or a :class:`SystemClock` when ``None``; reject non-clocks."""
    if clock is None:
        return SystemClock()
    if not callable(getattr(clock, "now", None)):
        raise InvalidInputError(
            "clock", f"must have a now() method, got {type(clock).__name__}",
            "pass SystemClock(), FixedClock(at) or SteppingClock(start, step)",
        )
    return clock


def parse_timestamp(value: datetime | str, *, field: str) -> datetime:
    """Turn an aware ``datetime`` or an ISO-8601 string with an offset into aware UTC.

    A naive value is refused: a time without a zone is ambiguous evidence, and guessing
    "local time" would make the same record mean different instants on different machines.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInputError(
                field, f"is not an ISO-8601 timestamp: {value!r}",
                "use a form like '2026-08-01T12:00:00Z'",
            ) from None
        value = parsed
    if not isinstance(value, datetime):
        raise InvalidInputError(
            field, f"must be a datetime or ISO-8601 string, got {type(value).__name__}"
        )
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InvalidInputError(
            field, f"is a naive timestamp ({value.isoformat()})",
            "give it a timezone, e.g. datetime(..., tzinfo=timezone.utc) or a '…Z' string",
        )
    return _as_utc(value, field)


def _as_utc(value: datetime, field: str) -> datetime:
    """``value`` in UTC. Near the ends of the calendar the offset can push the instant out
    of years 1–9999 (``0001-01-01T00:00:00+01:00`` is in year 0 in UTC), where Python
    raises a bare ``OverflowError``: refused here, naming the field, as every other bad
    timestamp is."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidInputError(
            field, f"{value.isoformat()} is outside the years 1-9999 once converted to UTC",
            "use a timestamp between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z",
        ) from None


def parse_stored_timestamp(value: Any, *, field: str) -> datetime:
    """A timestamp read back from disk: the ``…Z`` form :func:`format_timestamp` writes is
    taken in one call (replay reads thousands); anything else takes :func:`parse_timestamp`,
    which checks and converts it, naming ``field``."""
    if type(value) is str and value[-1:] == "Z":
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if parsed.tzinfo is UTC:
                return parsed
    return parse_timestamp(value, field=field)


def format_timestamp(value: datetime) -> str:
    """ISO-8601 in UTC with a ``Z`` suffix; microseconds only when present."""
    value = parse_timestamp(value, field="timestamp")
    return value.replace(tzinfo=None).isoformat() + "Z"
