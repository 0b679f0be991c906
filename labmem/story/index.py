"""The chapter index: structured episodic evidence in a real SQLite file (``index.db``).

Four tables, one row per fact a chapter reported: ``state_changes``, ``relationships``,
``appearances`` and ``loops`` (the plot threads ``memory_facts`` opened and closed — so a
closure that no summary mentions can still be rebuilt). State changes and relationships
keep the claim's ``certainty``. Recording a chapter replaces that chapter's rows inside one
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
    entity TEXT NOT NULL, field TEXT NOT NULL, new TEXT NOT NULL,
    certainty TEXT NOT NULL DEFAULT 'confirmed');
CREATE TABLE IF NOT EXISTS relationships (
    chapter INTEGER NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, kind TEXT NOT NULL,
    certainty TEXT NOT NULL DEFAULT 'confirmed');
CREATE TABLE IF NOT EXISTS appearances (
    chapter INTEGER NOT NULL, entity TEXT NOT NULL, UNIQUE (chapter, entity));
CREATE TABLE IF NOT EXISTS loops (
    chapter INTEGER NOT NULL, subject TEXT NOT NULL, state TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS state_changes_by_chapter ON state_changes (chapter);
CREATE INDEX IF NOT EXISTS relationships_by_chapter ON relationships (chapter);
"""
#: Columns added after the first release; an older index.db gets them on its next write.
ADDED_COLUMNS = (("state_changes", "certainty"), ("relationships", "certainty"))
TABLES = ("state_changes", "relationships", "appearances", "loops")


@dataclass(frozen=True)
class StateChangeRow:
    chapter: int
    source_chapter: int
    entity: str
    field: str
    new: str
    certainty: str = "confirmed"


@dataclass(frozen=True)
class RelationshipRow:
    chapter: int
    source: str
    target: str
    kind: str
    certainty: str = "confirmed"


@dataclass(frozen=True)
class LoopRow:
    """A plot thread a chapter's ``memory_facts`` opened (``open``) or closed (``closed``)."""

    chapter: int
    subject: str
    state: str
    text: str


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
        changes = [(chapter, c.get("source_chapter", chapter), c["entity"], c["field"], c["new"],
                    c.get("certainty", "confirmed")) for c in result.get("state_changes", [])]
        links = [(chapter, r["from"], r["to"], r["type"], r.get("certainty", "confirmed"))
                 for r in result.get("relationships_new", [])]
        facts = result.get("memory_facts", {})
        loops = [(chapter, e["subject"], "open", e["value"]) for e in facts.get("open_loops", [])]
        loops += [(chapter, e["subject"], "closed", e["resolution"])
                  for e in facts.get("closed_loops", [])]
        names = {c["entity"] for c in result.get("state_changes", [])}
        names |= {r["from"] for r in result.get("relationships_new", [])}
        names |= {n for n in result.get("appearances", []) if isinstance(n, str) and n.strip()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db, db:
            db.executescript(SCHEMA)
            for table, column in ADDED_COLUMNS:
                if column not in _columns(db, table):
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT NOT NULL "
                               "DEFAULT 'confirmed'")
            for table in TABLES:
                db.execute(f"DELETE FROM {table} WHERE chapter = ?", (chapter,))
            db.executemany("INSERT INTO state_changes (chapter, source_chapter, entity, field, "
                           "new, certainty) VALUES (?, ?, ?, ?, ?, ?)", changes)
            db.executemany("INSERT INTO relationships (chapter, source, target, kind, "
                           "certainty) VALUES (?, ?, ?, ?, ?)", links)
            db.executemany("INSERT INTO appearances VALUES (?, ?)",
                           [(chapter, n) for n in sorted(names)])
            db.executemany("INSERT INTO loops VALUES (?, ?, ?, ?)", loops)
        return chapter

    def _rows(self, sql: str, params: tuple[Any, ...] = (), *,
              table: str | None = None) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (``[]`` before the first write). Reading never changes the file:
        in an older index.db, ``{certainty}`` reads as 'confirmed' and a missing ``table``
        as empty."""
        if not self.path.exists():
            return []
        with self._connect() as db:
            columns = _columns(db, table) if table is not None else set()
            if table is not None and not columns:
                return []
            certainty = "certainty" if "certainty" in columns else "'confirmed'"
            return db.execute(sql.format(certainty=certainty), params).fetchall()

    def state_changes(self, first: int = 1, last: int | None = None) -> list[StateChangeRow]:
        """State changes committed in chapters ``first..last``, in commit order."""
        rows = self._rows("SELECT chapter, source_chapter, entity, field, new, {certainty} "
                          "FROM state_changes WHERE chapter BETWEEN ? AND ? "
                          "ORDER BY chapter, rowid", (first, last if last is not None else 1 << 62),
                          table="state_changes")
        return [StateChangeRow(*row) for row in rows]

    def relationships(self, first: int = 1, last: int | None = None) -> list[RelationshipRow]:
        rows = self._rows("SELECT chapter, source, target, kind, {certainty} FROM relationships "
                          "WHERE chapter BETWEEN ? AND ? ORDER BY chapter, rowid",
                          (first, last if last is not None else 1 << 62), table="relationships")
        return [RelationshipRow(*row) for row in rows]

    def loops(self, first: int = 1, last: int | None = None) -> list[LoopRow]:
        """Plot threads opened and closed in chapters ``first..last``, in commit order."""
        rows = self._rows("SELECT chapter, subject, state, text FROM loops "
                          "WHERE chapter BETWEEN ? AND ? ORDER BY chapter, rowid",
                          (first, last if last is not None else 1 << 62), table="loops")
        return [LoopRow(*row) for row in rows]

    def appearances(self, first: int = 1, last: int | None = None) -> list[tuple[int, str]]:
        return [(c, e) for c, e in self._rows(
            "SELECT chapter, entity FROM appearances WHERE chapter BETWEEN ? AND ? "
            "ORDER BY chapter, entity", (first, last if last is not None else 1 << 62))]

    def chapters(self) -> list[int]:
        return [c for (c,) in self._rows(
            "SELECT chapter FROM appearances UNION SELECT chapter FROM state_changes "
            "UNION SELECT chapter FROM relationships ORDER BY 1")]


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    """The columns ``table`` has (none when the table does not exist)."""
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
