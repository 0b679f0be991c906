"""Records and pages restored from the fold snapshot, read when first used (persistence).

The mechanism (:mod:`labmem.mmu.records`, :mod:`labmem.mmu.pages`) works on plain records.
A service opened from its fold snapshot (:mod:`labmem.mmu.snapshot`) has, per record, only
a row of columns and the offset of its latest log line; reading every line at open would
cost what the snapshot exists to save. This module lets that service hand out records and
pages anyway, without reading them:

* :class:`LazyRecord` — a :class:`~labmem.mmu.records.MemoryRecord` holding id, status,
  type and ``valid_until``; any other field is filled from its row's columns or its log
  line the first time it is read (the row's :class:`~labmem.mmu.snapshot.LineSource` does
  the reading). It equals, hashes, copies and pickles as the plain record it stands for.
* :class:`RowPageTable` — the Context MMU's :class:`~labmem.mmu.pages.PageTable` seeded
  with snapshot rows: a page is made from ``source.record(row)`` when first looked at, so
  opening a service and an MMU decodes no line and makes no record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Protocol

from labmem.mmu.pages import PageTable
from labmem.mmu.records import MemoryRecord

_COMPARED = tuple(f.name for f in fields(MemoryRecord) if f.compare)


class RowSource(Protocol):
    """What a lazy record and a row page table need of the snapshot's rows."""

    def record(self, row: int) -> LazyRecord: ...

    def fill(self, record: LazyRecord, name: str) -> None: ...


class LazyRecord(MemoryRecord):
    """A record restored from the fold snapshot, its fields read on first use.

    Made by :meth:`LineSource.record <labmem.mmu.snapshot.LineSource.record>` (calling
    the class makes a plain record): its ``__dict__`` holds the fields known at once plus
    ``_source`` and ``_row``; :meth:`__getattr__` (reached only for a field not held yet)
    asks the source to fill it. Once its line is read it holds every field and no
    ``_source``.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> MemoryRecord:  # type: ignore[misc]
        """Calling the class makes a plain, validated record: a new version made from a
        lazy one (``dataclasses.replace``) is an ordinary record."""
        return MemoryRecord(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        source = self.__dict__.get("_source")
        if source is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        source.fill(self, name)
        return object.__getattribute__(self, name)

    def _whole(self) -> dict[str, Any]:
        """Every field (the line is read if it was not), without the way to the line."""
        source = self.__dict__.get("_source")
        if source is not None:
            source.fill(self, "text")
        return {k: v for k, v in self.__dict__.items() if k not in ("_source", "_row")}

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        """A copy or a pickle is the plain record, not the way to its line (a file
        descriptor means nothing in another process)."""
        return _plain_record, (self._whole(),)

    def __eq__(self, other: object) -> bool:
        """Equal to the plain record it stands for (a dataclass compares classes)."""
        if not isinstance(other, MemoryRecord):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _COMPARED)

    __hash__ = MemoryRecord.__hash__

    def __repr__(self) -> str:
        return repr(_plain_record(self._whole()))


def _plain_record(values: dict[str, Any]) -> MemoryRecord:
    """The plain record holding ``values`` (already checked: they were its line's)."""
    record = object.__new__(MemoryRecord)
    record.__dict__.update(values)
    return record


class RowPageTable(PageTable):
    """A page table seeded with records or with rows of ``source`` (an ``int`` slot): the
    page of a row is made from ``source.record(row)`` — the record the service shares —
    when first looked at."""

    def __init__(self, source: RowSource | None = None) -> None:
        super().__init__()
        self._source = source

    @classmethod
    def of(cls, seeds: Mapping[str, MemoryRecord | int],
           source: RowSource | None) -> RowPageTable:
        table = cls(source)
        table.seed(seeds)
        return table

    def record_of(self, slot: MemoryRecord | int) -> MemoryRecord:  # type: ignore[override]
        """A row's lazy record (shared with the service), or the record itself."""
        return self._source.record(slot) if type(slot) is int else slot  # type: ignore

    def clear(self) -> None:
        super().clear()
        self._source = None
