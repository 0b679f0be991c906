"""The s10 contract suite: what a workspace memory promises, tried on any implementation.

Three implementations keep these promises: the chapter's from-scratch module
(:mod:`labmem.scratch.s10`), the production layer (:mod:`labmem.workspace`, which adds
validation, scopes, retry-safe ids, a lock, distill cursors, an audit log and a richer
MEMORY.md) behind :data:`PRODUCTION`, and the learner's layer (the from-scratch module with
the learner's pieces in it). Each offers the same names: ``Fact``, ``DistillPolicy``,
``is_promotable``, ``judge_rivals`` and ``Workspace(root, clock)`` with ``append``,
``facts``, ``distill(policy, as_of)`` (a dict of counts), ``view()`` (entries and conflicts
by id), ``resolve(conflict_id, candidate_id, expected_revision)`` and ``root``.
Every contract works in a fresh temporary directory and tries its smallest case first.
"""

from __future__ import annotations

import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from labmem.core.clock import FixedClock, parse_timestamp
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite
from labmem.scratch import s10 as scratch

T0 = parse_timestamp("2026-06-01T09:00:00Z", field="T0")
NOW = T0 + timedelta(days=90)


def day(n: float) -> datetime:
    """``n`` days after 2026-06-01T09:00Z: the times every contract uses."""
    return T0 + timedelta(days=n)


@contextmanager
def _workspace(impl: Any) -> Iterator[Any]:
    with tempfile.TemporaryDirectory(prefix="labmem-s10-contract-") as root:
        yield impl.Workspace(Path(root) / "project", FixedClock(NOW))


def _broken(case: str, expected: str, got: Any) -> ContractBroken:
    return ContractBroken(f"smallest case: {case} — expected {expected}, got {got}")


def _refused(action: Callable[[], Any], case: str, must_name: str) -> None:
    """``action`` must raise, with a message that names ``must_name``."""
    try:
        action()
    except NotImplementedError:
        raise
    except Exception as exc:  # each implementation raises its own error type
        if must_name not in str(exc):
            raise _broken(case, f"a refusal naming {must_name!r}",
                          f"{type(exc).__name__}: {exc}") from None
        return
    raise _broken(case, "a refusal", "it was accepted")


def _facts(impl: Any, rows: list[tuple]) -> list[Any]:
    """Facts from ``(content, importance, evidence, day)`` rows, ids f1, f2, ... in order."""
    return [impl.Fact(fact_id=f"f{i}", recorded_at=day(d), kind="decision", content=c,
                      importance=imp, memory_key="storage.engine", evidence=tuple(ev))
            for i, (c, imp, ev, d) in enumerate(rows, start=1)]


def _show(rows: list[tuple]) -> str:
    return "[" + "; ".join(f"{c!r} importance {imp} evidence {list(ev)} day {d}"
                           for c, imp, ev, d in rows) + "]"


# -- the log ------------------------------------------------------------------------------

def _logged_fact_reads_back(impl: Any) -> None:
    with _workspace(impl) as ws:
        fact = ws.append("Timestamps are UTC.", kind="convention", importance=5,
                         evidence=("t:1",), recorded_at=day(1))
        [path] = sorted((ws.root / "daily").glob("*.jsonl"))
        data = path.read_bytes()
        if data.count(b"\n") != 1 or not data.endswith(b"\n"):
            raise _broken("one append", "one complete line", repr(data[:80]))
        back = ws.facts()
        got = [(f.fact_id, f.recorded_at, f.kind, f.content, f.importance, f.memory_key,
                tuple(f.evidence)) for f in back]
        want = [(fact.fact_id, day(1), "convention", "Timestamps are UTC.", 5, None, ("t:1",))]
        if got != want:
            raise _broken("one append, read back", str(want), str(got))


def _torn_tail(impl: Any) -> None:
    with _workspace(impl) as ws:
        ws.append("Use JSONL.", kind="decision", evidence=("t:1",), recorded_at=day(1))
        [path] = sorted((ws.root / "daily").glob("*.jsonl"))
        whole = path.read_bytes()
        with open(path, "ab") as handle:
            handle.write(b'{"fact_id": "torn')  # a writer died mid-line
        if [f.content for f in ws.facts()] != ["Use JSONL."]:
            raise _broken("one fact + a torn tail, read", "the one complete fact",
                          [f.content for f in ws.facts()])
        second = ws.append("Use UTC.", kind="convention", evidence=("t:2",),
                           recorded_at=day(1))
        data = path.read_bytes()
        if b"torn" in data or not data.startswith(whole) or data.count(b"\n") != 2:
            raise _broken("one fact + a torn tail, then an append",
                          "the torn bytes cut, two complete lines", repr(data[-120:]))
        if [f.fact_id for f in ws.facts()][-1] != second.fact_id:
            raise _broken("append after a torn tail", f"last fact {second.fact_id!r}",
                          [f.fact_id for f in ws.facts()])


def _damaged_line(impl: Any) -> None:
    with _workspace(impl) as ws:
        ws.append("Use JSONL.", kind="decision", evidence=("t:1",), recorded_at=day(1))
        [path] = sorted((ws.root / "daily").glob("*.jsonl"))
        with open(path, "ab") as handle:
            handle.write(b'{"fact_id": "cut in two\n')
        _refused(ws.facts, "a complete line 2 that is not JSON", "line 2")


def _future_refused(impl: Any) -> None:
    with _workspace(impl) as ws:
        _refused(lambda: ws.append("Deploy on Fridays.", kind="convention",
                                   recorded_at=NOW + timedelta(seconds=1)),
                 "recorded_at one second after now", "recorded_at")
        ws.append("Deploy on Fridays.", kind="convention", recorded_at=NOW)
        if len(ws.facts()) != 1:
            raise _broken("recorded_at exactly now", "1 fact logged", len(ws.facts()))


# -- promotion ------------------------------------------------------------------------------

_PROMOTION_CASES = [  # (rows, minimum_importance, repeat_threshold, promotable?)
    ([("Pin 3.12", 4, ["t:1"], 0)], 4, 2, True),
    ([("Pin 3.12", 3, ["t:1"], 0)], 4, 2, False),
    ([("Pin 3.12", 3, ["t:1"], 0), ("Pin 3.12", 3, ["t:1"], 1)], 4, 2, False),
    ([("Pin 3.12", 3, ["t:1"], 0), ("Pin 3.12", 3, ["t:2"], 1)], 4, 2, True),
    ([("Pin 3.12", 3, ["t:1", "t:2"], 0)], 4, 2, True),
    ([("Pin 3.12", 4, ["t:1"], 0), ("Pin 3.12", 2, ["t:2"], 1)], 5, 3, False),
    ([("Pin 3.12", 2, ["t:1"], 0), ("Pin 3.12", 5, ["t:2"], 1)], 5, 3, True),
    ([("Pin 3.12", 3, ["t:1"], 0), ("Pin 3.12", 3, ["t:2"], 1),
      ("Pin 3.12", 3, ["t:3"], 2)], 5, 3, True),
]


def _promotion(impl: Any, cases: list[tuple]) -> None:
    for rows, minimum, repeat, want in cases:
        policy = impl.DistillPolicy(minimum_importance=minimum, repeat_threshold=repeat)
        got = impl.is_promotable(_facts(impl, rows), policy)
        if got is not want:
            raise _broken(f"is_promotable({_show(rows)}, minimum_importance={minimum}, "
                          f"repeat_threshold={repeat})", str(want), repr(got))


def _promoted_when_important_or_repeated(impl: Any) -> None:
    _promotion(impl, _PROMOTION_CASES)


def _no_evidence_is_its_own(impl: Any) -> None:
    _promotion(impl, [
        ([("Pin 3.12", 3, [], 0), ("Pin 3.12", 3, [], 1)], 4, 2, True),
        ([("Pin 3.12", 3, [], 0), ("Pin 3.12", 3, ["t:1"], 1)], 4, 2, True),
        ([("Pin 3.12", 3, [], 0)], 4, 2, False),
    ])


# -- distill, end to end ---------------------------------------------------------------------

def _curated(ws: Any) -> dict[str, Any]:
    return {e.content: e for e in ws.view().entries.values() if e.status == "active"}


def _cutoff_and_kinds(impl: Any) -> None:
    policy = impl.DistillPolicy()
    as_of = day(40)
    cutoff = as_of - timedelta(days=30)
    with _workspace(impl) as ws:
        ws.append("At the cutoff.", kind="decision", importance=5, recorded_at=cutoff)
        ws.append("After the cutoff.", kind="decision", importance=5,
                  recorded_at=cutoff + timedelta(seconds=1))
        ws.append("An outcome.", kind="outcome", importance=5, recorded_at=day(1))
        report = ws.distill(policy, as_of)
        got = sorted(_curated(ws))
        if got != ["At the cutoff."] or report["eligible"] != 1:
            raise _broken("importance-5 facts at the cutoff, 1 s after it, and an outcome",
                          "only the one at the cutoff curated (eligible 1)",
                          f"{got} (eligible {report['eligible']})")


def _repeats_merge(impl: Any) -> None:
    with _workspace(impl) as ws:
        ws.append("Store records as JSONL.", kind="decision", evidence=("t:1",),
                  recorded_at=day(1))
        ws.append("store records as  JSONL.", kind="decision", evidence=("t:2",),
                  recorded_at=day(2))
        ws.distill(ws_policy(impl), day(40))
        entries = list(_curated(ws).values())
        got = [(e.content, e.occurrences, tuple(e.evidence_ids)) for e in entries]
        want = [("Store records as JSONL.", 2, ("t:1", "t:2"))]
        if got != want:
            raise _broken("two wordings, evidence t:1 and t:2, importance 3", str(want),
                          str(got))


def ws_policy(impl: Any) -> Any:
    return impl.DistillPolicy()


def _second_distill_changes_nothing(impl: Any) -> None:
    with _workspace(impl) as ws:
        ws.append("Use UTC.", kind="convention", importance=5, recorded_at=day(1))
        ws.append("Use JSONL.", kind="decision", evidence=("t:1",), recorded_at=day(2))
        ws.distill(ws_policy(impl), day(40))
        before = ws.view()
        report = ws.distill(ws_policy(impl), day(40))
        if ws.view() != before or report["created"] or report["updated"]:
            raise _broken("one promotable fact and one skipped, distilled twice",
                          "the same view, created 0 and updated 0",
                          f"created {report['created']}, updated {report['updated']}")


# -- supersession ----------------------------------------------------------------------------

def _verdict(v: Any) -> tuple:
    return v.outcome, tuple(sorted(v.values)), tuple(sorted(v.stale))


def _judge(impl: Any, cases: list[tuple]) -> None:
    for rows, newer_than, threshold, want in cases:
        got = _verdict(impl.judge_rivals(_facts(impl, rows), day(newer_than), threshold))
        if got != want:
            raise _broken(f"judge_rivals({_show(rows)}, newer_than=day {newer_than}, "
                          f"threshold={threshold})", str(want), str(got))


def _stale(impl: Any) -> None:
    _judge(impl, [
        ([], 5, 2, ("keep", (), ())),
        ([("SQLite", 3, ["t:1"], 5)], 5, 1, ("keep", (), ("f1",))),
        ([("SQLite", 3, ["t:1"], 4), ("SQLite", 3, ["t:2"], 6)], 5, 2, ("keep", (), ("f1",))),
    ])
    with _workspace(impl) as ws:  # a late import of old notes cannot roll a key back
        for value, imp, ev, d in (("SQLite", 4, "t:1", 1), ("PostgreSQL", 3, "t:2", 5),
                                  ("PostgreSQL", 3, "t:3", 6)):
            ws.append(value, kind="decision", importance=imp, memory_key="db",
                      evidence=(ev,), recorded_at=day(d))
        ws.distill(ws_policy(impl), day(40))
        for ev, d in (("t:4", 4), ("t:5", 6)):  # old notes, imported late
            ws.append("SQLite", kind="decision", memory_key="db", evidence=(ev,),
                      recorded_at=day(d))
        report = ws.distill(ws_policy(impl), day(40))
        active = [e.content for e in ws.view().entries.values()
                  if e.memory_key == "db" and e.status == "active"]
        if active != ["PostgreSQL"] or report["stale"] != 2:
            raise _broken("SQLite day 1 (importance 4), PostgreSQL days 5 and 6, distilled; "
                          "then SQLite days 4 and 6 imported late", "PostgreSQL active, "
                          "stale 2", f"{active}, stale {report['stale']}")


def _supersedes(impl: Any) -> None:
    _judge(impl, [
        ([("PostgreSQL", 3, ["t:1"], 6)], 5, 2, ("keep", (), ())),
        ([("PostgreSQL", 3, ["t:1"], 6), ("PostgreSQL", 3, ["t:1"], 7)], 5, 2,
         ("keep", (), ())),
        ([("PostgreSQL", 3, ["t:1"], 6), ("postgresql", 3, ["t:2"], 7)], 5, 2,
         ("supersede", ("postgresql",), ())),
        ([("PostgreSQL", 3, ["t:1"], 6), ("DuckDB", 3, ["t:2"], 7),
          ("PostgreSQL", 3, ["t:3"], 8)], 5, 1, ("supersede", ("postgresql",), ())),
    ])
    with _workspace(impl) as ws:
        for value, imp, ev, d in (("SQLite", 4, "t:1", 1), ("PostgreSQL", 3, "t:2", 5),
                                  ("PostgreSQL", 3, "t:3", 6)):
            ws.append(value, kind="decision", importance=imp, memory_key="db",
                      evidence=(ev,), recorded_at=day(d))
        ws.distill(ws_policy(impl), day(40))
        chain = sorted((e for e in ws.view().entries.values() if e.memory_key == "db"),
                       key=lambda e: e.revision)
        got = [(e.content, e.status, e.supersedes, e.superseded_by) for e in chain]
        want = [("SQLite", "superseded", None, "db#r2"), ("PostgreSQL", "active", "db#r1", None)]
        if got != want:
            raise _broken("SQLite day 1 (importance 4), PostgreSQL days 5 and 6",
                          str(want), str(got))


def _fails_closed(impl: Any) -> None:
    _judge(impl, [
        ([("Buildkite", 3, ["t:1"], 6), ("Jenkins", 3, ["t:2"], 7)], 5, 1,
         ("conflict", ("buildkite", "jenkins"), ())),
        ([("Jenkins", 3, ["t:1"], 6), ("Buildkite", 3, ["t:2"], 7), ("Make", 3, ["t:3"], 8),
          ("Jenkins", 3, ["t:4"], 9), ("Buildkite", 3, ["t:5"], 9)], 5, 1,
         ("conflict", ("buildkite", "jenkins"), ())),
    ])
    with _workspace(impl) as ws:
        _conflicted(ws)
        ws.distill(ws_policy(impl), day(40))
        view = ws.view()
        active = [e.content for e in view.entries.values()
                  if e.memory_key == "ci" and e.status == "active"]
        cases = [(c.conflict_id, c.base_revision, c.status) for c in view.conflicts.values()]
        if active != ["GitHub Actions"] or cases != [("conflict:ci:r1", 1, "open")]:
            raise _broken("GitHub Actions (importance 4), then Buildkite and Jenkins twice "
                          "each", "GitHub Actions still active, conflict:ci:r1 open",
                          f"{active}, {cases}")


def _conflicted(ws: Any) -> None:
    for value, imp, ev, d in (("GitHub Actions", 4, "t:1", 1), ("Buildkite", 3, "t:2", 5),
                              ("Jenkins", 3, "t:3", 6), ("Buildkite", 3, "t:4", 7),
                              ("Jenkins", 3, "t:5", 8)):
        ws.append(value, kind="decision", importance=imp, memory_key="ci", evidence=(ev,),
                  recorded_at=day(d))


# -- the human resolution ------------------------------------------------------------------

def _resolution_guarded(impl: Any) -> None:
    with _workspace(impl) as ws:
        _conflicted(ws)
        ws.distill(ws_policy(impl), day(40))
        _refused(lambda: ws.resolve("conflict:ci:r1", "c1", 0),
                 "resolve conflict:ci:r1 (recorded against revision 1) with "
                 "expected_revision=0", "expected_revision")
        ws.resolve("conflict:ci:r1", "c1", 1)
        first = ws.view()
        ws.resolve("conflict:ci:r1", "c1", 1)
        if ws.view() != first:
            raise _broken("the same resolution twice", "the retry to change nothing",
                          "a changed view")
        _refused(lambda: ws.resolve("conflict:ci:r1", "c2", 1),
                 "a settled conflict resolved again with the other candidate", "c1")
        active = [e.content for e in ws.view().entries.values()
                  if e.memory_key == "ci" and e.status == "active"]
        if active != ["Buildkite"]:
            raise _broken("resolve with c1 (Buildkite)", "['Buildkite'] active", active)


def _resolution_dated(impl: Any) -> None:
    with _workspace(impl) as ws:
        _conflicted(ws)
        ws.distill(ws_policy(impl), day(40))
        entry = ws.resolve("conflict:ci:r1", "c1", 1)
        if entry.last_recorded_at != day(8):
            raise _broken("resolve with c1 (Buildkite, newest evidence day 7; Jenkins day 8)",
                          "the new revision dated day 8",
                          f"day {(entry.last_recorded_at - T0).days}")
        report = ws.distill(ws_policy(impl), day(40))
        if report["stale"] != 2 or report["conflicts"] != 0:
            raise _broken("distill after resolving with c1", "the 2 Jenkins facts stale, "
                          "no open conflict",
                          f"stale {report['stale']}, conflicts {report['conflicts']}")


SUITE = ContractSuite(N_("workspace memory"), (
    Contract(N_("a logged fact is one fsynced JSON line, read back as it was logged"),
             _logged_fact_reads_back),
    Contract(N_("a torn last line is ignored on read and cut before the next append"),
             _torn_tail),
    Contract(N_("a damaged complete line is refused with its line number, never skipped"),
             _damaged_line),
    Contract(N_("a fact dated later than the clock's now is refused"), _future_refused),
    Contract(N_("a group is promoted when one fact is important enough or its distinct "
                "evidence ids reach the repeat threshold"), _promoted_when_important_or_repeated),
    Contract(N_("a fact that names no evidence is one piece of evidence of its own"),
             _no_evidence_is_its_own),
    Contract(N_("only facts at or before the cutoff and of a stable kind are distilled"),
             _cutoff_and_kinds),
    Contract(N_("two wordings of one fact with two evidence ids merge into one entry that "
                "keeps both"), _repeats_merge),
    Contract(N_("a second distill with the same arguments changes nothing"),
             _second_distill_changes_nothing),
    Contract(N_("rival evidence not newer than the active revision is stale and cannot roll "
                "the key back"), _stale),
    Contract(N_("a rival value with enough newer distinct evidence supersedes, and the chain "
                "links both ways"), _supersedes),
    Contract(N_("equally strong strongest rivals fail closed: a conflict, the key unchanged"),
             _fails_closed),
    Contract(N_("a resolution names the conflict's base revision, and a settled conflict is "
                "not reopened"), _resolution_guarded),
    Contract(N_("a resolved revision is dated at the newest evidence of every candidate, so "
                "the rivals the human saw are stale"), _resolution_dated),
))

#: The chapter's from-scratch module is an implementation as it stands.
SCRATCH = scratch


# -- the production layer behind the same names ------------------------------------------------

def _production_fact(fact_id: str, recorded_at: datetime, kind: str, content: str,
                     importance: int = 3, memory_key: str | None = None,
                     evidence: tuple[str, ...] = ()) -> Any:
    from labmem.workspace import Fact
    line = int(fact_id[1:]) if fact_id[1:].isdigit() else 0
    return Fact(fact_id=fact_id, recorded_at=recorded_at, kind=kind, content=content,
                importance=importance, memory_key=memory_key, source=None,
                evidence=tuple(sorted(set(evidence))), line=line)


def view_of(state: Any) -> scratch.View:
    """A production :class:`~labmem.workspace.curation.CuratedState` in the from-scratch
    module's shape (a conflict's candidates become entries with ids c1, c2, ...)."""
    def entry(e: Any) -> scratch.Entry:
        return scratch.Entry(e.entry_id, e.kind, e.content, e.memory_key, e.revision,
                             e.status, e.importance, tuple(e.evidence_ids),
                             tuple(e.fact_ids), e.first_recorded_at, e.last_recorded_at,
                             e.supersedes, e.superseded_by, e.resolved_by)

    def candidate(key: str, c: Any) -> scratch.Entry:
        return scratch.Entry(c.candidate_id, c.kind, c.content, key, None, "candidate",
                             c.importance, tuple(c.evidence_ids), tuple(c.fact_ids),
                             c.first_recorded_at, c.last_recorded_at)
    return scratch.View(
        {k: entry(e) for k, e in sorted(state.entries.items())},
        {k: scratch.Conflict(c.conflict_id, c.memory_key, c.base_revision,
                             tuple(candidate(c.memory_key, x) for x in c.candidates),
                             c.status, None if c.resolution is None
                             else c.resolution.candidate_id)
         for k, c in sorted(state.conflicts.items())})


class ProductionWorkspace:
    """:class:`labmem.workspace.WorkspaceMemory` offering the from-scratch operations."""

    def __init__(self, root: str | Path, clock: Any) -> None:
        from labmem.workspace import WorkspaceMemory
        self.memory = WorkspaceMemory(root, workspace_id="contracts", clock=clock)
        self.root = Path(root)

    def append(self, content: str, *, kind: str, importance: int = 3,
               memory_key: str | None = None, evidence: tuple[str, ...] = (),
               recorded_at: datetime | None = None) -> Any:
        return self.memory.append_fact(content, kind=kind, importance=importance,
                                       memory_key=memory_key, evidence=list(evidence),
                                       recorded_at=recorded_at)

    def facts(self) -> list[Any]:
        return list(self.memory.iter_facts())

    def distill(self, policy: Any, as_of: datetime) -> dict[str, int]:
        return self.memory.distill(policy=policy, as_of=as_of).to_dict()

    def view(self) -> scratch.View:
        memory = self.memory
        return view_of(types.SimpleNamespace(
            entries={e.entry_id: e for e in memory.curated_entries(include_superseded=True)},
            conflicts={c.conflict_id: c for c in memory.list_conflicts(include_resolved=True)}))

    def resolve(self, conflict_id: str, candidate_id: str, expected_revision: int) -> Any:
        self.memory.resolve_conflict(conflict_id, candidate_id,
                                     expected_revision=expected_revision, actor="contracts",
                                     rationale="contract check")
        return self.memory.revision_chain(self.view().conflicts[conflict_id].memory_key)[-1]


def _production() -> types.SimpleNamespace:
    from labmem.workspace import DistillPolicy, is_promotable, judge_rivals
    return types.SimpleNamespace(Fact=_production_fact, DistillPolicy=DistillPolicy,
                                 is_promotable=is_promotable, judge_rivals=judge_rivals,
                                 Workspace=ProductionWorkspace)


#: The library's layer behind the same names.
PRODUCTION = _production()
