"""Checkers for the s14 compaction exercises (layers, pointer statuses, the threshold, tool
rounds) and the build exercise.

Each predict checker works its answer out with the real library — a compaction of its own
small conversation, pointers resolved against a throw-away session — never from a stored
copy. In Exercise 4 the learner writes three pieces of the chapter's from-scratch module
(:mod:`labmem.scratch.s14_compaction`): keeping tool pairs whole, clearing old tool results,
summarizing older tool rounds; :func:`check_layer` puts them into the module and runs the
layer's contract suite (:mod:`labmem.exercises.suites.s14_compaction`) on it. The section
at the end measures the module beside the library.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from labmem.artifacts import ToolResultExternalizer
from labmem.context import (
    LAYERS,
    CompactionPolicy,
    DurableContextState,
    SourcePointerResolver,
    compact_context,
    compaction_steps,
    estimate_messages_tokens,
    outline_messages,
)
from labmem.core.clock import FixedClock
from labmem.core.i18n import _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.contracts import ContractReport, assemble
from labmem.exercises.suites.s14_compaction import SUITE
from labmem.scratch import s14_compaction as scratch

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
    name = _("s14.1 applied layers")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, Mapping) or set(answer) != set(EXERCISE_1_THRESHOLDS):
        return Feedback(name, False, _("give a dict with one entry per threshold: {thresholds}")
                                     .format(thresholds=", ".join(map(str, EXERCISE_1_THRESHOLDS))))
    for threshold in EXERCISE_1_THRESHOLDS:
        given = answer[threshold]
        if isinstance(given, str) or not isinstance(given, Sequence):
            return Feedback(name, False, _("threshold {threshold}: give a tuple of layer names, "
                                           "() for none").format(threshold=threshold))
        unknown = [layer for layer in given if layer not in LAYERS]
        if unknown:
            return Feedback(name, False, _("{unknown!r} is not a layer; use {layers}")
                                         .format(unknown=unknown[0], layers=", ".join(LAYERS)))
    for threshold in EXERCISE_1_THRESHOLDS:
        given, expected = tuple(answer[threshold]), applied_layers(threshold)
        if given == expected:
            continue
        if sorted(given, key=LAYERS.index) != list(given):
            return Feedback(name, False, _("threshold {threshold}: layers always run in the "
                                           "order of LAYERS").format(threshold=threshold))
        if len(given) > len(expected):
            return Feedback(name, False, _("threshold {threshold}: too many — compaction stops "
                                           "as soon as the view is below the threshold")
                                         .format(threshold=threshold))
        return Feedback(name, False, _("threshold {threshold}: too few — a layer runs while the "
                                       "view is still at or above the threshold")
                                     .format(threshold=threshold))
    return Feedback(name, True, _("each layer runs only while the view is still at or above "
                      "the threshold, cheapest first"))


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
    name = _("s14.2 pointer statuses")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, Mapping) or set(answer) != set(EXERCISE_2_CASES):
        return Feedback(name, False, _("give a dict with the keys {keys}")
                                     .format(keys=", ".join(EXERCISE_2_CASES)))
    expected = resolved_statuses()
    if dict(answer) == expected:
        return Feedback(name, True, _("changed bytes or a disagreeing digest are corrupt; a "
                          "path that leaves the session, even to identical bytes, is denied"))
    if any(answer[case] == "available" for case in EXERCISE_2_CASES):
        return Feedback(name, False, _("none of these is available: every assembly re-checks "
                          "the path and the digest with the owner"))
    if answer["symlink"] != expected["symlink"]:
        return Feedback(name, False, _("the symlink's bytes are identical — what matters is "
                          "where the path leads"))
    return Feedback(name, False, _("which state means 'the owner's record or digest is bad'?"))


# -- exercise 3: exactly at the threshold -------------------------------------------------

def runs_at_threshold() -> bool:
    """Exercise 3: does a layer run when the view's tokens equal ``token_threshold``?"""
    messages = exercise_messages()
    return bool(applied_layers(estimate_messages_tokens(messages)))


def check_runs_at_threshold(answer: Any) -> Feedback:
    """Exercise 3: True or False."""
    name = _("s14.3 at the threshold")
    if answer is None:
        return not_answered(name)
    if not isinstance(answer, bool):
        return Feedback(name, False, _("answer True or False"))
    if answer == runs_at_threshold():
        return Feedback(name, True, _("layers run at or above the threshold; the view must be "
                          "strictly below it to stop"))
    return Feedback(name, False, _("try it: set token_threshold to estimate_messages_tokens(...) "
                      "of a conversation and look at applied_layers"))


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
    name = _("s14.5 tool rounds")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, bool) or not isinstance(answer, int):
        return Feedback(name, False, _("answer with a whole number of tool results"))
    expected = cleared_results()
    if answer == expected:
        return Feedback(name, True, _("one turn, but twelve tool rounds: all but the "
                                      "{keep_recent_tool_rounds} most recent lose their result "
                                      "to a placeholder")
                                    .format(keep_recent_tool_rounds=EXERCISE_5_POLICY['keep_recent_tool_rounds']))
    if answer == 0:
        return Feedback(name, False, _("it is one turn, but turn_pruning counts tool rounds too"))
    if answer == EXERCISE_5_ROUNDS:
        return Feedback(name, False, _("keep_recent_tool_rounds rounds keep their results in full"))
    return Feedback(name, False, _("count the rounds, then subtract the ones kept in full"))


# -- building the layer ------------------------------------------------------------------

#: The pieces of the chapter's module the learner writes in Exercise 4, in order.
PIECES = ("close_tool_pairs", "clear_old_tool_results", "summarize_rounds")


def check_layer(**pieces: Any) -> ContractReport:
    """Exercise 4: the chapter's from-scratch compaction with the learner's own pieces
    (``close_tool_pairs=...``, ``clear_old_tool_results=...``, ``summarize_rounds=...``) put
    in place of the module's, judged by the whole layer's contract suite. A piece left as
    ``None`` keeps the module's own version."""
    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        raise TypeError(f"check_layer() takes {', '.join(PIECES)}; not {unknown[0]!r}")
    given = {name: piece for name, piece in pieces.items() if piece is not None}
    return SUITE.run(assemble(scratch, given), who="your")


#: Single-function build exercises: none. Keeping tool pairs whole is one of the three
#: pieces of Exercise 4, judged with the rest of the layer by its contract suite.
BUILD: tuple = ()


# -- from scratch vs the library, measured -------------------------------------------------

def rereading_session(turns: int = 20) -> list[Message]:
    """``turns`` turns of a session that reads three files over and over and runs the
    tests: the case file-read dedup and turn pruning are for."""
    body = {f"src/{name}.py": "\n".join(f"def {name}_{i}(): return {i}" for i in range(40))
            for name in ("db", "queue", "billing")}
    paths = sorted(body)
    messages: list[Message] = []
    for n in range(turns):
        path = paths[n % 3]
        messages += [_user(f"Step {n}: check {path}."), _call(f"r{n}", "read_file", path=path),
                     _result(f"r{n}", body[path]), _call(f"b{n}", "bash", cmd="pytest -q"),
                     _result(f"b{n}", "".join(f"test_{i:03d} PASSED\n" for i in range(60))),
                     _assistant(f"Step {n} done.")]
    return messages


def forty_rounds() -> list[Message]:
    """One instruction, forty tool rounds of 4,000 characters, the answer."""
    messages = [_user("Port the billing service to the new queue; keep every test green.")]
    for r in range(40):
        messages += [_call(f"t{r}", "read_file" if r % 2 else "bash", path=f"src/m{r}.py"),
                     _result(f"t{r}", f"output {r} " + "x" * 4_000)]
    return messages + [_assistant("All tests pass.")]


#: workload → (its messages, its policy settings)
WORKLOADS: dict[str, tuple[Callable[[], list[Message]], dict[str, Any]]] = {
    "forty tool rounds": (forty_rounds, {"token_threshold": 2_000, "hard_limit": 8_000,
                                         "file_read_tools": ()}),
    "twenty turns, files re-read": (rereading_session, {"token_threshold": 3_000,
                                                        "hard_limit": 12_000,
                                                        "max_tool_result_tokens": 200}),
    "Exercise 1 at threshold 100": (exercise_messages, {"token_threshold": 100,
                                                        **EXERCISE_1_POLICY}),
}


class _CountingSummarizer:
    """A fixed, honest summary, counting how often it was asked."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> str:
        self.calls += 1
        return "The earlier work is summarized here."


def compare_work() -> list[dict[str, Any]]:
    """Each workload compacted by the from-scratch module and by the library, with the same
    policy and summarizer: the figures, whether the views are equal, the summarizer calls,
    and the trace only the library keeps (layer steps, message changes recorded)."""
    rows = []
    for label, (make, settings) in WORKLOADS.items():
        messages = make()
        calls = {"scratch": _CountingSummarizer(), "library": _CountingSummarizer()}
        mine = scratch.compact_context(messages, scratch.DurableContextState(),
                                       summarizer=calls["scratch"],
                                       policy=scratch.CompactionPolicy(**settings))
        library = compact_context(messages, DurableContextState(), summarizer=calls["library"],
                                  policy=CompactionPolicy(**settings))
        steps = compaction_steps(messages, summarizer=exercise_summarizer,
                                 policy=CompactionPolicy(**settings))
        rows.append({
            "workload": label, "messages": len(messages), "tokens before": mine.tokens_before,
            "after (scratch)": mine.tokens_after, "after (library)": library.tokens_after,
            "same view": list(mine.messages) == list(library.messages),
            "summarizer calls (scratch / library)":
                f"{calls['scratch'].calls} / {calls['library'].calls}",
            "steps traced (library)": len(steps),
            "message changes traced (library)": sum(len(s.changes) for s in steps),
        })
    return rows


def _hard_inputs() -> list[tuple[str, Callable[[Any], Any]]]:
    """Inputs the from-scratch module lets through, each as a call on an implementation
    (the module or :mod:`labmem.context`)."""
    talk = [_user("Hello."), _assistant("Hi.")]

    def policy(impl: Any, **settings: Any) -> Any:
        return impl.CompactionPolicy(**settings)

    def state(impl: Any) -> Any:
        return impl.DurableContextState()

    return [
        ("a policy whose hard_limit is below its threshold",
         lambda impl: impl.compact_context(talk, state(impl), summarizer=exercise_summarizer,
                                           policy=policy(impl, token_threshold=1_000,
                                                         hard_limit=10))),
        ("a message with the role 'system'",
         lambda impl: impl.compact_context([{"role": "system", "content": "Be brief."}, *talk],
                                           state(impl), summarizer=exercise_summarizer)),
        ("a message whose content is an empty list",
         lambda impl: impl.compact_context([*talk, {"role": "user", "content": []}],
                                           state(impl), summarizer=exercise_summarizer)),
        ("a summarizer that is not callable",
         lambda impl: impl.compact_context(talk, state(impl), summarizer="summarize it")),
        ("a durable state holding a plain string as a fact",
         lambda impl: impl.compact_context(talk, impl.DurableContextState(
             facts=("The store runs SQLite.",)), summarizer=exercise_summarizer)),
    ]


class _Library:
    compact_context = staticmethod(compact_context)
    CompactionPolicy = CompactionPolicy
    DurableContextState = DurableContextState


def validation_outcomes() -> list[dict[str, str]]:
    """What each implementation does with :func:`_hard_inputs`: the error it raises (by
    class name) or ``returned`` (it compacted, or returned the view unchanged)."""
    rows = []
    for label, attempt in _hard_inputs():
        row = {"input": label}
        for who, impl in (("from scratch", scratch), ("library", _Library)):
            try:
                attempt(impl)
                row[who] = "returned"
            except Exception as exc:
                row[who] = type(exc).__name__
        rows.append(row)
    return rows
