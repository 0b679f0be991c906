"""Contract 6: the memory pack — its layers, its warnings, and a budget that is enforced."""

import pytest

from labmem.core.clock import SteppingClock
from labmem.core.text import estimate_tokens
from labmem.story import MemoryContractAdapter, MemoryOrchestrator
from labmem.story.errors import StoryValidationError
from labmem.story.orchestrator import CUT_TIERS, WORKING_TIERS
from labmem.story.sample import load_sample_story

T0 = "2026-09-01T00:00:00Z"
BIG = 100_000


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    root = tmp_path_factory.mktemp("story")
    adapter = MemoryContractAdapter(root, clock=SteppingClock(T0), max_items=1000)
    for chapter in load_sample_story():
        adapter.commit_chapter(chapter.result, summary=chapter.summary, outline=chapter.outline)
    return adapter


def test_6_working_memory_has_outline_recent_summaries_and_protagonist(story):
    pack = story.orchestrator.build_memory_pack(12, outline="Mara lights a lamp.", budget=BIG)
    wm = pack.working_memory
    assert wm["outline"] == "Mara lights a lamp."
    assert [s[:5] for s in wm["recent_summaries"]] == ["ch10 ", "ch11 "]
    assert wm["protagonist"]["name"] == "Mara Venn"
    assert pack.cut == () and pack.stats["tokens"] == pack.stats["tokens_before_cut"]


def test_6_episodic_memory_is_recent_index_evidence(story):
    pack = story.orchestrator.build_memory_pack(12, outline="x", budget=BIG)
    reported = {int(line.split()[0][2:]) for line in pack.episodic_memory if "[late" not in line}
    assert reported == {9, 10, 11}
    # the chapter-9 report about chapter 3 is shown under chapter 3, marked late (issue 21.5)
    assert "ch3 state Mara Venn.lamp hook -> cracked [late: reported in ch9]" in \
        pack.episodic_memory


def test_6_semantic_memory_is_outline_mentions_or_chapter_window(story):
    plain = story.orchestrator.build_memory_pack(12, outline="A quiet night.", budget=BIG)
    assert all(int(line.rsplit("(ch ", 1)[1][:-1]) >= 9 for line in plain.semantic_memory)
    named = story.orchestrator.build_memory_pack(12, outline="Archivist Quell returns.", budget=BIG)
    extra = set(named.semantic_memory) - set(plain.semantic_memory)
    assert "[story_facts] Archivist Quell.introduced = keeper of the lamp ledger (ch 2)" in extra
    assert "[relationships] Mara Venn.Archivist Quell = betrayed (ch 10)" in named.semantic_memory


def test_6_constraints_are_world_rules_and_only_open_loops(story):
    pack = story.orchestrator.build_memory_pack(12, outline="x", budget=BIG)
    assert [c.split("]")[0] for c in pack.active_constraints].count("[world_rules") == 3
    loops = [c for c in pack.active_constraints if c.startswith("[open_loops]")]
    assert len(loops) == 2 and not any("torn ledger page" in c for c in loops)


def test_6_recent_changes_show_old_to_new(story):
    pack = story.orchestrator.build_memory_pack(13, outline="x", budget=BIG)
    assert "ch12 Mara Venn.location: the lighthouse -> the drowned side" in \
        pack.recent_changes


def test_6_warnings_name_contradictions(story):
    pack = story.orchestrator.build_memory_pack(12, outline="x", budget=BIG)
    assert pack.warnings == ("contradiction: character_state Sable/allegiance at chapter 11: "
                             "'the harbor council' vs \"the smugglers' guild\"",)


def test_6_missing_outline_warns_and_is_not_used_as_the_outline(tmp_path):
    adapter = MemoryContractAdapter(tmp_path, clock=SteppingClock(T0))
    adapter.commit_chapter({"chapter": 1, "entities_new": [
        {"name": "outline", "description": "a word the warning text contains"}]})
    adapter.commit_chapter({"chapter": 9, "state_changes": [
        {"entity": "Mara", "field": "location", "new": "pier"}]})
    pack = adapter.load_context(10, budget=BIG)  # chapter 10 has no outline file
    assert pack.working_memory["outline"] is None
    assert pack.warnings == ("no outline for chapter 10: semantic memory uses the chapter "
                             "window only",)
    assert pack.semantic_memory == ("[character_state] Mara.location = pier (ch 9)",)
    assert "outline:" not in pack.render()


@pytest.mark.parametrize("budget", [120, 200, 300, 500, 800])
def test_6_budget_is_enforced_for_every_chapter_and_cuts_are_listed(story, budget):
    for chapter in load_sample_story():
        n = chapter.chapter
        try:
            pack = story.orchestrator.build_memory_pack(n, outline=chapter.outline, budget=budget)
        except StoryValidationError as exc:
            assert exc.field == "budget"
            continue
        full = story.orchestrator.build_memory_pack(n, outline=chapter.outline, budget=BIG)
        assert estimate_tokens(pack.render()) <= pack.stats["tokens"] <= budget
        kept = {*pack.episodic_memory, *pack.semantic_memory, *pack.active_constraints,
                *pack.recent_changes, *(t for w in WORKING_TIERS for t in pack.working_memory[w])}
        everything = {*full.episodic_memory, *full.semantic_memory, *full.active_constraints,
                      *full.recent_changes,
                      *(t for w in WORKING_TIERS for t in full.working_memory[w])}
        assert kept | {c["text"] for c in pack.cut} == everything
        assert pack.stats["tokens_before_cut"] - sum(c["tokens"] for c in pack.cut) == \
            pack.stats["tokens"]
        if pack.cut:  # nothing of a more important tier went while a cheaper one stayed
            tiers_cut = [CUT_TIERS[c["tier"]] for c in pack.cut]
            assert tiers_cut == sorted(tiers_cut)


def test_6_budget_too_small_or_invalid_is_refused(story):
    orchestrator = MemoryOrchestrator(story.project)
    with pytest.raises(StoryValidationError, match="outline, protagonist and warnings"):
        orchestrator.build_memory_pack(12, outline="x" * 400, budget=50)
    for bad in (0, -1, 1.5, True, "100"):
        with pytest.raises(StoryValidationError) as err:
            orchestrator.build_memory_pack(12, outline="x", budget=bad)
        assert err.value.field == "budget"
    with pytest.raises(StoryValidationError) as err:
        orchestrator.build_memory_pack(0, outline="x", budget=100)
    assert err.value.field == "chapter"
