"""Chapter s15's checkers answer right and wrong answers as they should; the measured
comparison counts what it says."""

from labmem.exercises import s15


def test_undo_outcomes_are_the_hand_computed_ones():
    assert s15.undo_outcomes() == {2: False, 4: True, 8: False, 9: True, 10: False}


def test_check_undos():
    assert s15.check_undos({4, 9}).ok
    assert s15.check_undos([9, 4]).ok
    assert "commands 3 and 4" in s15.check_undos({2, 4, 9}).message
    assert "undo(10)" in s15.check_undos({4, 9, 10}).message
    assert "where is that" in s15.check_undos({4, 8, 9}).message
    assert not s15.check_undos({4})
    assert not s15.check_undos(4)
    assert s15.check_undos(None).ok is False


def test_required_fields():
    assert s15.check_required_fields(["value", "key"]).ok
    assert not s15.check_required_fields(["key"]).ok
    assert not s15.check_required_fields("key").ok


def test_the_build_is_the_layer():
    assert s15.BUILD == ()
    assert s15.PIECES == ("split_memory_path", "resolve_inside", "replace_once")


def test_the_scripted_commands_are_ten():
    ids = [tool_use_id for tool_use_id, _ in s15.scripted_commands()]
    assert ids == [f"toolu_{n:02}" for n in range(1, 11)]


def test_measured_table(tmp_path):
    rows = {row["measured"]: (row["from scratch"], row["library"])
            for row in s15.measure(tmp_path)}
    assert rows["commands run"] == (10, 10)
    assert rows["commands refused"] == (2, 2)
    assert rows["same outcomes and same files at the end"] == (True, True)
    assert rows["log lines kept (each chained to the last by its hash)"] == (0, 10)
    assert rows["commands that can be undone"] == (0, 6)
    assert rows["bytes of log"][0] == 0 and rows["bytes of log"][1] > 0
    race = next(v for k, v in rows.items() if k.startswith("escapes"))
    assert race == (len(s15.SWAP_COMMANDS), 0)
