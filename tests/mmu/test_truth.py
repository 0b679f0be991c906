"""s14 what is true now: status is a filter, the source rank decides supersession, validity
in time (issue items 1–2). The design's own example: a port stated as 18000, then 18300."""

from datetime import timedelta

import pytest

from labmem.core.clock import SteppingClock, parse_timestamp
from labmem.mmu import ContextMMU, FileMemoryService, MemoryRecord, MemoryValidationError
from labmem.mmu.records import SOURCE_RANK, exclusion_reason

T0 = parse_timestamp("2026-01-01T00:00:00Z", field="T0")


def service(root):
    return FileMemoryService(root, clock=SteppingClock(T0, step=timedelta(minutes=1)))


def claim(svc, text, source_kind, *, key="test-port", scope="alice", evidence=None, **kw):
    return svc.remember("semantic", scope=scope, title="Test environment port", text=text,
                        outcome="succeeded", evidence=[evidence or f"ev:{text}"],
                        source_kind=source_kind, origin_key=key, **kw)


def test_port_example_the_current_claim_is_loaded_and_the_old_one_is_history(tmp_path):
    svc = service(tmp_path)
    old = claim(svc, "The test environment listens on port 18000.", "user_stated")
    new = claim(svc, "The test environment now listens on port 18300.", "user_stated")
    guess = claim(svc, "The test environment probably listens on port 18000.",
                  "model_inferred")
    # the service: the newer user statement superseded the old one; the model's guess
    # could not demote it and waits as a pending conflict
    assert svc.recall_key(old.record_id, scope="alice").status == "superseded"
    assert guess.status == "conflicted" and guess.conflicts_with == new.record_id
    assert svc.recall_key(new.record_id, scope="alice").status == "provisional"
    explained = svc.explain_query("test environment port", 5, scope="alice")
    assert [h.record.record_id for h in explained.hits] == [new.record_id]
    assert {(e.record_id, e.reason) for e in explained.excluded} == {
        (old.record_id, f"superseded by {new.record_id}"),
        (guess.record_id, f"pending conflict with {new.record_id}")}
    # the MMU: the same rule; only 18300 is loaded, and the trace says why the others are not
    mmu = ContextMMU(svc, token_budget=1_000)
    trace = mmu.recall("which port does the test environment use", scope="alice")
    assert trace.loaded == (new.record_id,)
    assert [c.record_id for c in trace.candidates] == [new.record_id]
    assert {e.record_id: e.status for e in trace.excluded} == {
        old.record_id: "superseded", guess.record_id: "conflicted"}
    assert "18300" in mmu.text(new.record_id, scope="alice")


@pytest.mark.parametrize("first,second,second_wins", [
    (a, b, SOURCE_RANK[b] >= SOURCE_RANK[a]) for a in SOURCE_RANK for b in SOURCE_RANK])
def test_a_newer_claim_supersedes_only_claims_of_equal_or_lower_rank(tmp_path, first, second,
                                                                       second_wins):
    svc = service(tmp_path)
    a = claim(svc, "The port is 18000.", first)
    b = claim(svc, "The port is 18300.", second)
    hits = svc.recall_query("port", 5, scope="alice")
    assert [h.record.record_id for h in hits] == [b.record_id if second_wins else a.record_id]
    assert b.status == ("provisional" if second_wins else "conflicted")
    assert svc.recall_key(a.record_id, scope="alice").status == (
        "superseded" if second_wins else "provisional")


def test_a_pending_conflict_repeated_is_not_a_second_record(tmp_path):
    svc = service(tmp_path)
    claim(svc, "The port is 18300.", "user_stated")
    first = claim(svc, "The port is 18000.", "model_inferred")
    again = claim(svc, "The port is 18000.", "model_inferred", evidence="ev:other")
    assert again == first and svc.stats()["records"] == 2


def test_claims_of_other_origins_or_scopes_do_not_supersede(tmp_path):
    svc = service(tmp_path)
    a = claim(svc, "The port is 18000.", "user_stated", key="test-port")
    b = claim(svc, "The port is 18300.", "user_stated", key="prod-port")
    c = claim(svc, "The port is 18400.", "user_stated", scope="bob")
    assert {svc.recall_key(r.record_id, scope=r.scope).status for r in (a, b, c)} == {
        "provisional"}


def test_expired_records_are_excluded_counted_and_shown_as_expired(tmp_path):
    svc = service(tmp_path)
    soon = claim(svc, "The release freeze is on.", "user_stated", key="freeze",
                 valid_until=T0 + timedelta(minutes=5), verified_at=T0)
    lasting = claim(svc, "The release calendar is on the wiki.", "user_stated", key="cal")
    assert soon.valid_until == T0 + timedelta(minutes=5) and soon.verified_at == T0
    hits = svc.recall_query("release", 5, scope="alice")
    assert {h.record.record_id for h in hits} == {soon.record_id, lasting.record_id}
    assert svc.stats()["expired"] == 0
    later = T0 + timedelta(hours=1)
    assert svc.stats(now=later)["expired"] == 1
    svc.clock = SteppingClock(later)
    explained = svc.explain_query("release", 5, scope="alice")
    assert [h.record.record_id for h in explained.hits] == [lasting.record_id]
    assert [(e.record_id, e.reason) for e in explained.excluded] == [
        (soon.record_id, "expired at 2026-01-01T00:05:00Z")]
    assert svc.stats()["expired"] == 1
    mmu = ContextMMU(svc, token_budget=1_000)
    before = mmu.recall("release freeze", scope="alice", now=T0 + timedelta(minutes=2))
    assert soon.record_id in before.loaded  # valid then
    after = mmu.recall("release freeze", scope="alice", now=later)
    assert soon.record_id not in after.loaded
    assert [e.reason for e in after.excluded] == ["expired at 2026-01-01T00:05:00Z"]
    assert mmu.pages[soon.record_id].charged == 0  # the expired page was released
    mmu.check_ledger()
    # an expired claim no longer blocks a lower-ranked newer one
    renewed = claim(svc, "The release freeze is over.", "model_inferred", key="freeze")
    assert renewed.status == "provisional"


def test_a_record_superseded_while_loaded_is_released_from_the_mmu(tmp_path):
    svc = service(tmp_path)
    old = claim(svc, "The port is 18000.", "tool_observed")
    mmu = ContextMMU(svc, token_budget=1_000)
    mmu.recall("port", scope="alice")
    assert mmu.pages[old.record_id].charged > 0
    new = claim(svc, "The port is 18300.", "tool_observed")
    trace = mmu.recall("port", scope="alice")
    assert trace.loaded == (new.record_id,) and mmu.pages[old.record_id].charged == 0
    assert mmu.check_ledger().token_used == mmu.pages[new.record_id].charged


def test_the_mmu_keeps_one_claim_per_origin_even_if_a_backend_left_two(tmp_path):
    svc = service(tmp_path)
    a = claim(svc, "The port is 18000.", "user_stated")
    b = claim(svc, "The port is 18300.", "model_inferred", key="other")
    mmu = ContextMMU(svc, token_budget=1_000)
    mmu.pages[b.record_id].origin_key = a.origin_key  # as if both claimed the same origin
    trace = mmu.recall("port", scope="alice")
    assert trace.loaded == (a.record_id,)
    assert [(e.record_id, e.reason) for e in trace.excluded] == [
        (b.record_id, f"outranked by {a.record_id} (same origin)")]


def test_old_logs_without_the_new_fields_still_read(tmp_path):
    svc = service(tmp_path)
    record = claim(svc, "The port is 18000.", "user_stated")
    row = record.to_dict()
    assert not {"valid_until", "verified_at", "superseded_by", "conflicts_with"} & set(row)
    assert MemoryRecord.from_dict(row) == record
    with pytest.raises(MemoryValidationError, match="valid_until"):
        claim(svc, "x", "user_stated", key="bad", valid_until="2026-01-01T00:00:00")
    assert exclusion_reason(record, T0) is None
