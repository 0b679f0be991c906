"""An append before any read takes the ids a recall sidecar vouches for (labmem.recall.store).

At 100,000 records the first append of a new process decoded every line to learn the
stored ids (2.8 s and 350 MiB); with a sidecar beside the file it decodes only the lines
the sidecar does not cover. Everything the store promised still holds: duplicates are
refused whichever part of the file holds the id, reads see every record, and a sidecar
that no longer describes the file is never trusted.
"""

from __future__ import annotations

import pytest

from labmem.recall.sidecar import sidecar_path
from labmem.recall.store import RemoteMemoryCorruptionError, RemoteMemoryDuplicateError
from tests.procs import run_processes
from tests.recall import workers
from tests.recall.sidecar_workers import PROFILE, drafts, engine, open_store, write_records


@pytest.fixture()
def records(tmp_path):
    """300 records, a profile and 20 more, a sidecar over them, then 7 appended after it."""
    path = write_records(tmp_path / "records.jsonl", 300, 20)
    engine(path).recall("dog")  # writes the sidecar
    assert sidecar_path(path).exists()
    open_store(path).append_many(drafts(500, 7, "late"))
    return path


def state(store):
    return ([r.to_dict() for r in store.read_all()], len(store),
            store.latest_profile().to_dict(), store.get("m-00007").to_dict())


def test_a_first_append_decodes_only_what_the_sidecar_does_not_cover(records):
    size = records.stat().st_size
    store = open_store(records)
    store.append_many(drafts(900, 1, "new"))
    assert store.bytes_read < size // 20  # the 7 lines after the sidecar, not 328
    assert state(store) == state(open_store(records))  # then reads see every record
    assert len(store) == 300 + 1 + 20 + 7 + 1


@pytest.mark.parametrize("memory_id", ["m-00007", "m-00319", "late-00503"])
def test_an_id_anywhere_in_the_file_is_refused_and_nothing_is_written(records, memory_id):
    before = records.read_bytes()
    draft = {**drafts(0, 1, "x")[0], "memory_id": memory_id}
    with pytest.raises(RemoteMemoryDuplicateError):
        open_store(records).append(**draft)
    with pytest.raises(RemoteMemoryDuplicateError):
        open_store(records).append_many([drafts(950, 1, "ok")[0], draft])
    assert records.read_bytes() == before


def test_a_sidecar_that_no_longer_describes_the_file_is_not_trusted(records):
    """Line 2's id rewritten in place to line 1's (same length): the sidecar's checksum no
    longer holds, so the append reads the whole file and finds the corruption."""
    lines = records.read_bytes().split(b"\n")
    assert b'"m-00001"' in lines[1]
    lines[1] = lines[1].replace(b'"m-00001"', b'"m-00000"', 1)
    records.write_bytes(b"\n".join(lines))
    with pytest.raises(RemoteMemoryCorruptionError, match="stored twice"):
        open_store(records).append(**drafts(960, 1, "y")[0])


def test_a_profile_appended_by_ids_is_still_the_latest_profile_read(records):
    store = open_store(records)
    newer = {**PROFILE, "memory_id": "profile-new",
             "source": {**PROFILE["source"], "captured_at": "2026-07-30T00:00:00Z"}}
    store.append(**newer)
    assert store.latest_profile().memory_id == "profile-new"


def test_concurrent_appends_of_one_id_before_any_read_store_exactly_one(records):
    lines = len(records.read_bytes().splitlines())
    outcomes = sorted(run_processes(
        workers.append_same_id,
        lambda i, s: (str(records), s.start, s.pause, False, s.results, False), 4))
    assert outcomes == ["duplicate"] * 3 + ["stored"]
    assert len(records.read_bytes().splitlines()) == lines + 1


def test_a_file_replaced_after_an_append_by_ids_is_refused_on_the_first_read(records):
    store = open_store(records)
    store.append_many(drafts(970, 1, "z"))
    copy = records.with_name("copy.jsonl")
    copy.write_bytes(records.read_bytes())
    copy.replace(records)  # the same bytes under another inode
    with pytest.raises(RemoteMemoryCorruptionError, match="replaced"):
        store.read_all()
