"""The walkthrough's contract suite: the glue between the layers, contract by contract.

The walkthrough adds no memory mechanism; what it adds is glue: a transcript's memory
candidate handed to workspace memory and to the remote store, with its provenance. The
suite judges that glue twice over: first by the boundary checks a restart computes on
fresh objects (the first five contracts, one per check the s09–s12 layers answer), then
by the glue's own promises on small cases (the last six).

``SUITE`` runs on any implementation that offers, under these names:

* ``Clock(start)`` (``now()``, ``advance(delta)``) and ``Home(root)`` (``transcript``,
  ``workspace``, ``store(user_id)``);
* ``open_transcript(home, clock)``, ``open_workspace(home, clock)``,
  ``open_user(home, user_id, clock)``, ``open_store(home, user_id)``;
* the glue, ``hand_to_workspace(workspace, candidate)`` and
  ``hand_to_store(store, candidate, stored_at=...)``;
* ``first_hit(store, as_of)``, ``run(home, clock)`` (the stages before the restart) and
  ``restart_checks(home, run, clock)`` (the restart and the checks, by name).

``SCRATCH`` is the chapter's from-scratch module (:mod:`labmem.scratch.walkthrough`),
which composes the from-scratch modules of s09–s12; ``PRODUCTION`` is
:mod:`labmem.walkthrough` (with the library's layers) behind :class:`_Production`. The
library's run also computes the six checks of s13 and s14, which the from-scratch run
does not compose; those are shown in the chapter, not judged here.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from labmem import walkthrough as production
from labmem.core.clock import FixedClock, format_timestamp
from labmem.core.i18n import N_
from labmem.core.provenance import scope_digest
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, expect
from labmem.recall import RecallEngine, RemoteMemoryStore
from labmem.scratch import walkthrough as scratch_module
from labmem.transcript import Transcript
from labmem.user import UserMemory
from labmem.workspace import WorkspaceMemory

QUERY, SESSION, WORKSPACE_ID = production.QUERY, production.SESSION, production.WORKSPACE_ID
START = "2026-08-01T12:00:00Z"
#: the boundary checks the s09–s12 part of the run computes after its restart
BOUNDARY_CHECKS = ("transcript_recovered", "workspace_deduplicated",
                   "user_preference_deduplicated", "user_scope_isolated",
                   "recall_recovered_with_source")


@dataclass(frozen=True)
class _Home:
    """The library run's layout of one home, under the names the contracts use."""

    root: Path

    @property
    def transcript(self) -> Path:
        return self.root / "sessions" / f"{SESSION}.jsonl"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def store(self, user_id: str) -> Path:
        return self.root / "remote" / f"{scope_digest(user_id)}.jsonl"


class _Production:
    """:mod:`labmem.walkthrough` and the library's layers under the names the contracts use."""

    Clock = FixedClock
    Home = _Home
    POLICY = production.POLICY

    @staticmethod
    def open_transcript(home: _Home, clock: Any) -> Transcript:
        return Transcript(home.transcript, clock=clock)

    @staticmethod
    def open_workspace(home: _Home, clock: Any) -> WorkspaceMemory:
        return WorkspaceMemory(home.workspace, workspace_id=WORKSPACE_ID, clock=clock)

    @staticmethod
    def open_user(home: _Home, user_id: str, clock: Any) -> UserMemory:
        return UserMemory(home.root, user_id=user_id, clock=clock)

    @staticmethod
    def open_store(home: _Home, user_id: str) -> RemoteMemoryStore:
        return RemoteMemoryStore(home.store(user_id), user_id=user_id,
                                 clock=FixedClock(START))

    hand_to_workspace = staticmethod(production.hand_to_workspace)

    @staticmethod
    def hand_to_store(store: RemoteMemoryStore, candidate: Any, *, stored_at: datetime) -> Any:
        return production.hand_to_store(store, candidate)  # the store's clock dates it

    @staticmethod
    def first_hit(store: RemoteMemoryStore, as_of: datetime) -> Any:
        hits = RecallEngine(store, clock=FixedClock(as_of)).recall(QUERY, as_of=as_of).hits
        return hits[0] if hits else None

    @staticmethod
    def run(home: _Home, clock: Any) -> production.Walkthrough:
        walk = production.Walkthrough(home.root, clock=clock, out=lambda line: None)
        for stage in ("transcript_evidence", "artifact_reference", "workspace_distill",
                      "user_preference", "recall"):
            getattr(walk, stage)()
        return walk

    @staticmethod
    def restart_checks(home: _Home, before: production.Walkthrough, clock: Any
                       ) -> dict[str, bool]:
        found = before.restart()
        return {name: found[name] for name in BOUNDARY_CHECKS}

    def __repr__(self) -> str:
        return "labmem.walkthrough"


SCRATCH = scratch_module
PRODUCTION = _Production()


# -- helpers ------------------------------------------------------------------------------

@contextmanager
def _home(impl: Any) -> Iterator[tuple[Any, Any]]:
    """A fresh home in a throw-away directory, and a clock at :data:`START`."""
    root = Path(tempfile.mkdtemp(prefix="labmem-walk-contract-"))
    try:
        yield impl.Home(root), impl.Clock(START)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _event_id(event: Any) -> str:
    return event["event_id"] if isinstance(event, dict) else event.event_id


def _candidates(impl: Any, home: Any, clock: Any, count: int,
                summary: str = "Chose SQLite in WAL mode for the store.") -> list[Any]:
    """A session of a user message and ``count`` assistant answers, each answer selected
    as a candidate with the same ``summary``: events #2, #3, …"""
    transcript = impl.open_transcript(home, clock)
    transcript.append({"type": "message", "role": "user", "content": "Pick a store."})
    out = []
    for n in range(count):
        answer = transcript.append({"type": "message", "role": "assistant",
                                    "content": f"Answer {n + 1}: SQLite in WAL mode."})
        out.append(transcript.select_memory_candidate(
            _event_id(answer), summary=summary, reason="a durable project decision"))
    return out


def _iso(value: Any) -> Any:
    return format_timestamp(value) if isinstance(value, datetime) else value


def _source(source: Any) -> tuple[str, str, str, str]:
    """A provenance as plain values, whichever layer's class carries it."""
    return (source.source_id, source.source_type, source.title, _iso(source.captured_at))


def _kind(record: Any) -> str:
    return getattr(record.kind, "value", record.kind)


def _decisions(impl: Any, workspace: Any, clock: Any) -> list[tuple[str, int, tuple]]:
    """Distill with the run's policy; the active curated decisions as
    ``(content, occurrences, evidence ids)``."""
    if hasattr(workspace, "curated_entries"):  # the library's WorkspaceMemory
        workspace.distill(policy=impl.POLICY, as_of=clock.now())
        entries = workspace.curated_entries()
    else:
        workspace.distill(impl.POLICY, clock.now())
        entries = [e for e in workspace.view().entries.values() if e.status == "active"]
    return [(e.content, e.occurrences, tuple(e.evidence_ids)) for e in entries
            if e.kind == "decision"]


def _fresh_fact(impl: Any, home: Any, clock: Any, fact_id: str) -> Any:
    workspace = impl.open_workspace(home, clock)
    if hasattr(workspace, "get_fact"):
        return workspace.get_fact(fact_id)
    return next((f for f in workspace.facts() if f.fact_id == fact_id), None)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 140 else text[:137] + "..."


def _expect(case: str, got: Any, want: Any) -> None:
    expect(case, got, want, show=_short)


# -- the boundary checks, after a restart ---------------------------------------------------

def _fresh_reads(impl: Any, home: Any, clock: Any, before: Any) -> dict[str, str]:
    """What fresh objects read, one line per check, to say why a check failed."""
    transcript = impl.open_transcript(home, clock)
    decisions = _decisions(impl, impl.open_workspace(home, clock), clock)
    alice = [(p.key, p.revision) for p in impl.open_user(home, "alice", clock)
             .list_preferences()]
    bob = len(impl.open_user(home, "bob", clock).list_preferences())
    store = impl.open_store(home, "alice")
    records = [(r.memory_id, r.source.source_id) for r in store.read_all()]
    return {"transcript_recovered": f"a fresh transcript holds {len(transcript)} events",
            "workspace_deduplicated": f"a fresh workspace's curated decisions are {decisions}",
            "user_preference_deduplicated": f"alice's stored preferences are {alice}",
            "user_scope_isolated": f"bob lists {bob} preference(s)",
            "recall_recovered_with_source": f"alice's store holds {records}"}


def _boundary(name: str):
    def check(impl: Any) -> None:
        with _home(impl) as (home, clock):
            before = impl.run(home, clock)
            checks = impl.restart_checks(home, before, clock)
            if checks.get(name) is not True:
                why = _fresh_reads(impl, home, clock, before)[name]
                raise ContractBroken(f"smallest case: the walkthrough's run, then a restart — "
                                     f"{name} is {checks.get(name)!r}: {why}")
    check.__name__ = name
    return check


# -- the glue's own promises ----------------------------------------------------------------

def fact_rests_on_the_event(impl: Any) -> None:
    for count in (1, 2):
        case = ("the candidate of event #2" if count == 1 else
                "the candidates of events #2 and #3") + " handed to an empty workspace"
        with _home(impl) as (home, clock):
            candidates = _candidates(impl, home, clock, count)
            workspace = impl.open_workspace(home, clock)
            for candidate in candidates:
                fact = impl.hand_to_workspace(workspace, candidate)
            last = candidates[-1]
            stored = _fresh_fact(impl, home, clock, fact.fact_id)
            _expect(f"{case}: the last fact read by a fresh workspace",
                    None if stored is None else (stored.kind, stored.content,
                                                 tuple(stored.evidence)),
                    ("decision", last.summary, (last.source.source_id,)))
            if stored.importance >= impl.POLICY.minimum_importance:
                raise ContractBroken(f"smallest case: {case} — the fact's importance is "
                                     f"{stored.importance}, at or above the policy's bar "
                                     f"({impl.POLICY.minimum_importance}): one session would "
                                     "curate it alone")


def one_event_is_one_piece_of_evidence(impl: Any) -> None:
    steps = (("event #2 handed over once", (0,), []),
             ("event #2 handed over twice", (0, 0), []),
             ("event #2 twice, then event #3", (0, 0, 1), "two"))
    for case, order, want in steps:
        with _home(impl) as (home, clock):
            candidates = _candidates(impl, home, clock, 2)
            workspace = impl.open_workspace(home, clock)
            for index in order:
                impl.hand_to_workspace(workspace, candidates[index])
            got = _decisions(impl, workspace, clock)
            if want == "two":
                ids = tuple(sorted(c.source.source_id for c in candidates))
                want = [(candidates[0].summary, 3, ids)]
            _expect(f"{case}, then distill: the curated decisions", got, want)


def record_carries_the_source(impl: Any) -> None:
    for count in (1, 2):
        case = f"candidate of event #{count + 1} handed to alice's empty store an hour later"
        with _home(impl) as (home, clock):
            candidate = _candidates(impl, home, clock, count)[-1]
            clock.advance(timedelta(hours=1))
            record = impl.hand_to_store(impl.open_store(home, "alice"), candidate,
                                        stored_at=clock.now())
            stored = [r for r in impl.open_store(home, "alice").read_all()]
            _expect(f"{case}: records a fresh store reads", len(stored), 1)
            got = stored[0]
            _expect(f"{case}: the stored record's (kind, summary, content)",
                    (_kind(got), got.summary, got.content),
                    ("conversation", candidate.summary, candidate.summary))
            _expect(f"{case}: the stored record's source (id, type, title, captured_at)",
                    _source(got.source), _source(candidate.source))
            _expect(f"{case}: the returned record's id", record.memory_id, got.memory_id)


def a_retry_is_not_a_second_record(impl: Any) -> None:
    for tries in (2, 3):
        case = f"the candidate of event #2 handed to alice's store {tries} times"
        with _home(impl) as (home, clock):
            (candidate,) = _candidates(impl, home, clock, 1)
            ids = []
            for _ in range(tries):
                store = impl.open_store(home, "alice")  # a retry may come from a new process
                ids.append(impl.hand_to_store(store, candidate,
                                              stored_at=clock.now()).memory_id)
            _expect(f"{case}: records a fresh store reads",
                    len(impl.open_store(home, "alice").read_all()), 1)
            _expect(f"{case}: the ids returned", len(set(ids)), 1)


def two_events_are_two_records(impl: Any) -> None:
    case = "the candidates of events #2 and #3 (same summary) handed to alice's store"
    with _home(impl) as (home, clock):
        candidates = _candidates(impl, home, clock, 2)
        store = impl.open_store(home, "alice")
        for candidate in candidates:
            impl.hand_to_store(store, candidate, stored_at=clock.now())
        got = sorted(r.source.source_id for r in impl.open_store(home, "alice").read_all())
        _expect(f"{case}: the sources of the records a fresh store reads", got,
                sorted(c.source.source_id for c in candidates))


def recall_only_reads(impl: Any) -> None:
    case = "the candidate of event #2 in alice's store, then a recall by alice and by bob"
    with _home(impl) as (home, clock):
        (candidate,) = _candidates(impl, home, clock, 1)
        impl.hand_to_store(impl.open_store(home, "alice"), candidate, stored_at=clock.now())
        before = home.store("alice").read_bytes()
        hit = impl.first_hit(impl.open_store(home, "alice"), clock.now())
        _expect(f"{case}: alice's first hit's source",
                None if hit is None else hit.provenance.source_id,
                candidate.source.source_id)
        _expect(f"{case}: alice's store file unchanged by the recall",
                home.store("alice").read_bytes() == before, True)
        _expect(f"{case}: bob's first hit", impl.first_hit(impl.open_store(home, "bob"),
                                                             clock.now()), None)


SUITE = ContractSuite(N_("walkthrough"), (
    Contract(N_("transcript_recovered: after the restart a fresh transcript finds the "
                "candidate's event by its id, with its content, among the 2 events written"),
             _boundary("transcript_recovered")),
    Contract(N_("workspace_deduplicated: a fresh workspace holds one curated decision, 2 facts "
                "on 2 evidence ids"), _boundary("workspace_deduplicated")),
    Contract(N_("user_preference_deduplicated: the retried preference write was UNCHANGED and "
                "the stored preference is revision 1"), _boundary("user_preference_deduplicated")),
    Contract(N_("user_scope_isolated: a second user on the same home lists no preferences"),
             _boundary("user_scope_isolated")),
    Contract(N_("recall_recovered_with_source: a fresh store ranks the same record first, its "
                "source the candidate's event"), _boundary("recall_recovered_with_source")),
    Contract(N_("a handed-over fact is the candidate's summary as a decision below the "
                "importance bar, resting on the candidate's event alone"), fact_rests_on_the_event),
    Contract(N_("one event is one piece of evidence: handed over twice it is not curated, a "
                "second event makes it a repeat"), one_event_is_one_piece_of_evidence),
    Contract(N_("a stored record is the candidate's summary with the candidate's source "
                "unchanged: id, type, title, captured time"), record_carries_the_source),
    Contract(N_("a retry is not a second record: handing a candidate over again returns the "
                "stored one"), a_retry_is_not_a_second_record),
    Contract(N_("two events are two records, each with its own source"),
             two_events_are_two_records),
    Contract(N_("recall only reads: the store's file is unchanged by a recall, and another "
                "user's recall finds nothing"), recall_only_reads),
))

__all__ = ["BOUNDARY_CHECKS", "PRODUCTION", "SCRATCH", "START", "SUITE"]
