"""s10 distill cursors: a distill reads only what was appended since the last one, and
still ends exactly where folding every daily line again ends — state and report.

The oracle is the fold itself: :func:`distill_facts` over every fact of every daily file
up to the cutoff day, applied to a curated state kept beside the workspace (what
``distill`` did before it kept cursors).
"""

import json
import os
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.workspace import DistillPolicy, WorkspaceMemory, read_daily_file
from labmem.workspace.curation import OPEN, CuratedState, apply_resolution, distill_facts
from labmem.workspace.facts import day_of_file
from tests.file_access import FileAccess

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
POLICIES = (DistillPolicy(), DistillPolicy(repeat_threshold=1),
            DistillPolicy(stable_kinds={"decision", "outcome"}, minimum_age_days=10))
AS_OFS = tuple(T0 + timedelta(days=d, hours=h) for d, h in
               ((45, 0), (50, 6), (50, 18), (70, 0), (120, 0)))


def make(root):
    return WorkspaceMemory(root, workspace_id="cursors", clock=FixedClock(NOW))


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def every_fact(ws, last_day):
    return [f for p in ws._daily_files() if day_of_file(p) <= last_day
            for f in read_daily_file(p, ws.workspace_scope)[0]]


class Oracle:
    """The curated state as the full fold makes it: every fact, every time."""

    def __init__(self):
        self.state = CuratedState()
        self.resolutions = []

    def settle(self):
        for resolution in self.resolutions:
            case = self.state.conflicts.get(resolution.conflict_id)
            if case is not None and case.status == OPEN:
                self.state = apply_resolution(self.state, resolution)

    def distill(self, ws, policy, as_of):
        self.settle()
        facts = every_fact(ws, policy.cutoff(as_of).date())
        self.state, report = distill_facts(self.state, facts, policy=policy, as_of=as_of)
        return report


OPS = st.lists(st.one_of(
    st.tuples(st.just("fact"), st.integers(0, 7), st.integers(0, 2), st.integers(1, 5),
              st.integers(0, 100), st.integers(0, 9)),
    st.tuples(st.just("distill"), st.integers(0, len(POLICIES) - 1),
              st.integers(0, len(AS_OFS) - 1)),
    st.tuples(st.just("resolve"), st.integers(0, 1)),
), min_size=1, max_size=40)


@settings(max_examples=120, deadline=None)
@given(OPS)
def test_cursored_distill_equals_the_full_fold(tmp_path_factory, ops):
    """Appends (back-dated ones included), distills under changing policies and cutoffs,
    and human resolutions, in any order: every distill's report and curated state equal
    the full fold's; a repeated distill (the path that reads only the cursors) reports
    what the full fold reports and writes nothing; a fresh instance agrees."""
    root = tmp_path_factory.mktemp("ws") / "project"
    ws, oracle = make(root), Oracle()
    for op in ops:
        if op[0] == "fact":
            _, who, value, importance, day, evidence = op
            keyed = who < 4
            ws.append_fact(f"value {value}" if keyed else f"note {who} {value}",
                           kind=("decision", "convention", "pitfall", "outcome")[who % 4],
                           importance=importance, memory_key=f"k{who % 2}" if keyed else None,
                           evidence=[f"t:{evidence}"], recorded_at=T0 + timedelta(hours=day * 13))
        elif op[0] == "distill":
            policy, as_of = POLICIES[op[1]], AS_OFS[op[2]]
            expected = oracle.distill(ws, policy, as_of)
            assert ws.distill(policy=policy, as_of=as_of) == expected
            assert ws._load().to_dict() == oracle.state.to_dict()
            before = files(root)
            again = oracle.distill(ws, policy, as_of)
            assert make(root).distill(policy=policy, as_of=as_of) == again
            assert ws.distill(policy=policy, as_of=as_of) == again
            assert files(root) == before  # idempotent, byte for byte
            assert ws._nothing_new(policy, as_of) == again  # and read from the cursors
        else:
            open_cases = [c for c in ws.list_conflicts()]
            if open_cases:
                case = open_cases[op[1] % len(open_cases)]
                resolution = ws.resolve_conflict(
                    case.conflict_id, case.candidates[-1].candidate_id,
                    expected_revision=case.base_revision, actor="ann", rationale="test")
                oracle.resolutions.append(resolution)
                oracle.settle()
                assert ws._load().to_dict() == oracle.state.to_dict()


def _history(root, days=30, per_day=5):
    ws = make(root)
    for d in range(days):
        for i in range(per_day):
            ws.append_fact(f"note {i % 3}", kind="pitfall", importance=1 + i % 5,
                           evidence=[f"t:{d}:{i}"], recorded_at=T0 + timedelta(days=d, hours=i))
    return ws


def test_a_distill_with_nothing_new_opens_no_daily_log(tmp_path):
    root = tmp_path / "project"
    ws = _history(root)
    policy, as_of = DistillPolicy(), T0 + timedelta(days=70)
    first = ws.distill(policy=policy, as_of=as_of)
    assert first.scanned == 150 and first.created == 3
    opened = FileAccess.start(root)
    try:
        again = make(root).distill(policy=policy, as_of=as_of)
    finally:
        FileAccess.stop()
    assert (again.scanned, again.created, again.updated) == (150, 0, 0)
    assert not [p for p in opened if p.startswith("daily/")]  # the old distill: all 30
    # ("daily", the directory, is listed only when its marker cannot vouch for the logs,
    # and MEMORY.md is read only when its stamp cannot vouch for it: on a filesystem with
    # coarse timestamps; see test_distill_marker)
    assert set(opened) - {"daily", "MEMORY.md"} == {"curated.json", "workspace.json"}


def test_a_distill_reads_only_the_lines_appended_since(tmp_path):
    root = tmp_path / "project"
    ws = _history(root)
    policy, as_of = DistillPolicy(), T0 + timedelta(days=70)
    ws.distill(policy=policy, as_of=as_of)
    fact = ws.append_fact("note 1", kind="pitfall", evidence=["t:late"],
                          recorded_at=T0 + timedelta(days=3, hours=20))  # back-dated
    path = root / "daily" / "2026-06-04.jsonl"
    size = path.stat().st_size
    opened = FileAccess.start(root)
    try:
        report = make(root).distill(policy=policy, as_of=as_of)
    finally:
        FileAccess.stop()
    assert [p for p in opened if p.startswith("daily/")] == ["daily/2026-06-04.jsonl"]
    assert (report.scanned, report.updated) == (151, 1)
    assert fact.fact_id in {fid for e in ws.curated_entries() for fid in e.fact_ids}
    cursor = json.loads((root / "curated.json").read_text())["files"]
    assert cursor["2026-06-04.jsonl"] == [size, 6, 6]


def test_a_policy_change_or_an_earlier_cutoff_reads_everything(tmp_path):
    root = tmp_path / "project"
    ws = _history(root, days=10)
    as_of = T0 + timedelta(days=70)
    ws.distill(policy=DistillPolicy(), as_of=as_of)
    for policy, when in ((DistillPolicy(repeat_threshold=3), as_of),
                         (DistillPolicy(repeat_threshold=3), as_of - timedelta(days=35))):
        opened = FileAccess.start(root)
        try:
            ws.distill(policy=policy, as_of=when)
        finally:
            FileAccess.stop()
        read = {p for p in opened if p.startswith("daily/")}
        last_day = policy.cutoff(when).date()
        assert read == {f"daily/{p.name}" for p in ws._daily_files()
                        if day_of_file(p) <= last_day}


@pytest.mark.parametrize("edit", ["append", "same size", "same size, same second"])
def test_a_hand_edit_of_memory_md_is_repaired_by_the_next_distill(tmp_path, edit):
    root = tmp_path / "project"
    ws = _history(root, days=5)
    policy, as_of = DistillPolicy(), T0 + timedelta(days=70)
    ws.distill(policy=policy, as_of=as_of)
    path = root / "MEMORY.md"
    good = path.read_text()
    stamp = path.stat().st_mtime_ns
    if edit == "append":
        path.write_text(good + "- added by hand\n")
    else:  # one character changed: the size stays, only the stamp tells
        path.write_text(good.replace("note", "nota", 1))
        if edit == "same size, same second":  # an editor that keeps whole seconds
            os.utime(path, ns=(stamp // 10**9 * 10**9,) * 2)
    assert path.read_text() != good
    make(root).distill(policy=policy, as_of=as_of)
    assert path.read_text() == good


def test_cursors_survive_a_copy_of_the_project(tmp_path):
    """No inode, no absolute path in curated.json: a copied project distills the same."""
    import shutil

    ws = _history(tmp_path / "a", days=5)
    policy, as_of = DistillPolicy(), T0 + timedelta(days=70)
    ws.distill(policy=policy, as_of=as_of)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    opened = FileAccess.start(tmp_path / "b")
    try:
        report = make(tmp_path / "b").distill(policy=policy, as_of=as_of)
    finally:
        FileAccess.stop()
    assert not [p for p in opened if p.startswith("daily/")]
    assert report == make(tmp_path / "a").distill(policy=policy, as_of=as_of)


def test_a_v1_curated_json_is_read_and_the_next_distill_reads_everything(tmp_path):
    root = tmp_path / "project"
    ws = _history(root, days=5)
    policy, as_of = DistillPolicy(), T0 + timedelta(days=70)
    first = ws.distill(policy=policy, as_of=as_of)
    doc = json.loads((root / "curated.json").read_text())
    legacy = {"format": "labmem.workspace.curated/v1", "workspace_scope": ws.workspace_scope,
              "entries": doc["entries"], "conflicts": doc["conflicts"]}
    (root / "curated.json").write_text(json.dumps(legacy, indent=2))
    assert len(make(root).curated_entries()) == first.created
    again = make(root).distill(policy=policy, as_of=as_of)
    assert (again.scanned, again.created, again.updated) == (first.scanned, 0, 0)
    assert json.loads((root / "curated.json").read_text())["format"] == \
        "labmem.workspace.curated/v3"


@pytest.mark.parametrize("mangle", ["shrink", "pending"])
def test_damage_behind_a_cursor_is_reported(tmp_path, mangle):
    from labmem.workspace import WorkspaceCorruptionError

    root = tmp_path / "project"
    ws = _history(root, days=5)
    policy, as_of = DistillPolicy(), T0 + timedelta(days=70)
    ws.distill(policy=policy, as_of=as_of)
    if mangle == "shrink":
        path = root / "daily" / "2026-06-02.jsonl"
        path.write_bytes(path.read_bytes()[:-10])
        match = "shrank"
    else:
        doc = json.loads((root / "curated.json").read_text())
        doc["pending"] = [{"fact_id": "x"}]
        doc["distill"]["report"] = None
        (root / "curated.json").write_text(json.dumps(doc))
        match = "curated.json"
    make(root).append_fact("note 9", kind="pitfall", recorded_at=T0 + timedelta(days=4))
    with pytest.raises(WorkspaceCorruptionError, match=match):
        make(root).distill(policy=policy, as_of=as_of)


def _reference_decode(record, line):
    """decode_fact as it was before its fast paths: every field through its checker."""
    from labmem.core.clock import parse_timestamp
    from labmem.core.validation import require_text
    from labmem.workspace import facts

    if record.get("schema_version") != facts.SCHEMA_VERSION:
        raise ValueError("schema_version")
    fact_id = record.get("fact_id")
    if not isinstance(fact_id, str) or not facts.FACT_ID_PATTERN.fullmatch(fact_id):
        raise ValueError("fact_id")
    return facts.Fact(
        fact_id=fact_id,
        recorded_at=parse_timestamp(record.get("recorded_at"), field="recorded_at"),
        kind=facts.check_kind(record.get("kind")),
        content=require_text(record.get("content"), "content",
                             max_chars=facts.MAX_CONTENT_CHARS),
        importance=facts.check_importance(record.get("importance")),
        memory_key=facts.check_memory_key(record.get("memory_key")),
        source=facts.check_source(record.get("source")),
        evidence=facts.check_evidence(record.get("evidence")),
        line=line)


ID = st.sampled_from(["t:1", "t:2", "t:10", "ä:1", " ", "", "\x1f", "x" * 201, "x" * 200,
                     "t:\ud800", 7])
FIELD_VALUES = {
    "schema_version": st.sampled_from([1, 2, True, "1", None]),
    "fact_id": st.sampled_from(["fact:2026-07-01:1", "adr-7", "fact:x", "bad id", "", 7,
                                "é", "x" * 201]),
    "recorded_at": st.sampled_from(["2026-07-01T09:00:00Z", "2026-07-01T09:00:00.5Z",
                                    "2026-07-01T11:00:00+02:00", "2026-07-01T09:00:00",
                                    "2026-07-01T09:00:00z", " 2026-07-01T09:00:00Z", "Z",
                                    "20260701T090000Z", "2026-07-01T09:00:00+00:00Z",
                                    "yesterday", 5, None]),
    "kind": st.sampled_from(["decision", "outcome", "opinion", ["decision"], None]),
    "importance": st.sampled_from([1, 3, 5, 0, 6, True, 3.0, "3", None]),
    "evidence": st.one_of(st.lists(ID, max_size=4), st.sampled_from(
        [None, "t:1", ("t:1",), [], [f"t:{i}" for i in range(51)]])),
    "content": st.sampled_from(["Use WAL.", " ", "", "\x1f\t", "ok\ud800", "naïve", 3,
                                "x" * 4000, "x" * 4001]),
    "memory_key": st.sampled_from([None, "storage.engine", "Bad Key", "", 3]),
    "source": st.sampled_from([None, {"source_id": "t:1", "source_type": "transcript",
                                      "title": "s1", "captured_at": "2026-07-01T09:00:00Z"},
                               {"source_id": "t:1"}, "t:1"]),
}
MEMBERS = ["schema_version", "workspace_scope", "fact_id", "recorded_at", "kind", "content",
           "importance", "memory_key", "source", "evidence"]


def _one_off(**fields):
    """An example that differs from the fast path's line in one member only."""
    return example(fields, set(), False, False)


@settings(max_examples=600, deadline=None)
@_one_off(evidence=[" "])
@_one_off(evidence=["\x1f"])
@_one_off(evidence=[""])
@_one_off(evidence=["x" * 201])
@_one_off(evidence=["ä:1"])
@_one_off(evidence=[7])
@_one_off(evidence=["t:\ud800"])
@_one_off(content="ok\ud800")
@_one_off(evidence=[])
@_one_off(content=" ")
@_one_off(content="\x1f\t")
@_one_off(content="x" * 4001)
@_one_off(content="naïve")
@_one_off(importance=True)
@_one_off(importance=6)
@_one_off(schema_version=2)
@_one_off(schema_version=True)
@_one_off(memory_key="Bad Key")
@_one_off(fact_id="bad id")
@_one_off(recorded_at="2026-07-01T09:00:00z")
@_one_off(recorded_at="20260701T090000Z")
@_one_off(source={"source_id": "t:1"})
@given(st.fixed_dictionaries({}, optional=FIELD_VALUES),
       st.sets(st.sampled_from(MEMBERS), max_size=2), st.booleans(), st.booleans())
def test_decode_fast_paths_decide_like_the_checkers(fields, dropped, extra, shuffled):
    """For any stored record, decode_fact returns the same Fact as the plain checkers, or
    refuses it as they do (the fast paths only skip work, never a check). The default
    record is the line to_record writes, members in its order: the fast path's case."""
    from labmem.core.errors import InvalidInputError
    from labmem.workspace.facts import decode_fact

    record = {"schema_version": 1, "workspace_scope": "s", "fact_id": "fact:2026-07-01:1",
              "recorded_at": "2026-07-01T09:00:00Z", "kind": "decision",
              "content": "Use WAL.", "importance": 3, "memory_key": None, "source": None,
              "evidence": ["t:1"], **fields}
    for name in dropped:
        del record[name]
    if extra:
        record["note"] = "not a member"
    if shuffled:
        record = dict(reversed(record.items()))

    def outcome(decode):
        try:
            return decode(record, 4)
        except (ValueError, TypeError, InvalidInputError) as exc:
            return "refused", isinstance(exc, InvalidInputError), getattr(exc, "field", None)

    expected, got = outcome(_reference_decode), outcome(decode_fact)
    assert got == expected
    if not isinstance(expected, tuple):
        assert got.recorded_at.utcoffset() == timedelta(0) and got.order == expected.order
        assert type(got.evidence) is tuple and vars(got) == vars(expected)
