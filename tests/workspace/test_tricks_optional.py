"""s10 performance tricks are optional: each seam set to its plain implementation gives
the same reports and byte-identical files.

The tricks live in sibling modules (``line_matcher``, ``change_marker``,
``curated_encoding``, ``distill_cursors``), each behind a class attribute of
:class:`WorkspaceMemory` or a function argument; these tests turn them off.
"""

import json
from datetime import timedelta

from labmem.workspace import DistillPolicy, WorkspaceMemory
from labmem.workspace.curated_encoding import encode_document, encode_plain
from labmem.workspace.distill_cursors import distill_since
from labmem.workspace.facts import read_daily_lines
from tests.workspace.test_distill_cursors import T0, Oracle, _history, make

POLICIES = [DistillPolicy(), DistillPolicy(repeat_threshold=1)]
AS_OFS = [T0 + timedelta(days=40), T0 + timedelta(days=70)]


def _run(root, monkeypatch=None, plain=False):
    """Distill a history under each policy and cutoff, twice, with an append between;
    the reports and the files written."""
    if plain:
        monkeypatch.setattr(WorkspaceMemory, "read_daily", staticmethod(read_daily_lines))
        monkeypatch.setattr(WorkspaceMemory, "nothing_new_check", None)
        monkeypatch.setattr(WorkspaceMemory, "encode_curated", staticmethod(encode_plain))
    ws = _history(root, days=12)
    reports = []
    for policy in POLICIES:
        for as_of in AS_OFS:
            reports.append(ws.distill(policy=policy, as_of=as_of))
            reports.append(make(root).distill(policy=policy, as_of=as_of))
            ws.append_fact("note 1", kind="pitfall", evidence=[f"t:{len(reports)}"],
                           recorded_at=T0 + timedelta(days=2, hours=20))
    files = {p.name: p.read_bytes() for p in (root / "curated.json", root / "MEMORY.md")}
    return reports, files


def test_the_plain_implementations_give_the_same_reports_and_files(tmp_path, monkeypatch):
    fast = _run(tmp_path / "fast")
    plain = _run(tmp_path / "plain", monkeypatch, plain=True)
    assert fast[0] == plain[0]
    curated = [f[1].pop("curated.json") for f in (fast, plain)]
    assert fast[1] == plain[1]
    documents = [json.loads(c) for c in curated]
    for document in documents:  # the marker is a time (an mtime): the rest is equal
        document["distill"]["marker"] = None
    assert documents[0] == documents[1]


def test_the_record_encoder_writes_what_the_snapshot_encoder_writes(tmp_path):
    ws = _history(tmp_path / "project", days=12)
    ws.distill(policy=DistillPolicy(), as_of=AS_OFS[1])
    before, cursors, _ = ws._load_document()
    document = ws._document(before, cursors)
    assert encode_document(document) == encode_plain(document)


def test_distill_since_without_cursors_is_the_full_fold(tmp_path):
    ws = _history(tmp_path / "project", days=12)
    policy, as_of = DistillPolicy(), AS_OFS[1]
    after, report, cursors = distill_since(
        ws._load(), None, policy, as_of, policy.cutoff(as_of).date(),
        daily_files=ws._daily_files(), workspace_scope=ws.workspace_scope,
        read_daily=read_daily_lines, marker=None, audited=0)
    oracle = Oracle()
    assert report == oracle.distill(ws, policy, as_of)
    assert after.to_dict() == oracle.state.to_dict()
    assert cursors.marker is None and set(cursors.files) <= {p.name for p in ws._daily_files()}


def test_the_default_reader_is_looked_up_at_each_distill(tmp_path, monkeypatch):
    """``read_daily`` left at ``None`` reads through ``memory.read_daily_since`` at call
    time, so a tally wrapped around it (as the chapter does) sees every read."""
    from labmem.workspace import memory

    seen = []
    reader = memory.read_daily_since

    def counting(path, scope, start, kinds):
        seen.append(path.name)
        return reader(path, scope, start, kinds)

    monkeypatch.setattr(memory, "read_daily_since", counting)
    ws = _history(tmp_path / "project", days=3)
    ws.distill(policy=DistillPolicy(), as_of=AS_OFS[1])
    assert sorted(seen) == sorted(p.name for p in ws._daily_files())
