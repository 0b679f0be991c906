"""A cache cannot change an answer (issue item 4, and the cache readers of item 5).

The recall sidecar, its analyzed-groups companion, SQLite's packed postings and the MMU
fold snapshot are caches, never a source of truth. Their checksums prove only that a file
is as its writer left it: every attack here rewrites a cache and seals it again with valid
CRCs (:func:`labmem.core.arrayfile.write_arrays`), as anyone who can write the home could.

* a hit a cache proposes is read again from the records and checked (memory id at that
  offset, scope, length, time, each query term's count): a sidecar that lies is dropped,
  the index rebuilt from the records and the query answered again — the answer is the
  records' own (``truth``); SQLite, whose postings live beside the records, refuses the
  hit as corruption; the MMU refuses a returned record its log line contradicts;
* a write's duplicate check looks for the id in the records themselves, not the sidecar;
* a cache whose parts are not of the shape labmem writes (missing keys, wrong types,
  short arrays, codes out of range, parts that are not JSON, JSON nested 100,000 deep)
  is rebuilt (or refused), never a raw ``KeyError``/``IndexError``/``TypeError`` or a
  ``RecursionError``;
* the limit: a record a cache *hides* (its postings removed or renamed) is not proposed,
  so nothing reads it — ``test_the_limit_a_hidden_record_stays_hidden`` pins that down.
"""

from __future__ import annotations

import json
import sqlite3
import struct
import zlib

import numpy as np
import pytest

from labmem.core.arrayfile import read_arrays, write_arrays
from labmem.core.clock import FixedClock
from labmem.core.errors import LabmemError
from labmem.mmu import ContextMMU, FileMemoryService, MemoryCorruptionError
from labmem.mmu.records import STATUSES
from labmem.mmu.snapshot import MAGIC as FOLD_MAGIC
from labmem.mmu.snapshot import snapshot_path
from labmem.recall import RecallEngine, RemoteMemoryCorruptionError, SqliteMemoryStore
from labmem.recall.sidecar import MAGIC as SIDECAR_MAGIC
from labmem.recall.sidecar import sidecar_path, stamp_path
from labmem.recall.store import RemoteMemoryDuplicateError
from tests.recall.sidecar_workers import drafts, engine, open_store, write_records

DEEP = 100_000
SCORERS = ("bm25", "teaching", "contextual")
QUERIES = ("dog shelter", "wal sqlite", "garden", "记忆 测试", "cat")


# -- helpers: a cache rewritten and sealed again with valid checksums ---------------------

@pytest.fixture
def records(tmp_path):
    """300 records, a profile and 20 more, with a sidecar over all of them."""
    path = write_records(tmp_path / "records.jsonl", 300, 20)
    for scorer in SCORERS:
        engine(path, scorer).recall("dog")  # the sidecar, and the contextual companion
    assert sidecar_path(path).exists()
    return path


def reseal(path, change):
    """Rewrite ``path``'s sidecar through ``change(meta, arrays)``, sealed again."""
    meta, arrays = read_arrays(sidecar_path(path), SIDECAR_MAGIC)
    meta, arrays = dict(meta), {name: np.array(a) for name, a in arrays.items()}
    change(meta, arrays)
    write_arrays(sidecar_path(path), SIDECAR_MAGIC, meta, arrays)


def strings(arrays, name):
    return json.loads(arrays[name].tobytes())


def put_strings(arrays, name, values):
    text = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    arrays[name] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def answer(path, query, scorer, *, sidecar=True):
    return [hit.to_dict() for hit in engine(path, scorer, sidecar=sidecar).recall(query).hits]


def truth(path, query, scorer):
    """What the records alone answer (no sidecar read or written)."""
    return answer(path, query, scorer, sidecar=False)


def same_as_the_records(path, queries=QUERIES, scorers=SCORERS):
    for scorer in scorers:
        for query in queries:
            assert answer(path, query, scorer) == truth(path, query, scorer), (scorer, query)


def deep_text(depth=DEEP):
    return "[" * depth + "]" * depth


# -- 4. a lying sidecar cannot change an answer ----------------------------------------

def test_a_renamed_term_cannot_return_records_without_it(records):
    """'dog' renamed 'cat' in the sidecar: 'cat' proposed the dog records (old code)."""
    def rename(meta, arrays):
        terms = strings(arrays, "terms")
        terms[terms.index("dog")] = "cat"
        put_strings(arrays, "terms", terms)

    reseal(records, rename)
    for scorer in SCORERS:
        assert answer(records, "cat", scorer) == truth(records, "cat", scorer) == []
    same_as_the_records(records)


def test_postings_pointed_at_another_record_are_caught(records):
    """Two records' places swapped in one term's postings (counts kept, order kept): the
    term proposes a record that does not hold it."""
    def move(meta, arrays):
        slot = strings(arrays, "terms").index("garden")
        lo, hi = (int(x) for x in arrays["postings_offsets"][slot:slot + 2])
        positions = arrays["positions"]
        taken = set(positions[lo:hi].tolist())
        assert hi - lo >= 2
        positions[lo] = max(p for p in range(int(positions[lo + 1])) if p not in taken)

    reseal(records, move)
    same_as_the_records(records, ("garden", "garden dog"))


def test_offsets_pointed_at_another_line_are_caught(records):
    """Record p's offsets moved onto the next record's line (whole, valid): a query for p's
    own words returned that other record in p's place (old code)."""
    stored = open_store(records).read_all()
    p = next(i for i in range(1, 299) if stored[i].content != stored[i + 1].content
             and stored[i + 1].kind.value == "conversation")
    query = stored[p].content

    def point(meta, arrays):
        offsets = arrays["offsets"]
        offsets[p], offsets[p + 1] = offsets[p + 1], offsets[p + 2]

    reseal(records, point)
    same_as_the_records(records, (query, "dog shelter"))
    assert stored[p].memory_id in {h["memory_id"] for h in answer(records, query, "bm25")}


def test_swapped_memory_ids_are_caught(records):
    def swap(meta, arrays):
        ids = strings(arrays, "memory_ids")
        ids[3], ids[4] = ids[4], ids[3]
        put_strings(arrays, "memory_ids", ids)

    reseal(records, swap)
    same_as_the_records(records)


def test_a_changed_count_or_length_is_caught(records):
    def inflate(meta, arrays):
        slot = strings(arrays, "terms").index("shelter")
        arrays["counts"][int(arrays["postings_offsets"][slot])] += 5
        arrays["max_counts"][slot] += 5

    reseal(records, inflate)
    same_as_the_records(records, ("shelter", "dog shelter"))


def test_a_lie_found_at_a_hit_rebuilds_and_rewrites_the_sidecar(records):
    def rename(meta, arrays):
        terms = strings(arrays, "terms")
        terms[terms.index("dog")] = "cat"
        put_strings(arrays, "terms", terms)

    reseal(records, rename)
    e = engine(records)
    assert e.recall("cat").hits == ()
    assert e.index.sidecar_status.startswith("rebuilt: distrusted")
    assert len(e.recall("dog").hits) == 5  # the same engine now answers from the truth
    fresh = engine(records)
    assert fresh.recall("dog").hits and fresh.index.sidecar_status == "loaded"
    assert "cat" not in fresh.index._base_slots  # the rewritten sidecar is the records'


def test_the_limit_a_hidden_record_stays_hidden(records):
    """What a check of the hits cannot see: 'dog' renamed away hides the dog records from
    'dog' (nothing proposes them, so nothing reads them). The module docstring of
    labmem.recall.index names this limit; a full check would read every record."""
    def rename(meta, arrays):
        terms = strings(arrays, "terms")
        terms[terms.index("dog")] = "cat"
        put_strings(arrays, "terms", terms)

    reseal(records, rename)
    assert truth(records, "dog", "bm25") and answer(records, "dog", "bm25") == []


# -- 4. a write's duplicate check never trusts a cache ---------------------------------

@pytest.mark.parametrize("batch", [False, True])
def test_an_id_the_sidecar_hides_is_still_a_duplicate(records, batch):
    """'m-00007' renamed in the sidecar's ids: the append stored it a second time, and
    every later read of the file failed ('stored twice') — for good (old code)."""
    def hide(meta, arrays):
        ids = strings(arrays, "memory_ids")
        ids[7] = "m-99999"
        put_strings(arrays, "memory_ids", ids)

    reseal(records, hide)
    before = records.read_bytes()
    draft = {**drafts(0, 1, "x")[0], "memory_id": "m-00007"}
    with pytest.raises(RemoteMemoryDuplicateError):
        if batch:
            open_store(records).append_many([drafts(950, 1, "ok")[0], draft])
        else:
            open_store(records).append(**draft)
    assert records.read_bytes() == before
    assert len(open_store(records).read_all()) == 321  # still readable
    stored = open_store(records).append(**{**draft, "memory_id": "m-99999"})
    assert stored.memory_id == "m-99999"  # an id the sidecar claims is not a duplicate


def test_a_sidecar_covering_part_of_a_line_is_not_taken_as_the_prefix(records):
    """covered_bytes moved into the middle of a line (its CRC recomputed, as an attacker
    would): the append used to read a line fragment and blame the records file."""
    data = records.read_bytes()

    def cut(meta, arrays):
        meta["covered_bytes"] -= 10
        meta["covered_crc32"] = zlib.crc32(data[:meta["covered_bytes"]])

    reseal(records, cut)
    stored = open_store(records).append(**drafts(960, 1, "y")[0])
    assert len(open_store(records).read_all()) == 322 and stored.memory_id == "y-00960"


def test_a_large_batch_checks_every_id_against_the_records(records):
    def hide(meta, arrays):
        ids = strings(arrays, "memory_ids")
        ids[7] = "m-99999"
        put_strings(arrays, "memory_ids", ids)

    reseal(records, hide)
    batch = [*drafts(1000, 40, "big"), {**drafts(0, 1, "x")[0], "memory_id": "m-00007"}]
    with pytest.raises(RemoteMemoryDuplicateError):
        open_store(records).append_many(batch)


# -- 4. malformed caches that pass their checksums are rebuilt -------------------------

def _drop(name):
    return lambda meta, arrays: arrays.pop(name)


MALFORMED = {
    "no records count": lambda m, a: m.pop("records"),
    "records as text": lambda m, a: m.update(records="321"),
    "negative total": lambda m, a: m.update(total_length=-1),
    "more searched than records": lambda m, a: m.update(searched_records=10**6),
    "no counts array": _drop("counts"),
    "no bits array": _drop("bits"),
    "short lengths": lambda m, a: a.update(lengths=a["lengths"][:10]),
    "short offsets": lambda m, a: a.update(offsets=a["offsets"][:-3]),
    "times as integers": lambda m, a: a.update(captured_at=a["captured_at"].astype(np.int64)),
    "position past the end": lambda m, a: a["positions"].__setitem__(
        int(a["postings_offsets"][slot_of(a, "dog") + 1]) - 1, 4_000_000),
    "postings bound past the end": lambda m, a: a["postings_offsets"].__setitem__(
        slot_of(a, "dog") + 1, 10**9),
    "postings bounds falling": lambda m, a: a["postings_offsets"].__setitem__(
        slot_of(a, "dog"), 0),
    "counts of zero": lambda m, a: a["counts"].__setitem__(slice(None), 0),
    "bits slot out of range": lambda m, a: a["bits_slots"].__setitem__(0, 10**6),
    "terms not JSON": lambda m, a: put_bytes(a, "terms", b"not json"),
    "terms not strings": lambda m, a: put_bytes(a, "terms", b"[1,2,3]"),
    "terms too few": lambda m, a: put_strings(a, "terms", strings(a, "terms")[:-2]),
    "terms nested deep": lambda m, a: put_bytes(a, "terms", deep_text().encode()),
    "ids not JSON": lambda m, a: put_bytes(a, "memory_ids", b'["m-1", "m'),
    "ids too few": lambda m, a: put_strings(a, "memory_ids", strings(a, "memory_ids")[:5]),
    "ids nested deep": lambda m, a: put_bytes(a, "memory_ids", deep_text().encode()),
    "array of objects": lambda m, a: a.update(lengths=np.array([None] * 321, dtype=object)),
}


def slot_of(arrays, term):
    return strings(arrays, "terms").index(term)


def put_bytes(arrays, name, data):
    arrays[name] = np.frombuffer(data, dtype=np.uint8)


@pytest.mark.parametrize("change", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_sidecar_is_rebuilt_never_a_raw_error(records, change):
    try:
        reseal(records, change)
    except (TypeError, ValueError):  # numpy cannot even write an object array as bytes
        pytest.skip("not a sidecar numpy can write")
    same_as_the_records(records, ("dog shelter", "garden"))
    draft = {**drafts(0, 1, "x")[0], "memory_id": "m-00007"}
    with pytest.raises(RemoteMemoryDuplicateError):
        open_store(records).append(**draft)


def test_a_sidecar_header_nested_deep_is_refused_not_a_recursion_error(records):
    side = sidecar_path(records)
    data = side.read_bytes()
    length, = struct.unpack_from("<I", data, 8)
    header = data[16:16 + length].rstrip(b" ")
    deep = header.replace(b'{"meta":{', b'{"meta":{"deep":' + deep_text().encode() + b",", 1)
    side.write_bytes(data[:8] + struct.pack("<II", len(deep), zlib.crc32(deep)) + deep
                     + data[16 + length:])
    e = engine(records)
    assert [h.to_dict() for h in e.recall("dog shelter").hits] == truth(records, "dog shelter",
                                                                       "bm25")
    assert "damaged header" in e.index.sidecar_status


@pytest.mark.parametrize("stamp", [deep_text().encode(), b'{"stamp": "[]", "crc32": 1}',
                                   b'{"sidecar": [1], "records": [2]}', b"\xff\xfe"])
def test_a_damaged_or_deep_stamp_is_never_trusted_nor_a_crash(records, stamp):
    stamp_path(records).write_bytes(stamp)
    e = engine(records)
    e.recall("dog")
    assert e.index.sidecar_status == "loaded" and e.index.sidecar_proof == "checksums"


def test_a_stamp_is_trusted_only_with_its_own_checksum(records):
    """A stamp in the old form (no checksum) that names the two files as they are now is
    not taken: a stamp is only read with a CRC-32 of its own bytes."""
    from labmem.core.storage import file_signature

    side, recs = file_signature(sidecar_path(records)), file_signature(records)
    stamp_path(records).write_text(json.dumps({"sidecar": list(side), "records": list(recs)}))
    e = engine(records)
    e.recall("dog")
    assert e.index.sidecar_proof == "checksums"


# -- the analyzed-groups companion ------------------------------------------------------

def companion(path):
    found = sorted(sidecar_path(path).parent.glob(sidecar_path(path).name + ".*"))
    found = [p for p in found if not p.name.endswith((".verified", ".tmp"))]
    assert found, "the contextual scorer writes its companion"
    return found[0]


def test_a_companion_head_nested_deep_is_recomputed_not_a_crash(records):
    path = companion(records)
    _, _, body = path.read_bytes().partition(b"\n")
    path.write_bytes(deep_text().encode() + b"\n" + body)
    same_as_the_records(records, scorers=("contextual",))


@pytest.mark.parametrize("head", [b'{"version": 2}', b'{"version": 2, "sidecar": 5}', b"[]",
                                  b'{"version":2,"sidecar":[],"crc32":0,"arrays":{"x":[0,"O",1]}}'])
def test_a_malformed_companion_head_is_recomputed(records, head):
    path = companion(records)
    _, _, body = path.read_bytes().partition(b"\n")
    path.write_bytes(head + b"\n" + body)
    same_as_the_records(records, scorers=("contextual",))


def test_a_companion_group_naming_other_surfaces_cannot_change_an_answer(records):
    """The surface 'dog' added to the group of the analyzed term 'garden', sealed with
    the companion's own CRC-32: 'garden' then also proposed the dog records, which hold
    no 'garden' (old code)."""
    path = companion(records)
    head, _, body = path.read_bytes().partition(b"\n")
    meta = json.loads(head)
    arrays = {k: np.frombuffer(body, np.dtype(d), c, o).copy()
              for k, (o, d, c) in meta["arrays"].items()}
    from labmem.recall.sidecar import PackedStrings

    def words(prefix):
        text = arrays[prefix + "utf8"].tobytes()
        return [text[a:b].decode() for a, b in zip(arrays[prefix + "starts"],
                                                    arrays[prefix + "ends"], strict=True)]

    surfaces, ends = words("surfaces_"), arrays["group_ends"].astype(np.int64)
    at = surfaces.index("garden")
    group = int(np.searchsorted(ends, at, side="right"))
    surfaces.insert(at, "dog")
    ends[group:] += 1
    arrays.update(PackedStrings.of(surfaces).arrays("surfaces_"), group_ends=ends)
    parts, layout, offset = [], {}, 0
    for key, values in arrays.items():
        data = np.ascontiguousarray(values).tobytes()
        layout[key] = [offset, values.dtype.str, int(values.size)]
        parts.append(data + b"\0" * (-len(data) % 8))
        offset += len(parts[-1])
    body = b"".join(parts)
    meta.update(arrays=layout, crc32=zlib.crc32(body))
    path.write_bytes(json.dumps(meta).encode() + b"\n" + body)
    same_as_the_records(records, ("garden", "dog", "garden shelter"), ("contextual",))


# -- SQLite: postings copied across scopes, damaged totals -----------------------------

SOURCE = {"source_id": "chat-1", "source_type": "chat", "title": "storage chat",
          "captured_at": "2026-07-01T00:00:00Z"}
NOW = "2026-08-01T12:00:00Z"


def sqlite_store(path, user):
    return SqliteMemoryStore(path, user_id=user, clock=FixedClock(NOW))


@pytest.fixture
def shared(tmp_path):
    path = tmp_path / "shared.db"
    with sqlite_store(path, "alice") as alice:
        alice.append(kind="conversation", content="We chose WAL mode for the SQLite store",
                     summary="storage decision", source=SOURCE)
    with sqlite_store(path, "bob") as bob:
        bob.append(kind="conversation", content="Bob walks the dog at noon", summary="",
                   source={**SOURCE, "source_id": "chat-b"})
    return path


@pytest.mark.parametrize("scorer", ("teaching", "bm25", "bm25_recency", "contextual"))
def test_alices_postings_copied_under_bobs_scope_are_caught(shared, scorer):
    """Bob's recall of 'wal' returned bob's dog note, which holds no 'wal' (old code)."""
    bob = sqlite_store(shared, "bob")
    with sqlite3.connect(shared) as db:
        db.execute("INSERT INTO postings (user_scope, term, segment, size, data) "
                   "SELECT ?, term, segment, size, data FROM postings "
                   "WHERE user_scope = ? AND term = 'wal'",
                   (bob.user_scope, sqlite_store(shared, "alice").user_scope))
    try:
        hits = RecallEngine(bob, scorer=scorer).recall("wal").hits
    except RemoteMemoryCorruptionError as exc:
        assert "postings do not match" in str(exc)
    else:  # (the contextual scorer finds 'wal' through bob's vocabulary: not there)
        assert hits == ()


@pytest.mark.parametrize("value", ["many", -3, 2.5, b"\x01"])
@pytest.mark.parametrize("column", ["records", "conversation_records", "total_length"])
def test_scope_stats_that_are_not_counts_are_corruption_not_raw_errors(shared, column, value):
    with sqlite3.connect(shared) as db:
        db.execute(f"UPDATE scope_stats SET {column} = ?", (value,))
    store = sqlite_store(shared, "alice")
    for call in (lambda: RecallEngine(store).recall("wal"), lambda: len(store),
                 lambda: store.append(kind="conversation", content="more", summary="",
                                      source=SOURCE)):
        with pytest.raises(RemoteMemoryCorruptionError, match="scope_stats"):
            call()


# -- the MMU fold snapshot ----------------------------------------------------------------

MMU_NOW = "2026-03-01T00:00:00Z"


def mmu_service(root, snapshot=True):
    return FileMemoryService(root, clock=FixedClock(MMU_NOW),
                             snapshot_lines=1 if snapshot else None)


def mmu_history(root):
    svc = FileMemoryService(root, clock=FixedClock("2026-01-01T00:00:00Z"),
                            snapshot_lines=None)
    for i in range(12):
        svc.remember("semantic", scope="alice", title=f"billing {i}",
                     text=f"Billing fact {i}: the invoice port is {18000 + i}.",
                     outcome="succeeded", evidence=["ev-1"], source_kind="tool_observed",
                     origin_key=f"b{i}", importance=0.1 if i == 11 else 0.5)
    wal = svc.remember("semantic", scope="bob", title="wal", text="WAL mode is on.",
                       outcome="succeeded", evidence=["ev-1"], source_kind="tool_observed",
                       origin_key="wal")
    svc.forget(wal.record_id, scope="bob")
    snap = FileMemoryService(root, clock=FixedClock(MMU_NOW), snapshot_lines=10**9)
    snap.snapshot_lines = 1
    assert snap.save_snapshot()
    return wal.record_id


def reseal_fold(root, change):
    path = snapshot_path(root / "records.jsonl")
    meta, arrays = read_arrays(path, FOLD_MAGIC)
    meta, arrays = dict(meta), {name: np.array(a) for name, a in arrays.items()}
    change(arrays)
    write_arrays(path, FOLD_MAGIC, meta, arrays)


def mmu_answers(svc):
    mmu = ContextMMU(svc, token_budget=60, candidate_limit=4, warm_top_k=2,
                     clock=FixedClock(MMU_NOW))
    return (svc.explain_query("wal mode", 5, scope="bob"),
            svc.explain_query("billing invoice port", 5, scope="alice"),
            mmu.recall("billing invoice port", scope="alice", now=MMU_NOW))


def resurrect(wal_id, *, older_line):
    """The forgotten record's row marked current and alive, its terms posted again; with
    ``older_line`` its latest line is also pointed at the line before the forget."""
    def change(arrays):
        ids = json.loads(arrays["ids"].tobytes())
        row = ids.index(wal_id)
        arrays["status"][row] = STATUSES.index("provisional")
        arrays["alive"][row] = 1
        if older_line:
            arrays["latest"][row] -= 1
        terms = json.loads(arrays["terms"].tobytes())
        for word in ("wal", "mode"):
            terms.append(word)
            arrays["postings"] = np.append(arrays["postings"], np.int32(row))
            arrays["term_starts"] = np.append(arrays["term_starts"],
                                              arrays["term_starts"][-1] + 1)
        arrays["terms"] = np.frombuffer(json.dumps(terms).encode(), np.uint8)
    return change


def test_a_forgotten_record_pointed_at_its_older_line_is_not_resurrected(tmp_path):
    """Status, liveness, postings and latest line all rewritten: bob's recall returned
    the forgotten 'WAL mode is on.' (old code). Now the snapshot is refused at open."""
    wal_id = mmu_history(tmp_path)
    reseal_fold(tmp_path, resurrect(wal_id, older_line=True))
    svc = mmu_service(tmp_path)
    assert svc.snapshot_state.startswith("refused")
    assert mmu_answers(svc) == mmu_answers(mmu_service(tmp_path, snapshot=False))
    assert svc.recall_query("wal mode", 5, scope="bob") == ()


def test_a_forgotten_record_marked_current_is_refused_when_returned(tmp_path):
    wal_id = mmu_history(tmp_path)
    reseal_fold(tmp_path, resurrect(wal_id, older_line=False))
    svc = mmu_service(tmp_path)
    with pytest.raises(MemoryCorruptionError, match="lied"):
        svc.recall_query("wal mode", 5, scope="bob")
    assert not snapshot_path(tmp_path / "records.jsonl").exists()  # the lie is removed
    again = mmu_service(tmp_path)  # and the next open folds the log
    assert again.recall_query("wal mode", 5, scope="bob") == ()


def test_a_changed_importance_cannot_change_what_the_mmu_returns(tmp_path):
    """Record 12's importance raised from 0.1 to 1.0 in the snapshot: the Context MMU paged
    it in ahead of the others (old code). Now the record it returns is read from the log
    and the lie refused (and removed); the next open answers from the log."""
    mmu_history(tmp_path)
    plain = mmu_answers(mmu_service(tmp_path, snapshot=False))

    def promote(arrays):
        ids = json.loads(arrays["ids"].tobytes())
        arrays["importance"][ids.index("alice:m-000012")] = 1.0
        arrays["salience"][ids.index("alice:m-000012")] = 1.0
        arrays["utility"][ids.index("alice:m-000012")] = 1.0

    reseal_fold(tmp_path, promote)
    svc = mmu_service(tmp_path)
    try:
        answers = mmu_answers(svc)
    except MemoryCorruptionError as exc:
        assert "lied" in str(exc)
        answers = mmu_answers(mmu_service(tmp_path))
    assert answers == plain


MALFORMED_FOLD = {
    "status code out of range": lambda a: a["status"].__setitem__(0, 77),
    "type code out of range": lambda a: a["memory_type"].__setitem__(0, 9),
    "importance above one": lambda a: a["importance"].__setitem__(0, 7.5),
    "history past the rows": lambda a: a["history"].__setitem__(0, 10**6),
    "postings past the rows": lambda a: a["postings"].__setitem__(0, 10**6),
    "term starts short": lambda a: a.update(term_starts=a["term_starts"][:1]),
    "alive short": lambda a: a.update(alive=a["alive"][:2]),
    "ids not strings": lambda a: a.update(ids=np.frombuffer(b"[1,2]", np.uint8)),
    "ids nested deep": lambda a: a.update(ids=np.frombuffer(deep_text().encode(), np.uint8)),
    "tombstones deep": lambda a: a.update(
        tombstones=np.frombuffer(deep_text().encode(), np.uint8)),
    "claims deep": lambda a: a.update(claims=np.frombuffer(deep_text().encode(), np.uint8)),
}


@pytest.mark.parametrize("change", MALFORMED_FOLD.values(), ids=MALFORMED_FOLD.keys())
def test_a_malformed_fold_snapshot_is_refused_never_a_raw_error(tmp_path, change):
    mmu_history(tmp_path)
    reseal_fold(tmp_path, change)
    svc = mmu_service(tmp_path)
    assert svc.snapshot_state.startswith("refused"), svc.snapshot_state
    assert mmu_answers(svc) == mmu_answers(mmu_service(tmp_path, snapshot=False))


@pytest.mark.parametrize("part", ["strings", "terms"])
def test_a_lazily_read_fold_part_nested_deep_is_a_labmem_error(tmp_path, part):
    """The string columns and the term list are read on first need: nested 100,000 deep
    they are a labmem error (or refused), never a RecursionError."""
    mmu_history(tmp_path)
    reseal_fold(tmp_path, lambda a: a.update(
        {part: np.frombuffer(deep_text().encode(), np.uint8)}))
    svc = mmu_service(tmp_path)
    try:
        mmu_answers(svc)
    except LabmemError:
        pass


def test_a_forgotten_record_marked_current_is_refused_by_key_too(tmp_path):
    """The same lie asked for by id (``recall_key``): the record's line is read and
    compared before it is returned, so a forgotten record never comes back by key."""
    wal_id = mmu_history(tmp_path)
    reseal_fold(tmp_path, resurrect(wal_id, older_line=False))
    svc = mmu_service(tmp_path)
    with pytest.raises(MemoryCorruptionError, match="lied"):
        svc.recall_key(wal_id, scope="bob")
    assert not snapshot_path(tmp_path / "records.jsonl").exists()


MISSHAPEN_CLAIMS = {
    "origin not three columns": {"origin": [[]], "forgotten": [[], [], []], "pending": []},
    "columns of unequal length": {"origin": [["alice"], [], []], "forgotten": [[], [], []],
                                  "pending": []},
    "an id that is a number": {"origin": [["alice"], ["b1"], [7]],
                               "forgotten": [[], [], []], "pending": []},
    "pending rows of three": {"origin": [[], [], []], "forgotten": [[], [], []],
                              "pending": [["alice", "b1", "text"]]},
    "no pending key": {"origin": [[], [], []], "forgotten": [[], [], []]},
    "a list, not an object": [1, 2, 3],
}


@pytest.mark.parametrize("claims", MISSHAPEN_CLAIMS.values(), ids=MISSHAPEN_CLAIMS.keys())
def test_misshapen_claim_maps_are_a_named_corruption_never_a_raw_error(tmp_path, claims):
    """The claim maps are read on the first write (lazily): checksummed maps of the wrong
    shape raised a raw ``TypeError``/``ValueError`` there. Now: the fold's corruption,
    naming the fix, nothing written; deleting the cache, as it says, folds the log again."""
    mmu_history(tmp_path)
    reseal_fold(tmp_path, lambda a: a.update(
        claims=np.frombuffer(json.dumps(claims).encode(), np.uint8)))
    svc = mmu_service(tmp_path)
    lines = (tmp_path / "records.jsonl").read_bytes()
    with pytest.raises(MemoryCorruptionError, match="delete it and open the service again"):
        svc.remember("semantic", scope="alice", title="new", text="A new fact.",
                     outcome="succeeded", evidence=["ev-2"], source_kind="tool_observed",
                     origin_key="new")
    assert (tmp_path / "records.jsonl").read_bytes() == lines
    snapshot_path(tmp_path / "records.jsonl").unlink()
    fresh = mmu_service(tmp_path)
    assert fresh.remember("semantic", scope="alice", title="new", text="A new fact.",
                          outcome="succeeded", evidence=["ev-2"], source_kind="tool_observed",
                          origin_key="new").record_id == "alice:m-000013"
