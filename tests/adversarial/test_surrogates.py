"""Lone surrogates (issue item 3): refused by the core text validator, in every layer.

A Python string may hold an unpaired surrogate (``"bad\\ud800x"``); UTF-8 cannot. Before
the fix it passed validation and escaped later as ``UnicodeEncodeError`` — in the middle
of a write, after an externalized body was already on disk. Now each layer refuses it
with its own labmem error, naming the caller's field, and nothing is written.
"""

from __future__ import annotations

import hashlib

import pytest

from labmem.artifacts import ArtifactValidationError, RetentionClaim, ToolResultExternalizer
from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError, LabmemError
from labmem.mmu import FileMemoryService, MemoryValidationError
from labmem.recall import RemoteMemoryStore, RemoteMemoryValidationError, SqliteMemoryStore
from labmem.story import MemoryContractAdapter
from labmem.story.errors import StoryValidationError
from labmem.transcript import Transcript, TranscriptValidationError
from labmem.user import UserMemory, UserMemoryValidationError
from labmem.workspace import WorkspaceMemory, WorkspaceValidationError

BAD = "bad\ud800x"
NOW = "2026-08-01T12:00:00Z"
SOURCE = {"source_id": "s1", "source_type": "chat", "title": "a chat",
          "captured_at": "2026-07-01T00:00:00Z"}


def snapshot(root):
    """Every file under ``root`` with its bytes (lock files are not state)."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def refused(error, field, call, root, says="surrogate"):
    """``call`` raises ``error`` (a labmem error) naming ``field``; ``root`` is unchanged."""
    before = snapshot(root)
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, LabmemError)
    assert caught.value.field == field
    assert says in str(caught.value)
    assert snapshot(root) == before


def test_the_core_validators_refuse_a_lone_surrogate_naming_the_field():
    from labmem.core.validation import require_json, require_text

    for text in (BAD, "\udc80", "ok \U0001F600 then \udfff"):
        with pytest.raises(InvalidInputError) as caught:
            require_text(text, "note")
        assert caught.value.field == "note" and "U+D" in caught.value.problem
    with pytest.raises(InvalidInputError) as caught:
        require_json({"a": [1, {"b": BAD}]}, "payload")
    assert caught.value.field == "payload.a[1].b"
    with pytest.raises(InvalidInputError) as caught:
        require_json({BAD: 1}, "payload")
    assert caught.value.field == "payload"
    assert require_text("emoji \U0001F600 and 中文", "note") == "emoji \U0001F600 and 中文"


def test_transcript_refuses_it_in_text_and_in_arguments(tmp_path):
    transcript = Transcript(tmp_path / "s1.jsonl", clock=FixedClock(NOW))
    transcript.append({"type": "message", "role": "user", "content": "hello"})
    refused(TranscriptValidationError, "event.content", lambda: transcript.append(
        {"type": "message", "role": "user", "content": BAD}), tmp_path)
    refused(TranscriptValidationError, "event.arguments.query", lambda: transcript.append(
        {"type": "function_call", "call_id": "c1", "name": "search",
         "arguments": {"query": BAD}}), tmp_path)
    refused(TranscriptValidationError, "event.arguments.query", lambda: transcript.append(
        {"type": "function_call", "call_id": "c1", "name": "search",
         "arguments": '{"query": "bad\\ud800x"}'}), tmp_path)  # the JSON escape of one
    assert len(transcript.events()) == 1


def test_user_memory_refuses_it_in_values_profile_and_source(tmp_path):
    memory = UserMemory(tmp_path / "users", user_id="alice", clock=FixedClock(NOW))
    memory.set_preference("theme", "dark")
    refused(UserMemoryValidationError, "value",
            lambda: memory.set_preference("theme", BAD), tmp_path)
    refused(UserMemoryValidationError, "source_event_id",
            lambda: memory.set_preference("theme", "light", source_event_id=BAD), tmp_path,
            says="is not an id")  # an opaque id (item 13) has no room for one either
    refused(UserMemoryValidationError, "changes.name",
            lambda: memory.update_profile({"name": BAD}), tmp_path)


@pytest.mark.parametrize("store_type", [RemoteMemoryStore, SqliteMemoryStore])
def test_both_remote_stores_refuse_it(tmp_path, store_type):
    store = store_type(tmp_path / "records.store", user_id="alice", clock=FixedClock(NOW))
    store.append(kind="conversation", content="fine", summary="", source=SOURCE)
    for field, kwargs in (("content", {"content": BAD}), ("summary", {"summary": BAD}),
                          ("source.title", {"source": {**SOURCE, "title": BAD}})):
        draft = {"kind": "conversation", "content": "c", "summary": "", "source": SOURCE,
                 **kwargs}
        refused(RemoteMemoryValidationError, field, lambda d=draft: store.append(**d),
                tmp_path)
        good = {"kind": "conversation", "content": "ok", "summary": "", "source": SOURCE}
        refused(RemoteMemoryValidationError, f"drafts[1].{field}",
                lambda d=draft, g=good: store.append_many([g, d]), tmp_path)
    assert len(store.read_all()) == 1


def test_workspace_refuses_it(tmp_path):
    workspace = WorkspaceMemory(tmp_path / "project", workspace_id="w", clock=FixedClock(NOW))
    refused(WorkspaceValidationError, "content",
            lambda: workspace.append_fact(BAD, kind="decision"), tmp_path)
    refused(WorkspaceValidationError, "source.title",
            lambda: workspace.append_fact("fine", kind="decision",
                                          source={**SOURCE, "title": BAD}), tmp_path)


def test_an_externalize_refused_this_way_writes_nothing(tmp_path):
    session = tmp_path / "s1"
    session.mkdir()
    externalizer = ToolResultExternalizer(session, clock=FixedClock(NOW))
    big = "x" * 60_000  # over the 51,200-byte threshold: the body would go to disk
    refused(ArtifactValidationError, "summary",
            lambda: externalizer.externalize(big, "grep", summary=BAD), tmp_path)
    refused(ArtifactValidationError, "output",
            lambda: externalizer.externalize(big + BAD, "bash"), tmp_path)
    refused(ArtifactValidationError, "output",
            lambda: externalizer.externalize(big + BAD, "grep"), tmp_path)
    assert sorted(p.name for p in session.iterdir()) == []  # no body, manifest or lock
    assert externalizer.references() == []


def test_a_lease_claim_refuses_it_in_its_source_id():
    sha = hashlib.sha256(b"body").hexdigest()
    with pytest.raises(LabmemError) as caught:
        RetentionClaim("t1", f"artifact:s1:000001-{BAD}-{sha[:12]}.txt:{sha[:12]}", sha)
    assert caught.value.field == "claim.source_id" and "surrogate" in str(caught.value)


def test_the_story_writer_refuses_it_before_any_store_is_written(tmp_path):
    adapter = MemoryContractAdapter(tmp_path / "novel", clock=FixedClock(NOW))
    change = {"entity": "Mara", "field": "location", "new": "the harbour"}
    attacks = [
        ("result.state_changes[0].new", {"chapter": 1, "state_changes": [
            {**change, "new": BAD}]}, {}),
        ("result.appearances[0]", {"chapter": 1, "state_changes": [change],
                                   "appearances": [BAD]}, {}),
        ("summary.foreshadowing[0].text", {"chapter": 1, "state_changes": [change]},
         {"summary": {"chapter": 1, "title": "One", "text": "It begins.",
                      "foreshadowing": [{"state": "open", "subject": "the lamp",
                                         "text": BAD}]}}),
        ("outline", {"chapter": 1, "state_changes": [change]}, {"outline": BAD}),
    ]
    for field, result, kwargs in attacks:
        refused(StoryValidationError, field,
                lambda r=result, k=kwargs: adapter.commit_chapter(r, **k), tmp_path)
    assert not (tmp_path / "novel").exists() or snapshot(tmp_path / "novel") == {}


def test_the_memory_service_refuses_it(tmp_path):
    service = FileMemoryService(tmp_path / "mmu", clock=FixedClock(NOW))
    base = dict(title="t", text="fine", outcome="succeeded", evidence=["run:1"],
                source_kind="tool_observed", origin_key="k", scope="alice")
    for field in ("text", "title", "origin_key", "scope"):
        refused(MemoryValidationError, field,
                lambda f=field: service.remember("semantic", **{**base, f: BAD}), tmp_path)
    refused(MemoryValidationError, "evidence[0]",
            lambda: service.remember("semantic", **{**base, "evidence": [BAD]}), tmp_path)
