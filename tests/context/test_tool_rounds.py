"""s14 compaction inside one long task: tool rounds count, not only turns (issue item 7)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.context import (
    CompactionPolicy,
    DurableContextState,
    compact_context,
    compaction_steps,
    estimate_messages_tokens,
    outline_messages,
    run_layer,
    validate_tool_protocol,
)
from tests.context.test_compaction import STATE, assistant, call, result, user

INSTRUCTION = "Port the billing service to the new queue and keep every test green."


def agent_loop(rounds=40, result_chars=4_000):
    """One instruction, then ``rounds`` tool rounds, then the answer: one turn."""
    messages = [user(INSTRUCTION)]
    for r in range(rounds):
        messages += [call(f"t{r}", "read_file" if r % 2 else "bash", path=f"src/m{r}.py"),
                     result(f"t{r}", f"output {r} " + "x" * result_chars)]
    return messages + [assistant("All tests pass.")]


POLICY = CompactionPolicy(token_threshold=2_000, hard_limit=8_000, file_read_tools=())


def test_a_single_instruction_agent_loop_is_compacted_below_the_hard_limit():
    messages = agent_loop()
    before = estimate_messages_tokens(messages)
    assert before > 40_000
    out = compact_context(messages, DurableContextState(), summarizer=lambda t: "40 reads done.",
                          policy=POLICY)
    assert out.applied_layers == ("turn_pruning", "conversation_summary")
    assert out.tokens_after < POLICY.hard_limit and out.tokens_after < before // 10
    assert out.messages[0] == messages[0]  # the instruction stays, word for word
    assert out.messages[1]["content"].startswith("[conversation_summary of ")
    assert list(out.messages[-7:]) == messages[-7:]  # the last 3 rounds and the answer
    validate_tool_protocol(out.messages)


def test_pruning_clears_old_results_with_a_placeholder_naming_the_tool():
    messages = agent_loop(rounds=12, result_chars=2_000)
    steps = compaction_steps(messages, summarizer=lambda t: "", policy=CompactionPolicy(
        token_threshold=2_000, hard_limit=50_000, keep_recent_tool_rounds=4, file_read_tools=()))
    pruned = next(s for s in steps if s.name == "turn_pruning")
    assert pruned.applied and len(pruned.messages) == len(messages)  # nothing dropped
    cleared = [o for o in outline_messages(pruned.messages) if o.note.endswith(", cleared")]
    assert [o.index for o in cleared] == [2 * r + 2 for r in range(8)]
    first = pruned.messages[2]["content"][0]["content"]
    assert first == "[tool_result cleared: bash src/m0.py — 2,009 characters]"
    assert pruned.messages[-9:] == tuple(messages[-9:])  # the last 4 rounds in full
    assert {change[1] for change in pruned.changes} == {"pruned"}


def test_clearing_stops_when_pruning_turns_is_enough():
    messages = [user("start")]
    for t in range(10):
        messages += [user(f"turn {t} " + "w" * 400), call(f"c{t}", "bash", cmd="ls"),
                     result(f"c{t}", "small"), assistant("ok")]
    out = compact_context(messages, STATE, summarizer=lambda t: "s", policy=CompactionPolicy(
        token_threshold=700, hard_limit=10_000, keep_recent_turns=2, keep_recent_tool_rounds=1))
    assert out.applied_layers == ("turn_pruning",)
    assert not any("cleared" in o.note for o in outline_messages(out.messages))


@st.composite
def single_instruction_loops(draw):
    messages = [user("do the task " + "i" * draw(st.integers(0, 200)))]
    for n in range(draw(st.integers(0, 30))):
        calls = draw(st.integers(1, 3))  # parallel tool calls in one round
        messages.append({"role": "assistant", "content": (
            [{"type": "text", "text": "thinking"}] if draw(st.booleans()) else []) + [
            {"type": "tool_use", "id": f"r{n}.{k}", "name": draw(st.sampled_from(
                ["read_file", "bash", "grep"])), "input": {"path": f"f{k}.py"}}
            for k in range(calls)]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"r{n}.{k}",
             "content": "r" * draw(st.integers(0, 3_000))} for k in range(calls)]})
    if draw(st.booleans()):
        messages.append(assistant("done"))
    return messages


@settings(max_examples=150, deadline=None)
@given(single_instruction_loops(), st.integers(10, 3_000), st.integers(1, 6), st.integers(1, 4),
       st.sampled_from(["", "short summary", None]))
def test_single_instruction_loops_keep_pairs_and_the_instruction(messages, threshold, keep,
                                                                 keep_summary, summary):
    policy = CompactionPolicy(token_threshold=threshold, hard_limit=10**9,
                              max_tool_result_tokens=200, keep_recent_tool_rounds=keep,
                              summary_keep_recent_tool_rounds=keep_summary)
    out = compact_context(messages, STATE, summarizer=lambda t: summary, policy=policy)
    validate_tool_protocol(out.messages)
    assert all(m["content"] for m in out.messages)
    assert out.messages[0] == messages[0]
    assert out.tokens_after <= out.tokens_before
    rounds = sum(1 for m in messages if m["role"] == "assistant"
                 and any(b["type"] == "tool_use" for b in m["content"]
                         if isinstance(m["content"], list)))
    if out.tokens_before >= threshold and rounds > keep and summary:
        # one long task is compacted too, whenever summarizing its older rounds saves tokens
        # (a summary longer than the few empty rounds it replaces is rightly not applied)
        alone = run_layer("conversation_summary", messages, policy=policy,
                          summarizer=lambda t: summary)
        if estimate_messages_tokens(alone) < out.tokens_before:
            assert out.tokens_after < out.tokens_before
