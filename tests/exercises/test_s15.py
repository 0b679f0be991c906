"""Chapter s15's checkers answer right and wrong answers as they should."""

from labmem.agents import is_contained_memory_path
from labmem.exercises.s15 import (
    BUILD,
    check_refused_tool_uses,
    check_required_fields,
    refused_tool_uses,
)


def test_refused_tool_uses_are_the_two_escapes():
    assert refused_tool_uses() == ["toolu_06", "toolu_07"]
    assert check_refused_tool_uses(["toolu_07", "toolu_06"]).ok
    assert not check_refused_tool_uses(["toolu_06"]).ok
    assert not check_refused_tool_uses("toolu_06").ok
    assert check_refused_tool_uses(None).ok is False


def test_required_fields():
    assert check_required_fields(["value", "key"]).ok
    assert not check_required_fields(["key"]).ok


def test_the_build_exercise_judges_the_containment_rule():
    (exercise,) = BUILD
    assert exercise.reference is is_contained_memory_path
    assert is_contained_memory_path("/memories/a/notes.md")
    assert is_contained_memory_path("/memories/")
    for path in ("/memories/../x", "/etc/passwd", "/memories/.x", "/memories//a", 7):
        assert not is_contained_memory_path(path)
