"""The story scratchpad: one contract suite, run on the from-scratch module and the library.

Every contract is parametrized over both implementations. Then the exercise's checker is
shown to reject plausible wrong pieces (naming the contract each one breaks) and to accept
correct pieces written differently from the chapter's.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from labmem.exercises import story as exercises
from labmem.exercises.suites.story import PRODUCTION, SCRATCH, SUITE
from labmem.scratch import story as scratch

IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}
NAMES = SUITE.names()
LIVE = ("active", "contradicted")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=str)
@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_contract_holds_on_every_implementation(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def test_the_suite_is_the_layer_in_teaching_order():
    assert 8 <= len(SUITE.contracts) <= 15
    assert len(set(NAMES)) == len(NAMES)
    assert repr(SUITE.run(SCRATCH, who="the from-scratch")) == (
        f"✓ the from-scratch scratchpad passes all {len(NAMES)} contracts")
    assert SUITE.run(PRODUCTION).ok


def stub(*args, **kwargs):
    raise NotImplementedError



def test_stubs_are_reported_as_not_written_yet():
    report = exercises.check_layer(claim_action=stub, upsert=stub)
    assert report.passed == 5 and report.failing_names == set(NAMES[:10])
    text = repr(report)
    assert text.startswith(f"✗ your scratchpad passes 5 of {len(NAMES)} contracts; failing:")
    assert "not written yet (stub() raises NotImplementedError)" in text


def test_the_chapters_pieces_pass_and_unknown_pieces_are_refused():
    assert repr(exercises.check_layer(claim_action=scratch.claim_action,
                                      upsert=scratch.Scratchpad.upsert)) == (
        f"✓ your scratchpad passes all {len(NAMES)} contracts")
    assert exercises.PIECES == ("claim_action", "Scratchpad.upsert")
    with pytest.raises(TypeError, match="'decide'"):
        exercises.check_layer(decide=stub)


# claim_action: wrong, then right in another way --------------------------------------------

def _restates(item, claim):
    return (item.source_chapter == claim.source_chapter and item.value == claim.value
            and item.payload in (claim.payload, {**claim.payload, "late_arrival": True}))


def newest_arrival_wins(stored, claim):
    """Compares nothing but arrival: every live rival is replaced, whatever its chapter."""
    if any(_restates(item, claim) for item in stored):
        return "unchanged"
    live = [item for item in stored if item.status in LIVE]
    if not live:
        return "created"
    if any(item.source_chapter == claim.source_chapter for item in live):
        return "contradicted"
    return "superseded"


def exact_payload(stored, claim):
    """Forgets that a stored late claim carries one more mark than the retried claim."""
    if any(item.source_chapter == claim.source_chapter and item.value == claim.value
           and item.payload == claim.payload for item in stored):
        return "unchanged"
    if not scratch.live(stored):
        return "created"
    return _by_chapter(stored, claim)


def _by_chapter(stored, claim):
    newest = max(item.source_chapter for item in scratch.live(stored))
    if claim.source_chapter < newest:
        return "late"
    return "contradicted" if claim.source_chapter == newest else "superseded"


def same_chapter_is_late(stored, claim):
    """Off by one: a second value of the newest chapter is filed as late history."""
    if any(_restates(item, claim) for item in stored):
        return "unchanged"
    live = scratch.live(stored)
    if not live:
        return "created"
    return "late" if claim.source_chapter <= max(i.source_chapter for i in live) \
        else "superseded"


def restates_only_live_items(stored, claim):
    """Looks for a restatement among the live items only: a retried old claim is re-added."""
    live = scratch.live(stored)
    if any(_restates(item, claim) for item in live):
        return "unchanged"
    if not live:
        return "created"
    return _by_chapter(stored, claim)


def decide_written_differently(stored, claim):
    """One pass over the stored items, then a match on the comparison with the newest."""
    newest = None
    for item in stored:
        if _restates(item, claim):
            return "unchanged"
        if item.status in LIVE:
            newest = item.source_chapter if newest is None else max(newest, item.source_chapter)
    if newest is None:
        return "created"
    match (claim.source_chapter > newest) - (claim.source_chapter < newest):
        case -1:
            return "late"
        case 0:
            return "contradicted"
        case _:
            return "superseded"


@pytest.mark.parametrize("wrong, broken", [
    (newest_arrival_wins, NAMES[4]),
    (exact_payload, NAMES[5]),
    (same_chapter_is_late, NAMES[6]),
    (restates_only_live_items, NAMES[2]),
])
def test_wrong_claim_action_is_rejected(wrong, broken):
    report = exercises.check_layer(claim_action=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)
    assert NAMES[9] in report.failing_names  # the decision table names its smallest case too


def test_claim_action_written_differently_is_accepted():
    assert exercises.check_layer(claim_action=decide_written_differently).ok


def test_a_wrong_decision_names_its_smallest_case():
    report = exercises.check_layer(claim_action=newest_arrival_wins)
    (detail,) = [r.detail for r in report.failing if r.contract == NAMES[9]]
    assert detail == ("smallest case: claim_action([ch2 'b' active], ch1 'a') — expected "
                      "'late', got 'superseded'"), detail


# Scratchpad.upsert -------------------------------------------------------------------------

def _upsert(*, delete_old=False, late_demotes=False, ignore_certainty=False,
            count_retries=False, validate=True):
    """The chapter's upsert with one of its rules left out (each flag, one mistake)."""
    def upsert(self, *, category, subject, field="", value, source_chapter, evidence=(),
               payload=None, layer="semantic"):
        payload = {} if payload is None else payload
        if validate:
            scratch.check_claim(category, subject, field, value, source_chapter, payload)
        claim = scratch.MemoryItem(f"mem-{self.next_id:04d}", layer, category, subject, field,
                                   value, dict(payload), "active", source_chapter,
                                   tuple(evidence), scratch.timestamp(self.clock))
        stored = self.by_key(claim.key)
        action = scratch.claim_action(stored, claim)
        if action == "unchanged":
            if count_retries:
                self.next_id += 1
            return scratch.UpsertOutcome(action, next(i for i in stored
                                                      if scratch.restates(i, claim)))
        self.next_id += 1
        if action == "late" and not late_demotes:
            late = replace(claim, status="outdated",
                           payload={**claim.payload, "late_arrival": True})
            self.items.append(late)
            return scratch.UpsertOutcome(action, late)
        settled = tuple(replace(i, status="outdated") for i in stored
                        if i.status == "tentative" and i.source_chapter <= source_chapter)
        if claim.is_uncertain and not ignore_certainty:
            return self._store(replace(claim, status="tentative"), "tentative", settled)
        rivals = scratch.live(stored)
        if action == "contradicted":
            demoted = tuple(replace(i, status="contradicted") for i in rivals
                            if i.source_chapter == source_chapter)
            return self._store(replace(claim, status="contradicted"), action,
                               demoted + settled)
        if delete_old:
            gone = {i.id for i in rivals}
            self.items = [i for i in self.items if i.id not in gone]
            return self._store(claim, action, settled)
        demoted = tuple(replace(i, status="outdated") for i in rivals)
        return self._store(claim, action, demoted + settled)

    return upsert


def upsert_written_differently(self, *, category, subject, field="", value, source_chapter,
                               evidence=(), payload=None, layer="semantic"):
    """Builds the new list of items in one comprehension instead of replacing by id."""
    payload = {} if payload is None else payload
    scratch.check_claim(category, subject, field, value, source_chapter, payload)
    payload = dict(payload)
    claim = scratch.MemoryItem(f"mem-{self.next_id:04d}", layer, category, subject, field,
                               value, payload, "active", source_chapter, tuple(evidence),
                               scratch.timestamp(self.clock))
    stored = [item for item in self.items if item.key == claim.key]
    action = scratch.claim_action(stored, claim)
    if action == "unchanged":
        same = [item for item in stored if scratch.restates(item, claim)]
        return scratch.UpsertOutcome(action, same[0])
    self.next_id += 1

    def new_status(item):
        if item.key != claim.key or action == "late":
            return item.status
        if item.status == "tentative" and item.source_chapter <= source_chapter:
            return "outdated"
        if item.status in LIVE and not claim.is_uncertain:
            same_chapter = item.source_chapter == source_chapter
            return "contradicted" if action == "contradicted" and same_chapter else "outdated"
        return item.status

    changed = [replace(item, status=new_status(item)) for item in self.items]
    demoted = tuple(new for old, new in zip(self.items, changed, strict=True)
                    if new.status != old.status)
    if action == "late":
        claim = replace(claim, status="outdated", payload={**payload, "late_arrival": True})
    elif claim.is_uncertain:
        claim, action = replace(claim, status="tentative"), "tentative"
    elif action == "contradicted":
        claim = replace(claim, status="contradicted")
    self.items = changed + [claim]
    return scratch.UpsertOutcome(action, claim, demoted)


@pytest.mark.parametrize("wrong, broken", [
    (_upsert(delete_old=True), NAMES[3]),
    (_upsert(late_demotes=True), NAMES[4]),
    (_upsert(ignore_certainty=True), NAMES[7]),
    (_upsert(count_retries=True), NAMES[2]),
    (_upsert(validate=False), NAMES[1]),
], ids=["deletes-old-values", "late-demotes", "ignores-certainty", "counts-retries",
        "no-validation"])
def test_wrong_upsert_is_rejected(wrong, broken):
    report = exercises.check_layer(upsert=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_the_flagless_upsert_is_the_chapters():
    assert exercises.check_layer(upsert=_upsert()).ok


def test_upsert_written_differently_is_accepted():
    assert exercises.check_layer(upsert=upsert_written_differently).ok
