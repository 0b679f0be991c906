"""Checkers for the s14 compaction exercises (layers, pointer statuses, tool rounds, tool
pairs).

Each checker works its answer out with the real library — a compaction of its own small
conversation, pointers resolved against a throw-away session — never from a stored copy.
``BUILD`` holds the build-it-yourself exercise: keeping tool pairs whole, checked against
:func:`labmem.context.close_tool_pairs`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labmem.artifacts import ToolResultExternalizer
from labmem.context import (
    LAYERS,
    CompactionPolicy,
    DurableContextState,
    SourcePointerResolver,
    close_tool_pairs,
    compact_context,
    compaction_steps,
    estimate_messages_tokens,
    outline_messages,
)
from labmem.core.clock import FixedClock
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise, show

Message = dict[str, Any]


# -- a small conversation of our own -------------------------------------------------------

def _user(text: str) -> Message:
    return {"role": "user", "content": text}


def _assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def _call(call_id: str, tool: str, **tool_input: str) -> Message:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": tool,
                                              "input": tool_input}]}


def _result(call_id: str, text: str) -> Message:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                         "content": text}]}


def exercise_messages() -> list[Message]:
    """Exercise 1's conversation: a file read twice, a long build log, two short turns."""
    config = "\n".join(f"setting_{i} = {i}" for i in range(120))
    log = "\n".join(f"step {i}: ok" for i in range(1500))
    return [
        _user("Tune the build."), _call("c1", "read_file", path="config.py"),
        _result("c1", config), _assistant("config.py has 120 settings."),
        _user("Run the build."), _call("c2", "bash", cmd="make"), _result("c2", log),
        _assistant("It passed."),
        _user("Read config.py again."), _call("c3", "read_file", path="config.py"),
        _result("c3", config), _assistant("Unchanged."),
        _user("Set setting_7 to 70."), _assistant("Done."),
        _user("What is left?"), _assistant("Nothing."),
    ]


#: Exercise 1: the policy's other settings (the threshold is what the question varies).
EXERCISE_1_POLICY = {"max_tool_result_tokens": 300, "keep_recent_turns": 3,
                     "summary_keep_recent_turns": 1, "hard_limit": 1_000_000}
EXERCISE_1_THRESHOLDS = (8_000, 1_000, 500, 100)


def exercise_summarizer(text: str) -> str:
    """The summarizer the exercises use: short, fixed, honest."""
    return "The build passed; setting_7 is now 70."


def exercise_policy(token_threshold: int) -> CompactionPolicy:
    return CompactionPolicy(token_threshold=token_threshold, **EXERCISE_1_POLICY)


def applied_layers(token_threshold: int) -> tuple[str, ...]:
    """The layers compact_context applies to the exercise conversation at this threshold."""
    return compact_context(exercise_messages(), DurableContextState(),
                           summarizer=exercise_summarizer,
                           policy=exercise_policy(token_threshold)).applied_layers


def check_applied_layers(answer: Any) -> Feedback:
    """Exercise 1: threshold → the layers that run, in order."""
    name = "s14.1 applied layers"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, Mapping) or set(answer) != set(EXERCISE_1_THRESHOLDS):
        return Feedback(name, False, "give a dict with one entry per threshold: "
                        f"{', '.join(map(str, EXERCISE_1_THRESHOLDS))}")
    for threshold in EXERCISE_1_THRESHOLDS:
        given = answer[threshold]
        if isinstance(given, str) or not isinstance(given, Sequence):
            return Feedback(name, False, f"threshold {threshold}: give a tuple of layer "
                            "names, () for none")
        unknown = [layer for layer in given if layer not in LAYERS]
        if unknown:
            return Feedback(name, False, f"{unknown[0]!r} is not a layer; use "
                            f"{', '.join(LAYERS)}")
    for threshold in EXERCISE_1_THRESHOLDS:
        given, expected = tuple(answer[threshold]), applied_layers(threshold)
        if given == expected:
            continue
        if sorted(given, key=LAYERS.index) != list(given):
            return Feedback(name, False, f"threshold {threshold}: layers always run in the "
                            "order of LAYERS")
        if len(given) > len(expected):
            return Feedback(name, False, f"threshold {threshold}: too many — compaction "
                            "stops as soon as the view is below the threshold")
        return Feedback(name, False, f"threshold {threshold}: too few — a layer runs while "
                        "the view is still at or above the threshold")
    return Feedback(name, True, "each layer runs only while the view is still at or above "
                    "the threshold, cheapest first")


# -- exercise 2: what a pointer resolves to ----------------------------------------------

#: Exercise 2: what happened to an artifact (label → description) before the next assembly.
EXERCISE_2_CASES: dict[str, str] = {
    "edited": "someone changed one byte of the artifact's body",
    "symlink": "the body was replaced by a symlink to an identical copy outside tool-results/",
    "other_digest": "the pointer names the right file, but with another 12-hex digest",
}


def resolved_statuses() -> dict[str, str]:
    """Exercise 2, resolved by a real SourcePointerResolver over a throw-away session."""
    statuses = {}
    with tempfile.TemporaryDirectory(prefix="labmem-s14-ex-") as tmp:
        root = Path(tmp)
        for case in EXERCISE_2_CASES:
            artifacts = root / case / "artifacts"
            ex = ToolResultExternalizer(artifacts / "s1",
                                        clock=FixedClock("2026-08-01T09:00:00Z"))
            artifact = ex.externalize("test PASSED\n" * 4_000, "bash").artifact
            pointer = artifact.source_id
            body = artifacts / "s1" / "tool-results" / artifact.filename
            if case == "edited":
                body.write_bytes(b"#" + body.read_bytes()[1:])
            elif case == "symlink":
                outside = root / case / "copy.txt"
                outside.write_bytes(body.read_bytes())
                body.unlink()
                body.symlink_to(outside)
            else:
                other = "0" * 12 if not artifact.sha256.startswith("0" * 12) else "1" * 12
                pointer = pointer.rsplit(":", 1)[0] + ":" + other
            resolver = SourcePointerResolver(transcript_root=root / case / "sessions",
                                             artifact_root=artifacts)
            statuses[case] = resolver.resolve(pointer).status
    return statuses


def check_statuses(answer: Any) -> Feedback:
    """Exercise 2: case → the source status the pointer resolves to."""
    name = "s14.2 pointer statuses"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, Mapping) or set(answer) != set(EXERCISE_2_CASES):
        return Feedback(name, False, f"give a dict with the keys {', '.join(EXERCISE_2_CASES)}")
    expected = resolved_statuses()
    if dict(answer) == expected:
        return Feedback(name, True, "changed bytes or a disagreeing digest are corrupt; a "
                        "path that leaves the session, even to identical bytes, is denied")
    if any(answer[case] == "available" for case in EXERCISE_2_CASES):
        return Feedback(name, False, "none of these is available: every assembly re-checks "
                        "the path and the digest with the owner")
    if answer["symlink"] != expected["symlink"]:
        return Feedback(name, False, "the symlink's bytes are identical — what matters is "
                        "where the path leads")
    return Feedback(name, False, "which state means 'the owner's record or digest is bad'?")


# -- exercise 3: exactly at the threshold -------------------------------------------------

def runs_at_threshold() -> bool:
    """Exercise 3: does a layer run when the view's tokens equal ``token_threshold``?"""
    messages = exercise_messages()
    return bool(applied_layers(estimate_messages_tokens(messages)))


def check_runs_at_threshold(answer: Any) -> Feedback:
    """Exercise 3: True or False."""
    name = "s14.3 at the threshold"
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, bool):
        return Feedback(name, False, "answer True or False")
    if answer == runs_at_threshold():
        return Feedback(name, True, "layers run at or above the threshold; the view must be "
                        "strictly below it to stop")
    return Feedback(name, False, "try it: set token_threshold to estimate_messages_tokens(...) "
                    "of a conversation and look at applied_layers")


# Exercise 5: one instruction, then this many tool rounds, under this policy.
EXERCISE_5_ROUNDS = 12
EXERCISE_5_POLICY = {"token_threshold": 1_500, "hard_limit": 50_000,
                     "keep_recent_tool_rounds": 5, "file_read_tools": ()}


def exercise_5_messages() -> list[Message]:
    """One instruction, :data:`EXERCISE_5_ROUNDS` test runs of 1,200 characters, the answer."""
    messages = [_user("Make the whole test suite pass.")]
    for r in range(EXERCISE_5_ROUNDS):
        messages += [_call(f"run{r}", "bash", cmd=f"pytest tests/part_{r}"),
                     _result(f"run{r}", f"part {r}: " + "." * 1_190)]
    return messages + [_assistant("The suite passes.")]


def cleared_results() -> int:
    """Exercise 5: how many tool results ``turn_pruning`` replaced by a placeholder."""
    steps = compaction_steps(exercise_5_messages(), summarizer=exercise_summarizer,
                             policy=CompactionPolicy(**EXERCISE_5_POLICY))
    pruned = next(step for step in steps if step.name == "turn_pruning")
    return sum(o.note.endswith(", cleared") for o in outline_messages(pruned.messages))


def check_cleared(answer: Any) -> Feedback:
    """Exercise 5: a whole number."""
    name = "s14.5 tool rounds"
    if answer is None:
        return not_answered(name)
    if isinstance(answer, bool) or not isinstance(answer, int):
        return Feedback(name, False, "answer with a whole number of tool results")
    expected = cleared_results()
    if answer == expected:
        return Feedback(name, True, "one turn, but twelve tool rounds: all but the "
                        f"{EXERCISE_5_POLICY['keep_recent_tool_rounds']} most recent lose their "
                        "result to a placeholder")
    if answer == 0:
        return Feedback(name, False, "it is one turn, but turn_pruning counts tool rounds too")
    if answer == EXERCISE_5_ROUNDS:
        return Feedback(name, False, "keep_recent_tool_rounds rounds keep their results in full")
    return Feedback(name, False, "count the rounds, then subtract the ones kept in full")


# -- build it yourself: keep tool pairs whole -----------------------------------------------

@st.composite
def tool_conversations(draw: st.DrawFn) -> list[Message]:
    """Valid conversations in which calls may be answered late, several at a time."""
    messages: list[Message] = [_user("start")]
    open_calls: list[str] = []
    made = 0
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(("call", "answer", "user", "assistant")))
        if kind == "call":
            count = draw(st.integers(1, 2))
            ids = [f"t{made + k + 1}" for k in range(count)]
            made += count
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids]})
            open_calls += ids
        elif kind == "answer" and open_calls:
            ids = draw(st.lists(st.sampled_from(open_calls), min_size=1, unique=True))
            messages.append(_answers(ids, with_text=draw(st.booleans())))
            open_calls = [i for i in open_calls if i not in ids]
        elif kind == "user":
            messages.append(_user("more"))
        else:
            messages.append(_assistant("ok"))
    if open_calls:
        messages.append(_answers(open_calls, with_text=False))
    return messages


def _answers(ids: Sequence[str], *, with_text: bool) -> Message:
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": "ok"}
                                    for i in ids]
    if with_text:
        blocks.append({"type": "text", "text": "and a question"})
    return {"role": "user", "content": blocks}


@st.composite
def _pairs_inputs(draw: st.DrawFn) -> tuple[list[Message], frozenset[int]]:
    messages = draw(tool_conversations())
    keep = draw(st.frozensets(st.integers(0, len(messages) - 1)))
    return messages, keep


def outline(message: Message) -> str:
    """One message in a line: its role and its blocks (tool blocks with their ids)."""
    content = message["content"]
    if isinstance(content, str):
        return f"{message['role']} {show(content)}"
    parts = [f"{b['type']} {b.get('id') or b.get('tool_use_id')}" if b["type"] != "text"
             else "text" for b in content]
    return f"{message['role']} [{', '.join(parts)}]"


def describe_pairs(args: tuple) -> str:
    """A counterexample as numbered messages (index: role [blocks]) and the keep set."""
    messages, keep = args
    listed = " | ".join(f"{i}: {outline(m)}" for i, m in enumerate(messages))
    return f"messages {listed}; keep={sorted(keep)}"


BUILD = (
    BuildExercise(
        chapter="s14 compaction", name="keep tool pairs whole", reference=close_tool_pairs,
        inputs=_pairs_inputs(),
        hint="a tool_use and its tool_result are kept or dropped together, and a message "
             "you add may bring pairs of its own",
        project=lambda kept: sorted(kept), describe=describe_pairs),
)
