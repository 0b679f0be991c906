"""s14 memory service: the protocol, the write gate, dedup/status rules, restart (contracts 1–2)."""

import pytest

from labmem.core.clock import SteppingClock
from labmem.core.errors import LabmemError
from labmem.mmu import (
    MEMORY_TYPES,
    FileMemoryService,
    MemoryCorruptionError,
    MemoryService,
    MemoryValidationError,
    RecordNotFoundError,
    ServiceClosedError,
    UnsupportedOperationError,
    WriteGateError,
)
from tests.procs import run_processes


def service(root, **kw):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"), **kw)


def remember(svc, text="The test port is 18300.", *, key="port", evidence=("ev-1",),
             memory_type="semantic", scope="alice", **kw):
    kw.setdefault("outcome", "succeeded")
    kw.setdefault("source_kind", "tool_observed")
    return svc.remember(memory_type, scope=scope, title=f"title {key}", text=text,
                        evidence=evidence, origin_key=key, **kw)


def test_default_backend_is_a_memory_service_for_all_four_types(tmp_path):
    svc = service(tmp_path)
    assert isinstance(svc, MemoryService)
    ids = {}
    for memory_type in MEMORY_TYPES:
        ids[memory_type] = remember(svc, f"{memory_type} note about billing port",
                                    key=memory_type, memory_type=memory_type).record_id
    for memory_type in MEMORY_TYPES:
        hits = svc.recall_query("billing port", 5, scope="alice", memory_type=memory_type)
        assert [h.record.record_id for h in hits] == [ids[memory_type]]
        assert hits[0].score == 1.0 and hits[0].matched_terms == ("billing", "port")
        assert svc.recall_key(ids[memory_type], scope="alice").memory_type == memory_type
        svc.forget(ids[memory_type], scope="alice")
        assert svc.recall_query("billing port", 5, scope="alice",
                                memory_type=memory_type) == ()
    stats = svc.stats()
    assert stats["by_type"] == {t: 1 for t in MEMORY_TYPES}
    assert stats["by_status"] == {"archived": 4}


def test_recall_query_is_ranked_scored_and_tie_broken_by_id(tmp_path):
    svc = service(tmp_path)
    a = remember(svc, "port billing", key="a")
    b = remember(svc, "port only", key="b")
    c = remember(svc, "port billing again", key="c")
    hits = svc.recall_query("billing port", 3, scope="alice")
    assert [(h.record.record_id, h.score) for h in hits] == [
        (a.record_id, 1.0), (c.record_id, 1.0), (b.record_id, 0.5)]
    assert len(svc.recall_query("billing port", 1, scope="alice")) == 1
    with pytest.raises(MemoryValidationError, match="k"):
        svc.recall_query("port", 0, scope="alice")


def test_unsupported_type_and_closed_service_raise(tmp_path):
    svc = service(tmp_path, memory_types=("semantic",))
    with pytest.raises(UnsupportedOperationError, match="episodic"):
        remember(svc, memory_type="episodic")
    with pytest.raises(UnsupportedOperationError):
        svc.recall_query("port", 3, scope="alice", memory_type="working")
    with pytest.raises(MemoryValidationError, match="memory_type"):
        remember(svc, memory_type="dream")
    svc.close()
    with pytest.raises(ServiceClosedError):
        svc.stats()


@pytest.mark.parametrize("outcome", ["planned", "failed", "cancelled"])
def test_write_gate_refuses_unfinished_outcomes_and_leaves_the_file_unchanged(tmp_path,
                                                                              outcome):
    svc = service(tmp_path)
    remember(svc, key="first")
    before = (tmp_path / "records.jsonl").read_bytes()
    with pytest.raises(WriteGateError, match=f"outcome: a {outcome} task"):
        remember(svc, "I will create the file", key="plan", outcome=outcome)
    with pytest.raises(WriteGateError, match="evidence"):
        remember(svc, "done without proof", key="x", evidence=())
    assert (tmp_path / "records.jsonl").read_bytes() == before
    assert svc.stats()["records"] == 1


def test_repeat_merges_retry_is_unchanged_and_second_source_trusts(tmp_path):
    svc = service(tmp_path)
    first = remember(svc, confidence=0.4)
    assert first.status == "provisional" and first.version == 1
    retry = remember(svc, "the TEST port is  18300.", confidence=0.4)  # same evidence
    assert retry == first
    merged = remember(svc, evidence=("ev-2",), confidence=0.4)
    assert merged.record_id == first.record_id
    assert merged.version == 2 and merged.status == "trusted"
    assert merged.confidence == pytest.approx(0.7) and merged.evidence == ("ev-1", "ev-2")
    assert svc.stats()["records"] == 1


def test_recall_never_raises_confidence(tmp_path):
    svc = service(tmp_path)
    record = remember(svc)
    for _ in range(5):
        svc.recall_key(record.record_id, scope="alice")
        svc.recall_query("test port", 3, scope="alice")
    assert svc.recall_key(record.record_id, scope="alice").confidence == record.confidence


def test_disagreeing_newer_record_supersedes_the_old(tmp_path):
    svc = service(tmp_path)
    old = remember(svc, "The test port is 18000.")
    new = remember(svc, "The test port is 18300.", evidence=("ev-2",))
    assert new.record_id != old.record_id and new.status == "provisional"
    stale = svc.recall_key(old.record_id, scope="alice")
    assert (stale.status, stale.superseded_by) == ("superseded", new.record_id)
    assert [h.record.record_id for h in svc.recall_query("test port", 5, scope="alice")] == [
        new.record_id]


def test_forget_archives_and_hides_from_every_recall_path(tmp_path):
    svc = service(tmp_path)
    record = remember(svc)
    archived = svc.forget(record.record_id, scope="alice")
    assert archived.status == "archived" and archived.version == 2
    with pytest.raises(RecordNotFoundError, match="forgotten"):
        svc.recall_key(record.record_id, scope="alice")
    assert svc.recall_query("test port", 5, scope="alice") == ()
    with pytest.raises(RecordNotFoundError):
        svc.forget(record.record_id, scope="alice")


def test_scope_is_enforced_by_key_and_by_query(tmp_path):
    svc = service(tmp_path)
    record = remember(svc, scope="alice")
    with pytest.raises(RecordNotFoundError, match="no such record in scope 'bob'"):
        svc.recall_key(record.record_id, scope="bob")  # the same answer as a missing id
    assert svc.recall_query("test port", 5, scope="bob") == ()
    with pytest.raises(RecordNotFoundError):
        svc.forget(record.record_id, scope="bob")


def test_records_survive_a_restart_and_another_instance_sees_appends(tmp_path):
    svc = service(tmp_path)
    a = remember(svc, key="a")
    remember(svc, evidence=("ev-2",), key="a")
    svc.close()
    reopened = service(tmp_path)
    again = reopened.recall_key(a.record_id, scope="alice")
    assert again.version == 2 and again.status == "trusted" and again.text == a.text
    other = service(tmp_path)
    b = remember(reopened, "a new fact about ports", key="b")
    assert other.recall_key(b.record_id, scope="alice").text == "a new fact about ports"


def test_returned_values_are_owned_by_the_caller(tmp_path):
    svc = service(tmp_path)
    remember(svc)
    stats = svc.stats()
    stats["by_type"]["semantic"] = 99
    assert svc.stats()["by_type"]["semantic"] == 1
    with pytest.raises(AttributeError):
        svc.records()[0].text = "changed"  # frozen


def test_a_corrupt_line_is_reported_with_its_number(tmp_path):
    svc = service(tmp_path)
    remember(svc)
    with open(tmp_path / "records.jsonl", "a") as handle:
        handle.write('{"record_id": "alice:m-000002"}\n')
    with pytest.raises(MemoryCorruptionError, match="line 2"):
        service(tmp_path)


def test_bad_inputs_name_the_field(tmp_path):
    svc = service(tmp_path)
    with pytest.raises(MemoryValidationError, match="importance"):
        remember(svc, importance=1.5)
    with pytest.raises(MemoryValidationError, match="source_kind"):
        remember(svc, source_kind="rumour")
    with pytest.raises(MemoryValidationError, match="evidence"):
        remember(svc, evidence="ev-1")
    with pytest.raises(LabmemError, match="text"):
        remember(svc, "   ")
    assert svc.stats()["records"] == 0


def _writer(root, name, count, barrier):
    svc = service(root)
    barrier.wait()
    for i in range(count):
        remember(svc, f"{name} fact {i}", key=f"{name}-{i}", evidence=(f"{name}-{i}",))


def test_concurrent_writers_in_processes_get_distinct_ids(tmp_path):
    run_processes(_writer, lambda n, s: (str(tmp_path), f"w{n}", 15, s.start), 3, expect=0)
    records = service(tmp_path).records()
    assert len(records) == 45
    assert len({r.record_id for r in records}) == 45
    assert len((tmp_path / "records.jsonl").read_bytes().split(b"\n")) == 46
