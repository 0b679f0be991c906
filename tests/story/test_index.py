"""Contract 5: index.db (SQLite), summaries with foreshadowing, state.json, and bootstrap."""

import sqlite3

import pytest

from labmem.core.clock import SteppingClock
from labmem.story import ChapterIndex, MemoryContractAdapter, StoryProject, bootstrap
from labmem.story.errors import StoryCorruptionError, StoryNotFoundError
from labmem.story.evidence import (
    ChapterSummary,
    Foreshadowing,
    parse_summary,
    read_state,
    render_summary,
)
from labmem.story.sample import load_sample_story
from labmem.story.scratchpad import load_scratchpad

T0 = "2026-09-01T00:00:00Z"


@pytest.fixture
def story(tmp_path):
    adapter = MemoryContractAdapter(tmp_path / "proj", clock=SteppingClock(T0), max_items=1000)
    (tmp_path / "proj").mkdir()
    for chapter in load_sample_story():
        adapter.commit_chapter(chapter.result, summary=chapter.summary, outline=chapter.outline)
    return adapter


def test_5_index_is_a_real_sqlite_database(story):
    with sqlite3.connect(story.project.index_path) as db:
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables == {"state_changes", "relationships", "appearances", "loops"}
        assert db.execute("SELECT count(*) FROM state_changes").fetchone()[0] == 28
    index = ChapterIndex(story.project.index_path)
    assert index.chapters() == list(range(1, 13))
    late = [r for r in index.state_changes(9, 9) if r.source_chapter != r.chapter]
    assert [(r.entity, r.field, r.new, r.source_chapter) for r in late] == [
        ("Mara Venn", "lamp hook", "cracked", 3)]


def test_5_recording_a_chapter_twice_keeps_one_copy(tmp_path):
    index = ChapterIndex(tmp_path / "index.db")
    result = {"chapter": 3, "state_changes": [{"entity": "A", "field": "f", "new": "x"}],
              "appearances": ["B"]}
    index.record_chapter(result)
    index.record_chapter(result)
    assert len(index.state_changes()) == 1
    assert index.appearances() == [(3, "A"), (3, "B")]


def test_5_a_corrupt_index_is_reported(tmp_path):
    (tmp_path / "index.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoryCorruptionError, match="index.db"):
        ChapterIndex(tmp_path / "index.db").state_changes()


def test_5_summaries_round_trip_with_foreshadowing_block():
    summary = ChapterSummary(2, "The Torn Page", "Mara finds a page torn out.",
                             (Foreshadowing("open", "the page", "who tore it?"),))
    text = render_summary(summary)
    assert "## Foreshadowing\n- open: the page — who tore it?" in text
    assert parse_summary(2, text) == summary
    with pytest.raises(StoryCorruptionError, match="line 6"):
        parse_summary(2, text.replace("- open:", "- maybe:"))


def test_5_state_json_tracks_protagonist_progress_and_threads(story):
    state = read_state(story.project)
    assert state["progress"] == {"last_chapter": 12}
    assert state["protagonist"]["name"] == "Mara Venn"
    assert state["protagonist"]["lamp hook"] == "mended"  # the late chapter-3 fact lost
    assert state["plot_threads"] == ["Tobin's night walks", "the drowned bell"]


def test_5_bootstrap_reproduces_state_relationships_and_open_loops(story):
    rebuilt, diff = bootstrap(story.project)
    assert diff.differing == () and diff.only_rebuilt == ()
    stored = load_scratchpad(story.project.scratchpad_path)
    for category in ("character_state", "relationships"):
        want = {(i.key, i.value, i.status) for i in stored.items if i.category == category}
        got = {(i.key, i.value, i.status) for i in rebuilt.items if i.category == category}
        assert got == want, category
    assert {i.subject for i in rebuilt.open_loops()} == {i.subject for i in stored.open_loops()}
    assert "world_rules/tide-oil/burns" in diff.only_stored  # reported, not invented


def test_5_bootstrap_diff_shows_a_lost_scratchpad_and_write_restores_it(story):
    project = story.project
    project.scratchpad_path.unlink()
    _, diff = bootstrap(project)
    assert diff.matching == () and "character_state/Mara Venn/location" in diff.only_rebuilt
    bootstrap(project, write=True)
    _, diff = bootstrap(project)
    assert diff.only_rebuilt == () and diff.differing == ()
    assert len(diff.matching) == 14


def test_5_missing_summary_is_a_clear_error(tmp_path):
    with pytest.raises(StoryNotFoundError, match="chapter 4"):
        MemoryContractAdapter(StoryProject(tmp_path)).read_summary(4)
