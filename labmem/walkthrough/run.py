"""The walkthrough's seven stages, the restart between them, the checks, the manifest.

One decision — "SQLite in WAL mode for the store" — is followed through every layer:

1. s09: the assistant's answer is a transcript event, selected as a memory candidate;
2. s13: the test log that proves it is externalized behind a pointer with a digest;
3. s10: the decision is logged twice (two sessions, importance below the bar) and distill
   curates it because it is *repeated*; the test log's outcome is published into the
   workspace under a lease;
4. s11: the user's standing preference from the same session, written twice, stays hers;
5. s12: the candidate is stored as a source-bearing record and recalled;

then every object is dropped and rebuilt from disk (:meth:`Walkthrough.restart`), and

6. s13: the lease journal is recovered and cleanup keeps the referenced artifact;
7. s14: compaction with a lying summarizer; a fresh resolver verifies both sources.

:class:`Walkthrough` runs them one call per stage, each returning a :class:`Stage` with
what it produced (the notebook walks them cell by cell); :func:`run_walkthrough` runs them
all, which is what ``labmem walkthrough`` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from labmem.artifacts import (
    CleanupPolicy,
    LeaseJournal,
    LeasePhase,
    RetentionClaim,
    ToolResultExternalizer,
    apply_cleanup,
    plan_cleanup,
)
from labmem.context import (
    CompactionPolicy,
    DurableContextState,
    DurableFact,
    PendingItem,
    SourcePointerResolver,
    compact_context,
    render_durable_context,
)
from labmem.core.clock import FixedClock, format_timestamp
from labmem.core.errors import LabmemError
from labmem.core.i18n import N_
from labmem.core.provenance import scope_digest
from labmem.core.storage import write_text_atomic
from labmem.core.text import estimate_tokens
from labmem.recall import (
    MemoryKind,
    RecallEngine,
    RemoteMemoryStore,
    StoredMemory,
    derive_memory_id,
)
from labmem.transcript import Transcript, TranscriptMemoryCandidate
from labmem.user import UserMemory
from labmem.walkthrough.owner import WorkspaceReferenceOwner
from labmem.workspace import DistillPolicy, Fact, WorkspaceMemory, is_promotable

MANIFEST_NAME = "layered_memory_manifest.json"
SESSION = "session-1"
WORKSPACE_ID = "walkthrough-project"
DECISION = "Chose SQLite in WAL mode for the store."  # the candidate's summary
EARLIER_EVIDENCE = "transcript:session-0:4"  # the same decision, in an earlier session
FACT_IMPORTANCE = 3  # below DistillPolicy's minimum_importance (4): only the repeat promotes
PREFERENCE = ("storage.local_engine", "SQLite in WAL mode")
QUERY = "SQLite WAL decision for the store"
TRANSACTION = "tx-artifact-1"
#: The walkthrough distills within the session it logs, so its policy waives the age rule;
#: importance (4) and repeat (2) thresholds keep their defaults.
POLICY = DistillPolicy(minimum_age_days=0)

#: The boundary checks, in order, with the stage after which each is computed and what a
#: pass proves. Every one is computed on instances rebuilt from disk. (``N_`` marks the text
#: for the Chinese edition's catalogue; a chapter shows it through ``label()``.)
CHECK_MEANINGS: Mapping[str, tuple[str, str]] = {
    "transcript_recovered": (
        N_("restart"), N_("a fresh Transcript finds the candidate's event by its id, with the "
                          "same content, and holds exactly the 2 events written")),
    "workspace_deduplicated": (
        N_("restart"), N_("a fresh WorkspaceMemory holds one curated decision with 2 "
                          "occurrences and both evidence ids: a repeat is not a second copy")),
    "user_preference_deduplicated": (
        N_("restart"), N_("the second identical write was UNCHANGED and the stored preference "
                          "is still revision 1")),
    "user_scope_isolated": (
        N_("restart"), N_("bob, on the same home, lists no preferences: the same root is not "
                          "the same user")),
    "recall_recovered_with_source": (
        N_("restart"), N_("a fresh store and engine rank the same record first, and its source "
                          "is the transcript event of stage 1")),
    "artifact_recovered_with_digest": (
        N_("restart"), N_("a fresh externalizer re-hashes the kept body and finds the recorded "
                          "sha256")),
    "lease_recovered": (
        N_("stage 6"), N_("the journal's restart fold protects the artifact, its lease is "
                          "committed, and reconciliation finds nothing left to settle")),
    "cleanup_reference_aware": (
        N_("stage 6"), N_("cleanup deleted only the unreferenced orphan; the referenced "
                          "artifact of the same age survives")),
    "compaction_exercised": (
        N_("stage 7"), N_("the summarizer ran, the conversation_summary layer was applied and "
                          "the messages shrank")),
    "durable_state_preserved": (
        N_("stage 7"), N_("the durable state came back unchanged; the rendered block holds the "
                          "decision and the pending item, and not the summarizer's lie")),
    "sources_verified": (
        N_("stage 7"), N_("a fresh resolver finds both pointers available, and the deleted "
                          "orphan's pointer missing")),
}
CHECKS = tuple(CHECK_MEANINGS)
OWNERS = {  # top-level folder of the home -> the layer that owns it
    "sessions": "s09 transcript", "artifacts": "s13 artifacts + lease journal",
    "workspace": "s10 workspace memory", "users": "s11 user memory",
    "remote": "s12 remote memory", MANIFEST_NAME: "walkthrough report (not a source of truth)",
}


# Who owns what: these objects are not the same kind of memory.
OWNERSHIP = (
    (N_("transcript event"), N_("s09 session evidence"),
     N_("one session, append-only, replayable"), N_("no: written events are never rewritten")),
    (N_("workspace fact"), N_("s10 project memory"), N_("project, across sessions"),
     N_("log no; the curated view is re-derivable")),
    (N_("user preference"), N_("s11 user memory"), N_("user, across projects"),
     N_("no: explicit keyed updates, no fuzzy appends")),
    (N_("recall hit"), N_("s12 query result"), N_("one query"),
     N_("yes: a scored view with a source")),
    (N_("artifact"), N_("s13 large-result evidence"), N_("session"),
     N_("body no; the prompt keeps a pointer")),
    (N_("retention claim"), N_("s13 cleanup lease"), N_("while memory references it"),
     N_("no body, no path: protects one source + digest")),
    (N_("lease journal"), N_("s13 reference transactions"), N_("session, across processes"),
     N_("no: only an unterminated crash tail is ignored")),
    (N_("compacted messages"), N_("s14 prompt view"), N_("one or a few model calls"),
     N_("yes; durable state takes a lossless side path")),
    (N_("source resolution"), N_("s14 per-assembly check"), N_("one prompt assembly"),
     N_("never reused: re-verified from the owner each time")),
)


class WalkthroughError(LabmemError):
    """The walkthrough cannot run here (e.g. the home already holds a manifest)."""


@dataclass(frozen=True)
class Stage:
    """What one stage produced.

    ``line`` is the line it printed; ``details`` is JSON (ids, counts, statuses — never an
    artifact body) and goes into the manifest under ``layers[key]``; ``views`` are what the
    stage built for a prompt (the artifact's pointer, the messages before and after
    compaction, the rendered durable block): shown to a reader, not written to the manifest,
    since they quote bodies and conversation text.
    """

    number: int
    key: str
    title: str
    line: str
    details: Mapping[str, Any]
    views: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WalkthroughResult:
    ok: bool
    checks: dict[str, bool]
    stages: tuple[Stage, ...]
    manifest_path: Path

    @property
    def lines(self) -> tuple[str, ...]:
        """The seven stage lines, as printed."""
        return tuple(stage.line for stage in self.stages)

    def failing(self) -> list[str]:
        return [name for name, passed in self.checks.items() if not passed]


@dataclass
class _Paths:
    home: Path

    @property
    def transcripts(self) -> Path:
        return self.home / "sessions"

    @property
    def artifacts(self) -> Path:
        return self.home / "artifacts"

    @property
    def session_artifacts(self) -> Path:
        return self.artifacts / SESSION

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    @property
    def users(self) -> Path:
        return self.home  # UserMemory keeps each user under <root>/users/<scope>/

    @property
    def remote(self) -> Path:
        return self.home / "remote" / f"{scope_digest('alice')}.jsonl"


def _build_output(lines: int) -> str:
    """A deterministic ~49 KB bash transcript of a test run."""
    return "".join(f"tests/test_store.py::test_case_{i:04d} PASSED [{i * 100 // lines:3d}%]\n"
                   for i in range(lines))


# -- the glue: one layer's candidate handed to the next, with its provenance ---------------

def hand_to_workspace(workspace: WorkspaceMemory,
                      candidate: TranscriptMemoryCandidate) -> Fact:
    """Log ``candidate`` as a decision fact of importance :data:`FACT_IMPORTANCE` that rests
    on its event: the fact's evidence is the candidate's source id, so distill counts a
    second session's fact as a repeat and the same event handed over twice as one."""
    return workspace.append_fact(candidate.summary, kind="decision",
                                 importance=FACT_IMPORTANCE,
                                 evidence=[candidate.source.source_id])


def hand_to_store(store: RemoteMemoryStore, candidate: TranscriptMemoryCandidate) -> StoredMemory:
    """Store ``candidate`` as a conversation record with the candidate's own source; a
    retry (the first call's outcome unknown) returns the record already stored."""
    memory_id = derive_memory_id(MemoryKind.CONVERSATION, candidate.source, candidate.summary)
    stored = store.get(memory_id)
    if stored is not None:
        return stored
    return store.append(kind=MemoryKind.CONVERSATION, content=candidate.summary,
                        summary=candidate.summary, source=candidate.source)


def home_listing(home: str | Path) -> list[dict[str, Any]]:
    """Every file under ``home`` (lock files aside), sorted: its relative path, the layer that
    owns it (by top-level folder, :data:`OWNERS`) and its size in bytes."""
    root = Path(home)
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".lock"):
        rel = path.relative_to(root).as_posix()
        files.append({"path": rel, "owner": OWNERS.get(rel.split("/")[0], "?"),
                      "bytes": path.stat().st_size})
    return files


_ORDER = ("transcript_evidence", "artifact_reference", "workspace_distill", "user_preference",
          "recall", "restart", "leases_and_cleanup", "compaction", "finish")


class Walkthrough:
    """The run, one call per stage, in order (see the module docstring).

    ``home`` must be empty or new; ``clock`` a :class:`FixedClock`, which the stages
    advance. Each stage prints its line with ``out`` and returns a :class:`Stage`;
    :meth:`restart` returns the checks it computed; :meth:`finish` writes the manifest.
    """

    def __init__(self, home: str | Path, *, clock: FixedClock,
                 out: Callable[[str], None] = print) -> None:
        if not isinstance(clock, FixedClock):
            raise WalkthroughError("clock: must be a FixedClock (the stages advance it)")
        self.paths = _Paths(Path(home))
        self.manifest_path = self.paths.home / MANIFEST_NAME
        if self.manifest_path.exists():
            raise WalkthroughError(f"{MANIFEST_NAME} already exists in this home; choose a "
                                   "new --home (a walkthrough never overwrites earlier "
                                   "evidence)")
        if self.paths.home.exists() and any(self.paths.home.iterdir()):
            raise WalkthroughError("home: is not empty (an interrupted run?); choose a new or "
                                   "empty --home so the evidence is this run's alone")
        self.paths.home.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.out = out
        self.start = clock.now()
        self.stages: list[Stage] = []
        self.checks: dict[str, bool] = {}
        self._done: list[str] = []
        self._live: dict[str, Any] = {}  # the objects in use; emptied by restart()

    def _step(self, name: str) -> None:
        expected = _ORDER[len(self._done)] if len(self._done) < len(_ORDER) else None
        if name != expected:
            raise WalkthroughError(
                f"{name}: the stages run in order and the next one is "
                f"{expected or 'none (the run is finished)'}; start a new Walkthrough in a "
                "new home to run again")
        self._done.append(name)

    def _stage(self, number: int, key: str, title: str, summary: str,
               details: Mapping[str, Any], views: Mapping[str, Any] | None = None) -> Stage:
        stage = Stage(number, key, title, f"[{number}] {title} — {summary}", details,
                      dict(views or {}))
        self.stages.append(stage)
        self.out(stage.line)
        return stage

    # -- before the restart ---------------------------------------------------------------

    def transcript_evidence(self) -> Stage:
        """[1] Two events; the assistant's answer is selected as a memory candidate."""
        self._step("transcript_evidence")
        transcript = Transcript(self.paths.transcripts / f"{SESSION}.jsonl", clock=self.clock)
        asked = transcript.append({
            "type": "message", "role": "user",
            "content": "Migrate the store to SQLite and keep the tests green. For my local "
                       "stores I always want SQLite in WAL mode."})
        self.clock.advance(timedelta(minutes=1))
        answer = transcript.append({"type": "message", "role": "assistant",
                                    "content": "Migrated: SQLite in WAL mode; the suite "
                                               "passes."})
        candidate = transcript.select_memory_candidate(
            answer["event_id"], summary=DECISION,
            reason="a durable project decision")
        self._live.update(transcript=transcript, asked=asked, answer=answer,
                          candidate=candidate)
        events = [{"event_id": e["event_id"], "role": e["role"], "content": e["content"],
                   "recorded_at": e["recorded_at"]} for e in (asked, answer)]
        return self._stage(1, "transcript", "Transcript evidence",
                           f"events={len(events)}, candidate={candidate.source.source_id}",
                           {"events": events, "candidate": candidate.to_dict()})

    def artifact_reference(self) -> Stage:
        """[2] The test log behind a bounded pointer; an unreferenced twin is the orphan."""
        self._step("artifact_reference")
        externalizer = ToolResultExternalizer(self.paths.session_artifacts, clock=self.clock)
        kept = externalizer.externalize(_build_output(980), "bash")
        orphan = externalizer.externalize(_build_output(981), "bash")
        artifact = kept.artifact
        self._live.update(externalizer=externalizer, artifact=artifact,
                          orphan=orphan.artifact)
        return self._stage(
            2, "artifact", "Artifact reference",
            f"{artifact.byte_size:,} bytes → pointer of {len(kept.context_text):,} chars, "
            f"sha256={artifact.sha256[:12]}",
            {"reference": artifact.for_memory(), "body_bytes": artifact.byte_size,
             "pointer_chars": len(kept.context_text),
             "orphan_source_id": orphan.artifact.source_id},
            {"pointer": kept.context_text})

    def workspace_distill(self) -> Stage:
        """[3] The decision logged twice below the importance bar, curated by the repeat;
        the test log's outcome published under a lease (prepared → memory write →
        committed)."""
        self._step("workspace_distill")
        live = self._live
        workspace = WorkspaceMemory(self.paths.workspace, workspace_id=WORKSPACE_ID,
                                    clock=self.clock)
        earlier = format_timestamp(self.clock.now() - timedelta(days=31))
        facts = [workspace.append_fact(DECISION, kind="decision", importance=FACT_IMPORTANCE,
                                       evidence=[EARLIER_EVIDENCE], recorded_at=earlier),
                 hand_to_workspace(workspace, live["candidate"])]
        promotion = {"minimum_importance": POLICY.minimum_importance,
                     "repeat_threshold": POLICY.repeat_threshold,
                     "alone": [is_promotable([fact], POLICY) for fact in facts],
                     "together": is_promotable(facts, POLICY)}
        report = workspace.distill(policy=POLICY, as_of=self.clock.now())
        decisions = [e for e in workspace.curated_entries() if e.kind == "decision"]
        journal = LeaseJournal(self.paths.session_artifacts, clock=self.clock)
        owner = WorkspaceReferenceOwner(workspace)
        claim = RetentionClaim.for_reference(TRANSACTION, live["artifact"])
        journal.publish_reference(claim, partial(owner.publish, title="pytest log",
                                                 content="The full test log is kept as an "
                                                         "artifact."),
                                  verify=live["externalizer"].verify)
        outcome = workspace.get_fact(TRANSACTION)
        phase = journal.leases()[TRANSACTION].phase.value
        live.update(workspace=workspace, journal=journal, owner=owner, claim=claim)
        return self._stage(
            3, "workspace", "Workspace log and distill",
            f"{len(facts)} facts of importance {FACT_IMPORTANCE} → {len(decisions)} curated "
            f"entry with {sum(len(e.evidence_ids) for e in decisions)} evidence ids (repeat "
            f"threshold {POLICY.repeat_threshold}); lease {phase}",
            {"policy": POLICY.to_dict(),
             "facts": [{"fact_id": f.fact_id, "recorded_at": format_timestamp(f.recorded_at),
                        "importance": f.importance, "evidence": list(f.evidence)}
                       for f in facts],
             "promotion": promotion, "distill": report.to_dict(),
             "curated": [{"entry_id": e.entry_id, "content": e.content,
                          "occurrences": e.occurrences, "evidence_ids": list(e.evidence_ids)}
                         for e in decisions],
             "lease": {"transaction_id": TRANSACTION, "phase": phase},
             "outcome_fact": {"fact_id": outcome.fact_id, "kind": outcome.kind,
                              "source_id": outcome.source.source_id,
                              "evidence": list(outcome.evidence)}})

    def user_preference(self) -> Stage:
        """[4] The user's standing preference, written twice; a second user sees nothing."""
        self._step("user_preference")
        key, value = PREFERENCE
        alice = UserMemory(self.paths.users, user_id="alice", clock=self.clock)
        source = self._live["asked"]["event_id"]
        writes = [alice.set_preference(key, value, source_event_id=source) for _ in range(2)]
        bob_sees = UserMemory(self.paths.users, user_id="bob", clock=self.clock
                              ).list_preferences()
        self._live.update(alice=alice, writes=writes)
        first, second = writes
        return self._stage(
            4, "user", "User preference dedup and isolation",
            f"{first.status}, then {second.status} (revision {second.revision}); bob sees "
            f"{len(bob_sees)}",
            {"key": key, "value": value, "source_event_id": source,
             "writes": [w.status for w in writes], "revision": second.revision,
             "bob_preferences": len(bob_sees)})

    def recall(self) -> Stage:
        """[5] The candidate stored as a source-bearing record, recalled by a query."""
        self._step("recall")
        candidate = self._live["candidate"]
        store = RemoteMemoryStore(self.paths.remote, user_id="alice", clock=self.clock)
        record = hand_to_store(store, candidate)
        hit = RecallEngine(store, clock=self.clock).recall(QUERY).hits[0]
        self._live.update(store=store, record=record, recalled_at=self.clock.now())
        return self._stage(
            5, "remote", "Query-scoped recall",
            f"'{QUERY}' → rank {hit.rank} {hit.memory_id} (score {hit.score:.6f}, source "
            f"{hit.provenance.source_id})",
            {"memory_id": record.memory_id, "query": QUERY, "hit": hit.to_dict()})

    # -- the restart -----------------------------------------------------------------------

    def restart(self) -> dict[str, bool]:
        """Drop every object; rebuild fresh instances from disk; check what they hold.

        Two days pass, so both artifacts are older than the orphan TTL. Returns the six
        checks computed here (the rest follow in stages 6 and 7).
        """
        self._step("restart")
        live, paths, clock = self._live, self.paths, self.clock
        for name in ("transcript", "externalizer", "workspace", "journal", "owner", "alice",
                     "store"):
            del live[name]  # from here on, only what is on disk counts
        clock.advance(timedelta(days=2))
        candidate, answer = live["candidate"], live["answer"]

        transcript = Transcript(paths.transcripts / f"{SESSION}.jsonl", clock=clock)
        event = transcript.lookup(candidate.source.source_id)
        found = {"transcript_recovered": event is not None
                 and event["content"] == answer["content"] and len(transcript) == 2}
        workspace = WorkspaceMemory(paths.workspace, workspace_id=WORKSPACE_ID, clock=clock)
        decisions = [e for e in workspace.curated_entries() if e.kind == "decision"]
        found["workspace_deduplicated"] = (len(decisions) == 1
                                           and decisions[0].occurrences == 2
                                           and len(decisions[0].evidence_ids) == 2)
        stored = UserMemory(paths.users, user_id="alice").list_preferences()
        found["user_preference_deduplicated"] = (
            [w.status for w in live["writes"]] == ["created", "unchanged"]
            and [p.revision for p in stored] == [1])
        found["user_scope_isolated"] = UserMemory(paths.users, user_id="bob"
                                                  ).list_preferences() == ()
        store = RemoteMemoryStore(paths.remote, user_id="alice", clock=clock)
        hits = RecallEngine(store, clock=clock).recall(QUERY, as_of=live["recalled_at"]).hits
        found["recall_recovered_with_source"] = (
            bool(hits) and hits[0].memory_id == live["record"].memory_id
            and hits[0].provenance.source_id == candidate.source.source_id)
        externalizer = ToolResultExternalizer(paths.session_artifacts, clock=clock)
        found["artifact_recovered_with_digest"] = (
            externalizer.verify(live["artifact"].source_id).sha256 == live["artifact"].sha256)
        live.update(transcript=transcript, workspace=workspace, externalizer=externalizer)
        self.checks.update(found)
        return found

    # -- after the restart -----------------------------------------------------------------

    def leases_and_cleanup(self) -> Stage:
        """[6] The lease journal recovered; two-phase cleanup keeps the referenced artifact."""
        self._step("leases_and_cleanup")
        live, paths, clock = self._live, self.paths, self.clock
        artifact, orphan = live["artifact"], live["orphan"]
        journal = LeaseJournal(paths.session_artifacts, clock=clock)
        recovery = journal.recover()
        phase = journal.leases()[TRANSACTION].phase
        reconciled = journal.reconcile_pending(WorkspaceReferenceOwner(live["workspace"]))
        self.checks["lease_recovered"] = (artifact.source_id in recovery.protected_source_ids
                                          and phase is LeasePhase.COMMITTED
                                          and reconciled.committed == ())
        plan = plan_cleanup(journal=journal, policy=CleanupPolicy(), now=clock.now())
        cleaned = apply_cleanup(plan, journal=journal, now=clock.now())
        survivors = {ref.filename for ref in live["externalizer"].references()
                     if (paths.session_artifacts / "tool-results" / ref.filename).exists()}
        self.checks["cleanup_reference_aware"] = (cleaned.deleted == (orphan.filename,)
                                                  and survivors == {artifact.filename})
        return self._stage(
            6, "leases_and_cleanup", "Crash-recovered artifact leases and cleanup",
            f"lease {phase.value}, kept {len(survivors)} referenced, deleted "
            f"{len(cleaned.deleted)} orphan of the same age",
            {"lease_phase": phase.value, "recovery": recovery.to_dict(),
             "plan": plan.to_dict(), "report": cleaned.to_dict()})

    def compaction(self) -> Stage:
        """[7] Compaction with a lying summarizer; a fresh resolver verifies the pointers."""
        self._step("compaction")
        live, paths = self._live, self.paths
        candidate, artifact = live["candidate"], live["artifact"]
        messages = list(live["transcript"].replay_state().messages)
        messages += [{"role": "user", "content": f"Earlier note {i}: " + "detail " * 60}
                     if i % 2 == 0 else {"role": "assistant", "content": f"Noted {i}."}
                     for i in range(10)]
        confirmed = format_timestamp(self.start)
        state = DurableContextState(
            facts=(DurableFact("fact-storage", candidate.summary, candidate.source.source_id,
                               confirmed),),
            pending_items=(PendingItem("todo-integration", "Migrate the integration tests.",
                                       artifact.source_id, confirmed),))
        summaries: list[str] = []

        def lying_summarizer(text: str) -> str:
            summaries.append(text)
            return "The migration is complete and nothing is pending. The store is MongoDB."

        compacted = compact_context(messages, state, summarizer=lying_summarizer,
                                    policy=CompactionPolicy(token_threshold=300,
                                                            hard_limit=5_000,
                                                            summary_keep_recent_turns=1))
        resolver = SourcePointerResolver(transcript_root=paths.transcripts,
                                         artifact_root=paths.artifacts)
        resolutions = resolver.resolve_all(state.pointers())
        rendered = render_durable_context(compacted.durable_state, resolutions)
        orphan_status = resolver.resolve(live["orphan"].source_id).status
        verified = sum(r.status == "available" for r in resolutions)
        self.checks["compaction_exercised"] = (
            bool(summaries) and "conversation_summary" in compacted.applied_layers
            and compacted.tokens_after < compacted.tokens_before)
        self.checks["durable_state_preserved"] = (compacted.durable_state == state
                                                  and candidate.summary in rendered
                                                  and "Migrate the integration tests."
                                                  in rendered and "MongoDB" not in rendered)
        self.checks["sources_verified"] = verified == 2 and orphan_status == "missing"
        return self._stage(
            7, "context", "Compaction boundary",
            f"sources verified={verified} (tokens {compacted.tokens_before:,} → "
            f"{compacted.tokens_after:,}; orphan pointer {orphan_status})",
            {"messages_before": len(messages), "messages_after": len(compacted.messages),
             "tokens_before": compacted.tokens_before,
             "tokens_after": compacted.tokens_after,
             "durable_tokens": estimate_tokens(rendered),
             "applied_layers": list(compacted.applied_layers),
             "resolutions": [{"pointer": r.pointer, "status": r.status,
                              "evidence_sha256": r.evidence_sha256} for r in resolutions],
             "orphan_pointer": live["orphan"].source_id,
             "orphan_pointer_status": orphan_status},
            {"messages_before": tuple(messages), "messages_after": compacted.messages,
             "durable_context": rendered})

    def finish(self) -> WalkthroughResult:
        """Write the manifest (the checks, each stage's details, the home's files)."""
        self._step("finish")
        ok = all(self.checks[name] for name in CHECKS)
        checks = {name: self.checks[name] for name in CHECKS}
        manifest = {"checks": checks,
                    "layers": {stage.key: dict(stage.details) for stage in self.stages},
                    "artifacts": home_listing(self.paths.home)}
        write_text_atomic(self.manifest_path,
                          json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
        result = WalkthroughResult(ok, checks, tuple(self.stages), self.manifest_path)
        if ok:
            self.out("RESULT: OK — layered memory boundaries survived compaction and restart.")
        else:
            self.out(f"RESULT: FAILED — {', '.join(result.failing())}")
        return result

    def run(self) -> WalkthroughResult:
        """Every stage, the restart and the manifest, in order."""
        result = None
        for name in _ORDER[len(self._done):]:
            result = getattr(self, name)()
        if result is None:
            self._step("run")  # already finished: says so
        return result


def run_walkthrough(home: str | Path, *, clock: FixedClock,
                    out: Callable[[str], None] = print) -> WalkthroughResult:
    """Run the seven stages under ``home`` (which must not hold a manifest yet)."""
    return Walkthrough(home, clock=clock, out=out).run()
