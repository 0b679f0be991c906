"""The upsert decision as a pure rule (``claim_action``), and the scratchpad obeying it."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.story import UPSERT_ACTIONS, MemoryItem, Scratchpad, claim_action

T0 = "2026-09-01T00:00:00Z"
KEY = {"category": "character_state", "subject": "Ilse", "field": "location"}


def item(chapter, value, status="active", payload=None, number=1):
    return MemoryItem(id=f"mem-{number:04d}", layer="semantic", value=value,
                      payload=payload or {}, status=status, source_chapter=chapter,
                      evidence=(), updated_at=T0, **KEY)


def claim(chapter, value, payload=None):
    return item(chapter, value, payload=payload, number=99)


def test_nothing_stored_is_created():
    assert claim_action([], claim(3, "pier")) == "created"


def test_a_newer_chapter_supersedes_every_live_rival():
    assert claim_action([item(2, "pier")], claim(3, "hall")) == "superseded"
    pair = [item(2, "pier", "contradicted"), item(2, "hall", "contradicted", number=2)]
    assert claim_action(pair, claim(4, "bay")) == "superseded"


def test_an_older_chapter_arriving_late_is_late():
    assert claim_action([item(5, "mended")], claim(3, "cracked")) == "late"
    pair = [item(6, "pier", "contradicted"), item(6, "hall", "contradicted", number=2)]
    assert claim_action(pair, claim(4, "harbor")) == "late"  # a late fact settles nothing


def test_the_same_chapter_with_another_value_is_a_contradiction():
    assert claim_action([item(6, "pier")], claim(6, "lighthouse")) == "contradicted"
    # a different payload is a different claim, even with the same value
    assert claim_action([item(6, "pier")], claim(6, "pier", {"witness": "Tobin"})) == \
        "contradicted"


@pytest.mark.parametrize("status", ["active", "outdated", "contradicted"])
def test_a_restatement_is_unchanged_whatever_its_status(status):
    assert claim_action([item(2, "pier", status), item(3, "hall", number=2)],
                        claim(2, "pier")) == "unchanged"


def test_a_retried_late_claim_is_unchanged_despite_its_late_mark():
    stored = [item(5, "mended", number=1),
              item(3, "cracked", "outdated", {"late_arrival": True}, number=2)]
    assert claim_action(stored, claim(3, "cracked")) == "unchanged"


def test_only_live_items_compete():
    # an outdated value from a newer chapter (left by a bootstrap or a hand edit) loses
    assert claim_action([replace(item(7, "hall"), status="outdated")],
                        claim(4, "pier")) == "created"


CLAIMS = st.tuples(st.integers(1, 4), st.sampled_from(("pier", "hall")),
                   st.sampled_from(({}, {"witness": "Tobin"})))


@settings(max_examples=150, deadline=None)
@given(history=st.lists(CLAIMS, max_size=6), incoming=CLAIMS)
def test_upsert_does_what_the_rule_decided(history, incoming):
    pad = Scratchpad(clock=FixedClock(T0))
    for chapter, value, payload in history:
        pad.upsert(**KEY, value=value, source_chapter=chapter, payload=payload)
    chapter, value, payload = incoming
    before = list(pad.items)
    expected = claim_action(before, claim(chapter, value, payload))
    out = pad.upsert(**KEY, value=value, source_chapter=chapter, payload=payload)
    assert out.action == expected and expected in UPSERT_ACTIONS
    if expected == "unchanged":
        assert pad.items == before and out.item in before
    else:
        assert len(pad.items) == len(before) + 1
    live = [i for i in pad.items if i.status in ("active", "contradicted")]
    assert len({i.source_chapter for i in live}) <= 1  # one chapter's claims are current
