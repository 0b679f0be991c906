"""s14 compaction: one contract suite, run on the from-scratch layer and on the library's.

Every contract is parametrized over both implementations. Then the library's compaction is
held equal to the from-scratch module on generated conversations, and the exercise's
checker is shown to reject plausible wrong pieces (naming the contract they break) and to
accept correct pieces written differently from the chapter's.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem import context as library
from labmem.exercises import s14_compaction as exercises
from labmem.exercises.suites.s14_compaction import PRODUCTION, SCRATCH, SUITE
from labmem.scratch import s14_compaction as scratch
from labmem.scratch.s14_compaction import (
    blocks,
    estimate_tokens,
    is_summary,
    result_text,
    round_starts,
    summary_note,
    tool_label,
    turn_starts,
)

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}
NAMES = SUITE.names()
TRUNCATION, DEDUP, PAIRS, PRUNING, CLEARING, TURN_SUMMARY, ROUND_SUMMARY, FAILING, LIE, \
    LONGER, HARD_LIMIT, BROKEN_PAIR, FORTY = NAMES[2:]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=str)
@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_contract_holds_on_every_implementation(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def test_the_suite_is_the_layer_in_teaching_order():
    assert 8 <= len(SUITE.contracts) <= 15
    assert len(set(NAMES)) == len(NAMES)
    assert repr(SUITE.run(SCRATCH, who="the from-scratch")) == (
        f"✓ the from-scratch compaction passes all {len(NAMES)} contracts")
    assert "forty tool rounds" in FORTY


# -- the library compacts exactly as the module does ------------------------------------

def _conversation(actions: list[str], sizes: list[int]) -> list[dict]:
    """A valid conversation from a list of actions (``user``, ``assistant``, ``call``,
    ``read``, ``answer``), sizes cycling through ``sizes``; open calls are answered."""
    messages: list[dict] = [{"role": "user", "content": "Begin the task."}]
    open_calls: list[tuple[str, str]] = []
    for n, action in enumerate(actions):
        size = sizes[n % len(sizes)]
        if action in ("user", "assistant"):
            messages.append({"role": action, "content": f"{action} {n} " + "w" * size})
        elif action in ("call", "read"):
            tool = "read_file" if action == "read" else "bash"
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"c{n}", "name": tool,
                 "input": {"path": f"f{n % 3}.py"}}]})
            open_calls.append((f"c{n}", "x" * size))
        elif action == "answer" and open_calls:
            call_id, body = open_calls.pop(0)
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": body}]})
    for call_id, body in open_calls:
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": body}]})
    return messages


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(("user", "assistant", "call", "read", "answer", "answer")),
                max_size=24),
       st.lists(st.integers(1, 900), min_size=1, max_size=4),
       st.integers(20, 3_000), st.integers(1, 4), st.integers(1, 4), st.booleans())
def test_the_library_compacts_as_the_module_does(actions, sizes, threshold, keep_turns,
                                                 keep_rounds, summarizer_fails):
    messages = _conversation(actions, sizes)
    settings_ = {"token_threshold": threshold, "hard_limit": 1_000_000,
                 "max_tool_result_tokens": 100, "keep_recent_turns": keep_turns,
                 "summary_keep_recent_turns": keep_turns, "keep_recent_tool_rounds": keep_rounds,
                 "summary_keep_recent_tool_rounds": keep_rounds}

    def summarizer(text: str) -> str:
        if summarizer_fails:
            raise TimeoutError("no answer")
        return f"summary of {len(text)} characters"

    mine = scratch.compact_context(messages, scratch.DurableContextState(),
                                   summarizer=summarizer,
                                   policy=scratch.CompactionPolicy(**settings_))
    theirs = library.compact_context(messages, library.DurableContextState(),
                                     summarizer=summarizer,
                                     policy=library.CompactionPolicy(**settings_))
    assert list(mine.messages) == list(theirs.messages)
    assert (mine.tokens_before, mine.tokens_after, mine.applied_layers) == (
        theirs.tokens_before, theirs.tokens_after, theirs.applied_layers)


def test_the_measured_table_is_computed_in_one_run():
    rows = exercises.compare_work()
    assert [row["same view"] for row in rows] == [True, True, True]
    assert all(row["steps traced (library)"] >= 3 for row in rows)
    outcomes = exercises.validation_outcomes()
    assert all(row["library"] != "returned" for row in outcomes)
    assert sum(row["from scratch"] == "returned" for row in outcomes) == 4


# -- the exercise: the learner's pieces in the module, judged by the suite ----------------

def stub(*args):
    raise NotImplementedError



def check(**pieces):
    return exercises.check_layer(**pieces)


def test_stubs_are_reported_as_not_written_yet():
    report = check(close_tool_pairs=stub, clear_old_tool_results=stub, summarize_rounds=stub)
    assert {TRUNCATION, DEDUP, BROKEN_PAIR} == set(NAMES) - report.failing_names
    text = repr(report)
    assert text.startswith(f"✗ your compaction passes 3 of {len(NAMES)} contracts; failing:")
    assert "not written yet (stub() raises NotImplementedError)" in text


def test_the_chapters_pieces_pass_and_unknown_pieces_are_refused():
    pieces = {name: getattr(scratch, name) for name in exercises.PIECES}
    assert repr(check(**pieces)) == f"✓ your compaction passes all {len(NAMES)} contracts"
    with pytest.raises(TypeError, match="'close_pairs'"):
        check(close_pairs=stub)


# close_tool_pairs: wrong, then right in another way --------------------------------------

def _where(messages):
    use_at, result_at = {}, {}
    for i, message in enumerate(messages):
        for block in blocks(message):
            if block["type"] == "tool_use":
                use_at[block["id"]] = i
            elif block["type"] == "tool_result":
                result_at[block["tool_use_id"]] = i
    return use_at, result_at


def pairs_in_one_pass(messages, keep):
    """Adds the partners of the wanted messages once, and stops."""
    use_at, result_at = _where(messages)
    kept = set(keep)
    for call, i in use_at.items():
        if i in keep or result_at[call] in keep:
            kept |= {i, result_at[call]}
    return kept


def results_follow_calls_only(messages, keep):
    """A kept call brings its result, but a kept result does not bring its call."""
    use_at, result_at = _where(messages)
    return set(keep) | {result_at[call] for call, i in use_at.items() if i in keep}


def keep_as_given(messages, keep):
    """Trusts the layer: returns keep unchanged."""
    return set(keep)


def keep_everything(messages, keep):
    """Splits no pair by keeping every message — but it is not the smallest superset."""
    return set(range(len(messages)))


@pytest.mark.parametrize(("wrong", "broken"), [
    (pairs_in_one_pass, {PAIRS, PRUNING}),
    (results_follow_calls_only, {PAIRS}),
    (keep_as_given, {PAIRS, PRUNING}),
    (keep_everything, {PAIRS, PRUNING, TURN_SUMMARY}),
])
def test_wrong_pair_rules_are_named(wrong, broken):
    report = check(close_tool_pairs=wrong)
    assert broken <= report.failing_names, repr(report)
    assert "smallest case:" in repr(report)


def pairs_by_worklist(messages, keep):
    """Right, written differently: a worklist of messages whose partners are still due."""
    partner: dict[int, set[int]] = {}
    use_at, result_at = _where(messages)
    for call, i in use_at.items():
        partner.setdefault(i, set()).add(result_at[call])
        partner.setdefault(result_at[call], set()).add(i)
    kept, todo = set(), list(keep)
    while todo:
        i = todo.pop()
        if i not in kept:
            kept.add(i)
            todo.extend(partner.get(i, ()))
    return kept


# clear_old_tool_results: wrong, then right in another way ---------------------------------

def _marker(use, text):
    return f"[tool_result cleared: {tool_label(use)} — {len(text):,} characters]"


def _clear(messages, rounds_to_clear, marker=_marker):
    uses = {b["id"]: b for i in rounds_to_clear for b in blocks(messages[i])
            if b["type"] == "tool_use"}
    for message in messages[1:]:
        for block in blocks(message):
            if block["type"] == "tool_result" and block["tool_use_id"] in uses:
                text = result_text(block)
                new = marker(uses[block["tool_use_id"]], text)
                if estimate_tokens(new) < estimate_tokens(text):
                    block["content"] = new
    return messages


def clear_every_round(messages, policy):
    """Clears the recent rounds too."""
    return _clear(messages, round_starts(messages))


def clear_the_newest(messages, policy):
    """Counts from the wrong end: keeps the oldest rounds, clears the newest."""
    rounds = round_starts(messages)
    return _clear(messages, rounds[policy.keep_recent_tool_rounds:])


def drop_old_rounds(messages, policy):
    """Deletes the old rounds' calls and results instead of clearing the results."""
    rounds = round_starts(messages)
    older = rounds[:max(0, len(rounds) - policy.keep_recent_tool_rounds)]
    ids = {b["id"] for i in older for b in blocks(messages[i]) if b["type"] == "tool_use"}
    return [m for i, m in enumerate(messages) if i not in older and not any(
        b["type"] == "tool_result" and b["tool_use_id"] in ids for b in blocks(m))]


def clear_without_naming(messages, policy):
    """A placeholder that does not say which call it replaced."""
    rounds = round_starts(messages)
    older = rounds[:max(0, len(rounds) - policy.keep_recent_tool_rounds)]
    return _clear(messages, older, lambda use, text: "[tool_result cleared]")


@pytest.mark.parametrize("wrong", [clear_every_round, clear_the_newest, drop_old_rounds,
                                   clear_without_naming])
def test_wrong_clearing_is_named(wrong):
    report = check(clear_old_tool_results=wrong)
    assert CLEARING in report.failing_names, repr(report)


def clear_by_position(messages, policy):
    """Right, written differently: number the rounds, then clear by a result's round."""
    round_of: dict[str, int] = {}
    use_of: dict[str, dict] = {}
    for number, i in enumerate(round_starts(messages)):
        for block in blocks(messages[i]):
            if block["type"] == "tool_use":
                round_of[block["id"]], use_of[block["id"]] = number, block
    last_old = len(round_starts(messages)) - policy.keep_recent_tool_rounds
    for message in messages[1:]:
        for block in blocks(message):
            call = block.get("tool_use_id")
            if block["type"] == "tool_result" and round_of.get(call, last_old) < last_old:
                text = result_text(block)
                new = _marker(use_of[call], text)
                if estimate_tokens(new) < estimate_tokens(text):
                    block["content"] = new
    return messages


# summarize_rounds: wrong, then right in another way ---------------------------------------

def _summarize(messages, policy, summarizer, *, close=True, instructions=True,
               note_first=False, note_maker=summary_note):
    rounds = round_starts(messages)
    if len(rounds) <= policy.summary_keep_recent_tool_rounds:
        return messages
    wanted = set(range(rounds[-policy.summary_keep_recent_tool_rounds], len(messages)))
    if instructions:
        wanted |= {i for i in turn_starts(messages) if not is_summary(messages[i])}
    if not is_summary(messages[0]):
        wanted.add(0)
    keep = scratch.close_tool_pairs(messages, wanted) if close else wanted
    older = [m for i, m in enumerate(messages) if i not in keep]
    note = note_maker(older, summarizer) if older else None
    if note is None:
        return messages
    kept = [m for i, m in enumerate(messages) if i in keep]
    at = 0 if note_first or 0 not in keep else 1
    return kept[:at] + [note] + kept[at:]


def summary_before_the_instruction(messages, policy, summarizer):
    """Puts the summary first, ahead of the instruction it follows."""
    return _summarize(messages, policy, summarizer, note_first=True)


def summary_splitting_pairs(messages, policy, summarizer):
    """Keeps what it wants without closing it over tool pairs."""
    return _summarize(messages, policy, summarizer, close=False)


def summary_forgetting_instructions(messages, policy, summarizer):
    """Keeps the first message and the recent rounds, not the instructions between."""
    return _summarize(messages, policy, summarizer, instructions=False)


def trusting_note(older, summarizer):
    """Calls the summarizer without guarding against an exception or blank text."""
    text = "\n".join(f"{m['role']}: " + " | ".join(result_text(b) if b["type"] == "tool_result"
                                                   else b.get("text", b.get("name", ""))
                                                   for b in blocks(m)) for m in older)
    return {"role": "user", "content": f"[conversation_summary of {len(older)} earlier "
                                       f"messages]\n{summarizer(text)}"}


def summary_trusting_the_summarizer(messages, policy, summarizer):
    """Builds the note itself and trusts whatever the summarizer does."""
    return _summarize(messages, policy, summarizer, note_maker=trusting_note)


@pytest.mark.parametrize(("wrong", "broken"), [
    (summary_before_the_instruction, ROUND_SUMMARY),
    (summary_splitting_pairs, ROUND_SUMMARY),
    (summary_forgetting_instructions, ROUND_SUMMARY),
    (summary_trusting_the_summarizer, FAILING),
])
def test_wrong_round_summaries_are_named(wrong, broken):
    report = check(summarize_rounds=wrong)
    assert broken in report.failing_names, repr(report)


def summarize_rounds_differently(messages, policy, summarizer):
    """Right, written differently: split the view into kept and older in one walk."""
    rounds = round_starts(messages)
    if len(rounds) <= policy.summary_keep_recent_tool_rounds:
        return messages
    first_recent = rounds[-policy.summary_keep_recent_tool_rounds]
    instructions = set(turn_starts(messages))
    wanted = {i for i in range(len(messages))
              if i >= first_recent or (i in instructions and not is_summary(messages[i]))
              or (i == 0 and not is_summary(messages[0]))}
    keep = pairs_by_worklist(messages, wanted)
    kept, older = [], []
    for i, message in enumerate(messages):
        (kept if i in keep else older).append(message)
    note = summary_note(older, summarizer) if older else None
    if note is None:
        return messages
    return [*kept[:1], note, *kept[1:]] if 0 in keep else [note, *kept]


def test_correct_pieces_written_differently_pass():
    report = check(close_tool_pairs=pairs_by_worklist, clear_old_tool_results=clear_by_position,
                   summarize_rounds=summarize_rounds_differently)
    assert report.ok, repr(report)
