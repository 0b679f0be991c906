"""Contracts 1 and 2: the scratchpad's items, its snapshot, and the upsert rules."""

import json
import os

import pytest

from labmem.core.clock import FixedClock, SteppingClock
from labmem.story import CATEGORIES, STATUSES, MemoryItem, Scratchpad, load_scratchpad
from labmem.story.errors import StoryCorruptionError, StoryValidationError
from labmem.story.scratchpad import dedup_key

T0 = "2026-09-01T00:00:00Z"


def pad():
    return Scratchpad(clock=SteppingClock(T0))


def test_1_categories_statuses_and_item_fields():
    assert CATEGORIES == ("character_state", "story_facts", "world_rules", "timeline",
                          "open_loops", "reader_promises", "relationships")
    assert STATUSES == ("active", "outdated", "contradicted", "tentative")
    item = pad().upsert(category="character_state", subject="Mara", field="location",
                        value="pier", source_chapter=2, evidence=["chapter:2"]).item
    assert list(item.to_dict()) == ["id", "layer", "category", "subject", "field", "value",
                                    "payload", "status", "source_chapter", "evidence",
                                    "updated_at", "reported_chapter"]
    assert item.to_dict()["updated_at"] == "2026-09-01T00:00:00Z"
    assert MemoryItem.from_dict(item.to_dict()) == item


@pytest.mark.parametrize("change, field", [
    ({"category": "gossip"}, "category"), ({"status": "maybe"}, "status"),
    ({"subject": " "}, "subject"), ({"source_chapter": 0}, "source_chapter"),
    ({"source_chapter": True}, "source_chapter"),
    ({"updated_at": "2026-09-01T00:00:00"}, "updated_at"), ({"value": "x" * 2001}, "value")])
def test_1_items_are_validated_naming_the_field(change, field):
    good = pad().upsert(category="timeline", subject="ch1", field="e1", value="v",
                        source_chapter=1).item.to_dict()
    with pytest.raises(StoryValidationError) as err:
        MemoryItem.from_dict({**good, **change})
    assert err.value.field == field


def test_1_snapshot_round_trip_and_atomic_replace(tmp_path, monkeypatch):
    path = tmp_path / "memory_scratchpad.json"
    p = pad()
    p.upsert(category="world_rules", subject="tide-oil", field="burns", value="at high tide",
             source_chapter=1)
    p.save(path)
    before = path.read_bytes()
    assert json.loads(before)["format"] == "labmem.story.scratchpad/v1"
    again = load_scratchpad(path, clock=FixedClock(T0))
    assert again.items == p.items and again.next_id == p.next_id
    again.upsert(category="world_rules", subject="tide-oil", field="burns", value="never",
                 source_chapter=2)

    def boom(*args):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        again.save(path)
    assert path.read_bytes() == before  # a failed save leaves the old file byte-identical
    assert [p.name for p in tmp_path.iterdir()] == ["memory_scratchpad.json"]


def test_1_corrupt_snapshot_is_reported_not_ignored(tmp_path):
    path = tmp_path / "memory_scratchpad.json"
    path.write_text("{not json")
    with pytest.raises(StoryCorruptionError, match="memory_scratchpad.json"):
        load_scratchpad(path)
    path.write_text(json.dumps({"format": "labmem.story.scratchpad/v1", "next_id": 2,
                                "items": [{"id": "x"}]}))
    with pytest.raises(StoryCorruptionError, match="invalid item"):
        load_scratchpad(path)


def test_2_dedup_keys_per_category():
    assert dedup_key("character_state", "Mara", "location") == ("character_state", "Mara",
                                                                "location")
    assert dedup_key("relationships", "Mara", "Ilse") == ("relationships", "Mara", "Ilse")
    assert dedup_key("world_rules", "oil", "burns") == ("world_rules", "oil", "burns")
    assert dedup_key("open_loops", "the page", "anything") == ("open_loops", "the page")


def test_2_newer_value_outdates_the_old_one_and_keeps_it():
    p = pad()
    first = p.upsert(category="character_state", subject="Mara", field="location",
                     value="pier", source_chapter=2).item
    out = p.upsert(category="character_state", subject="Mara", field="location",
                   value="archive", source_chapter=3)
    assert out.action == "superseded" and [d.id for d in out.demoted] == [first.id]
    statuses = {i.value: i.status for i in p.items}
    assert statuses == {"pier": "outdated", "archive": "active"}


def test_2_a_repeat_is_unchanged():
    p = pad()
    p.upsert(category="open_loops", subject="page", value="who?", source_chapter=2)
    out = p.upsert(category="open_loops", subject="page", value="who?", source_chapter=2)
    assert out.action == "unchanged" and len(p.items) == 1


def test_2_edge_late_older_fact_never_demotes_newer_active_value():
    p = pad()
    p.upsert(category="character_state", subject="Mara", field="hook", value="mended",
             source_chapter=5)
    late = p.upsert(category="character_state", subject="Mara", field="hook", value="cracked",
                    source_chapter=3)
    assert late.action == "late" and late.item.status == "outdated"
    assert late.item.payload == {"late_arrival": True}
    assert [(i.value, i.status) for i in p.active()] == [("mended", "active")]


def test_2_edge_same_chapter_different_values_are_contradicted_and_warned():
    p = pad()
    p.upsert(category="character_state", subject="Ilse", field="location", value="pier",
             source_chapter=6)
    out = p.upsert(category="character_state", subject="Ilse", field="location",
                   value="lighthouse", source_chapter=6)
    assert out.action == "contradicted"
    assert sorted(i.value for i in p.contradictions()) == ["lighthouse", "pier"]
    assert p.active() == []
    # a later chapter settles it: both claims become history
    settled = p.upsert(category="character_state", subject="Ilse", field="location",
                       value="hall", source_chapter=8)
    assert settled.action == "superseded" and len(settled.demoted) == 2
    assert p.contradictions() == [] and [i.value for i in p.active()] == ["hall"]


def test_2_edge_a_late_fact_does_not_resolve_a_contradiction():
    p = pad()
    for value in ("pier", "lighthouse"):
        p.upsert(category="character_state", subject="Ilse", field="location", value=value,
                 source_chapter=6)
    out = p.upsert(category="character_state", subject="Ilse", field="location",
                   value="harbor", source_chapter=4)
    assert out.action == "late" and len(p.contradictions()) == 2
