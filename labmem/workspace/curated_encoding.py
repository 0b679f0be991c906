"""s10, a performance trick: curated.json encoded one record at a time.

``curated.json`` is written in :func:`~labmem.core.storage.encode_snapshot`'s layout (one
header member per line, then one entry, conflict and pending fact per line) so that a
distill with nothing new can read its first lines alone. ``encode_snapshot`` checks the
nesting of the document as a whole, and a large curated view holds more than 100
brackets in total, so it walked every entry in Python on every write.
:func:`encode_document` writes the same text with each record checked on its own by
:func:`~labmem.core.storage.encode_json_line` (the C encoder).

The seam: ``WorkspaceMemory.encode_curated`` is a :class:`DocumentEncoder`; the plain
one is :func:`encode_plain` (same text, slower).
"""

import json
from collections.abc import Mapping
from typing import Any, Protocol

from labmem.core.storage import encode_json_line, encode_snapshot

__all__ = ["RECORDS", "DocumentEncoder", "encode_document", "encode_plain"]

RECORDS = ("entries", "conflicts", "pending")  # curated.json members with a line per item


class DocumentEncoder(Protocol):
    """curated.json's text for a document: ``encode_snapshot(document, records=RECORDS)``."""

    def __call__(self, document: Mapping[str, Any]) -> str: ...


def encode_plain(document: Mapping[str, Any]) -> str:
    """The reference :class:`DocumentEncoder`: the storage layer's snapshot encoder."""
    return encode_snapshot(document, records=RECORDS)


def encode_document(document: Mapping[str, Any]) -> str:
    """What :func:`encode_plain` writes, each record encoded and checked on its own."""
    members = []
    for name, value in document.items():
        if name in RECORDS and isinstance(value, list) and value:
            body = b"[\n" + b",\n".join(encode_json_line(v)[:-1] for v in value) + b"\n]"
        elif isinstance(value, dict):
            body = encode_json_line(value)[:-1]
        else:  # a string, a number or null
            body = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        members.append(json.dumps(name, ensure_ascii=False).encode("utf-8") + b":" + body)
    return (b"{\n" + b",\n".join(members) + b"\n}\n").decode("utf-8")
