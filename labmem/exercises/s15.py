"""Checkers for chapter s15 (labmem behind real agent clients).

Two exercises that ask for reasoning (which undos the log allows, which arguments a tool
demands) and one build exercise: the learner writes three pieces of the chapter's
from-scratch memory-tool backend (:mod:`labmem.scratch.s15`) — the containment rule, the
step-by-step check on disk, the one-match edit — and :func:`check_layer` puts them into the
module and runs the layer's contract suite (:mod:`labmem.exercises.suites.s15`) on it.
The module also measures the from-scratch backend against the library's.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from labmem.agents import MEMORY_TOOL_TURNS, TOOL_SPECS, MemoryDirectory, MemoryToolError
from labmem.core.clock import SteppingClock
from labmem.core.i18n import _
from labmem.exercises import Feedback, not_answered
from labmem.exercises.contracts import ContractReport, assemble
from labmem.exercises.suites.s15 import SUITE, implementation
from labmem.scratch import s15 as scratch


def scripted_commands() -> list[tuple[str, dict[str, Any]]]:
    """The memory commands of the chapter's scripted conversation: (tool-use id, input)."""
    return [(block["id"], block["input"]) for turn in MEMORY_TOOL_TURNS for block in turn
            if block["type"] == "tool_use"]


def _after_stage_one(home: Path) -> MemoryDirectory:
    """A memory directory that has run the scripted conversation and then ``undo(10)``,
    as the chapter's Stage 1 does."""
    memories = MemoryDirectory(home, user_id="exercise",
                               clock=SteppingClock("2026-08-01T12:00:00Z"))
    for tool_use_id, command in scripted_commands():
        try:
            memories.execute(command, tool_use_id=tool_use_id)
        except MemoryToolError:
            pass
    memories.undo(10)
    return memories


#: Exercise 1: the undos the learner judges, each tried on its own right after Stage 1.
EXERCISE_1_SEQS = (2, 4, 8, 9, 10)


def undo_outcomes() -> dict[int, bool]:
    """For each of :data:`EXERCISE_1_SEQS`: would ``undo(seq)``, tried first after Stage 1
    (the scripted conversation, then ``undo(10)``), succeed?"""
    outcomes = {}
    for seq in EXERCISE_1_SEQS:
        with tempfile.TemporaryDirectory(prefix="labmem-s15-ex-") as home:
            memories = _after_stage_one(Path(home))
            try:
                memories.undo(seq)
                outcomes[seq] = True
            except MemoryToolError:
                outcomes[seq] = False
    return outcomes


def check_undos(answer: Iterable[int] | None) -> Feedback:
    """Exercise 1: which of ``undo(2)``, ``undo(4)``, ``undo(8)``, ``undo(9)``,
    ``undo(10)`` succeed, each tried on its own right after Stage 1?"""
    name = _("s15.1 which undos succeed")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, (str, int)):
        return Feedback(name, False, _("answer with a set of seq numbers, e.g. {2, 8}"))
    got = set(answer)
    expected = {seq for seq, ok in undo_outcomes().items() if ok}
    if got == expected:
        return Feedback(name, True, _("an undo needs every file it touched to be exactly as "
                                      "the command left it: 4 was the last change to "
                                      "decisions.md, and 9's two paths are as it left them "
                                      "since undo(10) put the moved file back"))
    if 2 in got:
        return Feedback(name, False, _("commands 3 and 4 changed decisions.md after command 2"))
    if 10 in got:
        return Feedback(name, False, _("command 10 deleted a file that undo(10) has put back: "
                                       "is the file as command 10 left it?"))
    if 8 in got:
        return Feedback(name, False, _("command 8 created /memories/scratch.md; where is that "
                                       "file now?"))
    return Feedback(name, False, _("for each command, compare every path it changed with what "
                                   "is there now: an undo succeeds only if nothing changed since"))


def required_fields(tool: str) -> tuple[str, ...]:
    return tuple(next(s for s in TOOL_SPECS if s.name == tool).input_schema["required"])


def check_required_fields(answer: Sequence[str] | None) -> Feedback:
    """Exercise 2: which arguments must a set_preference call carry?"""
    name = _("s15.2 required arguments")
    if answer is None:
        return not_answered(name)
    if isinstance(answer, str):
        return Feedback(name, False, _("answer with a list of argument names"))
    expected = required_fields("set_preference")
    if sorted(answer) == sorted(expected):
        return Feedback(name, True, _("key and value; expires_at and source_event_id are "
                                      "optional, and any other name is refused"))
    return Feedback(name, False, _("read the 'required' list of the set_preference schema"))


# -- building the layer ------------------------------------------------------------------

#: The pieces of the chapter's module the learner writes in Exercise 3, in order.
PIECES = ("split_memory_path", "resolve_inside", "replace_once")


def check_layer(**pieces: Any) -> ContractReport:
    """Exercise 3: the chapter's from-scratch backend with the learner's own pieces
    (``split_memory_path=...``, ``resolve_inside=...``, ``replace_once=...``) put in place
    of the module's, judged by the whole layer's contract suite. A piece left as ``None``
    keeps the module's own version."""
    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        raise TypeError(f"check_layer() takes {', '.join(PIECES)}; not {unknown[0]!r}")
    module = assemble(scratch, {})
    for name, piece in pieces.items():
        if piece is not None:
            setattr(module, name, _raising_the_modules_errors(piece, module))
    return SUITE.run(implementation(module), who="your")


def _raising_the_modules_errors(piece: Callable[..., Any], module: Any) -> Callable[..., Any]:
    """``piece``, with a ``MemoryToolError`` or ``MemoryPathError`` it raises (the chapter's
    class, or a class of the learner's own by that name) turned into the copy's class of
    the same name, so that the copy's own ``except`` clauses catch it."""
    def piece_in_the_copy(*args: Any, **kwargs: Any) -> Any:
        try:
            return piece(*args, **kwargs)
        except Exception as exc:
            name = type(exc).__name__
            if name in ("MemoryToolError", "MemoryPathError") and \
                    not isinstance(exc, getattr(module, name)):
                raise getattr(module, name)(*exc.args) from None
            raise

    piece_in_the_copy.__name__ = getattr(piece, "__name__", "piece")
    return piece_in_the_copy


#: Single-function build exercises: none. The containment rule is one of the three pieces
#: of Exercise 3, judged with the rest of the layer by its contract suite.
BUILD: tuple = ()


# -- from scratch vs the library, measured -------------------------------------------------

def _swap_for_link(tree: Path, outside: Path) -> None:
    """Put a link to ``outside`` where the folder ``d`` was (the folder is parked under a
    hidden name): what another process could do between a check and a use."""
    os.rename(tree / "d", tree / ".parked")
    (tree / "d").symlink_to(outside, target_is_directory=True)


SWAP_COMMANDS: tuple[dict[str, Any], ...] = (
    {"command": "view", "path": "/memories/d/f.md"},
    {"command": "create", "path": "/memories/d/new.md", "file_text": "written\n"},
    {"command": "str_replace", "path": "/memories/d/f.md", "old_str": "mine", "new_str": "x"},
    {"command": "delete", "path": "/memories/d/f.md"},
)


def _escaped(outside: Path, answer: str | None) -> bool:
    """Did the command read, write or remove anything outside the tree?"""
    files = {p.name: p.read_text(encoding="utf-8") for p in outside.iterdir()}
    return files != {"f.md": "SECRET mine\n"} or "SECRET" in (answer or "")


class _SwappedAfterOpen(MemoryDirectory):
    """The library's backend, with ``/memories/d`` swapped for a link to ``outside`` right
    after it first opened the descriptor of a folder below ``d``'s parent."""

    def __init__(self, home: Path, outside: Path) -> None:
        super().__init__(home, user_id="race", clock=SteppingClock("2026-08-01T12:00:00Z"))
        self.outside, self.swapped = outside, False

    def _dir(self, root: int, target: Any, fds: Any, *, create: bool = False) -> int:
        fd = super()._dir(root, target, fds, create=create)
        if not self.swapped and target.names[:1] == ("d",):
            self.swapped = True
            _swap_for_link(self.tree, self.outside)
        return fd


def _scratch_swapped_after_check(outside: Path) -> Any:
    """The from-scratch module with ``/memories/d`` swapped for a link to ``outside`` right
    after ``resolve_inside`` first checked a path below it."""
    swapped: list[bool] = []

    def checked_then_swapped(tree: Path, names: tuple[str, ...]) -> Path:
        real = scratch.resolve_inside(tree, names)
        if not swapped and names[:1] == ("d",):
            swapped.append(True)
            _swap_for_link(tree, outside)
        return real

    return assemble(scratch, {"resolve_inside": checked_then_swapped})


def swap_race(directory: Path) -> dict[str, int]:
    """Each of :data:`SWAP_COMMANDS` once per implementation, with ``/memories/d`` swapped
    for a link to the outside right after the path was checked (the from-scratch
    module: after ``resolve_inside``; the library: after it opened the folder's
    descriptor). Returns how many commands escaped the tree, per implementation."""
    escapes = {"from scratch": 0, "library": 0}
    for n, command in enumerate(SWAP_COMMANDS):
        for label in escapes:
            root = Path(directory) / f"swap-{n}-{label.replace(' ', '-')}"
            outside = root / "outside"
            outside.mkdir(parents=True)
            (outside / "f.md").write_text("SECRET mine\n", encoding="utf-8")
            if label == "from scratch":
                d: Any = _scratch_swapped_after_check(outside).MemoryDirectory(root / "home")
            else:
                d = _SwappedAfterOpen(root / "home", outside)
            (d.tree / "d").mkdir()
            (d.tree / "d" / "f.md").write_text("mine\n", encoding="utf-8")
            try:
                answer = d.execute(dict(command))
            except Exception:  # noqa: BLE001 — a refusal is the safe outcome here
                answer = None
            escapes[label] += _escaped(outside, answer)
    return escapes


def measure(directory: Path) -> list[dict[str, Any]]:
    """The scripted conversation through both backends, and the swap race: one row per
    measured quantity, with the from-scratch and the library's figure."""
    rows: dict[str, dict[str, Any]] = {}
    directory = Path(directory)
    outcomes: dict[str, list[str]] = {}
    trees: dict[str, dict[str, str]] = {}
    for label in ("from scratch", "library"):
        root = directory / label.replace(" ", "-")
        if label == "from scratch":
            d: Any = scratch.MemoryDirectory(root)
            run = d.execute
        else:
            d = MemoryDirectory(root, user_id="alice", clock=SteppingClock(
                "2026-08-01T12:00:00Z"))
            run = d.execute
        outcomes[label] = []
        for tool_use_id, command in scripted_commands():
            try:
                if label == "library":
                    run(command, tool_use_id=tool_use_id)
                else:
                    run(command)
                outcomes[label].append("ok")
            except Exception:  # noqa: BLE001 — both backends' refusals
                outcomes[label].append("refused")
        trees[label] = {p.relative_to(d.tree).as_posix(): p.read_text(encoding="utf-8")
                        for p in sorted(d.tree.rglob("*")) if p.is_file()}
        log = d.directory / "commands.jsonl" if label == "library" else None
        rows.setdefault("commands run", {})[label] = len(outcomes[label])
        rows.setdefault("commands refused", {})[label] = outcomes[label].count("refused")
        rows.setdefault("log lines kept (each chained to the last by its hash)", {})[label] = \
            len(d.history()) if label == "library" else 0
        rows.setdefault("bytes of log", {})[label] = log.stat().st_size if log else 0
        rows.setdefault("commands that can be undone", {})[label] = sum(
            1 for c in d.history() if c.outcome == "ok" and c.after) if label == "library" \
            else 0
    same = trees["from scratch"] == trees["library"] and \
        outcomes["from scratch"] == outcomes["library"]
    rows["same outcomes and same files at the end"] = {"from scratch": same, "library": same}
    escapes = swap_race(directory / "race")
    rows[f"escapes with a folder swapped for a link after the check "
         f"(of {len(SWAP_COMMANDS)} commands)"] = escapes
    return [{"measured": what, **values} for what, values in rows.items()]
