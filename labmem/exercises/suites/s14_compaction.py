"""The s14 compaction contract suite: what compaction promises, contract by contract.

``SUITE`` runs on any implementation that offers the operations the chapter builds:

* ``compact_context(messages, durable_state, summarizer=..., policy=...)`` → a result with
  ``messages``, ``durable_state``, ``tokens_before``, ``tokens_after`` and
  ``applied_layers``;
* ``CompactionPolicy(...)`` with the chapter's fields, ``DurableContextState``,
  ``DurableFact(fact_id, content, source_pointer)`` and
  ``PendingItem(item_id, description, source_pointer)``;
* ``close_tool_pairs(messages, keep)`` and ``estimate_messages_tokens(messages)``;
* the errors ``ToolProtocolError`` and ``MessageViewLimitExceeded``.

``SCRATCH`` is the chapter's from-scratch module (:mod:`labmem.scratch.s14_compaction`);
``PRODUCTION`` is :mod:`labmem.context` behind :class:`_Production`, which only fills in
the timestamp its durable records also carry. The summarizers are adversarial: one lies,
one raises, one returns blanks, one writes more than it replaces. Every check tries its
cases smallest first and names the first one that breaks.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from labmem import context as production
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, expect, is_a
from labmem.scratch import s14_compaction as scratch_module

AT = "2026-08-01T09:30:00Z"
Message = dict[str, Any]


class _Production:
    """The library's compaction under the names the contracts use."""

    compact_context = staticmethod(production.compact_context)
    CompactionPolicy = production.CompactionPolicy
    DurableContextState = production.DurableContextState
    DurableFact = functools.partial(production.DurableFact, last_confirmed_at=AT)
    PendingItem = functools.partial(production.PendingItem, last_confirmed_at=AT)
    close_tool_pairs = staticmethod(production.close_tool_pairs)
    estimate_messages_tokens = staticmethod(production.estimate_messages_tokens)
    ToolProtocolError = production.ToolProtocolError
    MessageViewLimitExceeded = production.MessageViewLimitExceeded

    def __repr__(self) -> str:
        return "labmem.context"


SCRATCH = scratch_module
PRODUCTION = _Production()


# -- messages, summarizers, shorthand -----------------------------------------------------

def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def call(call_id: str, tool: str = "bash", **tool_input: str) -> Message:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": tool,
                                              "input": tool_input}]}


def calls(*call_ids: str) -> Message:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": c, "name": "bash",
                                              "input": {}} for c in call_ids]}


def result(call_id: str, text: str, *, then: str | None = None) -> Message:
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": call_id,
                                     "content": text}]
    if then is not None:
        blocks.append({"type": "text", "text": then})
    return {"role": "user", "content": blocks}


def agent_loop(rounds: int, chars: int = 400) -> list[Message]:
    """One instruction, ``rounds`` tool rounds of ``chars`` characters each, the answer."""
    messages = [user("Port the billing service.")]
    for r in range(rounds):
        messages += [call(f"t{r}", "bash", cmd=f"src/m{r}.py"),
                     result(f"t{r}", f"output {r} " + "x" * (chars - 9 - len(str(r))))]
    return messages + [assistant("Done.")]


def chat(turns: int, chars: int = 200) -> list[Message]:
    """``turns`` plain turns: a request and an answer of ``chars`` characters each."""
    messages: list[Message] = []
    for n in range(1, turns + 1):
        messages += [user(f"request {n} " + "r" * chars), assistant(f"answer {n} " + "a" * chars)]
    return messages


class Recorder:
    """A summarizer that answers ``text`` and remembers what it was given."""

    def __init__(self, text: str = "S") -> None:
        self.text = text
        self.given: list[str] = []

    def __call__(self, older: str) -> str:
        self.given.append(older)
        return self.text


LIE = "Everything is done: the store now uses MongoDB and nothing is pending."


def raising(text: str) -> str:
    raise TimeoutError("summarizer: no answer within 30 s")


def blank(text: str) -> str:
    return "  \n"


def summary(count: int, text: str = "S") -> Message:
    return user(f"[conversation_summary of {count} earlier messages]\n{text}")


def short(message: Message) -> str:
    """A message in shorthand: ``user 'request 1 rrr…'``, ``call t1``, ``result t1``."""
    content = message["content"]
    if isinstance(content, str):
        text = content if len(content) <= 24 else content[:23] + "…"
        return f"{message['role']} {text!r}"
    parts = []
    for block in content:
        if block["type"] == "tool_use":
            parts.append(f"call {block['id']}")
        elif block["type"] == "tool_result":
            body = block["content"] if isinstance(block["content"], str) else "…"
            parts.append(f"result {block['tool_use_id']}"
                         + (" (cleared)" if body.startswith("[tool_result cleared") else ""))
        else:
            parts.append("text")
    return " + ".join(parts)


def shorts(messages: Any) -> str:
    return "[" + ", ".join(short(m) for m in messages) + "]"


def _policy(impl: Any, **settings: Any) -> Any:
    settings.setdefault("hard_limit", max(1_000_000, settings.get("token_threshold", 1)))
    settings.setdefault("file_read_tools", ())
    return impl.CompactionPolicy(**settings)


def _state(impl: Any) -> Any:
    return impl.DurableContextState(
        facts=(impl.DurableFact("fact-wal", "The store runs SQLite in WAL mode.",
                                "transcript:s1:8"),),
        pending_items=(impl.PendingItem("todo-tests", "Migrate the integration tests.",
                                        "transcript:s1:24"),))


def _compact(impl: Any, messages: list[Message], summarizer: Callable[[str], str],
             **settings: Any) -> Any:
    return impl.compact_context(messages, _state(impl), summarizer=summarizer,
                                policy=_policy(impl, **settings))


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
        text = shorts(value)
    else:
        text = repr(value)
    return text if len(text) <= 240 else text[:237] + "..."


def _expect(case: str, got: Any, want: Any) -> None:
    expect(case, got, want, show=_show)


def _view(case: str, run: Callable[[], Any]) -> Any:
    """``run()``, with a refusal of the layer's own making reported as a broken contract."""
    try:
        return run()
    except NotImplementedError:
        raise
    except Exception as exc:
        name = type(exc).__name__
        if name in ("ToolProtocolError", "MessageViewLimitExceeded"):
            raise ContractBroken(f"smallest case: {case} — raised {name}: "
                                 f"{str(exc)[:160]}") from None
        raise


def _tokens(impl: Any, messages: list[Message]) -> int:
    return impl.estimate_messages_tokens(messages)


# -- the contracts ----------------------------------------------------------------------

def under_the_threshold_nothing_runs(impl: Any) -> None:
    for turns in (1, 2, 3):
        messages = chat(turns)
        tokens = _tokens(impl, messages)
        case = f"{turns} turn(s) of {tokens} tokens, token_threshold {tokens + 1}"
        summarizer = Recorder()
        out = _view(case, lambda m=messages, t=tokens, s=summarizer:
                    _compact(impl, m, s, token_threshold=t + 1))
        _expect(f"{case}: the view", list(out.messages), messages)
        _expect(f"{case}: applied_layers", tuple(out.applied_layers), ())
        _expect(f"{case}: summarizer calls", len(summarizer.given), 0)
        _expect(f"{case}: tokens_before, tokens_after", (out.tokens_before, out.tokens_after),
                (tokens, tokens))
        case = f"{turns} turn(s) of {tokens} tokens, token_threshold {tokens} (exactly)"
        out = _view(case, lambda m=messages, t=tokens:
                    _compact(impl, m, Recorder(), token_threshold=t, keep_recent_turns=1,
                             summary_keep_recent_turns=1))
        if turns > 1 and not out.applied_layers:
            raise ContractBroken(f"smallest case: {case} — expected a layer to run at the "
                                 "threshold, got applied_layers ()")


def the_caller_keeps_its_messages(impl: Any) -> None:
    for rounds in (2, 3, 6):
        messages = [*chat(2), *agent_loop(rounds)]
        before = copy.deepcopy(messages)
        state = _state(impl)
        case = f"two turns, then {rounds} tool rounds, every layer asked to run"
        out = _view(case, lambda m=messages, s=state: impl.compact_context(
            m, s, summarizer=Recorder(), policy=_policy(
                impl, token_threshold=1, max_tool_result_tokens=20, keep_recent_turns=1,
                summary_keep_recent_turns=1, keep_recent_tool_rounds=1,
                summary_keep_recent_tool_rounds=1)))
        _expect(f"{case}: the caller's list afterwards", messages, before)
        if out.durable_state is not state and out.durable_state != state:
            raise ContractBroken(f"smallest case: {case} — the durable state came back "
                                 "changed")
        if len(out.messages) >= len(messages):
            raise ContractBroken(f"smallest case: {case} — expected fewer messages, got "
                                 f"{len(out.messages)} of {len(messages)}")


def oversized_results_are_cut(impl: Any) -> None:
    for chars in (400, 800):
        text = "".join(f"line {n:03d}\n" for n in range(chars // 9 + 1))[:chars]
        messages = [user("Run it."), call("c1"), result("c1", text), call("c2"),
                    result("c2", "short output"), assistant("ok")]
        tokens = _tokens(impl, messages)
        case = f"a {chars}-character tool result, max_tool_result_tokens 10"
        out = _view(case, lambda m=messages, t=tokens: _compact(
            impl, m, Recorder(), token_threshold=t - 20, max_tool_result_tokens=10))
        want = copy.deepcopy(messages)
        want[2]["content"][0]["content"] = (f"{text[:40]}\n[tool_result_truncation: cut "
                                            f"{chars - 40:,} of {chars:,} characters]")
        _expect(f"{case}: the view", list(out.messages), want)
        _expect(f"{case}: the cut result",
                out.messages[2]["content"][0]["content"], want[2]["content"][0]["content"])
        _expect(f"{case}: applied_layers", tuple(out.applied_layers),
                ("tool_result_truncation",))


def a_superseded_read_becomes_a_marker(impl: Any) -> None:
    body = "\n".join(f"def query_{i}(conn): return {i}" for i in range(8))
    for reads in (2, 3):
        messages = []
        for n in range(1, reads + 1):
            messages += [user(f"Read db.py ({n})."), call(f"r{n}", "read_file", path="db.py"),
                         result(f"r{n}", body), assistant("ok")]
        tokens = _tokens(impl, messages)
        case = f"db.py read {reads} times"
        out = _view(case, lambda m=messages, t=tokens: _compact(
            impl, m, Recorder(), token_threshold=t - 20, file_read_tools=("read_file",)))
        want = copy.deepcopy(messages)
        for n in range(1, reads):
            want[4 * n - 2]["content"][0]["content"] = (
                f"[file_read_dedup: superseded — db.py was read again later by r{reads}]")
        _expect(f"{case}: the view", list(out.messages), want)
        _expect(f"{case}: applied_layers", tuple(out.applied_layers), ("file_read_dedup",))


#: (label, messages, keep, the smallest closed superset)
PAIR_CASES: tuple[tuple[str, list[Message], set[int], set[int]], ...] = (
    ("nothing kept", [user("go"), call("t1"), result("t1", "ok")], set(), set()),
    ("a kept result brings its call", [user("go"), call("t1"), result("t1", "ok")], {2},
     {1, 2}),
    ("a kept call brings its result", [user("go"), call("t1"), result("t1", "ok")], {1},
     {1, 2}),
    ("two calls at once, the second result kept",
     [user("go"), calls("t1", "t2"), result("t1", "a"), result("t2", "b", then="why?"),
      assistant("a race")], {3, 4}, {1, 2, 3, 4}),
    ("two results in one message, one call kept",
     [user("go"), call("t1"), call("t2"),
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                    "content": "a"},
                                   {"type": "tool_result", "tool_use_id": "t2",
                                    "content": "b"}]}, assistant("ok")], {1}, {1, 2, 3}),
)


def pairs_close_to_the_smallest_superset(impl: Any) -> None:
    for label, messages, keep, want in PAIR_CASES:
        given = set(keep)
        got = impl.close_tool_pairs(copy.deepcopy(messages), given)
        case = f"{label}: {shorts(messages)}, keep={sorted(keep)}"
        if got is None:
            raise ContractBroken(f"smallest case: {case} — expected {sorted(want)}, got None")
        _expect(case, sorted(got), sorted(want))
        _expect(f"{case}: keep afterwards", given, keep)


def pruning_keeps_the_first_message_and_recent_turns(impl: Any) -> None:
    heavy = "h" * 400
    race = [user("Start."), assistant(heavy), user("Fix the flaky test."),
            calls("r1", "r2"), result("r1", "..."), result("r2", "1 failed", then="why?"),
            assistant("A race.")]
    cases = [(f"{turns} plain turns, keep_recent_turns 2", chat(turns), 2,
              [0, *range(2 * turns - 4, 2 * turns)]) for turns in (3, 4)]
    cases.append(("two calls at once, the last turn starts at the second result, "
                  "keep_recent_turns 1", race, 1, [0, 3, 4, 5, 6]))
    for case, messages, keep, kept in cases:
        tokens = _tokens(impl, messages)
        want = [messages[i] for i in kept]
        threshold = _tokens(impl, want) + 1
        out = _view(case, lambda m=messages, k=keep, t=threshold: _compact(
            impl, m, Recorder(), token_threshold=t, keep_recent_turns=k))
        _expect(f"{case} ({tokens} tokens, threshold {threshold}): the view",
                list(out.messages), want)


def _cleared(messages: list[Message], older: int) -> list[Message]:
    want = copy.deepcopy(messages)
    for r in range(older):
        block = want[2 + 2 * r]["content"][0]
        text = block["content"]
        block["content"] = f"[tool_result cleared: bash src/m{r}.py — {len(text):,} characters]"
    return want


def old_tool_results_are_cleared(impl: Any) -> None:
    for rounds, keep in ((2, 1), (3, 1), (5, 2)):
        messages = agent_loop(rounds)
        want = _cleared(messages, rounds - keep)
        threshold = _tokens(impl, want) + 1
        case = f"one instruction, {rounds} tool rounds, keep_recent_tool_rounds {keep}"
        out = _view(case, lambda m=messages, k=keep, t=threshold: _compact(
            impl, m, Recorder(), token_threshold=t, keep_recent_tool_rounds=k))
        _expect(f"{case}: the view", list(out.messages), want)
        _expect(f"{case}: applied_layers", tuple(out.applied_layers), ("turn_pruning",))


def older_turns_become_one_summary(impl: Any) -> None:
    for turns in (2, 3, 4):
        messages = chat(turns)
        summarizer = Recorder("S")
        case = f"{turns} plain turns, summary_keep_recent_turns 1"
        out = _view(case, lambda m=messages, s=summarizer: _compact(
            impl, m, s, token_threshold=1, keep_recent_turns=100,
            summary_keep_recent_turns=1))
        want = [summary(2 * turns - 2), *messages[-2:]]
        _expect(f"{case}: the view", list(out.messages), want)
        given = summarizer.given[0] if summarizer.given else ""
        if f"request {turns - 1}" not in given or f"request {turns}" in given:
            raise ContractBroken(f"smallest case: {case} — the summarizer should see the "
                                 f"older turns only, got {given[:80]!r}")


def older_rounds_become_one_summary_after_the_instruction(impl: Any) -> None:
    cases = []
    for rounds in (2, 3, 5):
        messages = agent_loop(rounds)
        want = [messages[0], summary(2 * rounds - 2), *messages[-3:]]
        cases.append((f"one instruction, {rounds} tool rounds", messages, want))
    late = [user("Port it."), call("t0"), result("t0", "x" * 400), call("t1"),
            result("t1", "y" * 400, then="Also keep a backup."), call("t2"),
            result("t2", "z" * 400), assistant("Done.")]
    cases.append(("a round whose result carries a new instruction", late,
                  [late[0], summary(2), late[3], late[4], late[5], late[6], late[7]]))
    for case, messages, want in cases:
        case = f"{case}, summary_keep_recent_tool_rounds 1"
        out = _view(case, lambda m=messages: _compact(
            impl, m, Recorder("S"), token_threshold=1, keep_recent_turns=100,
            summary_keep_recent_turns=100, keep_recent_tool_rounds=100,
            summary_keep_recent_tool_rounds=1))
        _expect(f"{case}: the view", list(out.messages), want)


def a_failing_summarizer_costs_nothing(impl: Any) -> None:
    for label, summarizer in (("raises TimeoutError", raising),
                              ("returns only whitespace", blank),
                              ("returns None", lambda text: None)):
        for shape, messages in (("3 plain turns", chat(3)), ("4 tool rounds", agent_loop(4))):
            case = f"{shape}, a summarizer that {label}"
            out = _view(case, lambda m=messages, s=summarizer: _compact(
                impl, m, s, token_threshold=1, keep_recent_turns=100,
                keep_recent_tool_rounds=100, summary_keep_recent_turns=1,
                summary_keep_recent_tool_rounds=1))
            _expect(f"{case}: the view", list(out.messages), messages)
            _expect(f"{case}: applied_layers", tuple(out.applied_layers), ())


def a_lie_lands_in_the_summary_only(impl: Any) -> None:
    for shape, messages in (("3 plain turns", chat(3)), ("4 tool rounds", agent_loop(4))):
        state = _state(impl)
        case = f"{shape}, a summarizer that lies"
        out = _view(case, lambda m=messages, s=state: impl.compact_context(
            m, s, summarizer=lambda text: LIE, policy=_policy(
                impl, token_threshold=1, keep_recent_turns=100, keep_recent_tool_rounds=100,
                summary_keep_recent_turns=1, summary_keep_recent_tool_rounds=1)))
        carriers = [i for i, m in enumerate(out.messages) if LIE in str(m["content"])]
        summaries = [i for i, m in enumerate(out.messages)
                     if str(m["content"]).startswith("[conversation_summary of ")]
        if len(carriers) != 1 or carriers != summaries:
            raise ContractBroken(f"smallest case: {case} — expected the lie in the one summary "
                                 f"message, found it in messages {carriers} "
                                 f"(summaries at {summaries})")
        if out.durable_state != _state(impl):
            raise ContractBroken(f"smallest case: {case} — the durable state came back changed")


def a_longer_summary_is_discarded(impl: Any) -> None:
    for shape, messages in (("3 plain turns", chat(3)), ("4 tool rounds", agent_loop(4))):
        case = f"{shape}, a summary of 4,000 characters"
        out = _view(case, lambda m=messages: _compact(
            impl, m, Recorder("w" * 4_000), token_threshold=1, keep_recent_turns=100,
            keep_recent_tool_rounds=100, summary_keep_recent_turns=1,
            summary_keep_recent_tool_rounds=1))
        _expect(f"{case}: the view", list(out.messages), messages)
        _expect(f"{case}: applied_layers", tuple(out.applied_layers), ())


def too_big_after_every_layer_is_refused(impl: Any) -> None:
    for lines in (100, 300):
        paste = "".join(f"09:{n % 60:02d} ERROR worker {n}: reset\n" for n in range(lines))
        messages = [*chat(2), user("Here is the crash log:\n" + paste)]
        before = copy.deepcopy(messages)
        tokens = _tokens(impl, messages)
        limit = _tokens(impl, messages[-1:])  # the last turn alone: no layer goes below it
        case = f"a pasted log of {lines} lines ({tokens:,} tokens), hard_limit {limit:,}"
        try:
            out = _compact(impl, messages, Recorder(), token_threshold=1, hard_limit=limit,
                           keep_recent_turns=1, summary_keep_recent_turns=1)
        except Exception as exc:
            if isinstance(exc, NotImplementedError):
                raise
            if not is_a(exc, impl.MessageViewLimitExceeded):
                raise ContractBroken(f"smallest case: {case} — expected "
                                     f"MessageViewLimitExceeded, got {type(exc).__name__}: "
                                     f"{exc}") from None
            text = str(exc)
            if f"hard_limit is {limit:,}" not in text or f"from {tokens:,}" not in text:
                raise ContractBroken(f"smallest case: {case} — the message should give the "
                                     f"figures (from {tokens:,}; hard_limit is {limit:,}), "
                                     f"got {text[:160]!r}") from None
        else:
            raise ContractBroken(f"smallest case: {case} — expected MessageViewLimitExceeded, "
                                 f"got a view of {out.tokens_after:,} tokens")
        _expect(f"{case}: the caller's list afterwards", messages, before)


def a_broken_pair_is_refused_before_any_layer(impl: Any) -> None:
    cases = (("a call without its result", [user("go"), call("c1")], "messages[1]"),
             ("a result without its call", [user("go"), result("c9", "ok")], "messages[1]"),
             ("a call answered twice", [user("go"), call("c1"), result("c1", "a"),
                                        result("c1", "b")], "messages[3]"))
    for label, messages, where in cases:
        summarizer = Recorder()
        case = f"{label}: {shorts(messages)}"
        try:
            _compact(impl, messages, summarizer, token_threshold=1)
        except Exception as exc:
            if isinstance(exc, NotImplementedError):
                raise
            if not is_a(exc, impl.ToolProtocolError):
                raise ContractBroken(f"smallest case: {case} — expected ToolProtocolError, got "
                                     f"{type(exc).__name__}: {exc}") from None
            if where not in str(exc):
                raise ContractBroken(f"smallest case: {case} — the message should name "
                                     f"{where}, got {str(exc)[:120]!r}") from None
        else:
            raise ContractBroken(f"smallest case: {case} — expected ToolProtocolError, but it "
                                 "was compacted")
        _expect(f"{case}: summarizer calls", len(summarizer.given), 0)


def forty_tool_rounds_fit_under_the_hard_limit(impl: Any) -> None:
    for rounds in (12, 40):
        messages = agent_loop(rounds, chars=4_000)
        tokens = _tokens(impl, messages)
        case = (f"one instruction and {rounds} tool rounds of 4,000 characters "
                f"({tokens:,} tokens), token_threshold 2,000, hard_limit 8,000, the default "
                "rounds kept")
        out = _view(case, lambda m=messages: impl.compact_context(
            m, _state(impl), summarizer=lambda text: LIE,
            policy=impl.CompactionPolicy(token_threshold=2_000, hard_limit=8_000,
                                         file_read_tools=())))
        view = list(out.messages)
        _expect(f"{case}: the first message", view[:1], messages[:1])
        if view[-7:] != messages[-7:]:
            raise ContractBroken(f"smallest case: {case} — expected the last 3 rounds and the "
                                 f"answer whole, got {shorts(view[-7:])}")
        if not out.tokens_after < 8_000 or out.tokens_after != _tokens(impl, view):
            raise ContractBroken(f"smallest case: {case} — tokens_after {out.tokens_after} "
                                 f"for a view of {_tokens(impl, view)}")
        open_calls: set[str] = set()
        for message in view:
            for block in message["content"] if isinstance(message["content"], list) else ():
                if block["type"] == "tool_use":
                    open_calls.add(block["id"])
                elif block["type"] == "tool_result":
                    open_calls.discard(block["tool_use_id"])
        _expect(f"{case}: calls left without a result", sorted(open_calls), [])


SUITE = ContractSuite(N_("compaction"), (
    Contract(N_("under the threshold the view comes back equal and nothing runs; at it, "
                "compaction starts"), under_the_threshold_nothing_runs),
    Contract(N_("the caller's messages are never changed, and the durable state comes back as "
                "given"), the_caller_keeps_its_messages),
    Contract(N_("a tool result over the cap keeps the longest prefix that fits and says how much "
                "was cut"), oversized_results_are_cut),
    Contract(N_("a file read again later leaves the earlier read as a marker naming the later "
                "call"), a_superseded_read_becomes_a_marker),
    Contract(N_("close_tool_pairs returns the smallest superset of keep that splits no tool pair"),
             pairs_close_to_the_smallest_superset),
    Contract(N_("pruning keeps the first message and the most recent turns whole, pairs "
                "included"), pruning_keeps_the_first_message_and_recent_turns),
    Contract(N_("inside one long task, all but the most recent tool rounds have their results "
                "cleared to a placeholder naming the call"), old_tool_results_are_cleared),
    Contract(N_("the turns before the most recent become one summary message at the start"),
             older_turns_become_one_summary),
    Contract(N_("inside one long task, older tool rounds become one summary after the "
                "instruction; instructions and recent rounds stay"),
             older_rounds_become_one_summary_after_the_instruction),
    Contract(N_("a summarizer that raises or returns no text changes nothing"),
             a_failing_summarizer_costs_nothing),
    Contract(N_("a lying summarizer's text lands in the summary and nowhere else; the durable "
                "state is untouched"), a_lie_lands_in_the_summary_only),
    Contract(N_("a summary longer than what it replaces is discarded"),
             a_longer_summary_is_discarded),
    Contract(N_("a view still at or above the hard limit after every layer is refused with its "
                "figures"), too_big_after_every_layer_is_refused),
    Contract(N_("a tool_use without its tool_result, or a result without its call, is refused "
                "before any layer runs, naming its position"),
             a_broken_pair_is_refused_before_any_layer),
    Contract(N_("one instruction and forty tool rounds fit under the hard limit, the instruction "
                "and the last rounds whole"), forty_tool_rounds_fit_under_the_hard_limit),
))
