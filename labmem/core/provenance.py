"""Where a memory came from, and whose it is.

``MemorySource`` is the one provenance shape in the project: transcript candidates,
stored records, artifacts and durable facts all carry it, and other modules re-export
it rather than defining their own. ``scope_digest`` is the one way to turn an owner id
(a user or a workspace) into the scope string written into every canonical record.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.core.errors import InvalidInputError
from labmem.core.validation import require_text

SCOPE_DIGEST_LENGTH = 16
# A session id names a transcript file (s09) and an artifact directory (s13), and sits
# inside source pointers: letters, digits, '.', '_' and '-', never a path separator.
SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# An opaque id one layer hands another, such as a transcript event id
# ``transcript:<session>:<n>``: the session id's characters plus ':' (the characters of a
# memory id or a lease transaction id), 1-200 of them, starting with a letter or digit —
# no spaces, no path separators, nothing a prompt block has to escape.
OPAQUE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")


def require_opaque_id(value: Any, field: str) -> str:
    """``value`` if it is an opaque id (:data:`OPAQUE_ID_PATTERN`); else a refusal naming
    ``field``."""
    if not isinstance(value, str) or not OPAQUE_ID_PATTERN.fullmatch(value):
        shown = value if not isinstance(value, str) else value[:120]
        raise InvalidInputError(
            field, f"is not an id: {shown!r}",
            "pass the id as it was issued (e.g. a transcript event id 'transcript:s1:3'): "
            "1-200 letters, digits, '.', '_', ':' or '-', starting with a letter or digit")
    return value


def scope_digest(owner_id: str, *, field: str = "owner_id") -> str:
    """A stable, non-reversible scope string for a user or workspace id.

    The same id always gives the same scope on every machine, and the id itself
    (which may be an e-mail address) is never written to disk.
    """
    if not isinstance(owner_id, str) or not owner_id.strip():
        raise InvalidInputError(field, f"must be a non-blank string, got {owner_id!r}",
                                "pass the id of the user or workspace that owns this memory")
    digest = hashlib.sha256(f"labmem-scope:v1:{owner_id}".encode()).hexdigest()
    return digest[:SCOPE_DIGEST_LENGTH]


#: The longest ``source_id``, ``source_type`` and ``title`` a :class:`MemorySource` takes.
MAX_SOURCE_CHARS = {"source_id": 500, "source_type": 200, "title": 500}


@dataclass(frozen=True)
class MemorySource:
    """The original object a memory was derived from.

    ``captured_at`` is when the source happened (the conversation, the snapshot);
    it is deliberately separate from any "stored at" time of the record built from it.
    """

    source_id: str
    source_type: str
    title: str
    captured_at: datetime

    def __post_init__(self) -> None:
        for name, limit in MAX_SOURCE_CHARS.items():
            require_text(getattr(self, name), f"source.{name}", max_chars=limit)
        at = parse_timestamp(self.captured_at, field="source.captured_at")
        object.__setattr__(self, "captured_at", at)

    def to_dict(self) -> dict[str, str]:
        return {
            "source_id": self.source_id,
            "source_type": self.source_type,
            "title": self.title,
            "captured_at": format_timestamp(self.captured_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemorySource:
        if not isinstance(data, Mapping):
            raise InvalidInputError(
                "source", f"must be a MemorySource or a mapping, got {type(data).__name__}"
            )
        missing = [k for k in ("source_id", "source_type", "title", "captured_at")
                   if k not in data]
        if missing:
            raise InvalidInputError("source", f"is missing {', '.join(missing)}")
        return cls(data["source_id"], data["source_type"], data["title"], data["captured_at"])
