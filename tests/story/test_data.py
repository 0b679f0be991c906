"""Contract 9: the sample story holds the planted edge cases, and memory handles each."""

from labmem.core.clock import SteppingClock
from labmem.story import MemoryContractAdapter, load_scratchpad
from labmem.story.sample import load_sample_story

T0 = "2026-09-01T00:00:00Z"


def test_9_twelve_chapters_with_results_summaries_and_outlines():
    chapters = load_sample_story()
    assert [c.chapter for c in chapters] == list(range(1, 13))
    assert all(c.summary["chapter"] == c.chapter for c in chapters)
    assert [c.chapter for c in chapters if c.outline is None] == [8]


def test_9_planted_cases_late_fact_contradiction_and_closed_loop(tmp_path):
    adapter = MemoryContractAdapter(tmp_path, clock=SteppingClock(T0))
    actions = {}
    for chapter in load_sample_story():
        report = adapter.commit_chapter(chapter.result, summary=chapter.summary)
        actions[chapter.chapter] = report.memory.actions()
    assert actions[9].get("late") == 1
    assert actions[6].get("contradicted") == 1 and actions[11].get("contradicted") == 1
    pad = load_scratchpad(adapter.project.scratchpad_path)
    assert "the torn ledger page" not in {i.subject for i in pad.open_loops()}
    folded = [i for i in pad.items if "folded_ids" in i.payload]
    assert folded, "the default threshold compacts the sample story at least once"
