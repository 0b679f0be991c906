"""The chapter index: structured episodic evidence in a real SQLite file (``index.db``).

Three tables, one row per fact a chapter reported: ``state_changes``, ``relationships``
and ``appearances``. Recording a chapter replaces that chapter's rows inside one
transaction, so committing the same chapter twice (a retry, a revision) leaves one copy,
and a crash mid-way leaves the previous rows (SQLite's journal makes it atomic).

The index answers "what happened recently" (the orchestrator's episodic memory) and
"what happened at all" (bootstrap replays it to rebuild the scratchpad).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.story.errors import StoryCorruptionError
from labmem.story.writer import chapter_claims

SCHEMA = """
CREATE TABLE IF NOT EXISTS state_changes (
    chapter INTEGER NOT NULL, source_chapter INTEGER NOT NULL,
    entity TEXT NOT NULL, field TEXT NOT NULL, new TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS relationships (
    chapter INTEGER NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS appearances (
    chapter INTEGER NOT NULL, entity TEXT NOT NULL, UNIQUE (chapter, entity));
CREATE INDEX IF NOT EXISTS state_changes_by_chapter ON state_changes (chapter);
CREATE INDEX IF NOT EXISTS relationships_by_chapter ON relationships (chapter);
"""


@dataclass(frozen=True)
class StateChangeRow:
    chapter: int
    source_chapter: int
    entity: str
    field: str
    new: str


@dataclass(frozen=True)
class RelationshipRow:
    chapter: int
    source: str
    target: str
    kind: str


class ChapterIndex:
    """One ``index.db``; opening the object does no I/O."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(self.path)
        try:
            yield connection
        except sqlite3.DatabaseError as exc:
            raise StoryCorruptionError(self.path.name, None,
                                       f"is not a usable SQLite index ({exc})") from None
        finally:
            connection.close()

    def record_chapter(self, result: Mapping[str, Any]) -> int:
        """Replace this chapter's rows with the result's facts; returns the chapter."""
        chapter, _ = chapter_claims(result)  # validates the whole result first
        changes = [(chapter, c.get("source_chapter", chapter), c["entity"], c["field"], c["new"])
                   for c in result.get("state_changes", [])]
        links = [(chapter, r["from"], r["to"], r["type"])
                 for r in result.get("relationships_new", [])]
        names = {c["entity"] for c in result.get("state_changes", [])}
        names |= {r["from"] for r in result.get("relationships_new", [])}
        names |= {n for n in result.get("appearances", []) if isinstance(n, str) and n.strip()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db, db:
            db.executescript(SCHEMA)
            for table in ("state_changes", "relationships", "appearances"):
                db.execute(f"DELETE FROM {table} WHERE chapter = ?", (chapter,))
            db.executemany("INSERT INTO state_changes VALUES (?, ?, ?, ?, ?)", changes)
            db.executemany("INSERT INTO relationships VALUES (?, ?, ?, ?)", links)
            db.executemany("INSERT INTO appearances VALUES (?, ?)",
                           [(chapter, n) for n in sorted(names)])
        return chapter

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if not self.path.exists():
            return []
        with self._connect() as db:
            return db.execute(sql, params).fetchall()

    def state_changes(self, first: int = 1, last: int | None = None) -> list[StateChangeRow]:
        """State changes committed in chapters ``first..last``, in commit order."""
        rows = self._rows("SELECT chapter, source_chapter, entity, field, new FROM state_changes "
                          "WHERE chapter BETWEEN ? AND ? ORDER BY chapter, rowid",
                          (first, last if last is not None else 1 << 62))
        return [StateChangeRow(*row) for row in rows]

    def relationships(self, first: int = 1, last: int | None = None) -> list[RelationshipRow]:
        rows = self._rows("SELECT chapter, source, target, kind FROM relationships "
                          "WHERE chapter BETWEEN ? AND ? ORDER BY chapter, rowid",
                          (first, last if last is not None else 1 << 62))
        return [RelationshipRow(*row) for row in rows]

    def appearances(self, first: int = 1, last: int | None = None) -> list[tuple[int, str]]:
        return [(c, e) for c, e in self._rows(
            "SELECT chapter, entity FROM appearances WHERE chapter BETWEEN ? AND ? "
            "ORDER BY chapter, entity", (first, last if last is not None else 1 << 62))]

    def chapters(self) -> list[int]:
        return [c for (c,) in self._rows(
            "SELECT chapter FROM appearances UNION SELECT chapter FROM state_changes "
            "UNION SELECT chapter FROM relationships ORDER BY 1")]
