"""The memory service's log line: a record's JSON with a CRC-32 of its own bytes.

A record is validated once, when it is written (:class:`~labmem.mmu.records.MemoryRecord`
checks every field). The line then carries ``"crc32"`` — the CRC-32 of every byte before
it — as its last member::

    {"record_id":"alice:m-000001", … ,"updated_at":"2026-01-01T00:00:00Z","crc32":"1c291ca3"}

On replay a line whose checksum matches is exactly what a validating writer produced, so
its fields are taken as they are (:func:`trusted_record`), not checked again; a
line without the member (written before checksums, by hand, or a purge's tombstone) is
validated in full; a line whose checksum does not match is validated in full too — a bad
field is reported by name — and then refused as corruption even if every field is valid.
A CRC detects accidents — torn or flipped bytes, an edit that forgot the checksum — not
an attacker who recomputes it: whoever can rewrite the log can already write any record.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from labmem.core.clock import UTC, parse_timestamp
from labmem.core.errors import validated_as
from labmem.core.storage import encode_json_line
from labmem.mmu.errors import MemoryValidationError
from labmem.mmu.records import (
    MEMORY_TYPES,
    OPTIONAL_FIELDS,
    OPTIONAL_TIMES,
    SOURCE_KINDS,
    STATUSES,
    MemoryRecord,
)

CHECKSUM_FIELD = "crc32"
_HEAD = b',"' + CHECKSUM_FIELD.encode() + b'":"'
_TAIL_LEN = len(_HEAD) + 8 + 2  # ,"crc32":"  + 8 hex digits + "}


def encode_line(record: dict[str, Any]) -> bytes:
    """``record`` as one JSONL line ending in its own CRC-32 member."""
    body = encode_json_line(record)[:-2]  # drop "}\n"; the record is never empty
    return body + b'%s%08x"}\n' % (_HEAD, zlib.crc32(body))


def checksum_state(raw: bytes) -> bool | None:
    """``True``: ``raw`` (one line, no newline) ends in a matching checksum; ``False``: it
    ends in one that does not match; ``None``: it carries none (a legacy line)."""
    if raw[-_TAIL_LEN:-10] != _HEAD or not raw.endswith(b'"}'):
        return None if (b'"' + CHECKSUM_FIELD.encode() + b'"') not in raw else False
    try:
        stored = int(raw[-10:-2], 16)
    except ValueError:
        return False
    return zlib.crc32(memoryview(raw)[:-_TAIL_LEN]) == stored  # a view: no copy


def trusted_record(data: Mapping[str, Any]) -> MemoryRecord:
    """A record from a log line whose checksum vouches that a validating writer
    produced it: the fields are taken as written — only converted back (lists to tuples,
    timestamps to datetimes), not checked again."""
    check_trusted_shape(data)
    record = object.__new__(MemoryRecord)
    fields = record.__dict__
    fields.update(_ABSENT)
    fields.update(data)
    fields["evidence"] = tuple(fields["evidence"])  # the four unit numbers were written
    # as floats (``require_unit`` made them so) and JSON reads them back as floats
    fields["created_at"] = _read_time(fields["created_at"], "created_at")
    fields["updated_at"] = _read_time(fields["updated_at"], "updated_at")
    for name in OPTIONAL_TIMES:
        if fields[name] is not None:
            fields[name] = _read_time(fields[name], name)
    return record


_ABSENT = dict.fromkeys(OPTIONAL_FIELDS)


#: The type of every field of a stored record, as JSON reads it back (the unit numbers were
#: written as floats); an optional field may also be absent or null.
_STORED_TYPES = (
    ("record_id", str), ("memory_type", str), ("scope", str), ("title", str), ("text", str),
    ("status", str), ("importance", float), ("confidence", float), ("utility", float),
    ("salience", float), ("source_kind", str), ("origin_key", str), ("evidence", list),
    ("version", int), ("created_at", str), ("updated_at", str),
)
_STORED_NAMES = tuple(name for name, _ in _STORED_TYPES)
_STORED_KINDS = tuple(kind for _, kind in _STORED_TYPES)
_CHOICES = (("memory_type", MEMORY_TYPES), ("status", STATUSES),
            ("source_kind", SOURCE_KINDS))
_STR_OR_ABSENT = {str, type(None)}


def check_trusted_shape(data: Mapping[str, Any]) -> None:
    """Refuse a checksummed line whose fields have the wrong types or names.

    A checksum vouches for bytes, not for whoever computed it: a line edited with its CRC
    recomputed (``"title": 7``, ``"scope": []``) would otherwise be taken as written and
    fail far from the log — a ``TypeError`` in a recall, a sort or a dict lookup. Exact
    type tests, in a few C-level passes (replay keeps its speed); the values' bounds stay
    the writer's word, as the checksum promises. Only a refusal looks field by field,
    to name the first bad one."""
    if (tuple(map(type, map(data.get, _STORED_NAMES))) != _STORED_KINDS
            or data["memory_type"] not in MEMORY_TYPES or data["status"] not in STATUSES
            or data["source_kind"] not in SOURCE_KINDS
            or not set(map(type, data["evidence"])) <= {str}
            or not set(map(type, map(data.get, OPTIONAL_FIELDS))) <= _STR_OR_ABSENT):
        _name_bad_field(data)


def _name_bad_field(data: Mapping[str, Any]) -> None:
    """The :class:`MemoryValidationError` for the first field :func:`check_trusted_shape`
    refuses."""
    for name, kind in _STORED_TYPES:
        value = data.get(name)
        if type(value) is not kind:
            got = "nothing" if name not in data else type(value).__name__
            raise MemoryValidationError(name, f"must be a {kind.__name__}, got {got}")
    for name, choices in _CHOICES:
        if data[name] not in choices:
            raise MemoryValidationError(name, f"must be one of {list(choices)}, "
                                              f"got {data[name]!r}")
    for i, item in enumerate(data["evidence"]):
        if type(item) is not str:
            raise MemoryValidationError(f"evidence[{i}]",
                                        f"must be a str, got {type(item).__name__}")
    for name in OPTIONAL_FIELDS:
        value = data.get(name)
        if value is not None and type(value) is not str:
            raise MemoryValidationError(name, f"must be a str or absent, got "
                                              f"{type(value).__name__}")


_from_iso = datetime.fromisoformat


def _read_time(value: str, field: str) -> datetime:
    """A timestamp as :func:`~labmem.core.clock.format_timestamp` wrote it: ``…Z``, read in
    one call; anything else (naive, another zone, not a time) takes the full parser, which
    converts it or names ``field``."""
    if value[-1:] == "Z":
        try:
            parsed = _from_iso(value)
        except ValueError:
            pass
        else:
            if parsed.tzinfo is UTC:
                return parsed
    return validated_as(MemoryValidationError, parse_timestamp, value, field=field)
