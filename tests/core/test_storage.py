"""Shared storage: JSONL follow-reading, torn tails, corruption, atomic snapshots."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from labmem.core.errors import CorruptionError, InvalidInputError, LabmemError
from labmem.core.storage import JsonlLog, encode_json_line, read_snapshot, write_snapshot


def plain_log(path):
    return JsonlLog(path, decode=lambda line, obj: obj)


def append(log, record):
    with log.locked():
        log.refresh()
        return log.append(record)


def test_append_and_follow(tmp_path):
    path = tmp_path / "log.jsonl"
    writer, reader = plain_log(path), plain_log(path)
    assert reader.refresh() == []
    assert append(writer, {"n": 1}) == 1
    assert append(writer, {"n": 2, "text": "line\u2028separator 记忆"}) == 2
    assert reader.refresh() == [{"n": 1}, {"n": 2, "text": "line\u2028separator 记忆"}]
    assert reader.refresh() == []  # nothing new: nothing re-read
    append(writer, {"n": 3})
    before = reader.bytes_read
    assert reader.refresh() == [{"n": 3}]
    assert reader.bytes_read - before == len(encode_json_line({"n": 3}))


def test_own_appends_are_not_read_back(tmp_path):
    log = plain_log(tmp_path / "log.jsonl")
    for n in range(50):
        append(log, {"n": n})
    assert log.bytes_read == 0 and log.line_count == 50


def test_torn_tail_is_ignored_then_repaired(tmp_path):
    path = tmp_path / "log.jsonl"
    append(plain_log(path), {"n": 1})
    with open(path, "ab") as handle:
        handle.write(b'{"n": 2, "half')  # a writer died mid-line
    log = plain_log(path)
    assert log.refresh() == [{"n": 1}]
    assert log.refresh() == []
    append(log, {"n": 3})
    assert path.read_bytes().count(b"\n") == 2
    assert plain_log(path).refresh() == [{"n": 1}, {"n": 3}]


@pytest.mark.parametrize("bad_line", [b"not json", b"[1, 2]", b"\xff\xfe"])
def test_complete_bad_line_is_corruption_naming_line(tmp_path, bad_line):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"n": 1}\n' + bad_line + b"\n" + b'{"n": 3}\n')
    log = plain_log(path)
    for _ in range(2):  # reported on every read, not once
        with pytest.raises(CorruptionError, match="log.jsonl line 2"):
            log.refresh()


def test_append_refuses_when_reader_is_behind(tmp_path):
    path = tmp_path / "log.jsonl"
    append(plain_log(path), {"n": 1})
    stale = plain_log(path)
    with pytest.raises(LabmemError, match="refresh"):
        stale.append({"n": 2})
    assert plain_log(path).refresh() == [{"n": 1}]


def test_unserializable_record_writes_nothing(tmp_path):
    path = tmp_path / "log.jsonl"
    with pytest.raises(InvalidInputError, match="record"):
        append(plain_log(path), {"x": object()})
    with pytest.raises(InvalidInputError, match="record"):
        append(plain_log(path), {"x": float("nan")})
    assert not path.exists()


def test_append_many_writes_a_batch_the_reader_follows(tmp_path):
    path = tmp_path / "log.jsonl"
    writer, reader = plain_log(path), plain_log(path)
    append(writer, {"n": 0})
    with writer.locked():
        writer.refresh()
        assert writer.append_many([{"n": 1}, {"n": 2, "text": "记忆"}, {"n": 3}]) == 4
        assert writer.append_many([]) == 4  # nothing to write: nothing written
    assert writer.line_count == 4 and writer.bytes_read == 0
    assert [r["n"] for r in reader.refresh()] == [0, 1, 2, 3]
    assert path.read_bytes() == b"".join(
        encode_json_line(r) for r in ({"n": 0}, {"n": 1}, {"n": 2, "text": "记忆"}, {"n": 3}))


def test_append_many_of_nothing_creates_no_file(tmp_path):
    path = tmp_path / "log.jsonl"
    assert plain_log(path).append_many([]) == 0
    assert not path.exists()


def test_append_many_with_one_bad_record_writes_nothing(tmp_path):
    path = tmp_path / "log.jsonl"
    append(plain_log(path), {"n": 0})
    before = path.read_bytes()
    log = plain_log(path)
    log.refresh()
    with pytest.raises(InvalidInputError, match="record"):
        log.append_many([{"n": 1}, {"x": object()}])
    assert path.read_bytes() == before and log.line_count == 1


def test_append_many_cuts_a_torn_tail_first(tmp_path):
    path = tmp_path / "log.jsonl"
    append(plain_log(path), {"n": 0})
    with open(path, "ab") as handle:
        handle.write(b'{"n": "torn')
    log = plain_log(path)
    log.refresh()
    with log.locked():
        log.append_many([{"n": 1}, {"n": 2}])
    assert plain_log(path).refresh() == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert path.read_bytes().count(b"\n") == 3


def test_shrunk_file_is_detected(tmp_path):
    path = tmp_path / "log.jsonl"
    log = plain_log(path)
    append(log, {"n": 1})
    append(log, {"n": 2})
    path.write_bytes(b'{"n": 1}\n')
    with pytest.raises(CorruptionError, match="shrank"):
        log.refresh()


WRITER = textwrap.dedent("""
    import sys
    from labmem.core.storage import JsonlLog
    log = JsonlLog(sys.argv[1], decode=lambda line, obj: obj)
    n = 0
    while True:
        with log.locked():
            log.refresh()
            log.append({"n": n, "pad": "x" * 5000})
        n += 1
        if n == 20:
            print("ready", flush=True)
""")


def test_killed_writer_leaves_a_readable_log(tmp_path):
    """SIGKILL a writer mid-stream; every complete line survives and the log stays usable."""
    path = tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    records = plain_log(path).refresh()
    assert len(records) >= 20
    assert [r["n"] for r in records] == list(range(len(records)))
    log = plain_log(path)
    log.refresh()
    append(log, {"n": "after"})
    assert plain_log(path).refresh()[-1] == {"n": "after"}


# -- snapshots -------------------------------------------------------------------------

def test_snapshot_round_trip_and_missing(tmp_path):
    path = tmp_path / "state.json"
    assert read_snapshot(path) is None
    write_snapshot(path, {"a": 1, "text": "记忆"})
    assert read_snapshot(path) == {"a": 1, "text": "记忆"}
    write_snapshot(path, {"a": 2})
    assert read_snapshot(path) == {"a": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_failed_snapshot_leaves_previous_file_byte_identical(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    write_snapshot(path, {"a": 1})
    before = path.read_bytes()
    with pytest.raises(InvalidInputError):
        write_snapshot(path, {"a": object()})
    assert path.read_bytes() == before

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_snapshot(path, {"a": 2})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_corrupt_snapshot_is_reported(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{half")
    with pytest.raises(CorruptionError, match="state.json"):
        read_snapshot(path)


# -- swap_into_place: a projection rewritten without a rename over the old file -----------

def test_swap_puts_the_new_file_in_place_and_removes_the_old(tmp_path):
    from labmem.core.storage import swap_into_place
    target, temp = tmp_path / "MEMORY.md", tmp_path / ".MEMORY.md.x.tmp"
    target.write_text("old")
    temp.write_text("new")
    with open(target) as reader:  # a reader that opened the old version before the swap
        swap_into_place(str(temp), target)
        assert reader.read() == "old"  # keeps reading the old version, whole
    assert target.read_text() == "new" and not temp.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


def test_swap_without_an_old_file_or_without_support_renames(tmp_path, monkeypatch):
    import labmem.core.storage as storage
    target, temp = tmp_path / "MEMORY.md", tmp_path / ".MEMORY.md.x.tmp"
    temp.write_text("first")
    storage.swap_into_place(str(temp), target)  # nothing to exchange with yet
    assert target.read_text() == "first" and not temp.exists()
    monkeypatch.setattr(storage, "_exchange_function", lambda: None)  # not Linux
    temp.write_text("second")
    storage.swap_into_place(str(temp), target)
    assert target.read_text() == "second" and not temp.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_swap_exchanges_rather_than_renames_over(tmp_path, monkeypatch):
    """The point of it: os.replace is not called when the C library can exchange."""
    import labmem.core.storage as storage
    if storage._exchange_function() is None:
        pytest.skip("this C library has no renameat2")
    target, temp = tmp_path / "MEMORY.md", tmp_path / ".MEMORY.md.x.tmp"
    target.write_text("old")
    temp.write_text("new")
    monkeypatch.setattr(storage.os, "replace", lambda *a: pytest.fail("renamed over"))
    storage.swap_into_place(str(temp), target)
    assert target.read_text() == "new"


def test_swap_onto_something_that_is_not_a_plain_file_behaves_like_a_rename(tmp_path):
    """A directory in the way is refused as os.replace refuses it, and nothing moves."""
    from labmem.core.storage import swap_into_place
    target, temp = tmp_path / "MEMORY.md", tmp_path / ".MEMORY.md.x.tmp"
    target.mkdir()
    temp.write_text("new")
    with pytest.raises(OSError):
        swap_into_place(str(temp), target)
    assert target.is_dir() and temp.read_text() == "new"
