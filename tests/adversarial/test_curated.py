"""A tampered ``curated.json`` (issue item 9): contradictions are corruption, not memory.

A key's revision chain has at most one active revision; that is what lets MEMORY.md and
the agent context say *the* value of a key. A ``curated.json`` edited so that two
revisions of one key are active used to be accepted, and both contradictory values
reached MEMORY.md and the agent's context. Every read of it is now refused as
corruption, and nothing is rewritten.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from labmem.core.clock import FixedClock
from labmem.workspace import DistillPolicy, WorkspaceCorruptionError, WorkspaceMemory

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
AS_OF = datetime(2026, 9, 30, tzinfo=timezone.utc)
POLICY = DistillPolicy()


def day(n):
    return datetime(2026, 7, 1, 9, tzinfo=timezone.utc) + timedelta(days=n)


@pytest.fixture
def project(tmp_path):
    """A workspace whose key ``storage.engine`` went SQLite (r1) → PostgreSQL (r2)."""
    ws = WorkspaceMemory(tmp_path / "project", workspace_id="w", clock=FixedClock(NOW))
    for value, n, evidence, importance in (("SQLite", 0, "t:1", 5), ("PostgreSQL", 10, "t:2", 3),
                                           ("PostgreSQL", 12, "t:3", 3)):
        ws.append_fact(value, kind="decision", memory_key="storage.engine",
                       importance=importance, evidence=[evidence], recorded_at=day(n))
        ws.distill(policy=POLICY, as_of=AS_OF)
    assert [(e.content, e.status) for e in ws.revision_chain("storage.engine")] == [
        ("SQLite", "superseded"), ("PostgreSQL", "active")]
    ws.read_memory_md()
    return tmp_path / "project"


def tamper(project, edit):
    path = project / "curated.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    edit(document["entries"])
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")


def files(project):
    return {p.name: p.read_bytes() for p in sorted(project.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def every_read_is_refused(project):
    before = files(project)
    ws = WorkspaceMemory(project, clock=FixedClock(NOW))
    for read in (ws.curated_entries, ws.read_memory_md, ws.get_context_for_agent,
                 ws.list_conflicts, lambda: ws.revision_chain("storage.engine"),
                 lambda: ws.distill(policy=POLICY, as_of=AS_OF)):
        with pytest.raises(WorkspaceCorruptionError, match="curated.json") as caught:
            read()
        assert "storage.engine" in str(caught.value)
    assert files(project) == before  # MEMORY.md still says one value; nothing rewritten


def test_two_active_revisions_of_one_key_are_corruption(project):
    def reactivate_r1(entries):
        entries[0].update(status="active", superseded_by=None)

    tamper(project, reactivate_r1)
    every_read_is_refused(project)


def test_a_forged_extra_active_revision_is_corruption(project):
    def forge_r3(entries):
        entries.append({**entries[1], "entry_id": "storage.engine#r3", "revision": 3,
                        "content": "MongoDB", "supersedes": "storage.engine#r2"})

    tamper(project, forge_r3)
    every_read_is_refused(project)


def test_one_entry_id_twice_is_corruption(project):
    def duplicate(entries):
        entries.append({**entries[1], "content": "MongoDB"})

    tamper(project, duplicate)
    every_read_is_refused(project)
