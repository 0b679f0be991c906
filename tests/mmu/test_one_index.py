"""Issue 17 item 4: one integer-id index for the Context MMU; validate on write, trust the
line checksum on replay.

* every record line the service writes ends in a CRC-32 of its bytes, and a replayed
  record is equal — field for field, type for type — to a fully validated decode of it;
* a line whose bytes no longer match its checksum is corruption naming the line (a bad
  field in it is named first); a line without a checksum (an older log, a hand-written
  line, a purge's tombstone) is validated in full;
* the service owns the only term index: the MMU searches it, the text of a record is
  tokenized once (and only when a query first needs it), and what it answers equals a
  brute-force match over the current records through writes, revisions, supersessions
  and forgets.
"""

import json
import zlib
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.core.text import extract_terms
from labmem.mmu import (
    ContextMMU,
    FileMemoryService,
    KeyedTermIndex,
    MemoryCorruptionError,
    MemoryRecord,
    encode_line,
)
from labmem.mmu.logline import checksum_state, trusted_record

LOG = "records.jsonl"


def service(root):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"))


def remember(svc, text, *, key, scope="alice", source_kind="tool_observed", **kw):
    return svc.remember("semantic", scope=scope, title=f"note {key}", text=text,
                        outcome="succeeded", evidence=kw.pop("evidence", ("ev-1",)),
                        source_kind=source_kind, origin_key=key, **kw)


def lines(root):
    return (root / LOG).read_bytes().split(b"\n")[:-1]


def write_history(root):
    svc = service(root)
    a = remember(svc, "The test port is 18300.", key="port", valid_until="2027-01-01T00:00:00Z")
    remember(svc, "The test port is 18300.", key="port", evidence=("ev-2",))  # merge
    remember(svc, "The test port is 18400.", key="port", source_kind="user_stated")  # supersede
    remember(svc, "The port is 1.", key="port", source_kind="model_inferred")  # conflict
    b = remember(svc, "Deploys run at noon.", key="deploy", verified_at="2026-01-02T00:00:00Z")
    svc.revise(b.record_id, scope="alice", text="Deploys run at nine.", evidence=["ev-3"])
    c = remember(svc, "WAL mode is on.", key="wal", scope="bob")
    svc.forget(c.record_id, scope="bob")
    return svc, a


# -- the checksummed line ----------------------------------------------------------------

def test_every_line_ends_in_a_matching_crc32_of_its_own_bytes(tmp_path):
    write_history(tmp_path)
    for raw in lines(tmp_path):
        assert checksum_state(raw) is True
        body, _, tail = raw.rpartition(b',"crc32":"')
        assert int(tail[:8], 16) == zlib.crc32(body)
        assert "crc32" in json.loads(raw)  # still one plain JSON object


def test_a_replayed_record_equals_a_fully_validated_decode_of_its_line(tmp_path):
    svc, _ = write_history(tmp_path)
    reopened = service(tmp_path).records()
    validated = {}
    for raw in lines(tmp_path):
        data = json.loads(raw)
        del data["crc32"]
        validated[data["record_id"]] = MemoryRecord.from_dict(data)  # last line wins
    assert reopened == svc.records() == tuple(validated[r.record_id] for r in reopened)
    for record in reopened:  # equal is not enough: the same types, aware UTC times
        expected = validated[record.record_id]
        for name in MemoryRecord.__dataclass_fields__:
            assert type(getattr(record, name)) is type(getattr(expected, name)), name
        assert record.created_at.tzinfo == timezone.utc
        assert record.content_hash == expected.content_hash


def test_a_line_edited_without_its_checksum_is_corruption_naming_the_line(tmp_path):
    write_history(tmp_path)
    raw = (tmp_path / LOG).read_bytes()
    edited = raw.replace(b"Deploys run at nine.", b"Deploys run at ten..", 1)
    assert edited != raw and len(edited) == len(raw)
    (tmp_path / LOG).write_bytes(edited)
    line = 1 + edited[: edited.index(b"Deploys run at ten")].count(b"\n")
    with pytest.raises(MemoryCorruptionError, match=f"line {line}.*crc32"):
        service(tmp_path)


def test_a_flipped_bit_inside_a_field_the_checksum_covers_is_caught(tmp_path):
    remember(service(tmp_path), "The test port is 18300.", key="port")
    raw = bytearray((tmp_path / LOG).read_bytes())
    raw[raw.index(b'"importance":0.5') + len(b'"importance":0.')] = ord("9")
    (tmp_path / LOG).write_bytes(bytes(raw))
    with pytest.raises(MemoryCorruptionError, match="line 1"):
        service(tmp_path)


def test_a_line_without_a_checksum_is_validated_in_full(tmp_path):
    svc = service(tmp_path)
    good = remember(svc, "The test port is 18300.", key="port")
    row = good.to_dict() | {"record_id": "alice:m-000002", "origin_key": "legacy"}
    with open(tmp_path / LOG, "a") as handle:  # an older log's line: plain JSON, no crc32
        handle.write(json.dumps(row) + "\n")
    assert service(tmp_path).recall_key("alice:m-000002", scope="alice").origin_key == "legacy"
    with open(tmp_path / LOG, "a") as handle:
        handle.write(json.dumps(row | {"record_id": "alice:m-000003", "importance": 1.5}) + "\n")
    with pytest.raises(MemoryCorruptionError, match="line 3.*importance"):
        service(tmp_path)


def test_a_checksummed_line_holding_a_bad_field_would_be_trusted_so_only_writers_checksum(
        tmp_path):
    # What the checksum vouches for is "these are the bytes a validating writer wrote":
    # encode_line is the writer's step, after MemoryRecord has checked every field.
    record = remember(service(tmp_path / "a"), "The test port is 18300.", key="port")
    assert encode_line(record.to_dict()) == lines(tmp_path / "a")[0] + b"\n"


def test_an_edited_line_with_a_bad_field_names_the_field(tmp_path):
    write_history(tmp_path)
    raw = (tmp_path / LOG).read_bytes()
    (tmp_path / LOG).write_bytes(raw.replace(b'"importance":0.5', b'"importance":"high"', 1))
    with pytest.raises(MemoryCorruptionError, match="line 1: importance: must be a number"):
        service(tmp_path)


def test_a_purge_keeps_record_checksums_and_writes_tombstones_plain(tmp_path):
    svc, _ = write_history(tmp_path)
    assert svc.purge() == 1
    states = [(b'"tombstone":true' in raw, checksum_state(raw)) for raw in lines(tmp_path)]
    assert (True, None) in states  # validated in full on replay: seven short fields
    assert all(state is True for tombstone, state in states if not tombstone)
    assert service(tmp_path).stats() == svc.stats()


# -- one index --------------------------------------------------------------------------

def test_the_mmu_has_no_index_of_its_own_and_each_text_is_tokenized_once(tmp_path):
    svc = service(tmp_path)
    for i in range(20):
        remember(svc, f"fact {i} about the billing port", key=f"k{i}")
    reopened = service(tmp_path)
    mmu = ContextMMU(reopened, token_budget=500)
    assert reopened.index.tokenized == 0  # opening tokenizes nothing
    assert not hasattr(mmu, "_index")
    trace = mmu.recall("billing port", scope="alice")
    assert len(trace.candidates) == 20 and reopened.index.tokenized == 20
    reopened.recall_query("billing port", 5, scope="alice")
    mmu.recall("port fact", scope="alice")
    ContextMMU(reopened, token_budget=500).recall("billing", scope="alice")  # a second MMU
    assert reopened.index.tokenized == 20
    revised = reopened.revise("alice:m-000003", scope="alice", text="moved to the ledger",
                              evidence=["ev-9"])
    assert [c.record_id for c in mmu.recall("ledger", scope="alice").candidates] == [
        revised.record_id]
    assert reopened.index.tokenized == 21  # only the new text


def test_relevance_from_the_shared_index_equals_the_page_term_set(tmp_path):
    svc = service(tmp_path)
    remember(svc, "The billing port is 18300 in the test environment.", key="port")
    remember(svc, "Billing runs nightly.", key="billing")
    mmu = ContextMMU(svc, token_budget=500)
    query = "which billing port does the test use"
    terms = frozenset(extract_terms(query))
    for candidate in mmu.recall(query, scope="alice").candidates:
        page = mmu.pages[candidate.record_id]
        assert candidate.factors["relevance"] == round(len(terms & page.terms) / len(terms), 6)


def brute_force(svc, terms):
    out = {}
    for record in svc.records():
        if record.visible:
            held = set(extract_terms(record.title + "\n" + record.text)) & set(terms)
            if held:
                out[record.record_id] = len(held)
    return out


WORDS = ["port", "billing", "wal", "deploy", "noon", "nine", "cache", "host"]
OPS = st.lists(st.tuples(st.sampled_from(["remember", "revise", "forget", "rival"]),
                         st.integers(0, 5), st.lists(st.sampled_from(WORDS), min_size=1,
                                                      max_size=4)),
               min_size=1, max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
def test_match_counts_equal_a_brute_force_match_through_any_history(tmp_path_factory, ops,
                                                                     query):
    root = tmp_path_factory.mktemp("idx")
    svc = service(root)
    for op, slot, words in ops:
        text = " ".join(words) + "."
        current = [r for r in svc.records() if r.visible and r.origin_key == f"k{slot}"
                   and r.status in ("provisional", "trusted")]
        if op == "remember" or not current:
            remember(svc, text, key=f"k{slot}")
        elif op == "rival":
            remember(svc, text, key=f"k{slot}", source_kind="model_inferred")
        elif op == "revise":
            svc.revise(current[0].record_id, scope="alice", text=text, evidence=["ev-r"])
        else:
            svc.forget(current[0].record_id, scope="alice")
        svc.match_counts(["port"])  # tokenize part of the way, so both paths are mixed
    assert dict(svc.match_counts(query)) == brute_force(svc, query)
    assert dict(service(root).match_counts(query)) == brute_force(svc, query)  # replayed


def test_the_index_skips_a_replaced_document_without_tokenizing_it():
    texts = {"a": "port billing"}
    index = KeyedTermIndex(texts.__getitem__)
    index.put("a")
    texts["a"] = "wal cache"
    index.put("a")  # replaced before any query: the first text is never tokenized
    assert dict(index.match_counts(["port", "wal"])) == {"a": 1}
    assert index.tokenized == 1 and len(index) == 1
    index.remove("a")
    assert index.match_counts(["wal"]) == {} and len(index) == 0


def test_a_trusted_record_is_the_record_that_was_written():
    record = MemoryRecord(
        record_id="alice:m-000001", memory_type="semantic", scope="alice", title="t", text="x",
        status="trusted", importance=1.0, confidence=0.25, utility=0.5, salience=0.0,
        source_kind="user_stated", origin_key="k", evidence=("e1", "e2"), version=3,
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        updated_at="2026-01-02T03:04:05.123456Z", valid_until="2026-02-01T00:00:00Z",
        superseded_by="alice:m-000002")
    data = json.loads(encode_line(record.to_dict()))
    del data["crc32"]
    assert trusted_record(data) == record
