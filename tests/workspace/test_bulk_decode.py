"""s10 bulk reader: a distill decodes a daily file with one regular expression when every
line is of the form ``to_record`` writes, and line by line otherwise.

The oracle is the line-by-line reader (``open_daily_log(...).refresh()``, the path every
other reader takes): for any file — valid lines, members with escapes, bad members, raw
damage, torn tails — the bulk reader returns the same facts and cursor, or raises the same
error with the same message. The fast path only ever skips work, never a check.
"""

import contextlib
import json
import os
import shutil
from datetime import date, datetime, timedelta, timezone
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.errors import LabmemError
from labmem.workspace import KINDS, DistillPolicy, WorkspaceCorruptionError, WorkspaceMemory
from labmem.workspace.facts import open_daily_log
from labmem.workspace.line_matcher import decode_daily_lines, read_daily_since

SCOPE = "0123456789abcdef"
DAY, DAY_NAME = date(2026, 7, 1), "2026-07-01.jsonl"

IDS = ["t:1", "t:2", "t:10", "ä:1", " ", "", "\u3000", "\u3000x", "\x1f", "x" * 201,
       "x" * 200, 't:"q"', "t:\\", "t:\ud800", 7, None]
#: Each member's values: the one ``to_record`` writes first, then valid others, then bad
#: ones (and ones that are valid but must take the line reader: escapes, a source).
ONE_OFF = {
    "schema_version": [1, 2, True, "1", 1.0],
    "workspace_scope": [SCOPE, "fedcba9876543210", None],
    "fact_id": ["fact:2026-07-01:1", "adr-7", "a/b#c@d", "x" * 200, "fact:x", "bad id", "",
                7, "é", "x" * 201, "-lead"],
    "recorded_at": [
        "2026-07-01T09:00:00Z", "2026-07-01T23:59:59Z", "2026-07-01T00:00:00.123456Z",
        "2026-07-01T09:00:00.5Z", "2026-07-01T09:00:00.123Z", "2026-07-01T24:00:00Z",
        "2026-07-01T09:60:00Z", "2026-07-01T09:00:60Z", "2026-07-02T09:00:00Z",
        "2026-06-30T23:00:00Z", "2026-07-01T11:00:00+02:00", "2026-07-01T09:00:00+00:00",
        "2026-07-01T09:00:00", "2026-07-01T09:00:00z", " 2026-07-01T09:00:00Z",
        "2026-07-01T09:00Z", "2026-07-01t09:00:00Z", "2026-07-01T09:00:00.1234567Z",
        "\u0662026-07-01T09:00:00Z", "2026-07-01T\u0660\u0669:00:00Z", "yesterday", 5, None],
    "kind": [*KINDS, "opinion", "Decision", ["decision"], None],
    "content": [
        "Use WAL.", "naïve café", "日本語のメモ", 'say "hi"', "back\\slash", "tab\there",
        "new\nline", "bell\x07", " ", "", "\u3000", "\u2028", "\x85", " \u3000 x ",
        "\u00a0nbsp", "\x1c", "ok\ud800", "x" * 4000, "é" * 4000, "x" * 4001, " " * 4001,
        "\x7f del", "}\n{", 3, None],
    "importance": [3, 1, 2, 4, 5, 0, 6, -1, 10, True, 3.0, "3", None],
    "memory_key": [None, "storage.engine", "k0", "a" * 64, "a" * 65, "Bad Key", "", "_x", 3],
    "source": [None, {"source_id": "t:1", "source_type": "transcript", "title": "s1",
                      "captured_at": "2026-07-01T09:00:00Z"}, {"source_id": "t:1"}, "t:1"],
    "evidence": [["t:1"], None, [], ["t:2", "t:1"], ["t:1", "t:1"], ["t:1", "t:2", "t:1"],
                 [f"t:{i}" for i in range(50)], [f"t:{i}" for i in range(51)], "t:1",
                 *([i] for i in IDS[1:])],
}
VALUES = {name: st.sampled_from(values) for name, values in ONE_OFF.items()}
VALUES["evidence"] = st.one_of(
    VALUES["evidence"], st.lists(st.sampled_from(IDS), min_size=1, max_size=3),
    st.lists(st.sampled_from(["t:1", "t:2", "t:3"]), min_size=2, max_size=4))
MEMBERS = list(VALUES)


def valid(line):
    return {"schema_version": 1, "workspace_scope": SCOPE, "fact_id": f"adr-{line}",
            "recorded_at": "2026-07-01T09:00:00Z", "kind": "decision", "content": "Use WAL.",
            "importance": 3, "memory_key": None, "source": None, "evidence": ["t:1"]}


@st.composite
def a_line(draw):
    """One stored line: the record ``to_record`` writes, with a few members changed, moved
    or dropped, encoded as labmem encodes (or otherwise), and sometimes damaged as text."""
    record = valid(draw(st.integers(1, 9)))
    for name in draw(st.lists(st.sampled_from(MEMBERS), max_size=2)):
        record[name] = draw(VALUES[name])
    if draw(st.integers(0, 9)) == 0:
        del record[draw(st.sampled_from(MEMBERS))]
    if draw(st.integers(0, 9)) == 0:
        record["note"] = draw(st.sampled_from(["x", {"deep": [1]}, float("nan")]))
    if draw(st.integers(0, 9)) == 0:
        record = dict(reversed(record.items()))
    style = draw(st.sampled_from(["labmem"] * 6 + ["ascii", "spaced"]))
    text = json.dumps(record, ensure_ascii=style == "ascii",
                      separators=(", ", ": ") if style == "spaced" else (",", ":"))
    raw = text.encode("utf-8", "surrogatepass")  # a lone surrogate: bytes that are not UTF-8
    damage = draw(st.sampled_from([None] * 8 + ["control", "cut", "newline", "byte", "space",
                                              "cr", "twice", "deep"]))
    at = draw(st.integers(0, len(raw)))
    if damage == "control":
        raw = raw[:at] + b"\t" + raw[at:]
    elif damage == "cut":
        raw = raw[:at]
    elif damage == "newline":
        raw = raw[:at] + b"\n" + raw[at:]
    elif damage == "byte":
        raw = raw[:at] + b"\xff" + raw[at + 1:]
    elif damage == "space":
        raw = b" " + raw
    elif damage == "cr":
        raw = raw + b"\r"
    elif damage == "twice":
        raw = raw + b"," + raw
    elif damage == "deep":
        raw = raw[:-1] + b',"deep":' + b"[" * 150 + b"]" * 150 + b"}"
    return raw


def reference(path, start, kinds):
    """The line-by-line reader: facts of ``kinds`` and the cursor, or the error."""
    try:
        log = open_daily_log(path, SCOPE, start=start)
        facts = [f for f in log.refresh() if f.kind in kinds]
        return [vars(f) for f in facts], log.offset, log.line_count
    except LabmemError as exc:
        return type(exc), str(exc)


def bulk(path, start, kinds):
    try:
        facts, offset, lines = read_daily_since(path, SCOPE, start, kinds)
        assert all(type(f.evidence) is tuple and f.recorded_at.utcoffset() == timedelta(0)
                   for f in facts)
        return [vars(f) for f in facts], offset, lines
    except LabmemError as exc:
        return type(exc), str(exc)


def _file(tmp_path, records):
    path = tmp_path / DAY_NAME
    path.write_bytes(b"".join(json.dumps(r, ensure_ascii=False, separators=(",", ":"))
                              .encode("utf-8", "surrogatepass") + b"\n" for r in records))
    return path


@pytest.mark.parametrize(("member", "value"), [
    (member, value) for member, values in ONE_OFF.items() for value in values])
def test_each_member_value_decides_like_the_line_reader(tmp_path, member, value):
    """A file whose second line differs from the line to_record writes in one member: the
    bulk reader's facts or error are the line reader's, for every value tried."""
    path = _file(tmp_path, [valid(1), {**valid(2), member: value}, valid(3)])
    for kinds in (frozenset(KINDS), frozenset({"outcome"})):
        assert bulk(path, (0, 0), kinds) == reference(path, (0, 0), kinds)


@pytest.mark.parametrize("after", [1, 2])
@pytest.mark.parametrize("where", ['"Use', '"t:1', '"adr-2', '"2026', ':3,', '"decision'])
@pytest.mark.parametrize("raw", [b"\t", b"\x00", b"\x1f", b"\n", b"\r", b"\\", b'"', b"\xff",
                                 b"\xc3", b"\x7f", b" ", "\u3000".encode()])
def test_raw_damage_decides_like_the_line_reader(tmp_path, where, after, raw):
    """A byte put into the text of the middle line (before or after the first character
    of a member's value): control characters, a quote, a backslash, broken UTF-8 …"""
    path = _file(tmp_path, [valid(1), valid(2), valid(3)])
    lines = path.read_bytes().split(b"\n")
    at = lines[1].index(where.encode()) + after
    lines[1] = lines[1][:at] + raw + lines[1][at:]
    path.write_bytes(b"\n".join(lines))
    assert bulk(path, (0, 0), frozenset(KINDS)) == reference(path, (0, 0), frozenset(KINDS))


KIND_SETS = st.sampled_from([frozenset(KINDS), frozenset({"decision", "convention",
                                                          "pitfall"}), frozenset()])


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(lines=[json.dumps(valid(1), separators=(",", ":")).encode()], tail=b"", skip=0,
         kinds=frozenset(KINDS))
@given(lines=st.lists(a_line(), min_size=1, max_size=5),
       tail=st.sampled_from([b"", b"", b'{"schema_version":1', b"\xff"]),
       skip=st.integers(0, 5), kinds=KIND_SETS)
def test_the_bulk_reader_decides_like_the_line_reader(tmp_path, lines, tail, skip, kinds):
    """Same facts, same cursor, or the same error (class and message), from the start of
    the file or from a cursor after its first ``skip`` lines; and whenever the one
    expression decodes a chunk, the line reader accepts the same chunk with the same facts."""
    path = tmp_path / DAY_NAME
    body = b"".join(raw + b"\n" for raw in lines)
    path.write_bytes(body + tail)
    complete = body.split(b"\n")
    skip = min(skip, len(complete) - 1)
    start = (sum(len(raw) + 1 for raw in complete[:skip]), skip)
    expected = reference(path, start, kinds)
    assert bulk(path, start, kinds) == expected
    decoded = decode_daily_lines(body[start[0]:], day=DAY, workspace_scope=SCOPE,
                                 first_line=skip + 1, kinds=kinds)
    if decoded is not None:  # the expression's verdict is the line reader's
        assert ([vars(f) for f in decoded[0]], start[0] + len(body[start[0]:]),
                skip + decoded[1]) == expected


def test_the_lines_labmem_writes_take_the_expression(tmp_path):
    """The fast path is the common path: lines ``append_fact`` writes, sources and escapes
    aside, are decoded by the expression (not by the line reader it falls back to)."""
    ws = WorkspaceMemory(tmp_path / "project", workspace_id="w")
    at = "2026-07-01T09:00:00Z"
    plain = [ws.append_fact(text, kind=kind, importance=i, memory_key=key, evidence=ev,
                            recorded_at=at)
             for text, kind, i, key, ev in (("Use WAL.", "decision", 3, None, ["t:1"]),
                                            ("naïve 日本", "pitfall", 5, "k.1", None),
                                            ("x", "outcome", 1, None, ["t:3", "t:2", "t:3"]))]
    path = tmp_path / "project" / "daily" / DAY_NAME
    decoded = decode_daily_lines(path.read_bytes(), DAY, ws.workspace_scope, 1, KINDS)
    assert decoded is not None and [vars(f) for f in decoded[0]] == [vars(f) for f in plain]
    ws.append_fact('say "hi"', kind="decision", recorded_at=at)  # an escape: line by line
    assert decode_daily_lines(path.read_bytes(), DAY, ws.workspace_scope, 1, KINDS) is None
    assert [f.content for f in read_daily_since(path, ws.workspace_scope, (0, 0), KINDS)[0]] \
        == ["Use WAL.", "naïve 日本", "x", 'say "hi"']


def test_a_corrupt_line_among_good_ones_is_named(tmp_path):
    """A bad complete line in a file of good ones: the distill names file and line."""
    def at(days):
        return datetime(2026, 7, 1, 9, tzinfo=timezone.utc) + timedelta(days=days)

    ws = WorkspaceMemory(tmp_path / "project", workspace_id="w", clock=FixedClock(at(100)))
    for n in range(5):
        ws.append_fact(f"note {n}", kind="decision", evidence=[f"t:{n}"], recorded_at=at(0))
    path = tmp_path / "project" / "daily" / DAY_NAME
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"importance":3', b'"importance":7')
    path.write_bytes(b"\n".join(lines))
    os.utime(tmp_path / "project" / "daily")
    with pytest.raises(WorkspaceCorruptionError, match=r"daily/2026-07-01\.jsonl.*line 3.*"
                                                      r"importance"):
        ws.distill(policy=DistillPolicy(), as_of=at(90))


TEXTS = ["Use WAL.", "use  wal.", 'say "hi"', "naïve café", "tab\tin", "x", "日本語"]
FACT_ROW = st.tuples(st.integers(0, len(TEXTS) - 1), st.integers(0, 3), st.integers(1, 5),
                     st.sampled_from([None, None, "k.1", "k.2"]),
                     st.lists(st.sampled_from(["t:1", "t:2", "t:3"]), max_size=2),
                     st.integers(0, 5), st.integers(0, 23))
DAMAGE = st.one_of(st.none(), st.tuples(
    st.integers(0, 40), st.sampled_from([(b'"importance":', b'"importance":9'),
                                         (b'"kind":"', b'"kind":"x'), (b'"content":"', b'\t'),
                                         (b'"evidence":[', b'"evidence":[7,'),
                                         (b'"recorded_at":"2026-07-0', b'"recorded_at":"2026-08-0'),
                                         (b"}", b"")])))
NOW = datetime(2026, 10, 1, tzinfo=timezone.utc)


def _distilled(root, policy, as_of, *, line_by_line):
    """The report (or error) of a fresh instance's distill, and the files it wrote."""
    from labmem.workspace import line_matcher

    slow = mock.patch.object(line_matcher, "decode_daily_lines", lambda *a, **k: None)
    try:
        with slow if line_by_line else contextlib.nullcontext():
            outcome = WorkspaceMemory(root, clock=FixedClock(NOW)).distill(policy=policy,
                                                                           as_of=as_of)
    except LabmemError as exc:
        outcome = (type(exc), str(exc))
    return outcome, {name: (root / name).read_bytes() for name in ("curated.json", "MEMORY.md")
                     if (root / name).exists()}


@settings(max_examples=60, deadline=None)
@given(first=st.lists(FACT_ROW, min_size=1, max_size=25),
       later=st.lists(FACT_ROW, max_size=10), damage=DAMAGE,
       policy=st.sampled_from([DistillPolicy(), DistillPolicy(repeat_threshold=1),
                               DistillPolicy(stable_kinds={"outcome", "decision"})]),
       days=st.sampled_from([32, 34, 40]))
def test_a_distill_writes_what_the_line_reader_would(tmp_path_factory, first, later, damage,
                                                     policy, days):
    """Two copies of one workspace, distilled by the bulk reader and by the line reader
    alone: the same report (or the same error) and byte-identical curated.json and
    MEMORY.md — on a first distill, and on the next one, which reads from the cursors."""
    base = tmp_path_factory.mktemp("ws")
    fast, slow = base / "fast", base / "slow"
    ws = WorkspaceMemory(fast, workspace_id="w", clock=FixedClock(NOW))

    def log(rows):
        for text, kind, importance, key, evidence, day, hour in rows:
            ws.append_fact(TEXTS[text], kind=KINDS[kind], importance=importance,
                           memory_key=key, evidence=evidence or None,
                           recorded_at=datetime(2026, 7, 1 + day, hour, tzinfo=timezone.utc))

    log(first)
    if damage is not None:
        logs = sorted((fast / "daily").iterdir())
        path = logs[damage[0] % len(logs)]
        lines = path.read_bytes().split(b"\n")
        at = damage[0] % (len(lines) - 1)
        lines[at] = lines[at].replace(*damage[1], 1)
        path.write_bytes(b"\n".join(lines))
    as_of = datetime(2026, 7, 1, tzinfo=timezone.utc) + timedelta(days=days)
    for again in range(1 if damage else 2):  # (a damaged log takes no more appends)
        if again:
            log(later)
        shutil.rmtree(slow, ignore_errors=True)
        shutil.copytree(fast, slow)
        expected = _distilled(slow, policy, as_of, line_by_line=True)
        assert _distilled(fast, policy, as_of, line_by_line=False) == expected
