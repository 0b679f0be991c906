"""Refusals that were not labmem errors, or named the wrong field (issue items 5 and 13).

Every refusal is a labmem error that names the field as the *caller* wrote it:

* a ``workspace.json`` that is valid JSON but not an object is corruption, not an
  ``AttributeError``;
* an MMU scope (or a shared scope, a record id, a level) of the wrong type is a
  validation error, not a ``TypeError`` from a dict lookup;
* a story value over the limit names ``result.state_changes[0].new``, not ``value``;
  an entity type of NaN names ``result.entities_new[0].type``, not ``document``;
* user memory's ``source_event_id`` is an opaque id (the id rule of
  :data:`labmem.core.provenance.OPAQUE_ID_PATTERN`), not free text with spaces.
"""

from __future__ import annotations

import json

import pytest

from labmem.core.clock import FixedClock
from labmem.core.errors import LabmemError
from labmem.mmu import ContextMMU, FileMemoryService, MemoryValidationError, MmuValidationError
from labmem.story import MemoryWriter
from labmem.story.errors import StoryValidationError
from labmem.transcript import Transcript
from labmem.user import UserMemory, UserMemoryValidationError
from labmem.workspace import WorkspaceCorruptionError, WorkspaceMemory

NOW = "2026-08-01T12:00:00Z"


def field_of(error, call):
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, LabmemError)
    return caught.value.field


# -- workspace.json ----------------------------------------------------------------------

@pytest.mark.parametrize("document", [[], "workspace", 7, None, [{"workspace_id": "w"}]])
def test_a_workspace_json_that_is_not_an_object_is_corruption(tmp_path, document):
    project = tmp_path / "project"
    WorkspaceMemory(project, workspace_id="w", clock=FixedClock(NOW))
    (project / "workspace.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(WorkspaceCorruptionError, match="workspace.json"):
        WorkspaceMemory(project, clock=FixedClock(NOW))


# -- the memory service and the Context MMU ---------------------------------------------

@pytest.fixture
def service(tmp_path):
    return FileMemoryService(tmp_path / "mmu", clock=FixedClock(NOW))


REMEMBER = dict(title="WAL", text="the store runs in WAL mode", outcome="succeeded",
                evidence=["run:1"], source_kind="tool_observed", origin_key="store.mode",
                scope="alice")


@pytest.mark.parametrize("field, value", [
    ("scope", ["alice"]), ("scope", {"alice": 1}), ("origin_key", ["store.mode"]),
])
def test_remember_refuses_a_wrong_type_naming_the_field(service, field, value):
    assert field_of(MemoryValidationError,
                    lambda: service.remember("semantic", **{**REMEMBER, field: value})) == field
    assert service.stats()["records"] == 0


def test_evidence_items_are_named_by_position(service):
    assert field_of(MemoryValidationError, lambda: service.remember(
        "semantic", **{**REMEMBER, "evidence": ["run:1", ["run:2"]]})) == "evidence[1]"
    record = service.remember("semantic", **REMEMBER)
    assert field_of(MemoryValidationError, lambda: service.revise(
        record.record_id, scope="alice", text="x", evidence=[{"id": 1}])) == "evidence[0]"


def test_every_mmu_call_refuses_a_list_scope(service):
    record = service.remember("semantic", **REMEMBER)
    mmu = ContextMMU(service, token_budget=200, clock=FixedClock(NOW))
    for call in (lambda: service.recall_key(record.record_id, scope=["alice"]),
                 lambda: service.forget(record.record_id, scope=["alice"]),
                 lambda: service.recall_query("WAL", 3, scope=["alice"]),
                 lambda: mmu.recall("WAL", scope=["alice"]),
                 lambda: mmu.load(record.record_id, scope=["alice"]),
                 lambda: mmu.pin(record.record_id, scope=["alice"])):
        assert field_of((MemoryValidationError, MmuValidationError), call) == "scope"
    assert field_of(MmuValidationError, lambda: mmu.load([record.record_id],
                                                         scope="alice")) == "record_id"
    assert field_of(MmuValidationError, lambda: mmu.load(record.record_id, scope="alice",
                                                         level="L9")) == "level"


@pytest.mark.parametrize("shared, field", [
    (("global", ["team"]), "shared_scopes[1]"), ("global", "shared_scopes"),
    (None, "shared_scopes"),
])
def test_shared_scopes_are_checked_when_the_mmu_is_built(service, shared, field):
    assert field_of(MmuValidationError, lambda: ContextMMU(
        service, token_budget=200, shared_scopes=shared)) == field


# -- the story writer --------------------------------------------------------------------

@pytest.fixture
def writer(tmp_path):
    return MemoryWriter(tmp_path / "novel" / "memory_scratchpad.json", clock=FixedClock(NOW))


@pytest.mark.parametrize("result, field", [
    ({"chapter": 1, "state_changes": [{"entity": "Mara", "field": "mood",
                                       "new": "x" * 2_001}]},
     "result.state_changes[0].new"),
    ({"chapter": 1, "state_changes": [{"entity": "M" * 201, "field": "mood", "new": "calm"}]},
     "result.state_changes[0].entity"),
    ({"chapter": 1, "memory_facts": {"world_rules": [
        {"subject": "magic", "field": "cost", "value": "y" * 5_000}]}},
     "result.memory_facts.world_rules[0].value"),
    ({"chapter": 1, "chapter_meta": {"hook": "z" * 2_001}}, "result.chapter_meta.hook"),
    ({"chapter": 1, "entities_new": [{"name": "Oren", "type": float("nan"),
                                      "description": "a smith"}]},
     "result.entities_new[0].type"),
    ({"chapter": 1, "entities_new": [{"name": "Oren", "type": 3, "description": "a smith"}]},
     "result.entities_new[0].type"),
    ({"chapter": 1, "protagonist": ["Mara"]}, "result.protagonist"),
])
def test_a_story_refusal_names_the_callers_field(writer, result, field):
    assert field_of(StoryValidationError,
                    lambda: writer.update_from_chapter_result(result)) == field
    assert not writer.path.exists()
    report = writer.update_from_chapter_result(  # an entity without a type stays "unknown"
        {"chapter": 1, "entities_new": [{"name": "Oren", "description": "a smith"}]})
    assert report.outcomes[0].item.payload == {"type": "unknown"}


# -- user memory: source_event_id is an opaque id ------------------------------------------

@pytest.fixture
def user(tmp_path):
    return UserMemory(tmp_path / "users", user_id="alice", clock=FixedClock(NOW))


@pytest.mark.parametrize("source", ["free text with spaces", "evt 1", "a/b", " evt-1",
                                    "evt-1\n", "<b>evt</b>"])
def test_source_event_id_is_an_opaque_id(user, tmp_path, source):
    event = Transcript(tmp_path / "session-1.jsonl", clock=FixedClock(NOW)).append(
        {"type": "message", "role": "user", "content": "I prefer dark mode"})
    for key, good in (("theme", event["event_id"]), ("a", "evt-1"), ("b", "evt.2_b:3"),
                      ("c", "x" * 200)):
        assert user.set_preference(key, "dark", source_event_id=good).status == "created"
    assert user.get_preference("theme").source_event_id == "transcript:session-1:1"
    assert field_of(UserMemoryValidationError, lambda: user.set_preference(
        "reply.language", "en", source_event_id=source)) == "source_event_id"
    assert user.get_preference("reply.language") is None
