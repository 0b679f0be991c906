"""A version-1 database, as labmem wrote it before recall ran on the server: the rows
and the per-scope counter only (no analyzed terms, no vocabulary). Kept so that
``labmem db upgrade`` is tested on real old data, not only on an empty schema."""

from __future__ import annotations

import json

import psycopg

from labmem.core.clock import SteppingClock
from labmem.core.provenance import MemorySource, scope_digest
from labmem.recall.postgres import init_database
from labmem.recall.store import validate_draft


def write_v1(admin_url: str, users: dict[str, list[dict]]) -> dict[str, list]:
    """Build schema version 1 at ``admin_url`` and store each user's drafts the way a
    version-1 store did; returns the records written, per user."""
    init_database(admin_url, version=1)
    clock = SteppingClock("2026-08-02T00:00:00Z")
    written = {}
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for user, drafts in users.items():
            scope = scope_digest(user)
            records = [validate_draft(**d).stored(scope, clock.now()) for d in drafts]
            for ordinal, record in enumerate(records):
                conn.execute(
                    "INSERT INTO memories (user_scope, ordinal, memory_id, kind, captured_at, "
                    "record) VALUES (%s, %s, %s, %s, %s, %s)",
                    (scope, ordinal, record.memory_id, record.kind.value,
                     record.source.captured_at.timestamp(),
                     json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":"))))
            conn.execute("INSERT INTO scope_stats (user_scope, records) VALUES (%s, %s)",
                         (scope, len(records)))
            written[user] = records
    return written


def draft(content: str, *, kind: str = "conversation", title: str = "Decision",
          at: str = "2026-08-01T12:00:00Z", memory_id: str | None = None) -> dict:
    return {"kind": kind, "content": content, "summary": "", "memory_id": memory_id,
            "source": MemorySource(f"t-{abs(hash(content)) % 10_000}",
                                   "conversation_transcript", title, at)}
