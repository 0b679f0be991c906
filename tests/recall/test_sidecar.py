"""The JSONL index's sidecar: results byte-identical with and without it, and every way a
sidecar can be wrong (missing, torn, damaged, another file or scope, older, newer, left by
a crashed writer) detected and rebuilt — never trusted."""

import os
import shutil
import signal
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.recall.sidecar import PackedStrings, sidecar_path, string_key, string_keys
from labmem.recall.store import RemoteMemoryCorruptionError, RemoteMemoryStore
from tests.procs import _SPAWN, running
from tests.recall.sidecar_workers import (
    NOW,
    drafts,
    engine,
    open_store,
    play_role,
    rewrite_sidecar_forever,
    write_records,
)

SCORERS = ["teaching", "bm25", "bm25_recency", "contextual"]
QUERIES = ["dog shelter may", "记忆 sidecar", "Ana crash thread", "adopted 1 july 2026",
           "absent words only"]
def answers(path, *, sidecar=True):
    """Every scorer's JSON answer to every query, from a new engine (a cold open)."""
    out = {}
    for scorer in SCORERS:
        e = engine(path, scorer, sidecar=sidecar)
        out[scorer] = [e.recall(q, limit=4).to_json() for q in QUERIES]
    return out, e.index.sidecar_status


def status(path):
    e = engine(path)
    e.recall("dog", limit=1)
    return e.index.sidecar_status


@pytest.fixture
def records(tmp_path):
    return write_records(tmp_path / "records.jsonl", 120, 40)


def test_results_are_byte_identical_with_and_without_the_sidecar(records):
    plain, off = answers(records, sidecar=False)
    assert off == "off" and not sidecar_path(records).exists()
    built, first = answers(records)
    assert first == "loaded" and sidecar_path(records).exists()  # the 1st scorer wrote it
    loaded, again = answers(records)
    assert again == "loaded"
    assert plain == built == loaded


def test_a_loaded_sidecar_decodes_only_the_hits(records):
    status(records)  # writes it
    e = engine(records, "contextual")
    result = e.recall("dog shelter", limit=3)
    assert e.index.sidecar_status == "loaded"
    assert e.store.bytes_read == 0  # the store itself never decoded the file
    assert len(e.index._records) <= 3 + 6  # the hits (and nothing near the whole store)
    assert result.searched_records == 160


def test_records_appended_after_the_sidecar_extend_it(records):
    status(records)
    open_store(records).append_many(drafts(500, 30, "late"))
    e = engine(records)
    e.index.sidecar_min_records = 10_000  # keep the tail in memory only
    hits = e.recall("sidecar crash", limit=10)
    assert e.index.sidecar_status == "loaded" and e.index.records == 191
    assert hits.to_json() == engine(records, sidecar=False).recall("sidecar crash",
                                                                  limit=10).to_json()
    assert answers(records)[0] == answers(records, sidecar=False)[0]


def test_each_terms_kept_extremes_are_its_postings_extremes(records):
    """The sidecar's per-term (largest count, shortest record), extended by the records
    appended since, are what pruning would compute from the postings (its bounds)."""
    from labmem.recall.pruning import term_extremes

    status(records)
    late = drafts(500, 30, "late")
    for n, draft in enumerate(late[:6]):  # counts and lengths the base has not seen
        draft["content"] = " ".join(["dog"] * (9 + n) + ["zebra"] * (n + 1))
    open_store(records).append_many(late)
    e = engine(records)
    e.index.sidecar_min_records = 10_000  # keep the tail in memory only
    e.recall("dog", limit=1)
    index = e.index
    lengths = index.record_columns()[0]
    assert index.sidecar_status == "loaded" and index._postings  # base and tail
    for term in index.vocabulary():
        positions, counts = index.term_postings(term)
        assert index.term_extremes(term) == term_extremes(positions, counts, lengths), term
    assert index.term_extremes("no-such-term") is None


def test_kept_bits_are_the_records_of_each_common_term(records):
    """The sidecar keeps, for each term in 1/BITS_SHARE of the records or more, its records
    as bits; with the records appended since ORed in, they name exactly its postings."""
    import numpy as np

    from labmem.recall import index as index_module

    status(records)
    open_store(records).append_many(drafts(500, 30, "late"))
    e = engine(records)
    e.index.sidecar_min_records = 10_000  # keep the tail in memory only
    e.recall("dog", limit=1)
    index, kept, extended = e.index, 0, 0
    for term in index.vocabulary():
        positions, _ = index.term_postings(term)
        bits = index.term_bits(term)
        slot = index._base_slots.get(term)
        common = slot is not None and (len(index._base_postings(slot)[0])
                                       * index_module.BITS_SHARE >= index._base_records)
        assert (bits is not None) == common, term
        if bits is not None:
            kept += 1
            extended += positions[-1] >= index._base_records  # it has tail postings
            assert np.flatnonzero(np.unpackbits(bits)).tolist() == positions.tolist(), term
    assert kept >= 3 and extended >= 1


def test_a_long_tail_is_persisted(records):
    status(records)
    before = os.stat(sidecar_path(records)).st_ino
    open_store(records).append_many(drafts(500, 200, "late"))
    e = engine(records)
    e.recall("dog", limit=1)  # 200 new records ≥ the threshold: written again
    assert os.stat(sidecar_path(records)).st_ino != before
    covered = engine(records)
    covered.recall("dog", limit=1)
    assert covered.index._log.offset == os.path.getsize(records)
    assert answers(records)[0] == answers(records, sidecar=False)[0]


@pytest.mark.parametrize("cut", [0, 5, 20, 200, -1])
def test_a_torn_sidecar_is_rebuilt(records, cut):
    status(records)
    side = sidecar_path(records)
    data = side.read_bytes()
    side.write_bytes(data[:cut] if cut >= 0 else data[:-1])
    reason = status(records)
    assert reason.startswith("rebuilt: ") and ("torn" in reason or "magic" in reason)
    assert status(records) == "loaded"  # the rebuild wrote a good one
    assert answers(records)[0] == answers(records, sidecar=False)[0]


def test_each_refusal_names_its_reason(records, tmp_path):
    side = sidecar_path(records)
    assert status(records) == "rebuilt: missing"
    good = side.read_bytes()

    side.write_bytes(good[:-7])
    assert "torn" in status(records)

    damaged = bytearray(good)
    damaged[-3] ^= 0xFF  # a byte of the body
    side.write_bytes(bytes(damaged))
    assert "damaged" in status(records)

    side.write_bytes(b"not an index at all")
    assert "wrong magic" in status(records)

    other = tmp_path / "other" / "records.jsonl"  # same content, another file
    other.parent.mkdir()
    shutil.copy(records, other)
    shutil.copy(side, sidecar_path(other))
    assert "another file" in status(other)
    assert answers(other)[0] == answers(records, sidecar=False)[0]

    bob = RemoteMemoryStore(records, user_id="bob")
    from labmem.recall.sidecar import SidecarRefused, load_sidecar
    with pytest.raises(SidecarRefused, match="another user scope"):
        load_sidecar(records, user_scope=bob.user_scope)


def test_a_sidecar_newer_than_its_records_is_rebuilt(records):
    status(records)
    size = os.path.getsize(records)
    with open(records, "r+b") as handle:  # the same inode, cut back to fewer lines
        data = handle.read()
        handle.seek(0)
        handle.truncate(data.rfind(b"\n", 0, size // 2) + 1)
    assert "newer than the records" in status(records)
    assert answers(records)[0] == answers(records, sidecar=False)[0]


def test_records_changed_in_place_are_reread_in_full(records):
    status(records)
    data = bytearray(records.read_bytes())
    at = data.index(b"sidecar")
    data[at:at + 7] = b"SIDECAR"  # the same size, the same inode: only the checksum knows
    with open(records, "r+b") as handle:
        handle.write(data)
    assert "changed (checksum)" in status(records)
    assert answers(records)[0] == answers(records, sidecar=False)[0]


def test_a_corrupt_complete_line_still_raises(records):
    status(records)
    data = bytearray(records.read_bytes())
    data[data.index(b'"content"') + 1] = ord("{")  # break the JSON of line 1, same size
    with open(records, "r+b") as handle:
        handle.write(data)
    with pytest.raises(RemoteMemoryCorruptionError, match="line 1"):
        engine(records).recall("dog")


def test_a_corrupt_line_appended_after_the_sidecar_raises(records):
    status(records)
    with open(records, "ab") as handle:
        handle.write(b'{"not": "a record"}\n')
    with pytest.raises(RemoteMemoryCorruptionError, match="line 162"):
        engine(records).recall("dog")


def test_a_duplicate_id_appended_after_the_sidecar_raises(records):
    status(records)
    line = records.read_bytes().split(b"\n")[0] + b"\n"
    with open(records, "ab") as handle:  # line 1 again: its id is in the sidecar only
        handle.write(line)
    with pytest.raises(RemoteMemoryCorruptionError, match="stored twice"):
        engine(records).recall("dog")


def test_a_replaced_records_file_is_never_followed(records):
    status(records)
    copy = records.with_name("copy.jsonl")
    shutil.copy(records, copy)
    os.replace(copy, records)  # same bytes, new inode
    assert "another file" in status(records)


def test_a_temporary_file_left_by_a_crashed_writer_is_ignored_then_removed(records):
    status(records)
    side = sidecar_path(records)
    stale = side.with_name(f".{side.name}.crashed.tmp")
    stale.write_bytes(side.read_bytes()[:100])
    assert status(records) == "loaded"
    open_store(records).append_many(drafts(900, 200, "more"))
    status(records)  # writes again: the stale temporary goes
    assert not stale.exists()


def test_kill_9_during_a_sidecar_write(records):
    """A real child rewrites the sidecar in a loop; SIGKILL lands while a temporary file is
    being written. The sidecar on disk is then the old one or the new one, never torn."""
    open_store(records).append_many(drafts(1000, 3000, "big"))  # a write takes a while
    expected = answers(records, sidecar=False)[0]
    side = sidecar_path(records)
    killed_mid_write = 0
    for _ in range(5):
        started = _SPAWN.Event()
        child = _SPAWN.Process(target=rewrite_sidecar_forever, args=(str(records), started))
        child.start()
        assert started.wait(60)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _temporaries(side):
            time.sleep(0.001)
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        assert child.exitcode == -signal.SIGKILL
        killed_mid_write += bool(_temporaries(side))
        assert status(records) == "loaded"  # the file that is there is whole
        assert answers(records)[0] == expected
    assert killed_mid_write  # at least one kill really landed mid-write


def _temporaries(side):
    return [n for n in os.listdir(side.parent) if n.startswith(f".{side.name}.")]


def test_two_appenders_and_a_recaller(records):
    def args(i, sync):
        if i < 2:
            return ("append", str(records), f"w{i}", 15, 20, sync.start)
        return ("recall", str(records), sync.start, sync.results, 40)

    with running(play_role, args, workers=3, timeout=120) as sync:
        seen = sync.results.get(timeout=120)
    counts = [n for n, _ in seen]
    assert counts == sorted(counts)  # the recaller never saw the store go backwards
    assert all(len(set(ids)) == len(ids) for _, ids in seen)
    final = open_store(records)
    assert len(final) == 160 + 1 + 2 * 15 * 20  # every append landed, none twice
    assert answers(records)[0] == answers(records, sidecar=False)[0]


def test_an_unwritable_directory_only_means_no_sidecar(records):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    records.parent.chmod(0o500)
    try:
        e = engine(records)
        e.recall("dog")
        assert "not written" in e.index.sidecar_status
    finally:
        records.parent.chmod(0o700)
    assert NOW.year == 2026


# -- the stamp: a full check that passed, remembered by the two files' signatures --------

def settle(*paths, seconds=60):
    """Make files look written ``seconds`` ago (what a stamp needs: settled timestamps)."""
    for path in paths:
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 1_000_000_000))


def proof(path):
    e = engine(path)
    e.recall("dog", limit=1)
    return e.index.sidecar_status, e.index.sidecar_proof


def test_a_settled_pair_is_stamped_and_then_trusted_without_reading(records):
    from labmem.recall.sidecar import stamp_path
    status(records)  # writes the sidecar
    assert proof(records) == ("loaded", "checksums") and not stamp_path(records).exists()
    settle(records, sidecar_path(records))
    assert proof(records) == ("loaded", "checksums")  # checked in full, then stamped
    assert stamp_path(records).exists()
    assert proof(records) == ("loaded", "stamp")
    assert answers(records)[0] == answers(records, sidecar=False)[0]


def test_files_written_just_now_are_never_stamped(records):
    """Racy timestamps: a write in the same clock tick would not move the time, so a file
    younger than SETTLED_NS is checked in full every time."""
    from labmem.recall.sidecar import stamp_path
    status(records)
    for _ in range(3):
        assert proof(records) == ("loaded", "checksums")
    assert not stamp_path(records).exists()


@pytest.mark.parametrize("change", ["records in place", "sidecar in place", "append",
                                    "new sidecar"])
def test_a_stamp_never_vouches_for_a_file_written_after_it(records, change):
    status(records)
    settle(records, sidecar_path(records))
    proof(records)
    assert proof(records) == ("loaded", "stamp")
    side = sidecar_path(records)
    if change == "records in place":
        data = bytearray(records.read_bytes())
        at = data.index(b"sidecar")
        data[at:at + 7] = b"SIDECAR"  # same size, same inode: only the time moves
        with open(records, "r+b") as handle:
            handle.write(data)
        assert "changed (checksum)" in status(records)
    elif change == "sidecar in place":
        damaged = bytearray(side.read_bytes())
        damaged[-3] ^= 0xFF
        with open(side, "r+b") as handle:
            handle.write(damaged)
        assert "damaged" in status(records)
    elif change == "append":
        open_store(records).append_many(drafts(500, 3, "late"))
        assert proof(records)[1] == "checksums"
    else:
        before = side.stat().st_ino
        e = engine(records)
        e.index.refresh()
        e.index._persist()  # rewritten: a new inode, which the old stamp does not name
        assert side.stat().st_ino != before
        assert proof(records)[1] == "checksums"
    assert answers(records)[0] == answers(records, sidecar=False)[0]


def test_a_small_postings_cache_gives_the_same_answers(records, monkeypatch):
    """POSTINGS_CACHE_BYTES only bounds memory: terms dropped from it are read again."""
    import labmem.recall.index as index_module
    expected = answers(records, sidecar=False)[0]
    status(records)
    monkeypatch.setattr(index_module, "POSTINGS_CACHE_BYTES", 64)
    e = engine(records)
    got = [e.recall(q, limit=4).to_json() for q in QUERIES * 2]
    assert got == expected["bm25"] * 2
    assert len(e.index._cached) == 1  # everything but the last term was dropped


# -- the analyzer's groups, kept beside the sidecar ----------------------------------------

def companions(path):
    return sorted(p.name for p in path.parent.iterdir() if ".recall-index.english-" in p.name)


def test_the_english_groups_are_kept_and_reused(records, monkeypatch):
    import labmem.recall.analyzers as analyzers
    expected = answers(records, sidecar=False)[0]["contextual"]
    status(records)
    assert companions(records) == []
    assert answers(records)[0]["contextual"] == expected  # groups the vocabulary, keeps it
    assert len(companions(records)) == 1
    calls = []
    real = analyzers.EnglishAnalyzer.term
    monkeypatch.setattr(analyzers.EnglishAnalyzer, "term",
                        lambda self, surface: calls.append(surface) or real(self, surface))

    def analyzed_by_a_new_process():
        calls.clear()
        e = engine(records, "contextual")
        assert [e.recall(q, limit=4).to_json() for q in QUERIES] == expected
        return set(calls), set(e.index.vocabulary())

    kept, vocabulary = analyzed_by_a_new_process()
    (records.parent / companions(records)[0]).unlink()
    regrouped, _ = analyzed_by_a_new_process()
    assert vocabulary <= regrouped  # without it, every vocabulary term is analyzed again
    assert vocabulary - kept  # with it, terms outside the queries and dates are not
    assert len(companions(records)) == 1  # and it was written again


@pytest.mark.parametrize("damage", ["garbage", "another sidecar", "wrong shape"])
def test_a_companion_that_does_not_fit_is_ignored(records, damage):
    expected = answers(records, sidecar=False)[0]["contextual"]
    status(records)
    answers(records)
    (name,) = companions(records)
    kept = records.parent / name
    if damage == "garbage":
        kept.write_bytes(kept.read_bytes()[:-5])  # its checksum no longer matches
    elif damage == "another sidecar":
        head, _, body = kept.read_bytes().partition(b"\n")
        kept.write_bytes(head.replace(b"[", b"[1", 1) + b"\n" + body)
    else:
        import json
        import zlib
        body = json.dumps({"terms": 3, "groups": {"dog": "not a list"}}).encode()
        head = json.loads(kept.read_bytes().partition(b"\n")[0])
        head["crc32"] = zlib.crc32(body)
        kept.write_bytes(json.dumps(head).encode() + b"\n" + body)
    assert answers(records)[0]["contextual"] == expected


def test_distinct_groups_is_np_unique():
    import numpy as np
    from hypothesis import given
    from hypothesis import strategies as st

    from labmem.recall.index import distinct, distinct_groups

    @given(st.lists(st.integers(-5, 40), max_size=80))
    def check(values):
        array = np.array(values, dtype=np.int64)
        expected = np.unique(array, return_index=True, return_inverse=True)
        got = distinct_groups(array)
        for want, have in zip(expected, got, strict=True):
            assert np.array_equal(want, have)
        assert np.array_equal(distinct(array), expected[0])

    check()


# -- the keys PackedStrings.find sorts ------------------------------------------------------

_long_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(_long_texts, max_size=20))
def test_string_keys_at_once_are_each_strings_own_key(strings):
    packed = PackedStrings.of(strings)
    keys = string_keys(packed.arrays("x_")["x_utf8"], *(packed.arrays("x_")[name]
                                                       for name in ("x_starts", "x_ends")))
    assert keys.dtype == np.uint64
    assert [int(key) for key in keys] == [string_key(text.encode("utf-8")) for text in strings]


def test_find_tells_apart_strings_whose_keys_collide():
    # same first and last eight bytes and the same length: the same key, other strings
    strings = [f"prefix00{middle}suffix00" for middle in ("aaa", "bbb", "ccc", "aaa")]
    assert len({string_key(text.encode()) for text in strings}) == 1
    packed = PackedStrings.of(strings)
    assert [packed.find(text) for text in strings] == [0, 1, 2, 0]  # the first of twins
    assert packed.find("prefix00dddsuffix00") is None
    assert PackedStrings.of([]).find("") is None and PackedStrings.of([""]).find("") == 0


def test_both_checks_run_and_the_first_ones_error_wins():
    """The sidecar's body and the records' prefix are checked at once (two threads);
    whichever fails, the reason given is the one the sequential order would give."""
    from labmem.recall.sidecar import _both

    ran = []

    def body_bad():
        ran.append("body")
        raise ValueError("body")

    def records_bad():
        ran.append("records")
        raise KeyError("records")

    with pytest.raises(ValueError, match="body"):
        _both(body_bad, records_bad)
    assert sorted(ran) == ["body", "records"]
    with pytest.raises(KeyError, match="records"):
        _both(lambda: None, records_bad)
    with pytest.raises(ValueError, match="body"):
        _both(body_bad, lambda: None)
    _both(lambda: None, lambda: None)
