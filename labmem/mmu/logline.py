"""The memory service's log line: a record's JSON with a CRC-32 of its own bytes.

A record is validated once, when it is written (:class:`~labmem.mmu.records.MemoryRecord`
checks every field). The line then carries ``"crc32"`` — the CRC-32 of every byte before
it — as its last member::

    {"record_id":"alice:m-000001", … ,"updated_at":"2026-01-01T00:00:00Z","crc32":"1c291ca3"}

On replay a line whose checksum matches is exactly what a validating writer produced, so
its fields are taken as they are (:meth:`MemoryRecord.trusted`), not checked again; a
line without the member (written before checksums, by hand, or a purge's tombstone) is
validated in full; a line whose checksum does not match is validated in full too — a bad
field is reported by name — and then refused as corruption even if every field is valid.
A CRC detects accidents — torn or flipped bytes, an edit that forgot the checksum — not
an attacker who recomputes it: whoever can rewrite the log can already write any record.
"""

from __future__ import annotations

import zlib
from typing import Any

from labmem.core.storage import encode_json_line

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
