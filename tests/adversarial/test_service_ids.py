"""Memory-service ids (hardening item 7): an id must not tell one scope about another.

Ids were one counter across scopes (``m-{n:06d}``), so bob's first record was ``m-000002``
when alice wrote before him. Ids are now numbered within their scope and carry it
(``bob:m-000001``), so they say nothing about other scopes and stay unique in the service.
"""

from __future__ import annotations

from labmem.core.clock import SteppingClock
from labmem.mmu import FileMemoryService


def remember(service, scope, text="The database host is db-1."):
    return service.remember("semantic", scope=scope, title="db host", text=text,
                            outcome="succeeded", evidence=["ev:1"],
                            source_kind="tool_observed", origin_key="db-host")


def test_bobs_first_id_does_not_reveal_that_alice_wrote(tmp_path):
    service = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    remember(service, "alice")
    remember(service, "alice", text="The database host is db-2.")
    alone = FileMemoryService(tmp_path / "alone", clock=SteppingClock("2026-01-01T00:00:00Z"))
    assert remember(service, "bob").record_id == remember(alone, "bob").record_id \
        == "bob:m-000001"


def test_a_scope_with_a_colon_cannot_make_another_scopes_id(tmp_path):
    service = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    ids = [remember(service, scope).record_id for scope in ("a", "a:m-000001", "a:m")]
    assert len(set(ids)) == 3
    for scope, record_id in zip(("a", "a:m-000001", "a:m"), ids, strict=True):
        assert record_id.rsplit(":", 1)[0] == scope


def test_numbering_continues_past_forgotten_and_purged_ids(tmp_path):
    service = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    # five claims of one origin: each supersedes the last, each is its own record
    first = [remember(service, "alice", text=f"host {i}").record_id for i in range(5)]
    service.forget(first[-1], scope="alice")
    service.purge()
    reopened = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-02T00:00:00Z"))
    fresh = reopened.remember("semantic", scope="alice", title="t", text="another note",
                              outcome="succeeded", evidence=["ev:2"],
                              source_kind="tool_observed", origin_key="other")
    assert fresh.record_id == "alice:m-000006"


def test_ids_stay_unique_and_scoped_whatever_the_numbering(tmp_path):
    """What any fix must keep: a scope reaches only its own records by id."""
    service = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    alices, bobs = remember(service, "alice"), remember(service, "bob")
    assert service.recall_key(alices.record_id, scope="alice").scope == "alice"
    assert service.recall_key(bobs.record_id, scope="bob").scope == "bob"
    service.forget(bobs.record_id, scope="bob")
    assert service.recall_key(alices.record_id, scope="alice").status == "provisional"
