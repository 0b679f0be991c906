"""The walkthrough: one contract suite, run on the from-scratch run and on the library's.

Every contract is parametrized over both implementations. Then the exercise's checker is
shown to reject plausible wrong glue (naming the contract it breaks) and to accept glue
written differently from the chapter's.
"""

from __future__ import annotations

import dataclasses

import pytest

from labmem.exercises import walkthrough as exercises
from labmem.exercises.suites.walkthrough import BOUNDARY_CHECKS, PRODUCTION, SCRATCH, SUITE
from labmem.scratch import s12
from labmem.scratch import walkthrough as scratch
from labmem.walkthrough import CHECKS

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}
NAMES = SUITE.names()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=str)
@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_contract_holds_on_every_implementation(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def test_the_suite_starts_with_the_boundary_checks_of_s09_to_s12():
    assert 8 <= len(NAMES) <= 15 and len(set(NAMES)) == len(NAMES)
    assert tuple(name.split(":")[0] for name in NAMES[:5]) == BOUNDARY_CHECKS
    assert set(BOUNDARY_CHECKS) <= set(CHECKS)
    assert repr(SUITE.run(SCRATCH, who="the from-scratch")) == (
        f"✓ the from-scratch walkthrough passes all {len(NAMES)} contracts")


def test_the_from_scratch_run_is_small_and_passes_its_checks(tmp_path):
    assert len(open(scratch.__file__, encoding="utf-8").read().splitlines()) <= 300
    checks = scratch.run_all(scratch.Home(tmp_path), scratch.Clock("2026-08-01T12:00:00Z"))
    assert checks == dict.fromkeys(BOUNDARY_CHECKS, True)


def test_compare_runs_is_deterministic(tmp_path):
    first = exercises.compare_runs(tmp_path / "a")  # and a longer path: no path is stored
    assert first == exercises.compare_runs(tmp_path / "a-longer-directory" / "b")
    assert first["from scratch"]["boundary checks passed"] == "5 of 5"
    assert first["library"]["boundary checks passed"] == f"{len(CHECKS)} of {len(CHECKS)}"


# -- the exercise: the learner's glue in the module, judged by the suite --------------------

def stub(*args, **kwargs):
    raise NotImplementedError



def test_stubs_are_reported_as_not_written_yet():
    report = exercises.check_layer(hand_to_workspace=stub, hand_to_store=stub)
    text = repr(report)
    assert text.startswith(f"✗ your walkthrough passes 0 of {len(NAMES)} contracts; failing:")
    assert "not written yet (stub() raises NotImplementedError)" in text


def test_the_chapters_pieces_pass_and_unknown_pieces_are_refused():
    pieces = {name: getattr(scratch, name) for name in exercises.PIECES}
    assert repr(exercises.check_layer(**pieces)) == (
        f"✓ your walkthrough passes all {len(NAMES)} contracts")
    with pytest.raises(TypeError, match="'hand_to_stores'"):
        exercises.check_layer(hand_to_stores=stub)


# hand_to_workspace: wrong, then right in another way ---------------------------------------

def workspace_without_evidence(workspace, candidate):
    """Forgets the evidence: the fact then rests on itself, so a retry looks like a repeat."""
    return workspace.append(candidate.summary, kind="decision", importance=3)


def workspace_important_enough(workspace, candidate):
    """Raises the importance to the bar, so one session curates the decision alone."""
    return workspace.append(candidate.summary, kind="decision", importance=4,
                            evidence=(candidate.source.source_id,))


def workspace_as_outcome(workspace, candidate):
    """Logs the decision as an outcome: another kind, so never the same entry as the
    earlier session's decision."""
    return workspace.append(candidate.summary, kind="outcome", importance=3,
                            evidence=(candidate.source.source_id,))


def workspace_citing_the_title(workspace, candidate):
    """Cites the source's title instead of its id: no reader can follow it to the event."""
    return workspace.append(candidate.summary, kind="decision", importance=3,
                            evidence=(candidate.source.title,))


def workspace_written_differently(workspace, candidate):
    """Keyword arguments, the importance derived from the policy's bar."""
    source_id = candidate.source.source_id
    return workspace.append(content=candidate.summary, kind="decision",
                            importance=scratch.POLICY.minimum_importance - 1,
                            evidence=tuple([source_id]))


@pytest.mark.parametrize("wrong, broken", [
    (workspace_without_evidence, NAMES[6]),
    (workspace_important_enough, NAMES[6]),
    (workspace_as_outcome, NAMES[1]),
    (workspace_citing_the_title, NAMES[5]),
])
def test_wrong_hand_to_workspace_is_rejected(wrong, broken):
    report = exercises.check_layer(hand_to_workspace=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_hand_to_workspace_written_differently_is_accepted():
    assert exercises.check_layer(hand_to_workspace=workspace_written_differently).ok


# hand_to_store ------------------------------------------------------------------------------

def _record(store, candidate, stored_at, *, memory_id=None, captured_at=None,
            source_type=None):
    origin = candidate.source
    source = s12.MemorySource(origin.source_id, source_type or origin.source_type, origin.title,
                              captured_at or s12.utc_time(origin.captured_at))
    return s12.StoredMemory(memory_id or scratch.memory_id_for(candidate), store.user_scope,
                            s12.CONVERSATION, candidate.summary, candidate.summary, source,
                            stored_at)


def store_without_looking_first(store, candidate, *, stored_at):
    """Appends every time: a retry hits the store's duplicate refusal."""
    return store.append(_record(store, candidate, stored_at))


def store_counting_ids(store, candidate, *, stored_at):
    """Numbers records in arrival order: a retry gets a new number, so a second copy."""
    memory_id = f"conversation-{len(store.read_all()) + 1}"
    return store.append(_record(store, candidate, stored_at, memory_id=memory_id))


def store_by_summary_only(store, candidate, *, stored_at):
    """Derives the id from the summary alone: another event with the same words is taken
    for a retry."""
    import hashlib
    memory_id = f"conversation-{hashlib.sha256(candidate.summary.encode()).hexdigest()[:16]}"
    for record in store.read_all():
        if record.memory_id == memory_id:
            return record
    return store.append(_record(store, candidate, stored_at, memory_id=memory_id))


def store_dated_when_stored(store, candidate, *, stored_at):
    """Dates the source by when it was stored, not when the event happened."""
    for record in store.read_all():
        if record.memory_id == scratch.memory_id_for(candidate):
            return record
    return store.append(_record(store, candidate, stored_at, captured_at=stored_at))


def store_retyping_the_source(store, candidate, *, stored_at):
    """Calls every source a conversation: the record no longer says it is an event."""
    for record in store.read_all():
        if record.memory_id == scratch.memory_id_for(candidate):
            return record
    return store.append(_record(store, candidate, stored_at, source_type="conversation"))


def store_written_differently(store, candidate, *, stored_at):
    """Tries the append and, on the duplicate refusal, returns what is stored."""
    record = _record(store, candidate, stored_at)
    try:
        return store.append(record)
    except s12.DuplicateError:
        by_id = {r.memory_id: r for r in store.read_all()}
        return by_id[record.memory_id]


@pytest.mark.parametrize("wrong, broken", [
    (store_without_looking_first, NAMES[8]),
    (store_counting_ids, NAMES[8]),
    (store_by_summary_only, NAMES[9]),
    (store_dated_when_stored, NAMES[7]),
    (store_retyping_the_source, NAMES[7]),
])
def test_wrong_hand_to_store_is_rejected(wrong, broken):
    report = exercises.check_layer(hand_to_store=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_hand_to_store_written_differently_is_accepted():
    assert exercises.check_layer(hand_to_store=store_written_differently).ok


def test_a_wrong_piece_names_its_smallest_case():
    report = exercises.check_layer(hand_to_store=store_dated_when_stored)
    (detail,) = [r.detail for r in report.failing if r.contract == NAMES[7]]
    assert detail.startswith("smallest case: candidate of event #2 handed to alice's empty "
                             "store an hour later: the stored record's source"), detail


def test_the_records_are_frozen():
    assert dataclasses.is_dataclass(scratch.Run) and scratch.Run.__dataclass_params__.frozen
