"""Contract 7: MemoryContractAdapter's seven calls over one project."""

import pytest

from labmem.core.clock import SteppingClock
from labmem.story import MemoryContractAdapter
from labmem.story.errors import StoryValidationError
from labmem.story.sample import load_sample_story

T0 = "2026-09-01T00:00:00Z"


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    adapter = MemoryContractAdapter(tmp_path_factory.mktemp("p"), clock=SteppingClock(T0))
    for chapter in load_sample_story():
        report = adapter.commit_chapter(chapter.result, summary=chapter.summary,
                                        outline=chapter.outline)
        assert report.chapter == chapter.chapter
    return adapter


def test_7_commit_chapter_writes_every_store(story):
    project = story.project
    assert project.index_path.exists() and project.state_path.exists()
    assert len(list(project.summaries_dir.glob("ch*.md"))) == 12
    assert len(list(project.outlines_dir.glob("ch*.md"))) == 11
    assert project.scratchpad_path.exists()


def test_7_commit_refuses_a_mismatched_summary_and_writes_nothing(tmp_path):
    adapter = MemoryContractAdapter(tmp_path, clock=SteppingClock(T0))
    with pytest.raises(StoryValidationError) as err:
        adapter.commit_chapter({"chapter": 2}, summary={"chapter": 3, "title": "t", "text": "x"})
    assert err.value.field == "summary.chapter"
    assert list(tmp_path.iterdir()) == []


def test_7_load_context_is_the_memory_pack(story):
    pack = story.load_context(13, budget=300)
    assert pack.chapter == 13 and pack.stats["tokens"] <= 300


def test_7_query_entity_shows_current_value_and_history(story):
    rows = [(i.field, i.value, i.status) for i in story.query_entity("Mara Venn")
            if i.category == "character_state" and i.field == "lamp hook"]
    assert rows == [("lamp hook", "cracked", "outdated"), ("lamp hook", "mended", "active")]
    with pytest.raises(StoryValidationError):
        story.query_entity(" ")


def test_7_query_rules_gives_active_world_rules(story):
    rules = {(r.subject, r.field): r.value for r in story.query_rules()}
    assert rules[("tide-oil", "burns")] == "between high tides, and on the drowned side at any hour"
    assert len(rules) == 3


def test_7_read_summary(story):
    summary = story.read_summary(10)
    assert summary.title == "The Storm-Night Page"
    assert summary.foreshadowing[0].state == "closed"


def test_7_open_loops_exclude_the_closed_one(story):
    assert [i.subject for i in story.get_open_loops()] == ["Tobin's night walks",
                                                           "the drowned bell"]


def test_7_timeline_is_complete_and_in_story_order_even_after_folding(story):
    expected = [(c.chapter, e["event"]) for c in load_sample_story()
                for e in c.result["memory_facts"].get("timeline_events", [])]
    assert story.get_timeline() == expected


def test_7_committing_a_chapter_again_is_a_safe_retry(tmp_path):
    adapter = MemoryContractAdapter(tmp_path, clock=SteppingClock(T0))
    chapters = load_sample_story()[:6]
    for chapter in chapters:
        adapter.commit_chapter(chapter.result, summary=chapter.summary)
    pad_before = adapter.project.scratchpad_path.read_bytes()
    rows_before = adapter.index.state_changes()
    for chapter in (chapters[-1], chapters[2]):  # the last one, and an older one
        report = adapter.commit_chapter(chapter.result, summary=chapter.summary)
        assert set(report.memory.actions()) == {"unchanged"}
    assert adapter.index.state_changes() == rows_before
    assert adapter.project.scratchpad_path.read_bytes() == pad_before
