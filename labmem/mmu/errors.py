"""The errors the memory service and the Context MMU raise on purpose.

One base class per concern, each a subclass of the core kinds, so a caller can catch
"the write gate refused" apart from "this backend cannot do that".
"""

from __future__ import annotations

from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError, ScopeError


class MemoryServiceError(LabmemError):
    """Base of every error the memory service raises."""


class MemoryValidationError(MemoryServiceError, InvalidInputError):
    """An argument to the service was refused; the message names the field."""


class WriteGateError(MemoryValidationError):
    """Only a succeeded outcome with evidence becomes a long-term record."""


class UnsupportedOperationError(MemoryServiceError):
    """The backend does not implement this operation (never a silent no-op)."""


class RecordNotFoundError(MemoryServiceError, KeyError):
    """No visible record has this id in the caller's scope.

    It never existed, it was forgotten, or it belongs to another scope: one answer for all
    three, so ids cannot be used to probe or count another scope's records.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MemoryScopeError(MemoryServiceError, ScopeError):
    """A scope rule was broken. Not raised for a lookup by id: another scope's id is
    answered with :class:`RecordNotFoundError`, exactly like a missing one."""


class MemoryCorruptionError(MemoryServiceError, CorruptionError):
    """A line of the records log cannot be trusted."""


class ServiceClosedError(MemoryServiceError):
    """The service was closed; open a new one on the same directory."""


class MmuError(LabmemError):
    """Base of every error the Context MMU raises."""


class MmuValidationError(MmuError, InvalidInputError):
    """An argument to the MMU was refused; the message names the field."""


class LedgerError(MmuError):
    """``token_used`` disagrees with the pages it is supposed to sum (a bug, never hidden)."""
