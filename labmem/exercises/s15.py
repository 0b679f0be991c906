"""Checkers for chapter s15 (labmem behind real agent clients).

Two predict-the-value exercises and one build exercise: the path-containment rule of the
memory tool, judged against :func:`labmem.agents.is_contained_memory_path`.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from labmem.agents import MEMORY_TOOL_TURNS, TOOL_SPECS, is_contained_memory_path
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise


def refused_tool_uses() -> list[str]:
    """The ids of the scripted conversation's memory commands a labmem backend refuses."""
    import tempfile

    from labmem.agents import MemoryDirectory, MemoryToolError

    refused = []
    with tempfile.TemporaryDirectory() as home:
        memories = MemoryDirectory(home, user_id="exercise")
        for turn in MEMORY_TOOL_TURNS:
            for block in turn:
                if block["type"] == "tool_use":
                    try:
                        memories.execute(block["input"], tool_use_id=block["id"])
                    except MemoryToolError:
                        refused.append(block["id"])
    return refused


def check_refused_tool_uses(answer: Sequence[str] | None) -> Feedback:
    """Exercise 1: which tool uses of the scripted conversation are refused?"""
    name = "s15.1 refused commands"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, "answer with a list of tool-use ids, e.g. ['toolu_01']")
    expected = refused_tool_uses()
    if sorted(answer) == expected:
        return Feedback(name, True, "a '..' segment and a path outside /memories: both are "
                                    "refused before the file system is touched")
    return Feedback(name, False, f"{len(expected)} commands are refused; look for paths that "
                                 "leave /memories, however they are spelled")


def required_fields(tool: str) -> tuple[str, ...]:
    return tuple(next(s for s in TOOL_SPECS if s.name == tool).input_schema["required"])


def check_required_fields(answer: Sequence[str] | None) -> Feedback:
    """Exercise 2: which arguments must a set_preference call carry?"""
    name = "s15.2 required arguments"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, "answer with a list of argument names")
    expected = required_fields("set_preference")
    if sorted(answer) == sorted(expected):
        return Feedback(name, True, "key and value; expires_at and source_event_id are "
                                    "optional, and any other name is refused")
    return Feedback(name, False, "read the 'required' list of the set_preference schema")


SEGMENTS = ("notes.md", "a", "..", ".", "", ".hidden", "x\\y", "memories", "etc", "b c",
            "\x00")


def _path_inputs() -> st.SearchStrategy[tuple]:
    head = st.sampled_from(["/memories", "memories", "/memories/", "/etc", "/memoriesX", ""])
    tail = st.lists(st.sampled_from(SEGMENTS), max_size=8)
    return st.builds(lambda h, t: ("/".join([h, *t]) if t else h,), head, tail)


BUILD = (
    BuildExercise(
        chapter="s15", name="the containment rule", reference=is_contained_memory_path,
        inputs=_path_inputs(),
        hint="a path is '/memories' or starts with '/memories/'; then every segment is "
             "checked: no '', '.', '..', no leading '.', no backslash or control character, "
             "at most 6 segments (a single trailing '/' is allowed)"),
)
