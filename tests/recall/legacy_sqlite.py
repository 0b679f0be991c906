"""Older SQLite store files (schema versions 1 and 2: one row per posting), built from a
current file with plain SQL — what the upgrade on open must turn into packed postings."""

from __future__ import annotations

import sqlite3

import numpy as np

V1_SCHEMA = (
    "CREATE TABLE memories (user_scope TEXT NOT NULL, ordinal INTEGER NOT NULL, memory_id "
    "TEXT NOT NULL, kind TEXT NOT NULL, captured_at REAL NOT NULL, record TEXT NOT NULL, "
    "PRIMARY KEY (user_scope, ordinal), UNIQUE (user_scope, memory_id))",
    "CREATE INDEX memories_by_kind ON memories (user_scope, kind, captured_at, memory_id)",
    "CREATE TABLE postings (user_scope TEXT NOT NULL, term TEXT NOT NULL, ordinal INTEGER "
    "NOT NULL, tf INTEGER NOT NULL, length INTEGER NOT NULL, captured_at REAL NOT NULL, "
    "PRIMARY KEY (user_scope, term, ordinal)) WITHOUT ROWID",
    "CREATE TABLE scope_stats (user_scope TEXT PRIMARY KEY, records INTEGER NOT NULL, "
    "conversation_records INTEGER NOT NULL, total_length INTEGER NOT NULL)",
)
V2_VOCABULARY = (
    "CREATE TABLE vocabulary (user_scope TEXT NOT NULL, term TEXT NOT NULL, first_ordinal "
    "INTEGER NOT NULL, PRIMARY KEY (user_scope, term)) WITHOUT ROWID",
    "CREATE INDEX vocabulary_by_first ON vocabulary (user_scope, first_ordinal)",
)


def read_packed(db, scope):
    """term -> [(ordinal, tf)], and per ordinal (length, captured), from a current file."""
    postings = {}
    for term, segment, size, data in db.execute(
            "SELECT term, segment, size, data FROM postings WHERE user_scope = ? "
            "ORDER BY term, segment", (scope,)):
        gap_width, count_width = 1 << (data[0] >> 4), 1 << (data[0] & 15)
        gaps = np.frombuffer(data, f"<u{gap_width}", size, 1)
        counts = np.frombuffer(data, f"<u{count_width}", size, 1 + size * gap_width)
        postings.setdefault(term, []).extend(
            zip((segment + np.cumsum(gaps)).tolist(), counts.tolist(), strict=True))
    columns = []
    for lengths, captured in db.execute(
            "SELECT lengths, captured_at FROM record_columns WHERE user_scope = ? "
            "ORDER BY segment", (scope,)):
        columns += zip(np.frombuffer(lengths, "<u4").tolist(),
                       np.frombuffer(captured, "<f8").tolist(), strict=True)
    return postings, columns


def write_legacy(current, target, version: int) -> None:
    """Write ``target``: the records of the current-format file ``current``, as ``version``."""
    source = sqlite3.connect(current)
    scopes = [row[0] for row in source.execute("SELECT user_scope FROM scope_stats")]
    with sqlite3.connect(target) as db:
        for statement in V1_SCHEMA + (V2_VOCABULARY if version >= 2 else ()):
            db.execute(statement)
        db.executemany("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?)", source.execute(
            "SELECT user_scope, ordinal, memory_id, kind, captured_at, record FROM memories"))
        db.executemany("INSERT INTO scope_stats VALUES (?, ?, ?, ?)", source.execute(
            "SELECT user_scope, records, conversation_records, total_length FROM scope_stats"))
        if version >= 2:
            db.executemany("INSERT INTO vocabulary VALUES (?, ?, ?)", source.execute(
                "SELECT user_scope, term, first_ordinal FROM vocabulary"))
        for scope in scopes:
            postings, columns = read_packed(source, scope)
            db.executemany("INSERT INTO postings VALUES (?, ?, ?, ?, ?, ?)", (
                (scope, term, ordinal, tf, *columns[ordinal])
                for term, posted in postings.items() for ordinal, tf in posted))
        db.execute(f"PRAGMA user_version = {version}")
    source.close()
