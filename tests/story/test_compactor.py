"""Contract 4: the compactor — latest outdated per key, closed loops out, no event lost."""

from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.core.clock import SteppingClock
from labmem.story import Scratchpad, compact

T0 = "2026-09-01T00:00:00Z"


def pad():
    return Scratchpad(clock=SteppingClock(T0))


def test_4_keeps_only_the_latest_outdated_item_per_key():
    p = pad()
    for chapter, value in enumerate(["a", "b", "c", "d"], start=1):
        p.upsert(category="character_state", subject="Mara", field="loc", value=value,
                 source_chapter=chapter)
    report = compact(p, current_chapter=4, max_items=100)
    assert [(i.value, i.status) for i in p.items] == [("c", "outdated"), ("d", "active")]
    assert report.reasons() == {"older outdated": 2} and (report.before, report.after) == (4, 2)


def test_4_removes_closed_loops_with_their_history_and_keeps_open_ones():
    p = pad()
    p.upsert(category="open_loops", subject="page", value="who?", source_chapter=2)
    p.upsert(category="open_loops", subject="bell", value="what rings?", source_chapter=3)
    p.upsert(category="open_loops", subject="page", value="Quell", source_chapter=5,
             payload={"closed": True, "closed_in": 5})
    report = compact(p, current_chapter=5, max_items=100)
    assert [i.subject for i in p.items] == ["bell"]
    assert report.reasons() == {"closed loop": 2}


def test_4_a_lone_old_timeline_event_is_folded_not_dropped():
    p = pad()
    lone = p.upsert(category="timeline", subject="chapter 1", field="event 1",
                    value="Mara lights the lamps", source_chapter=1).item
    p.upsert(category="timeline", subject="chapter 9", field="event 1", value="recent",
             source_chapter=9)
    report = compact(p, current_chapter=9, max_items=100, timeline_window=4)
    summaries = [i for i in p.items if i.category == "story_facts"]
    assert len(summaries) == 1
    assert summaries[0].payload == {"events": ["Mara lights the lamps"], "folded_ids": [lone.id]}
    assert summaries[0].subject == "timeline of chapter 1" and summaries[0].source_chapter == 1
    assert report.folded == ((summaries[0].id, (lone.id,)),)
    assert [i.value for i in p.items if i.category == "timeline"] == ["recent"]


def test_4_folding_twice_merges_into_the_same_summary():
    p = pad()
    p.upsert(category="timeline", subject="chapter 1", field="event 1", value="one",
             source_chapter=1)
    compact(p, current_chapter=9, max_items=100)
    p.upsert(category="timeline", subject="chapter 1", field="event 2", value="two",
             source_chapter=1)
    compact(p, current_chapter=10, max_items=100)
    [summary] = p.items
    assert summary.payload["events"] == ["one", "two"] and summary.value == "one; two"


def test_4_trims_outdated_oldest_first_and_never_active_or_contradicted():
    p = pad()
    for n in range(1, 7):
        p.upsert(category="relationships", subject=f"r{n}", field="x", value="old",
                 source_chapter=n)
        p.upsert(category="relationships", subject=f"r{n}", field="x", value="new",
                 source_chapter=n + 1)
    for value in ("a", "b"):
        p.upsert(category="character_state", subject="S", field="side", value=value,
                 source_chapter=7)
    report = compact(p, current_chapter=8, max_items=10)
    assert report.reasons() == {"trimmed (outdated)": 4}
    left = sorted(i.subject for i in p.items if i.status == "outdated")
    assert left == ["r5", "r6"]
    assert sum(i.status == "active" for i in p.items) == 6
    assert sum(i.status == "contradicted" for i in p.items) == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.text("abc", min_size=1, max_size=3)),
                min_size=1, max_size=25),
       st.integers(1, 14), st.integers(0, 5))
def test_4_no_timeline_event_is_ever_lost(events, current, window):
    p = pad()
    for n, (chapter, text) in enumerate(events):
        p.upsert(category="timeline", subject=f"chapter {chapter}", field=f"event {n}",
                 value=text, source_chapter=chapter)
    expected = sorted((chapter, text) for chapter, text in events)
    compact(p, current_chapter=current, max_items=0, timeline_window=window)
    seen = []
    for item in p.items:
        if item.category == "timeline":
            seen.append((item.source_chapter, item.value))
        else:
            seen += [(item.source_chapter, e) for e in item.payload["events"]]
    assert sorted(seen) == expected


def test_4_a_huge_chapter_folds_without_overflowing_the_item_value():
    p = pad()
    events = [f"event number {n} " + "x" * 60 for n in range(60)]
    for n, text in enumerate(events):
        p.upsert(category="timeline", subject="chapter 1", field=f"event {n}", value=text,
                 source_chapter=1)
    compact(p, current_chapter=9, max_items=0)
    [summary] = p.items
    assert len(summary.value) == 2000 and summary.value.endswith("…")
    assert summary.payload["events"] == events
