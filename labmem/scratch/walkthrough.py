# Generated from notebooks/walkthrough_layered_memory.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""The walkthrough from scratch: the chapters' own layers (s09–s12), composed by hand.

It adds no memory mechanism: the transcript, workspace memory, user memory and remote store
are the from-scratch modules of s09–s12. This module is the glue between them (the few
lines that hand one layer's output to the next, with its provenance), one offline run of
one decision through them, a restart that keeps only the files, and the boundary checks,
computed on fresh objects that read those files.
"""

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from labmem.scratch import s09, s10, s11, s12

SESSION = "session-1"
ASKED = ("Migrate the store to SQLite and keep the tests green. For my local stores I "
         "always want SQLite in WAL mode.")
ANSWER = "Migrated: SQLite in WAL mode; the suite passes."
DECISION = "Chose SQLite in WAL mode for the store."  # the candidate's summary
EARLIER_EVIDENCE = "transcript:session-0:4"  # the same decision, in an earlier session
FACT_IMPORTANCE = 3  # below the policy's minimum importance (4): only a repeat promotes
POLICY = s10.DistillPolicy(minimum_age_days=0)  # distill within the session that logs
PREFERENCE = ("storage.local_engine", "SQLite in WAL mode")
QUERY = "SQLite WAL decision for the store"


class Clock:
    """A clock the run moves by hand, so that every output is the same on every run."""

    def __init__(self, start: str) -> None:
        self.at = datetime.fromisoformat(start.replace("Z", "+00:00"))

    def now(self) -> datetime:
        return self.at

    def advance(self, delta: timedelta) -> None:
        self.at += delta


@dataclass(frozen=True)
class Home:
    """One directory for the whole run, one folder per owning layer."""

    root: Path

    @property
    def transcript(self) -> Path:
        return self.root / "sessions" / f"{SESSION}.jsonl"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def store(self, user_id: str) -> Path:
        return self.root / "remote" / f"{s12.scope_of(user_id)}.jsonl"


def open_transcript(home: Home, clock: Clock) -> s09.Transcript:
    return s09.Transcript(home.transcript, clock=clock)


def open_workspace(home: Home, clock: Clock) -> s10.Workspace:
    return s10.Workspace(home.workspace, clock)


def open_user(home: Home, user_id: str, clock: Clock) -> s11.UserMemory:
    return s11.UserMemory(home.root, user_id=user_id, clock=clock)  # root/users/<scope>/


def open_store(home: Home, user_id: str) -> s12.RemoteMemoryStore:
    return s12.RemoteMemoryStore(home.store(user_id), s12.scope_of(user_id))


@dataclass(frozen=True)
class Session:
    """Stage 1's output: the two events, and the answer selected as a memory candidate."""

    asked: s09.Event
    answer: s09.Event
    candidate: s09.MemoryCandidate


def record_session(home: Home, clock: Clock) -> Session:
    """The user asks (and states a wish of her own); the assistant answers with the decision."""
    transcript = open_transcript(home, clock)
    asked = transcript.append({"type": "message", "role": "user", "content": ASKED})
    clock.advance(timedelta(minutes=1))
    answer = transcript.append({"type": "message", "role": "assistant", "content": ANSWER})
    candidate = transcript.select_memory_candidate(answer.event_id, summary=DECISION,
                                                   reason="a durable project decision")
    return Session(asked, answer, candidate)


def hand_to_workspace(workspace: s10.Workspace, candidate: s09.MemoryCandidate) -> s10.Fact:
    """Log the candidate as a decision fact that rests on its event.

    The evidence is the candidate's source id: distill counts a fact from another session
    as a repeat, and the same event handed over twice as one piece of evidence.
    """
    return workspace.append(candidate.summary, kind="decision", importance=FACT_IMPORTANCE,
                            evidence=(candidate.source.source_id,))


def memory_id_for(candidate: s09.MemoryCandidate) -> str:
    """The record's id, derived from what it says and where it came from."""
    text = f"{candidate.source.source_id}\n{candidate.summary}"
    return f"conversation-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def hand_to_store(store: s12.RemoteMemoryStore, candidate: s09.MemoryCandidate, *,
                  stored_at: datetime) -> s12.StoredMemory:
    """Store the candidate as a record with the candidate's own source.

    A retry (the first call's outcome unknown) finds the record by its derived id and
    returns it: a repeat is not a second copy.
    """
    memory_id = memory_id_for(candidate)
    for record in store.read_all():
        if record.memory_id == memory_id:
            return record
    origin = candidate.source
    source = s12.MemorySource(origin.source_id, origin.source_type, origin.title,
                              s12.utc_time(origin.captured_at))
    return store.append(s12.StoredMemory(memory_id, store.user_scope, s12.CONVERSATION,
                                         candidate.summary, candidate.summary, source,
                                         stored_at))


@dataclass(frozen=True)
class Run:
    """What the run wrote before the restart (the checks compare fresh reads with it)."""

    session: Session
    facts: tuple[s10.Fact, ...]
    writes: tuple[s11.PreferenceWrite, ...]
    record: s12.StoredMemory
    recalled_at: datetime


def first_hit(store: s12.RemoteMemoryStore, as_of: datetime) -> "s12.RecallHit | None":
    hits = s12.recall(store, QUERY, as_of=as_of).hits
    return hits[0] if hits else None


def run(home: Home, clock: Clock) -> Run:
    """Stages 1, 3, 4 and 5 of the walkthrough, on the from-scratch layers."""
    session = record_session(home, clock)                                      # s09
    workspace = open_workspace(home, clock)                                    # s10
    earlier = workspace.append(DECISION, kind="decision", importance=FACT_IMPORTANCE,
                               evidence=(EARLIER_EVIDENCE,),
                               recorded_at=clock.now() - timedelta(days=31))
    facts = (earlier, hand_to_workspace(workspace, session.candidate))
    workspace.distill(POLICY, clock.now())
    key, value = PREFERENCE                                                     # s11
    alice = open_user(home, "alice", clock)
    writes = tuple(alice.set_preference(key, value, source_event_id=session.asked.event_id)
                   for _ in range(2))  # a client retries: the second write is UNCHANGED
    store = open_store(home, "alice")                                           # s12
    record = hand_to_store(store, session.candidate, stored_at=clock.now())
    first_hit(store, clock.now())  # recall reads; nothing is written back
    return Run(session, facts, writes, record, clock.now())


def restart_checks(home: Home, before: Run, clock: Clock) -> dict[str, bool]:
    """Two days later, in a fresh process: every object is built again from the files,
    and each boundary check asks one of them what it holds."""
    clock.advance(timedelta(days=2))
    candidate, answer = before.session.candidate, before.session.answer
    transcript = open_transcript(home, clock)
    event = transcript.lookup(candidate.source.source_id)
    checks = {"transcript_recovered": event is not None and len(transcript) == 2
              and event.payload["content"] == answer.payload["content"]}
    entries = open_workspace(home, clock).view().entries.values()
    decisions = [e for e in entries if e.kind == "decision" and e.status == "active"]
    checks["workspace_deduplicated"] = (len(decisions) == 1 and decisions[0].occurrences == 2
                                        and len(decisions[0].evidence_ids) == 2)
    stored = open_user(home, "alice", clock).list_preferences()
    checks["user_preference_deduplicated"] = (
        [w.status for w in before.writes] == [s11.CREATED, s11.UNCHANGED]
        and [p.revision for p in stored] == [1])
    checks["user_scope_isolated"] = open_user(home, "bob", clock).list_preferences() == []
    hit = first_hit(open_store(home, "alice"), before.recalled_at)
    checks["recall_recovered_with_source"] = (
        hit is not None and hit.memory_id == before.record.memory_id
        and hit.provenance.source_id == candidate.source.source_id)
    return checks


def run_all(home: Home, clock: Clock) -> dict[str, bool]:
    """The whole run: the stages, the restart, the checks."""
    return restart_checks(home, run(home, clock), clock)
