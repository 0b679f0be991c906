"""Memory-service ids (hardening item 7): an id must not tell one scope about another.

NOT FIXED YET — recorded here as a strict expected failure, so the fix turns it green and
must then drop the marker. Ids are one counter across scopes (``m-{n:06d}``), so bob's
first record is ``m-000002`` when alice wrote before him. Numbering per scope (alice's
first ``m-000001``, bob's first ``m-000001`` too) keeps every single-scope chapter's output
as it is (s14 names ``m-000001``-``m-000009`` in its prose), but two scopes then share ids,
so every map keyed by the id alone must be keyed by ``(scope, id)``: the service's records,
tombstones and term index, the Context MMU's page table, and the fold snapshot's columns
(``labmem/mmu/snapshot.py``, which another change owns). Opaque ids would need none of
that, but would break the chapter's prose and code that name the ids.
"""

from __future__ import annotations

import pytest

from labmem.core.clock import SteppingClock
from labmem.mmu import FileMemoryService


def remember(service, scope, text="The database host is db-1."):
    return service.remember("semantic", scope=scope, title="db host", text=text,
                            outcome="succeeded", evidence=["ev:1"],
                            source_kind="tool_observed", origin_key="db-host")


@pytest.mark.xfail(strict=True, reason="item 7 not fixed: one id counter across scopes")
def test_bobs_first_id_does_not_reveal_that_alice_wrote(tmp_path):
    service = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    remember(service, "alice")
    remember(service, "alice", text="The database host is db-2.")
    alone = FileMemoryService(tmp_path / "alone", clock=SteppingClock("2026-01-01T00:00:00Z"))
    assert remember(service, "bob").record_id == remember(alone, "bob").record_id


def test_ids_stay_unique_and_scoped_whatever_the_numbering(tmp_path):
    """What any fix must keep: a scope reaches only its own records by id."""
    service = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"))
    alices, bobs = remember(service, "alice"), remember(service, "bob")
    assert service.recall_key(alices.record_id, scope="alice").scope == "alice"
    assert service.recall_key(bobs.record_id, scope="bob").scope == "bob"
    service.forget(bobs.record_id, scope="bob")
    assert service.recall_key(alices.record_id, scope="alice").status == "provisional"
