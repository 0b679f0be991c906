"""s10 curation rules as functions: promotion (is_promotable) and supersession (judge_rivals).

The distill fold calls both; these tests pin each rule down on hand-built facts, show that
the fold really goes through them, and check on generated histories that the fold's first
decision for a key is the one ``judge_rivals`` gives.
"""

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

import labmem.workspace.curation as curation
from labmem.core.provenance import MemorySource
from labmem.core.text import normalize_text
from labmem.workspace import (
    DistillPolicy,
    Fact,
    RivalVerdict,
    is_promotable,
    judge_rivals,
)

T0 = datetime(2026, 7, 1, 9, tzinfo=timezone.utc)
AS_OF = T0 + timedelta(days=60)  # every fact below is old enough for the default policy


def fact(i, content="SQLite", *, day=0, importance=3, evidence=("t:1",), key="storage.engine",
         source=None):
    return Fact(fact_id=f"f{i}", recorded_at=T0 + timedelta(days=day), kind="decision",
                content=content, importance=importance, memory_key=key, source=source,
                evidence=tuple(sorted(set(evidence))), line=i)


# -- is_promotable ----------------------------------------------------------------------

def test_importance_alone_promotes():
    assert is_promotable([fact(1, importance=4)], DistillPolicy())
    assert not is_promotable([fact(1, importance=3)], DistillPolicy())
    assert is_promotable([fact(1, importance=3)], DistillPolicy(minimum_importance=3))


def test_a_repeat_needs_independent_evidence():
    policy = DistillPolicy()  # repeat_threshold 2
    same_event = [fact(1, evidence=["t:1"]), fact(2, evidence=["t:1"])]
    assert not is_promotable(same_event, policy)  # two lines, one piece of evidence
    assert is_promotable([fact(1, evidence=["t:1"]), fact(2, evidence=["t:2"])], policy)
    assert is_promotable([fact(1, evidence=["t:1", "t:2"])], policy)  # one line, two events


def test_without_evidence_ids_the_source_then_the_fact_id_is_the_evidence():
    source = MemorySource("transcript:s1:4", "transcript", "s1", "2026-07-01T09:00:00Z")
    policy = DistillPolicy()
    assert is_promotable([fact(1, evidence=()), fact(2, evidence=())], policy)  # two fact ids
    assert not is_promotable([fact(1, evidence=(), source=source),
                              fact(2, evidence=(), source=source)], policy)  # one source


# -- judge_rivals -----------------------------------------------------------------------

def test_no_rivals_or_no_qualified_value_keeps():
    assert judge_rivals([], T0, 2) == RivalVerdict("keep")
    verdict = judge_rivals([fact(1, "PostgreSQL", day=3)], T0, 2)
    assert verdict == RivalVerdict("keep", (), ())


def test_evidence_from_the_active_revisions_last_instant_is_stale():
    rivals = [fact(1, "PostgreSQL", day=2, evidence=["t:1"]),
              fact(2, "PostgreSQL", day=3, evidence=["t:2"])]
    assert judge_rivals(rivals, T0 + timedelta(days=1), 2).outcome == "supersede"
    at_boundary = judge_rivals(rivals, T0 + timedelta(days=2), 2)
    assert at_boundary == RivalVerdict("keep", (), ("f1",))  # stale evidence does not count


def test_the_single_strongest_value_supersedes_in_normalized_form():
    rivals = [fact(1, "PostgreSQL", day=1, evidence=["t:1"]),
              fact(2, "postgresql ", day=2, evidence=["t:2"]),
              fact(3, "DuckDB", day=2, evidence=["t:3", "t:4", "t:5"]),
              fact(4, "PostgreSQL", day=3, evidence=["t:6", "t:7"])]
    verdict = judge_rivals(rivals, T0, 2)
    assert verdict == RivalVerdict("supersede", ("postgresql",), ())  # 4 ids beat 3


def test_equally_strong_strongest_values_fail_closed():
    rivals = [fact(1, "Buildkite", day=1, evidence=["t:1"]),
              fact(2, "Jenkins", day=1, evidence=["t:2"]),
              fact(3, "Buildkite", day=2, evidence=["t:3"]),
              fact(4, "Jenkins", day=2, evidence=["t:4"]),
              fact(5, "Travis", day=2, evidence=["t:5"])]
    assert judge_rivals(rivals, T0, 2) == RivalVerdict("conflict", ("buildkite", "jenkins"))
    assert judge_rivals(rivals, T0, 1).values == ("buildkite", "jenkins")  # Travis is weaker


# -- the fold goes through the rules ----------------------------------------------------

def test_distill_calls_both_rules(monkeypatch):
    calls = []

    def spy(name, real):
        def called(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)
        return called

    monkeypatch.setattr(curation, "is_promotable", spy("is_promotable", is_promotable))
    monkeypatch.setattr(curation, "judge_rivals", spy("judge_rivals", judge_rivals))
    facts = [fact(1, "SQLite", importance=5, evidence=["t:1"]),
             fact(2, "PostgreSQL", day=2, evidence=["t:2"]),
             fact(3, "PostgreSQL", day=3, evidence=["t:3"])]
    state, report = curation.distill_facts(curation.CuratedState(), facts,
                                           policy=DistillPolicy(), as_of=AS_OF)
    assert {"is_promotable", "judge_rivals"} <= set(calls)
    assert report.superseded == 1 and state.active_revision("storage.engine").revision == 2


RIVAL = st.tuples(st.sampled_from(["Buildkite", "buildkite", "Jenkins", "Travis"]),
                  st.integers(0, 6), st.lists(st.sampled_from(["e1", "e2", "e3", "e4"]),
                                              min_size=1, max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.lists(RIVAL, max_size=7), st.integers(0, 3), st.integers(1, 3))
def test_the_folds_first_decision_is_judge_rivals(rows, active_day, threshold):
    """Revision 1 rests on one important fact; the rivals arrive in the next distill."""
    policy = DistillPolicy(supersession_repeat_threshold=threshold)
    first = fact(0, "GitHub Actions", day=active_day, importance=5, evidence=["e0"],
                 key="ci.runner")
    state, _ = curation.distill_facts(curation.CuratedState(), [first], policy=policy,
                                      as_of=AS_OF)
    rivals = [fact(i, value, day=d, evidence=ev, key="ci.runner")
              for i, (value, d, ev) in enumerate(rows, start=1)]
    verdict = judge_rivals(rivals, first.recorded_at, threshold)
    after, report = curation.distill_facts(state, [first, *rivals], policy=policy,
                                           as_of=AS_OF)
    chain = sorted((e for e in after.entries.values() if e.memory_key == "ci.runner"),
                   key=lambda e: e.revision)
    case = after.open_conflict("ci.runner")
    if verdict.outcome == "keep":
        assert len(chain) == 1 and case is None and report.stale == len(verdict.stale)
    elif verdict.outcome == "conflict":
        assert len(chain) == 1 and case is not None and case.base_revision == 1
        assert tuple(normalize_text(c.content) for c in case.candidates) == verdict.values
    else:
        assert normalize_text(chain[1].content) == verdict.values[0]
        assert chain[1].supersedes == chain[0].entry_id
        assert report.stale >= len(verdict.stale)


# -- the fold's sums ------------------------------------------------------------------------

GROUP_FACT = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 5),
                       st.lists(st.sampled_from(["e1", "e2", "e3"]), max_size=2),
                       st.sampled_from([None, "src:1"]))


def add_one(group, fact):
    """The plain definition of a group's sums: one fact at a time."""
    group.facts.append(fact)
    if fact.importance > group.importance:
        group.importance = fact.importance
    group.evidence.update(fact.evidence or fact.evidence_ids)
    at = fact.recorded_at
    if at <= group.first_order[0] and (at, fact.line) < group.first_order:
        group.first, group.first_order = fact, (at, fact.line)
    if at > group.last:
        group.last = at


@settings(max_examples=300, deadline=None)
@given(st.lists(GROUP_FACT, min_size=1, max_size=8, unique_by=lambda r: (r[0], r[1])))
def test_a_groups_sums_are_the_facts_sums(rows):
    """``_Group.of`` (one loop) and ``_new_entry`` (one constructor) sum a group as the
    plain definitions do: one :func:`add_one` per fact, and an empty entry with the first
    fact's wording absorbing the group (the code before they were made one step)."""
    facts = [Fact(fact_id=f"f{day}-{line}", recorded_at=T0 + timedelta(days=day),
                  kind="decision", content="SQLite", importance=importance, memory_key=None,
                  source=None if src is None else MemorySource(
                      src, "transcript", "s", T0.isoformat()),
                  evidence=tuple(sorted(set(ev))), line=line)
             for day, line, importance, ev, src in rows]
    plain = curation._Group(facts[0])
    for f in facts[1:]:
        add_one(plain, f)
    group = curation._Group.of(facts)
    assert [getattr(group, name) for name in curation._Group.__slots__] == \
        [getattr(plain, name) for name in curation._Group.__slots__]
    assert group.first is min(facts, key=lambda f: f.order)
    first = group.first
    empty = curation.CuratedEntry(
        entry_id="entry:x", kind=first.kind, content=first.content, memory_key=None,
        revision=None, status=curation.ACTIVE, importance=first.importance, evidence_ids=(),
        fact_ids=(), occurrences=0, first_recorded_at=first.recorded_at,
        last_recorded_at=first.recorded_at)
    assert curation._new_entry("entry:x", group) == empty._absorbed(plain)
