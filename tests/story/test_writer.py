"""Contract 3: MemoryWriter maps a chapter result into items; closed loops stop being open."""

from contextlib import nullcontext

import pytest

from labmem.core.clock import SteppingClock
from labmem.story import MemoryWriter, load_scratchpad
from labmem.story.errors import StoryValidationError
from tests.procs import run_processes

T0 = "2026-09-01T00:00:00Z"

RESULT = {
    "chapter": 2,
    "state_changes": [{"entity": "Mara", "field": "location", "new": "archive"}],
    "entities_new": [{"name": "Quell", "type": "character", "description": "archivist"}],
    "relationships_new": [{"from": "Mara", "to": "Quell", "type": "wary"}],
    "chapter_meta": {"hook": "a page is missing"},
    "memory_facts": {
        "timeline_events": [{"event": "page found torn"}],
        "world_rules": [{"subject": "ledger", "field": "keeper", "value": "the archivist"}],
        "open_loops": [{"subject": "torn page", "value": "who tore it?"}],
        "reader_promises": [{"subject": "the storm", "value": "show the storm night"}]},
}


def writer(tmp_path, **kw):
    return MemoryWriter(tmp_path / "memory_scratchpad.json", clock=SteppingClock(T0), **kw)


def test_3_every_part_of_a_result_becomes_an_item(tmp_path):
    report = writer(tmp_path).update_from_chapter_result(RESULT)
    assert report.actions() == {"created": 8}
    items = load_scratchpad(tmp_path / "memory_scratchpad.json").items
    got = {(i.category, i.subject, i.field, i.value) for i in items}
    assert got == {
        ("character_state", "Mara", "location", "archive"),
        ("story_facts", "Quell", "introduced", "archivist"),
        ("relationships", "Mara", "Quell", "wary"),
        ("reader_promises", "hook of chapter 2", "", "a page is missing"),
        ("timeline", "chapter 2", "event 1", "page found torn"),
        ("world_rules", "ledger", "keeper", "the archivist"),
        ("open_loops", "torn page", "", "who tore it?"),
        ("reader_promises", "the storm", "", "show the storm night")}
    assert all(i.source_chapter == 2 and i.evidence == ("chapter:2",) for i in items)


def test_3_a_closed_loop_stops_being_open(tmp_path):
    w = writer(tmp_path)
    w.update_from_chapter_result(RESULT)
    pad = load_scratchpad(w.path)
    assert [i.subject for i in pad.open_loops()] == ["torn page"]
    w.update_from_chapter_result({"chapter": 5, "memory_facts": {"closed_loops": [
        {"subject": "torn page", "resolution": "the archivist did it"}]}})
    pad = load_scratchpad(w.path)
    assert pad.open_loops() == []
    closed = [i for i in pad.items if i.is_closed]
    assert [(i.value, i.payload) for i in closed] == [
        ("the archivist did it", {"closed": True, "closed_in": 5})]


def test_3_late_fact_via_source_chapter(tmp_path):
    w = writer(tmp_path)
    w.update_from_chapter_result({"chapter": 5, "state_changes": [
        {"entity": "Mara", "field": "hook", "new": "mended"}]})
    report = w.update_from_chapter_result({"chapter": 9, "state_changes": [
        {"entity": "Mara", "field": "hook", "new": "cracked", "source_chapter": 3}]})
    assert report.actions() == {"late": 1}
    assert [i.value for i in load_scratchpad(w.path).active()] == ["mended"]


def test_3_contradiction_surfaces_as_a_warning(tmp_path):
    report = writer(tmp_path).update_from_chapter_result({"chapter": 6, "state_changes": [
        {"entity": "Ilse", "field": "location", "new": "pier"},
        {"entity": "Ilse", "field": "location", "new": "lighthouse"}]})
    assert report.warnings == ("contradiction in character_state Ilse.location at chapter 6: "
                               "'lighthouse' vs 'pier'",)


@pytest.mark.parametrize("bad, field", [
    ({"chapter": 0}, "result.chapter"),
    ({"chapter": 2, "state_changes": [{"entity": "M", "field": "x"}]},
     "result.state_changes[0].new"),
    ({"chapter": 2, "state_changes": {"entity": "M"}}, "result.state_changes"),
    ({"chapter": 2, "state_changes": [{"entity": "M", "field": "x", "new": "y",
                                       "source_chapter": 3}]},
     "result.state_changes[0].source_chapter"),
    ({"chapter": 2, "memory_facts": {"closed_loops": [{"subject": "p"}]}},
     "result.memory_facts.closed_loops[0].resolution"),
    ({"chapter": 2, "chapter_meta": "hook"}, "result.chapter_meta")])
def test_3_a_bad_result_is_refused_and_changes_nothing(tmp_path, bad, field):
    w = writer(tmp_path)
    w.update_from_chapter_result(RESULT)
    before = w.path.read_bytes()
    broken = {**bad, "entities_new": [{"name": "Z", "description": "would be written"}]}
    with pytest.raises(StoryValidationError) as err:
        w.update_from_chapter_result(broken)
    assert err.value.field == field
    assert w.path.read_bytes() == before


def _commit_many(path, worker, count, barrier):
    barrier.wait()
    w = MemoryWriter(path, clock=SteppingClock(T0))
    for n in range(count):
        w.update_from_chapter_result({"chapter": n + 1, "state_changes": [
            {"entity": f"worker-{worker}", "field": f"f{n}", "new": "x"}]})


def test_3_two_processes_lose_no_update(tmp_path):
    path = tmp_path / "memory_scratchpad.json"
    run_processes(_commit_many, lambda w, s: (path, w, 8, s.start), 2, expect=0)
    pad = load_scratchpad(path)
    assert len(pad.items) == 16
    assert len({i.id for i in pad.items}) == 16


def _commit_many_unlocked(path, worker, count, start, pause):
    """A writer without the lock that pauses (≤ 2 s, at a shared barrier) between reading
    and saving the scratchpad, so every writer reads the same old state before anyone saves."""
    from labmem.resilience import pause_before
    from labmem.story.scratchpad import Scratchpad

    pause_before(Scratchpad, "save", pause)
    start.wait()
    w = MemoryWriter(path, clock=SteppingClock(T0), lock_factory=lambda p: nullcontext())
    for n in range(count):
        w.update_from_chapter_result({"chapter": n + 1, "state_changes": [
            {"entity": f"worker-{worker}", "field": f"f{n}", "new": "x"}]})


def test_3_control_without_the_lock_updates_are_lost(tmp_path):
    """Deterministic: with the read-save window widened, unlocked writers overwrite
    each other; the lock is what makes the test above pass."""
    path = tmp_path / "memory_scratchpad.json"
    run_processes(_commit_many_unlocked, lambda w, s: (path, w, 5, s.start, s.pause), 4,
                  expect=0)
    assert len(load_scratchpad(path).items) < 20


def test_3_a_retried_commit_changes_nothing(tmp_path):
    w = writer(tmp_path)
    contradicting = {"chapter": 6, "state_changes": [
        {"entity": "Ilse", "field": "location", "new": "pier"},
        {"entity": "Ilse", "field": "location", "new": "lighthouse"}]}
    for result in (RESULT, contradicting):
        w.update_from_chapter_result(result)
    before = load_scratchpad(w.path).items
    for result in (RESULT, contradicting):
        report = w.update_from_chapter_result(result)
        assert set(report.actions()) == {"unchanged"}
    assert load_scratchpad(w.path).items == before
