"""The memory tool's command log is evidence: each line carries a dense seq and the hash of
the line before, ``commands.head.json`` records the last seq and hash, and a log that does
not verify (a line removed, changed, inserted or appended by hand) is refused — above all
by ``undo``, which would otherwise write what the forged line says."""

from __future__ import annotations

import hashlib
import json

import pytest

from labmem.agents import MemoryDirectory, MemoryToolError
from labmem.agents.memory_files import (
    GENESIS,
    HEAD_NAME,
    LOG_NAME,
    MemoryLogCorruptionError,
    MemoryLogIntegrityError,
    line_hash,
)


def test_the_head_file_is_named_in_the_module():
    assert (LOG_NAME, HEAD_NAME) == ("commands.jsonl", "commands.head.json")


@pytest.fixture
def home(tmp_path):
    """A home whose log holds five commands: create, three edits, a view."""
    memories = MemoryDirectory(tmp_path, user_id="alice")
    memories.execute({"command": "create", "path": "/memories/n.md", "file_text": "v1\n"})
    for old, new in (("v1", "v2"), ("v2", "v3"), ("v3", "v4")):
        memories.execute({"command": "str_replace", "path": "/memories/n.md", "old_str": old,
                          "new_str": new})
    memories.execute({"command": "view", "path": "/memories/n.md"})
    return tmp_path


def log_path(home):
    return next(home.glob(f"memory-tool/*/{LOG_NAME}"))


def lines(home):
    return log_path(home).read_bytes().splitlines(keepends=True)


def write_lines(home, kept):
    log_path(home).write_bytes(b"".join(kept))


def reopen(home):
    return MemoryDirectory(home, user_id="alice")


def note(home):
    return next(home.glob("memory-tool/*/memories/n.md")).read_text()


def test_every_line_is_chained_and_the_head_records_the_last(home):
    records = [json.loads(raw) for raw in lines(home)]
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    assert records[0]["prev"] == GENESIS
    for before, after in zip(records, records[1:], strict=False):
        assert after["prev"] == line_hash(before)
    head = json.loads(next(home.glob(f"memory-tool/*/{HEAD_NAME}")).read_text())
    assert (head["seq"], head["hash"], head["pending"]) == (5, line_hash(records[-1]), None)
    assert reopen(home).verify_log() == 5


def test_a_deleted_middle_line_is_detected(home):
    kept = lines(home)
    write_lines(home, kept[:2] + kept[3:])
    with pytest.raises(MemoryLogIntegrityError, match="line 3: carries seq 4.*removed"):
        reopen(home)


def test_a_deleted_last_line_is_detected(home):
    write_lines(home, lines(home)[:-1])
    with pytest.raises(MemoryLogIntegrityError, match="ends at seq 4.*records seq 5.*removed"):
        reopen(home)


def test_a_deleted_last_line_is_detected_by_a_reader_that_was_open(home):
    memories = reopen(home)
    write_lines(home, lines(home)[:-1])
    with pytest.raises(MemoryLogCorruptionError):
        memories.undo(4)
    assert note(home) == "v4\n"


def test_a_changed_before_image_breaks_the_chain(home):
    kept = lines(home)
    record = json.loads(kept[2])
    record["before"] = {"/memories/n.md": "attacker's text\n"}
    kept[2] = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    write_lines(home, kept)
    with pytest.raises(MemoryLogIntegrityError, match="line 4: its 'prev' hash"):
        reopen(home)


def forged_line(home, **changes):
    """A well-formed line after the last one: dense seq, the right prev hash, the undo
    of which would write the attacker's text."""
    last = json.loads(lines(home)[-1])
    record = dict(last, seq=last["seq"] + 1, prev=line_hash(last), command="str_replace",
                  tool_use_id="toolu_forged", outcome="ok", message="Edited /memories/n.md",
                  arguments={"path": "/memories/n.md"},
                  before={"/memories/n.md": "attacker's text\n"},
                  after={"/memories/n.md": hashlib.sha256(b"v4\n").hexdigest()})
    record.update(changes)
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def test_an_appended_well_formed_line_is_detected_and_undo_writes_nothing(home):
    memories = reopen(home)  # a reader that verified the log before the forgery
    write_lines(home, lines(home) + [forged_line(home)])
    with pytest.raises(MemoryLogIntegrityError, match="after seq 5.*something other than"):
        memories.undo(6)
    with pytest.raises(MemoryLogIntegrityError):
        reopen(home)
    with pytest.raises(MemoryLogIntegrityError):  # and no new command is chained onto it
        memories.execute({"command": "view", "path": "/memories"})
    assert note(home) == "v4\n"


def test_an_inserted_line_is_detected(home):
    kept = lines(home)
    write_lines(home, kept[:2] + [kept[1]] + kept[2:])
    with pytest.raises(MemoryLogIntegrityError, match="seq"):
        reopen(home)


def test_a_missing_head_is_detected(home):
    next(home.glob(f"memory-tool/*/{HEAD_NAME}")).unlink()
    with pytest.raises(MemoryLogIntegrityError, match="missing"):
        reopen(home)


def test_the_error_names_the_problem_and_the_fix(home):
    write_lines(home, lines(home)[:-1])
    with pytest.raises(MemoryToolError) as caught:
        reopen(home)
    message = str(caught.value)
    assert "commands.jsonl" in message and "restore" in message and "move" in message


def test_undo_finds_the_command_by_the_seq_on_its_line(home):
    memories = reopen(home)
    with pytest.raises(MemoryToolError, match="command 2.*has changed|has changed since"):
        memories.undo(2)
    assert memories.undo(4) == "Undid command 4 (str_replace)"
    assert note(home) == "v3\n"
    assert memories.history()[-1].arguments == {"seq": 4}
    with pytest.raises(MemoryToolError, match="no command has seq 99"):
        memories.undo(99)


def test_a_crash_between_the_append_and_the_head_still_verifies(home):
    """The head announces each line before it is appended; a line the head announced is
    the tool's own, not an insertion."""
    head_path = next(home.glob(f"memory-tool/*/{HEAD_NAME}"))
    records = [json.loads(raw) for raw in lines(home)]
    head = {"format": "labmem-memory-tool-head/1", "seq": 4, "hash": line_hash(records[3]),
            "pending": {"seq": 5, "hash": line_hash(records[4])}}
    head_path.write_text(json.dumps(head))
    assert reopen(home).verify_log() == 5
    # a crash before the append: the head announced a line that never came
    write_lines(home, lines(home)[:-1])
    assert reopen(home).verify_log() == 4


def test_a_torn_last_line_after_a_crash_is_not_tampering(home):
    memories = reopen(home)
    head_path = next(home.glob(f"memory-tool/*/{HEAD_NAME}"))
    records = [json.loads(raw) for raw in lines(home)]
    head_path.write_text(json.dumps({"format": "labmem-memory-tool-head/1", "seq": 5,
                                     "hash": line_hash(records[4]),
                                     "pending": {"seq": 6, "hash": "f" * 64}}))
    log_path(home).write_bytes(b"".join(lines(home)) + b'{"seq":6,"at":')
    assert reopen(home).verify_log() == 5
    memories.execute({"command": "view", "path": "/memories"})  # the torn tail is cut off
    assert reopen(home).verify_log() == 6


def test_a_log_from_before_the_chain_is_named(home):
    kept = [json.loads(raw) for raw in lines(home)]
    for record in kept:
        del record["prev"]
    write_lines(home, [(json.dumps(r) + "\n").encode() for r in kept])
    with pytest.raises(MemoryLogCorruptionError, match="older labmem"):
        reopen(home)
