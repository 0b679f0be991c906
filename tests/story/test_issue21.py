"""Issue 21: closed threads stay closed, the outline filter reads values, the pack shows the
story's time. One test (or more) per numbered item; each fails on the original design."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from labmem.core.clock import SteppingClock
from labmem.story import (
    MemoryContractAdapter,
    Scratchpad,
    StoryProject,
    bootstrap,
    compact,
    load_sample_story,
    load_scratchpad,
    sample_story_dir,
)
from labmem.story.errors import StoryProjectError, StoryValidationError
from labmem.story.orchestrator import CUT_TIERS

T0 = "2026-09-01T00:00:00Z"
BIG = 100_000


def adapter(root, **kwargs):
    return MemoryContractAdapter(root, clock=SteppingClock(T0), **kwargs)


def pack_lines(pack):
    wm = pack.working_memory
    return [*wm["recent_summaries"], *wm["plot_threads"], *wm["disambiguation"],
            *pack.episodic_memory, *pack.semantic_memory, *pack.active_constraints,
            *pack.recent_changes]


# -- 1. bootstrap rebuilds every closure; the dry run lists what --write changes ----------

def _closed_through_memory_facts(root):
    memory = adapter(root)
    memory.commit_chapter({"chapter": 1, "memory_facts": {"open_loops": [
        {"subject": "the drowned bell", "value": "who rings it?"}]}},
        summary={"chapter": 1, "title": "Bell", "text": "A bell rings.", "foreshadowing": [
            {"state": "open", "subject": "the drowned bell", "text": "who rings it?"}]})
    memory.commit_chapter({"chapter": 2, "memory_facts": {"closed_loops": [
        {"subject": "the drowned bell", "resolution": "the keeper rings it"}]}},
        summary={"chapter": 2, "title": "Keeper", "text": "The keeper.", "foreshadowing": []})
    return memory


def test_1_bootstrap_write_keeps_a_thread_closed_by_memory_facts(tmp_path):
    memory = _closed_through_memory_facts(tmp_path)
    assert memory.get_open_loops() == []
    _, dry = bootstrap(memory.project)
    assert dry.changes == ()            # nothing to change: the closure is rebuilt too
    bootstrap(memory.project, write=True)
    assert memory.get_open_loops() == []
    pack = memory.load_context(3, budget=BIG, outline="x")
    assert not any("drowned bell" in line for line in pack.active_constraints)
    assert pack.working_memory["plot_threads"] == []


def test_1_bootstrap_rebuilds_a_closure_after_the_scratchpad_is_lost(tmp_path):
    memory = _closed_through_memory_facts(tmp_path)
    memory.project.scratchpad_path.unlink()
    bootstrap(memory.project, write=True)
    pad = load_scratchpad(memory.project.scratchpad_path)
    assert [i.value for i in pad.items if i.is_closed] == ["the keeper rings it"]
    assert memory.get_open_loops() == []


def test_1_the_dry_run_lists_exactly_what_write_changes(tmp_path):
    memory = adapter(tmp_path)
    for chapter in load_sample_story()[:11]:
        memory.commit_chapter(chapter.result, summary=chapter.summary)
    pad = load_scratchpad(memory.project.scratchpad_path)
    # tamper with the stored pad so that --write has work: drop a relationship, change a
    # location
    mara = next(i for i in pad.items if i.status == "active" and i.name == "Mara Venn.location")
    pad.items = [i for i in pad.items if i.category != "relationships" or i.subject != "Sable"]
    pad.items = [replace(i, value="the moon") if i is mara else i for i in pad.items]
    pad.save(memory.project.scratchpad_path)
    before = load_scratchpad(memory.project.scratchpad_path).items
    from labmem.story.bootstrap import view_changes
    _, dry = bootstrap(memory.project)
    assert dry.changes, "the tampered pad differs from the evidence"
    _, written = bootstrap(memory.project, write=True)
    after = load_scratchpad(memory.project.scratchpad_path).items
    assert view_changes(before, after) == dry.changes == written.changes
    assert ("character_state/Mara Venn/location", "active 'the moon'",
            "active 'the lighthouse'") in dry.changes
    _, again = bootstrap(memory.project)
    assert again.changes == ()


def test_1_cli_dry_run_prints_the_changes(tmp_path, capsys):
    from labmem.cli import main
    memory = _closed_through_memory_facts(tmp_path)
    pad = load_scratchpad(memory.project.scratchpad_path)
    # the pad the original bootstrap wrote: the closure lost, the thread open again
    pad.items = [replace(i, status="active") for i in pad.items if not i.is_closed]
    pad.save(memory.project.scratchpad_path)
    assert main(["story", "bootstrap", "--project", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "--write will change 1 keys:" in out
    assert "open_loops/the drowned bell: active 'who rings it?' -> (nothing)" in out
    assert main(["story", "bootstrap", "--project", str(tmp_path), "--write"]) == 0
    assert memory.get_open_loops() == []


# -- 2. outline matching reads the value ----------------------------------------------------

def test_2_an_item_whose_value_the_outline_names_is_selected(tmp_path):
    memory = adapter(tmp_path)
    memory.commit_chapter({"chapter": 1, "entities_new": [
        {"name": "Lin Feng", "type": "character", "description": "a young swordsman"}]})
    memory.commit_chapter({"chapter": 9, "state_changes": [
        {"entity": "Mara", "field": "location", "new": "pier"}]})
    pack = memory.load_context(10, budget=BIG, outline="The young swordsman reaches the gate.")
    assert "[story_facts] Lin Feng.introduced = a young swordsman (ch 1)" in \
        pack.semantic_memory
    other = memory.load_context(10, budget=BIG, outline="An old monk waits.")
    assert not any("Lin Feng" in line for line in other.semantic_memory)


# -- 3. the semantic window has an upper bound: nothing reported at or after the chapter --

def test_3_a_pack_never_holds_what_its_chapter_or_later_reported(tmp_path):
    memory = adapter(tmp_path, max_items=1000)
    story = load_sample_story()
    for chapter in story:
        memory.commit_chapter(chapter.result, summary=chapter.summary, outline=chapter.outline)
    for target in range(2, 13):
        pack = memory.load_context(target, budget=BIG, outline=story[target - 1].outline)
        for line in pack.semantic_memory + pack.active_constraints:
            assert int(line.rsplit("(ch ", 1)[1].split(")")[0]) < target, (target, line)
        for line in pack.recent_changes + pack.episodic_memory:
            assert int(line.split()[0][2:]) < target, (target, line)
    two = memory.load_context(2, budget=BIG, outline="x")
    assert two.working_memory["protagonist"] == {
        "name": "Mara Venn", "role": "apprentice lamplighter", "location": "the harbor wall"}
    five = memory.load_context(5, budget=BIG, outline="x")
    assert any("the torn ledger page" in c for c in five.active_constraints)  # closed in 10
    assert five.working_memory["plot_threads"] == [
        "plot thread: Tobin's night walks", "plot thread: the torn ledger page"]


def test_3_commit_order_does_not_matter(tmp_path):
    story = load_sample_story()[:4]
    in_order, reversed_order = adapter(tmp_path / "a"), adapter(tmp_path / "b")
    for chapter in story:
        in_order.commit_chapter(chapter.result, summary=chapter.summary)
    for chapter in reversed(story):
        reversed_order.commit_chapter(chapter.result, summary=chapter.summary)
    for target in (2, 3):
        a = in_order.load_context(target, budget=BIG, outline="Mara")
        b = reversed_order.load_context(target, budget=BIG, outline="Mara")
        assert sorted(a.semantic_memory) == sorted(b.semantic_memory)
        assert a.working_memory["protagonist"] == b.working_memory["protagonist"]
        assert not any(f"(ch {target})" in line for line in b.semantic_memory)


# -- 4. a contradicted protagonist field shows the contradiction --------------------------

def test_4_protagonist_snapshot_shows_a_contradiction_not_the_last_write(tmp_path):
    memory = adapter(tmp_path)
    memory.commit_chapter({"chapter": 1, "protagonist": "Mara", "state_changes": [
        {"entity": "Mara", "field": "location", "new": "the pier"},
        {"entity": "Mara", "field": "location", "new": "the lighthouse"}]})
    pack = memory.load_context(2, budget=BIG, outline="x")
    assert pack.working_memory["protagonist"]["location"] == {
        "contradicted": ["the pier", "the lighthouse"]}
    assert "protagonist: location=[contradicted] the pier | the lighthouse; name=Mara" in \
        pack.render()
    state = json.loads(memory.project.state_path.read_text())
    assert state["protagonist"]["location"] == {"contradicted": ["the pier", "the lighthouse"]}
    memory.commit_chapter({"chapter": 2, "state_changes": [
        {"entity": "Mara", "field": "location", "new": "home"}]})
    assert memory.load_context(3, budget=BIG, outline="x").working_memory[
        "protagonist"]["location"] == "home"


# -- 5. episodic lines show the story chapter and mark late arrivals ---------------------

def test_5_episodic_lines_show_the_story_chapter_and_mark_late_reports(tmp_path):
    memory = adapter(tmp_path)
    memory.commit_chapter({"chapter": 2, "state_changes": [
        {"entity": "Mara", "field": "hook", "new": "mended"}]})
    memory.commit_chapter({"chapter": 3, "state_changes": [
        {"entity": "Mara", "field": "hook", "new": "cracked", "source_chapter": 1},
        {"entity": "Mara", "field": "mood", "new": "calm"}]})
    pack = memory.load_context(4, budget=BIG, outline="x")
    assert "ch1 state Mara.hook -> cracked [late: reported in ch3]" in pack.episodic_memory
    assert "ch3 state Mara.mood -> calm" in pack.episodic_memory


# -- 6. working memory carries the plot threads and the items awaiting disambiguation ----

def test_6_working_memory_has_plot_threads_and_disambiguation_from_state(tmp_path):
    memory = adapter(tmp_path)
    for chapter in load_sample_story()[:6]:
        memory.commit_chapter(chapter.result, summary=chapter.summary)
    state = json.loads(memory.project.state_path.read_text())
    assert state["disambiguation"] == ["character_state:Ilse Korr.location"]
    pack = memory.load_context(7, budget=BIG, outline="x")
    wm = pack.working_memory
    assert wm["plot_threads"] == [f"plot thread: {t}" for t in state["plot_threads"]]
    assert wm["disambiguation"] == [
        "awaiting disambiguation: character_state:Ilse Korr.location"]
    rendered = pack.render().split("\n")
    assert "plot thread: the torn ledger page" in rendered[:rendered.index("[episodic_memory]")]
    assert CUT_TIERS["plot_threads"] < CUT_TIERS["open_loops"]


def test_6_plot_threads_and_disambiguation_fit_the_budget(tmp_path):
    memory = adapter(tmp_path)
    for chapter in load_sample_story()[:6]:
        memory.commit_chapter(chapter.result, summary=chapter.summary)
    full = memory.load_context(7, budget=BIG, outline="x")
    tight = memory.load_context(7, budget=full.stats["tokens"] - 60, outline="x")
    assert tight.stats["tokens"] <= tight.stats["budget"]
    assert any(c["tier"] == "plot_threads" for c in tight.cut) or \
        tight.working_memory["plot_threads"] == full.working_memory["plot_threads"]


# -- 7. tentative is produced, shown, and trimmed -----------------------------------------

def test_7_an_uncertain_claim_is_tentative_and_never_demotes_a_confirmed_one(tmp_path):
    memory = adapter(tmp_path)
    memory.commit_chapter({"chapter": 1, "state_changes": [
        {"entity": "Tobin", "field": "location", "new": "home"}]})
    report = memory.commit_chapter({"chapter": 2, "state_changes": [
        {"entity": "Tobin", "field": "location", "new": "the docks", "certainty": "inferred"}],
        "relationships_new": [{"from": "Tobin", "to": "Sable", "type": "courier",
                               "certainty": "uncertain"}]})
    assert report.memory.actions() == {"tentative": 2}
    pad = load_scratchpad(memory.project.scratchpad_path)
    assert [(i.value, i.status) for i in pad.by_key(("character_state", "Tobin", "location"))] \
        == [("home", "active"), ("the docks", "tentative")]
    pack = memory.load_context(3, budget=BIG, outline="Tobin")
    assert "[character_state] Tobin.location = the docks (ch 2) [tentative]" in \
        pack.semantic_memory
    assert "[character_state] Tobin.location = home (ch 1)" in pack.semantic_memory
    assert "ch2 state Tobin.location -> the docks [tentative]" in pack.episodic_memory
    # a confirmed claim of a later chapter settles the guess
    memory.commit_chapter({"chapter": 3, "state_changes": [
        {"entity": "Tobin", "field": "location", "new": "the docks"}]})
    pad = load_scratchpad(memory.project.scratchpad_path)
    assert [(i.value, i.status) for i in pad.by_key(("character_state", "Tobin", "location"))] \
        == [("home", "outdated"), ("the docks", "outdated"), ("the docks", "active")]
    _, diff = bootstrap(memory.project)
    assert diff.changes == ()  # the index keeps the certainty, so bootstrap agrees


def test_7_bad_certainty_is_refused_naming_the_field(tmp_path):
    with pytest.raises(StoryValidationError) as err:
        adapter(tmp_path).commit_chapter({"chapter": 1, "state_changes": [
            {"entity": "A", "field": "b", "new": "c", "certainty": "maybe"}]})
    assert err.value.field == "result.state_changes[0].certainty"


def test_7_the_compactor_trims_tentative_after_outdated_and_max_items_is_soft():
    pad = Scratchpad(clock=SteppingClock(T0))
    for n in range(1, 6):
        pad.upsert(category="character_state", subject="A", field="x", value=f"v{n}",
                   source_chapter=n)
    for n in range(1, 4):
        pad.upsert(category="story_facts", subject=f"guess {n}", field="f", value="maybe",
                   source_chapter=n, payload={"certainty": "uncertain"})
    pad.upsert(category="world_rules", subject="r", field="f", value="1", source_chapter=1)
    pad.upsert(category="world_rules", subject="r", field="f", value="2", source_chapter=1)
    assert len(pad.tentative()) == 3
    report = compact(pad, current_chapter=6, max_items=4)
    assert report.reasons() == {"older outdated": 3, "trimmed (outdated)": 1,
                                "trimmed (tentative)": 2}
    assert [i.subject for i in pad.tentative()] == ["guess 3"]
    # only current truth and open contradictions left: the limit gives way
    soft = compact(pad, current_chapter=6, max_items=1)
    assert soft.after == 3 > 1
    assert {i.status for i in pad.items} == {"active", "contradicted"}


# -- 8. query_entity finds a name in fields and values ------------------------------------

def test_8_query_entity_finds_the_name_in_values_and_fields(tmp_path):
    memory = adapter(tmp_path)
    memory.commit_chapter({"chapter": 1, "entities_new": [
        {"name": "Lin Feng", "description": "a swordsman trained by Master Qiu"}],
        "relationships_new": [{"from": "Lin Feng", "to": "Master Qiu", "type": "pupil"}]})
    found = memory.query_entity("Master Qiu")
    assert [(i.category, i.subject) for i in found] == [("relationships", "Lin Feng"),
                                                        ("story_facts", "Lin Feng")]
    assert memory.query_entity("master qiu") == found
    assert [i.subject for i in memory.query_entity("Lin Feng")] == ["Lin Feng", "Lin Feng"]


# -- 9. the sample project works directly; the two hints agree ----------------------------

MAIN = "import sys; from labmem.cli import main; sys.exit(main(sys.argv[1:]))"


def run(*args, cwd):
    return subprocess.run([sys.executable, "-c", MAIN, "story", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_9_the_readme_commands_work_on_the_sample_project():
    root = sample_story_dir() / "tide-lamp"
    cwd = root.parents[2]
    before = {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for args in (("stats",), ("query", "Ilse Korr"), ("dump",), ("conflicts",),
                 ("bootstrap",)):
        done = run(*args, "--project", "data/story/tide-lamp", cwd=cwd)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() and done.stdout.strip() != "(nothing)"
    stats = json.loads(run("stats", "--json", "--project", "data/story/tide-lamp",
                           cwd=cwd).stdout)
    assert stats["last_chapter"] == 7 and stats["contradictions"] == 2
    after = {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before, "reading the sample project changes nothing"


def test_9_the_sample_project_is_the_deterministic_build_of_the_serial(tmp_path):
    from labmem.story.sample import sample_project_dir, write_sample_project
    built = write_sample_project(tmp_path / "tide-lamp")
    shipped = sample_project_dir()
    names = sorted(p.relative_to(shipped).as_posix() for p in shipped.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(built).as_posix() for p in built.rglob("*")
                           if p.is_file())
    for name in names:
        if name != "index.db":
            assert (built / name).read_bytes() == (shipped / name).read_bytes(), name
    from labmem.story import ChapterIndex
    assert ChapterIndex(built / "index.db").state_changes() == \
        ChapterIndex(shipped / "index.db").state_changes()
    with pytest.raises(StoryProjectError, match="not empty"):
        write_sample_project(built)


def test_9_both_missing_directory_hints_say_the_same(tmp_path):
    missing = tmp_path / "nope"
    (tmp_path / "r.json").write_text('{"chapter": 1}')
    with pytest.raises(StoryProjectError) as read_err:
        StoryProject(missing).require_existing()
    done = run("update", str(tmp_path / "r.json"), "--project", str(missing), cwd=tmp_path)
    hint = str(read_err.value).split("does not exist; ", 1)[1]
    assert done.returncode == 2 and hint in done.stderr
    assert "data/story/tide-lamp" in hint and "story update" in hint
