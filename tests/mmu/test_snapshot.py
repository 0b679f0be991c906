"""Issue 17 item 6 (MMU open): the fold snapshot beside the memory service's log.

* a valid snapshot is used: open decodes no line and tokenizes no text, and every answer
  (stats, records, recall_query with its exclusions, match counts, Context MMU traces and
  ledgers) equals the answer of a service that folds the whole log — for any history, with
  any part of it appended after the snapshot (property test);
* a snapshot that is missing, torn, damaged, of another format, made for another file,
  newer than the log, or whose covered lines were changed is refused with the reason and
  the log is folded from its first line; a corrupt covered line still raises;
* a writer killed (SIGKILL, a real child) during a snapshot write leaves the previous
  snapshot or none, and a temporary file the next writer removes;
* a purge removes the snapshot before rewriting the log, so no file keeps a purged text's
  terms, and a snapshot of the replaced log is never written;
* other processes appending while a restored service reads: it sees all of it.
"""

import os
import queue
import shutil
import signal
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock, SteppingClock
from labmem.core.text import extract_terms
from labmem.mmu import ContextMMU, FileMemoryService, MemoryCorruptionError
from labmem.mmu.snapshot import snapshot_path
from tests.mmu import snapshot_workers
from tests.procs import run_child, running

LOG = "records.jsonl"
NOW = "2026-03-01T00:00:00Z"
QUERIES = ("test port", "deploys nine noon", "wal mode", "billing note", "port 18400 cache")


def writer(root):
    return FileMemoryService(root, clock=SteppingClock("2026-01-01T00:00:00Z"),
                             snapshot_lines=None)


def reader(root, snapshot=True):
    return FileMemoryService(root, clock=FixedClock(NOW),
                             snapshot_lines=1 if snapshot else None)


def remember(svc, text, *, key, scope="alice", source_kind="tool_observed", **kw):
    return svc.remember("semantic", scope=scope, title=f"note {key}", text=text,
                        outcome="succeeded", evidence=kw.pop("evidence", ("ev-1",)),
                        source_kind=source_kind, origin_key=key, **kw)


def write_history(root):
    """Merges, a supersession, a pending conflict, a revision, an expiry, a forget."""
    svc = writer(root)
    remember(svc, "The test port is 18300.", key="port", valid_until="2026-02-01T00:00:00Z")
    remember(svc, "The test port is 18300.", key="port", evidence=("ev-2",))
    remember(svc, "The test port is 18400.", key="port", source_kind="user_stated")
    remember(svc, "The port is 1.", key="port", source_kind="model_inferred")
    b = remember(svc, "Deploys run at noon.", key="deploy", verified_at="2026-01-02T00:00:00Z")
    svc.revise(b.record_id, scope="alice", text="Deploys run at nine.", evidence=["ev-3"])
    c = remember(svc, "WAL mode is on.", key="wal", scope="bob")
    svc.forget(c.record_id, scope="bob")
    remember(svc, "The cache port is 6379 in the test setup.", key="cache")
    return svc


def observe(svc):
    """Everything a caller can ask, as plain values."""
    out = {"stats": svc.stats(now=NOW), "records": svc.records(),
           "lines": svc.stats(now=NOW)["log_lines"]}
    for query in QUERIES:
        for scope in ("alice", "bob"):
            out[("explain", query, scope)] = svc.explain_query(query, 5, scope=scope)
        out[("counts", query)] = dict(svc.match_counts(extract_terms(query)))
    mmu = ContextMMU(svc, token_budget=60, warm_top_k=2, l2_top_k=1, clock=FixedClock(NOW))
    out["traces"] = [mmu.recall(query, scope="alice", now=NOW) for query in QUERIES * 2]
    out["ledger"] = mmu.ledger()
    out["pages"] = sorted(mmu.pages)
    return out


def snapshot_of(root):
    """A snapshot covering the whole log (written now unless one already does)."""
    svc = FileMemoryService(root, clock=FixedClock(NOW), snapshot_lines=10**9)
    svc.snapshot_lines = 1
    assert svc.save_snapshot() or svc.snapshot_state == "loaded"
    return snapshot_path(root / LOG)


# -- used, and the same answers ------------------------------------------------------------

def test_a_valid_snapshot_is_used_decodes_nothing_at_open_and_answers_the_same(tmp_path):
    write_history(tmp_path)
    path = snapshot_of(tmp_path)
    assert path.name == "records.jsonl.fold"
    svc = reader(tmp_path)
    assert svc.snapshot_state == "loaded"
    mmu = ContextMMU(svc, token_budget=60)
    assert svc.index.tokenized == 0 and mmu.pages.made == 0
    source = svc._source
    assert source.decoded == 0  # nothing read of any record but its id, status, type
    svc.stats(now=NOW)
    assert source.decoded == 0
    mmu.recall("deploys nine", scope="alice", now=NOW)
    assert 0 < source.decoded <= 3 and svc.index.tokenized == 0
    assert observe(reader(tmp_path)) == observe(reader(tmp_path, snapshot=False))


def test_lines_appended_after_the_snapshot_are_folded_on_top_of_it(tmp_path):
    svc = write_history(tmp_path)
    snapshot_of(tmp_path)
    remember(svc, "The test port is 18500.", key="port", source_kind="user_stated")
    svc.revise("alice:m-000005", scope="alice", text="The cache port is 6380.", evidence=["ev-9"])
    svc.forget("alice:m-000004", scope="alice")
    remember(svc, "A billing note.", key="billing")
    restored = reader(tmp_path)
    assert restored.snapshot_state == "loaded"
    assert observe(restored) == observe(reader(tmp_path, snapshot=False))
    again = remember(restored, "The test port is 18500.", key="port", source_kind="user_stated",
                     evidence=("ev-1",))
    assert again.version == 1  # the claim maps came back from the snapshot: a retry


def test_the_snapshot_is_written_at_open_and_at_close_once_enough_lines_lag(tmp_path):
    write_history(tmp_path)
    lines = (tmp_path / LOG).read_bytes().count(b"\n")
    FileMemoryService(tmp_path, snapshot_lines=lines + 1)
    assert not snapshot_path(tmp_path / LOG).exists()
    opened = FileMemoryService(tmp_path, snapshot_lines=lines)
    assert opened.snapshot_write == "written" and snapshot_path(tmp_path / LOG).exists()
    before = snapshot_path(tmp_path / LOG).read_bytes()
    svc = FileMemoryService(tmp_path, clock=SteppingClock("2026-01-01T00:00:00Z"),
                            snapshot_lines=2)
    remember(svc, "one more", key="k1")
    assert snapshot_path(tmp_path / LOG).read_bytes() == before  # writes do not rewrite it
    remember(svc, "and another", key="k2")
    svc.close()
    assert svc.snapshot_write == "written"
    assert reader(tmp_path).stats()["log_lines"] == lines + 2
    assert FileMemoryService(tmp_path, snapshot_lines=None).snapshot_state == "off"


WORDS = ["port", "billing", "wal", "deploy", "noon", "nine", "cache", "host"]
OPS = st.lists(st.tuples(st.sampled_from(["remember", "revise", "forget", "rival", "expire"]),
                         st.integers(0, 4), st.lists(st.sampled_from(WORDS), min_size=1,
                                                      max_size=4)),
               min_size=1, max_size=24)
OPS_AFTER = st.lists(st.tuples(st.sampled_from(["remember", "revise", "forget", "rival"]),
                               st.integers(0, 4),
                               st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
                     max_size=8)


def apply_ops(svc, ops):
    for op, slot, words in ops:
        text = " ".join(words) + "."
        current = [r for r in svc.records() if r.visible and r.origin_key == f"k{slot}"
                   and r.status in ("provisional", "trusted")]
        if op == "remember" or not current:
            remember(svc, text, key=f"k{slot}", scope=("alice", "bob")[slot % 2])
        elif op == "rival":
            remember(svc, text, key=f"k{slot}", scope=current[0].scope,
                     source_kind="model_inferred")
        elif op == "expire":
            remember(svc, text, key=f"k{slot}", scope=current[0].scope,
                     source_kind="user_stated", valid_until="2026-01-01T00:05:00Z")
        elif op == "revise":
            svc.revise(current[0].record_id, scope=current[0].scope, text=text,
                       evidence=["ev-r"])
        else:
            svc.forget(current[0].record_id, scope=current[0].scope)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=OPS, after=OPS_AFTER, purge=st.booleans())
def test_answers_with_and_without_the_snapshot_are_equal_for_any_history(
        tmp_path_factory, before, after, purge):
    root = tmp_path_factory.mktemp("fold")
    svc = writer(root)
    apply_ops(svc, before)
    if purge:
        svc.purge()
    snapshot_of(root)
    apply_ops(svc, after)
    restored = reader(root)
    assert restored.snapshot_state == "loaded"
    assert observe(restored) == observe(reader(root, snapshot=False))


# -- refused, and rebuilt from the log -------------------------------------------------------

def refused(root, reason):
    svc = reader(root)
    assert svc.snapshot_state.startswith("refused") and reason in svc.snapshot_state, \
        svc.snapshot_state
    assert observe(svc) == observe(reader(root, snapshot=False))
    return svc


def test_a_missing_snapshot_is_rebuilt_from_the_log(tmp_path):
    write_history(tmp_path)
    svc = refused(tmp_path, "missing")
    assert svc.snapshot_write == "written"  # snapshot_lines=1: the open wrote one
    assert reader(tmp_path).snapshot_state == "loaded"


@pytest.mark.parametrize("cut", [4, 40, -1])
def test_a_torn_snapshot_is_refused(tmp_path, cut):
    write_history(tmp_path)
    path = snapshot_of(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:cut] if cut > 0 else data[:cut])
    refused(tmp_path, "torn")


def test_a_damaged_snapshot_body_or_another_format_is_refused(tmp_path):
    write_history(tmp_path)
    path = snapshot_of(tmp_path)
    data = bytearray(path.read_bytes())
    data[-70] ^= 0x01
    path.write_bytes(bytes(data))
    refused(tmp_path, "damaged")
    path = snapshot_of(tmp_path)
    path.write_bytes(b"LMRIDX01" + path.read_bytes()[8:])
    refused(tmp_path, "not this format")


def test_a_snapshot_made_for_another_file_is_refused(tmp_path):
    write_history(tmp_path / "a")
    snapshot_of(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the same bytes, another inode
    refused(tmp_path / "b", "another file")
    os.replace(tmp_path / "b" / LOG, tmp_path / "a" / LOG)  # the name now holds another
    refused(tmp_path / "a", "another file")


def test_a_snapshot_newer_than_the_log_is_refused(tmp_path):
    write_history(tmp_path)
    snapshot_of(tmp_path)
    lines = (tmp_path / LOG).read_bytes().split(b"\n")[:-1]
    with open(tmp_path / LOG, "r+b") as handle:  # the same file, cut back by two lines
        handle.truncate(sum(len(line) + 1 for line in lines[:-2]))
    refused(tmp_path, "newer than the log")


def edit_in_place(root, old, new):
    """Replace ``old`` by ``new`` (same length) in the log's bytes, keeping the inode."""
    raw = (root / LOG).read_bytes()
    assert len(old) == len(new) and old in raw
    with open(root / LOG, "r+b") as handle:
        handle.write(raw.replace(old, new, 1))


def test_a_changed_covered_line_is_refused_and_a_corrupt_one_still_raises(tmp_path):
    write_history(tmp_path)
    snapshot_of(tmp_path)
    edit_in_place(tmp_path, b"Deploys run at nine.", b"Deploys run at ten..")
    with pytest.raises(MemoryCorruptionError, match="crc32"):  # not hidden by the snapshot
        reader(tmp_path)


def test_a_covered_line_rewritten_with_a_valid_checksum_is_read_from_the_log(tmp_path):
    write_history(tmp_path)
    snapshot_of(tmp_path)
    raw = (tmp_path / LOG).read_bytes()
    lines = raw.split(b"\n")
    at = next(i for i, line in enumerate(lines) if b"Deploys run at nine." in line)
    body = lines[at][: lines[at].rindex(b',"crc32":"')].replace(b"nine.", b"ten..")
    lines[at] = body + b',"crc32":"%08x"}' % zlib.crc32(body)
    edit_in_place(tmp_path, raw, b"\n".join(lines))
    svc = refused(tmp_path, "changed (checksum)")
    assert svc.recall_key("alice:m-000004", scope="alice").text == "Deploys run at ten.."


# -- crashes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("worker", [snapshot_workers.save_and_die,
                                    snapshot_workers.save_torn_and_die])
@pytest.mark.parametrize("earlier", [False, True])
def test_a_writer_killed_during_a_snapshot_write_leaves_the_old_snapshot_or_none(
        tmp_path, worker, earlier):
    svc = write_history(tmp_path)
    if earlier:
        old = snapshot_of(tmp_path).read_bytes()
    remember(svc, "A later note.", key="later")
    assert run_child(worker, tmp_path) == -signal.SIGKILL
    temps = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert temps, "the child was killed before its temporary file existed"
    path = snapshot_path(tmp_path / LOG)
    if earlier:
        assert path.read_bytes() == old
        restored = reader(tmp_path)
        assert restored.snapshot_state == "loaded"
    else:
        assert not path.exists()
        restored = refused(tmp_path, "missing")
    assert observe(restored) == observe(reader(tmp_path, snapshot=False))
    remember(svc, "Written after the crash.", key="after")
    snapshot_of(tmp_path)  # the next writer
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


# -- purge ---------------------------------------------------------------------------------------

SECRET = "The vault passphrase is tangerine-8841."


def test_a_purge_removes_the_snapshot_so_no_file_keeps_the_purged_terms(tmp_path):
    svc = writer(tmp_path)
    remember(svc, "The test port is 18300.", key="port")
    secret = remember(svc, SECRET, key="vault")
    snapshot_of(tmp_path)  # written while the secret was live: it holds its terms
    assert b"tangerine" in snapshot_path(tmp_path / LOG).read_bytes()
    svc.forget(secret.record_id, scope="alice")
    follower = FileMemoryService(tmp_path, clock=FixedClock(NOW), snapshot_lines=10**9)
    assert follower.snapshot_state == "loaded"  # restored, then folded the forget; the
    assert b"tangerine" in snapshot_path(tmp_path / LOG).read_bytes()  # snapshot is as was
    assert svc.purge() == 1
    for path in tmp_path.iterdir():
        assert b"tangerine" not in path.read_bytes(), path.name
    # the follower's log was replaced: it folds the new one and a later snapshot is of it
    assert follower.recall_query("vault passphrase", 5, scope="alice") == ()
    assert follower.snapshot_state == "refused: missing"
    follower.snapshot_lines = 1
    assert follower.save_snapshot()
    assert reader(tmp_path).snapshot_state == "loaded"
    for path in tmp_path.iterdir():
        assert b"tangerine" not in path.read_bytes(), path.name
    assert observe(reader(tmp_path)) == observe(reader(tmp_path, snapshot=False))


def test_a_snapshot_of_a_log_replaced_since_it_was_folded_is_not_written(tmp_path):
    svc = writer(tmp_path)
    secret = remember(svc, SECRET, key="vault")
    stale = FileMemoryService(tmp_path, snapshot_lines=10**9)  # folded with the secret live
    stale.snapshot_lines = 1
    for i in range(3):  # the rewritten log is longer than the one the stale fold read
        remember(svc, f"Note {i} written after.", key=f"k{i}")
    svc.forget(secret.record_id, scope="alice")
    svc.purge()
    assert not stale.save_snapshot()
    assert stale.snapshot_write == "skipped: the log was replaced"
    assert not snapshot_path(tmp_path / LOG).exists()


# -- other processes appending ---------------------------------------------------------------

def test_a_restored_service_follows_other_processes_appending(tmp_path):
    write_history(tmp_path)
    snapshot_of(tmp_path)
    svc = reader(tmp_path)
    mmu = ContextMMU(svc, token_budget=200, clock=FixedClock(NOW))
    assert svc.snapshot_state == "loaded"
    finished, reads = [], 0
    with running(snapshot_workers.append, lambda i, sync: (i, sync, tmp_path, 15),
                 workers=2) as sync:
        while len(finished) < 2:  # read while they write
            seen = mmu.recall("billing note", scope="alice", now=NOW)
            assert svc.stats(now=NOW)["records"] >= len(seen.candidates)
            reads += 1
            try:
                finished.append(sync.results.get(timeout=0.02))
            except queue.Empty:
                pass
    assert sorted(finished) == [0, 1] and reads > 1
    trace = mmu.recall("billing note", scope="alice", now=NOW)
    assert len([c for c in trace.candidates if c.factors["relevance"] == 1.0]) == 30
    assert svc.stats(now=NOW)["records"] == 6 + 30
    assert observe(svc) == observe(reader(tmp_path, snapshot=False))
    assert observe(reader(tmp_path)) == observe(reader(tmp_path, snapshot=False))


def test_a_lazy_record_copies_and_pickles_as_the_whole_record(tmp_path):
    import copy
    import pickle

    write_history(tmp_path)
    snapshot_of(tmp_path)
    for make in (copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))):
        svc = reader(tmp_path)
        lazy = svc._source.record(svc._records["alice:m-000004"])
        assert "_source" in lazy.__dict__
        copied = make(lazy)
        assert "_source" not in copied.__dict__ and copied == lazy
        assert copied == reader(tmp_path, snapshot=False).recall_key("alice:m-000004",
                                                                     scope="alice")


def test_a_whole_snapshot_whose_content_is_not_what_labmem_writes_is_refused(tmp_path):
    import json

    import numpy as np

    from labmem.core.arrayfile import read_arrays, write_arrays
    from labmem.mmu.snapshot import MAGIC

    write_history(tmp_path)
    path = snapshot_of(tmp_path)
    meta, arrays = read_arrays(path, MAGIC)
    arrays = dict(arrays)
    arrays["tombstones"] = np.frombuffer(json.dumps([{"record_id": "x"}]).encode(), np.uint8)
    write_arrays(path, MAGIC, meta, arrays)  # checksummed, so whole: but not ours
    refused(tmp_path, "damaged content")
    del arrays["latest"]
    write_arrays(path, MAGIC, meta, arrays)
    refused(tmp_path, "damaged content")


def test_records_read_late_come_from_the_file_they_were_folded_from(tmp_path):
    svc = write_history(tmp_path)
    snapshot_of(tmp_path)
    before = reader(tmp_path, snapshot=False).records()
    follower = reader(tmp_path)
    held = follower.records()  # lazy: nothing of them is read yet
    assert follower._source.decoded == 0
    svc.forget("alice:m-000005", scope="alice")
    assert svc.purge() == 2  # the wal note (forgotten earlier) and the cache note
    assert held == before  # read now, from the file they were folded from
    assert observe(follower) == observe(reader(tmp_path, snapshot=False))


def test_a_recall_reads_the_lines_of_the_candidates_it_names_not_of_every_match(tmp_path):
    svc = writer(tmp_path)
    for i in range(40):
        remember(svc, f"Billing fact {i}: the invoice port is {18000 + i}.", key=f"b{i}")
    snapshot_of(tmp_path)
    restored = reader(tmp_path)
    mmu = ContextMMU(restored, token_budget=100, candidate_limit=8, warm_top_k=3,
                     clock=FixedClock(NOW))
    trace = mmu.recall("billing invoice port", scope="alice", now=NOW)
    assert mmu.scored == 40  # every match is scored (from the snapshot's columns) ...
    assert restored._source.decoded <= len(trace.candidates) == 8  # ... 8 lines are read
    plain = ContextMMU(reader(tmp_path, snapshot=False), token_budget=100, candidate_limit=8,
                       warm_top_k=3, clock=FixedClock(NOW))
    assert plain.recall("billing invoice port", scope="alice", now=NOW) == trace


def test_a_record_read_from_the_snapshot_has_the_types_of_a_replayed_one(tmp_path):
    from labmem.mmu import MemoryRecord

    write_history(tmp_path)
    snapshot_of(tmp_path)
    restored, replayed = reader(tmp_path), reader(tmp_path, snapshot=False)
    columns = ("record_id", "status", "memory_type", "valid_until", "scope", "updated_at",
               "importance", "version", "source_kind", "superseded_by", "conflicts_with",
               "origin_key", "salience")
    for record_id in (f"alice:m-00000{n}" for n in (1, 2, 3, 4, 5)):
        lazy = restored._source.record(restored._records[record_id])
        plain = next(r for r in replayed.records() if r.record_id == record_id)
        for names in (columns, tuple(MemoryRecord.__dataclass_fields__)):
            before = restored._source.decoded
            for name in names:  # the column fields first (no line is read), then all
                assert getattr(lazy, name) == getattr(plain, name), name
                assert type(getattr(lazy, name)) is type(getattr(plain, name)), name
            assert restored._source.decoded == before + (names is not columns)
