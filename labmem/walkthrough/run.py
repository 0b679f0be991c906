"""``run_walkthrough(home, *, clock)``: the seven stages, the checks, the manifest."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
from labmem.core.provenance import scope_digest
from labmem.core.storage import write_text_atomic
from labmem.recall import MemoryKind, RecallEngine, RemoteMemoryStore
from labmem.transcript import Transcript
from labmem.user import UserMemory
from labmem.walkthrough.owner import WorkspaceReferenceOwner
from labmem.workspace import DistillPolicy, WorkspaceMemory

MANIFEST_NAME = "layered_memory_manifest.json"
SESSION = "session-1"
WORKSPACE_ID = "walkthrough-project"
CHECKS = ("transcript_recovered", "workspace_deduplicated", "user_preference_deduplicated",
          "user_scope_isolated", "recall_recovered_with_source",
          "artifact_recovered_with_digest", "lease_recovered", "cleanup_reference_aware",
          "compaction_exercised", "durable_state_preserved", "sources_verified")
OWNERS = {  # top-level folder of the home -> the layer that owns it
    "sessions": "s09 transcript", "artifacts": "s13 artifacts + lease journal",
    "workspace": "s10 workspace memory", "users": "s11 user memory",
    "remote": "s12 remote memory", MANIFEST_NAME: "walkthrough report (not a source of truth)",
}


# Who owns what: these objects are not the same kind of memory.
OWNERSHIP = (
    ("transcript event", "s09 session evidence", "one session, append-only, replayable",
     "no: written events are never rewritten"),
    ("workspace fact", "s10 project memory", "project, across sessions",
     "log no; the curated view is re-derivable"),
    ("user preference", "s11 user memory", "user, across projects",
     "no: explicit keyed updates, no fuzzy appends"),
    ("recall hit", "s12 query result", "one query", "yes: a scored view with a source"),
    ("artifact", "s13 large-result evidence", "session", "body no; the prompt keeps a pointer"),
    ("retention claim", "s13 cleanup lease", "while memory references it",
     "no body, no path: protects one source + digest"),
    ("lease journal", "s13 reference transactions", "session, across processes",
     "no: only an unterminated crash tail is ignored"),
    ("compacted messages", "s14 prompt view", "one or a few model calls",
     "yes; durable state takes a lossless side path"),
    ("source resolution", "s14 per-assembly check", "one prompt assembly",
     "never reused: re-verified from the owner each time"),
)


class WalkthroughError(LabmemError):
    """The walkthrough cannot run here (e.g. the home already holds a manifest)."""


@dataclass(frozen=True)
class WalkthroughResult:
    ok: bool
    checks: dict[str, bool]
    stages: tuple[str, ...]
    manifest_path: Path

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


def _tree(home: Path) -> list[dict[str, Any]]:
    files = []
    for path in sorted(p for p in home.rglob("*") if p.is_file() and p.suffix != ".lock"):
        rel = path.relative_to(home).as_posix()
        files.append({"path": rel, "owner": OWNERS.get(rel.split("/")[0], "?"),
                      "bytes": path.stat().st_size})
    return files


def run_walkthrough(home: str | Path, *, clock: FixedClock,
                    out: Callable[[str], None] = print) -> WalkthroughResult:
    """Run the seven stages under ``home`` (which must not hold a manifest yet)."""
    if not isinstance(clock, FixedClock):
        raise WalkthroughError("clock: must be a FixedClock (the stages advance it)")
    paths = _Paths(Path(home))
    manifest_path = paths.home / MANIFEST_NAME
    if manifest_path.exists():
        raise WalkthroughError(f"{MANIFEST_NAME} already exists in this home; choose a new "
                               "--home (a walkthrough never overwrites earlier evidence)")
    if paths.home.exists() and any(paths.home.iterdir()):
        raise WalkthroughError("home: is not empty (an interrupted run?); choose a new or "
                               "empty --home so the evidence is this run's alone")
    paths.home.mkdir(parents=True, exist_ok=True)
    start = clock.now()
    checks: dict[str, bool] = {}
    layers: dict[str, Any] = {}
    stages: list[str] = []

    def stage(line: str) -> None:
        stages.append(line)
        out(line)

    # [1] transcript evidence: two events, one explicitly selected as a memory candidate
    transcript = Transcript(paths.transcripts / f"{SESSION}.jsonl", clock=clock)
    transcript.append({"type": "message", "role": "user",
                       "content": "Migrate the store to SQLite and keep the tests green."})
    clock.advance(timedelta(minutes=1))
    answer = transcript.append({"type": "message", "role": "assistant",
                                "content": "Migrated: SQLite in WAL mode; the suite passes."})
    candidate = transcript.select_memory_candidate(
        answer["event_id"], summary="Chose SQLite in WAL mode for the store.",
        reason="a durable project decision")
    layers["transcript"] = {"events": 2, "candidate": candidate.to_dict()}
    stage(f"[1] Transcript evidence — events=2, candidate={candidate.source.source_id}")

    # [2] a large tool result becomes a bounded pointer; an unreferenced twin is the orphan
    externalizer = ToolResultExternalizer(paths.session_artifacts, clock=clock)
    kept = externalizer.externalize(_build_output(980), "bash")
    orphan = externalizer.externalize(_build_output(981), "bash")
    artifact = kept.artifact
    layers["artifact"] = {"reference": artifact.for_memory(),
                          "pointer_chars": len(kept.context_text),
                          "orphan_source_id": orphan.artifact.source_id}
    stage(f"[2] Artifact reference — {artifact.byte_size:,} bytes → pointer of "
          f"{len(kept.context_text):,} chars, sha256={artifact.sha256[:12]}")

    # [3] the same decision logged twice 31 days ago, distilled into one entry; the
    #     artifact outcome published under a lease (prepared → memory write → committed)
    workspace = WorkspaceMemory(paths.workspace, workspace_id=WORKSPACE_ID, clock=clock)
    decided = format_timestamp(clock.now() - timedelta(days=31))
    for evidence in ("transcript:session-0:4", answer["event_id"]):
        workspace.append_fact("Use SQLite in WAL mode for the store.", kind="decision",
                              importance=4, evidence=[evidence], recorded_at=decided)
    report = workspace.distill(policy=DistillPolicy(), as_of=clock.now())
    journal = LeaseJournal(paths.session_artifacts, clock=clock)
    owner = WorkspaceReferenceOwner(workspace)
    claim = RetentionClaim.for_reference("tx-artifact-1", artifact)
    journal.publish_reference(claim, partial(owner.publish, title="pytest log",
                                             content="The full test log is kept as an artifact."),
                              verify=externalizer.verify)
    decisions = [e for e in workspace.curated_entries() if e.kind == "decision"]
    layers["workspace"] = {"distill": asdict(report),
                           "curated_decisions": len(decisions),
                           "evidence_ids": list(decisions[0].evidence_ids) if decisions else [],
                           "lease_phase": journal.leases()[claim.transaction_id].phase.value}
    stage(f"[3] Workspace log and distill — 2 facts → {len(decisions)} curated entry with "
          f"{len(layers['workspace']['evidence_ids'])} evidence ids; lease "
          f"{layers['workspace']['lease_phase']}")

    # [4] a keyed preference written twice; a second user sees nothing
    alice = UserMemory(paths.users, user_id="alice", clock=clock)
    first = alice.set_preference("reply.language", "English")
    second = alice.set_preference("reply.language", "English")
    bob_sees = UserMemory(paths.users, user_id="bob", clock=clock).list_preferences()
    layers["user"] = {"writes": [first.status, second.status], "revision": second.revision,
                      "bob_preferences": len(bob_sees)}
    stage(f"[4] User preference dedup and isolation — {first.status}, then {second.status} "
          f"(revision {second.revision}); bob sees {len(bob_sees)}")

    # [5] the candidate stored as a source-bearing remote record, recalled by a
    #     self-contained query
    store = RemoteMemoryStore(paths.remote, user_id="alice", clock=clock)
    record = store.append(kind=MemoryKind.CONVERSATION, content=candidate.summary,
                          summary=candidate.summary, source=candidate.source)
    query = "SQLite WAL decision for the store"
    hit = RecallEngine(store, clock=clock).recall(query).hits[0]
    layers["remote"] = {"memory_id": record.memory_id, "hit": hit.to_dict()}
    stage(f"[5] Query-scoped recall — '{query}' → rank {hit.rank} {hit.memory_id} "
          f"(score {hit.score:.6f}, source {hit.provenance.source_id})")

    # drop every object; from here on, only what is on disk counts
    del transcript, externalizer, workspace, journal, owner, alice, store
    clock.advance(timedelta(days=2))  # both artifacts are now older than the orphan TTL

    transcript = Transcript(paths.transcripts / f"{SESSION}.jsonl", clock=clock)
    recovered_event = transcript.lookup(candidate.source.source_id)
    checks["transcript_recovered"] = (recovered_event is not None
                                      and recovered_event["content"] == answer["content"]
                                      and len(transcript) == 2)
    workspace = WorkspaceMemory(paths.workspace, workspace_id=WORKSPACE_ID, clock=clock)
    decisions = [e for e in workspace.curated_entries() if e.kind == "decision"]
    checks["workspace_deduplicated"] = (len(decisions) == 1 and decisions[0].occurrences == 2
                                        and len(decisions[0].evidence_ids) == 2)
    checks["user_preference_deduplicated"] = (
        [first.status, second.status] == ["created", "unchanged"]
        and UserMemory(paths.users, user_id="alice").list_preferences()[0].revision == 1)
    checks["user_scope_isolated"] = UserMemory(paths.users, user_id="bob").list_preferences() == ()
    fresh_store = RemoteMemoryStore(paths.remote, user_id="alice", clock=clock)
    fresh_hit = RecallEngine(fresh_store, clock=clock).recall(query, as_of=start).hits
    checks["recall_recovered_with_source"] = (
        bool(fresh_hit) and fresh_hit[0].memory_id == record.memory_id
        and fresh_hit[0].provenance.source_id == candidate.source.source_id)
    externalizer = ToolResultExternalizer(paths.session_artifacts, clock=clock)
    checks["artifact_recovered_with_digest"] = (
        externalizer.verify(artifact.source_id).sha256 == artifact.sha256)

    # [6] the lease journal recovered; two-phase cleanup keeps the referenced artifact
    journal = LeaseJournal(paths.session_artifacts, clock=clock)
    recovery = journal.recover()
    checks["lease_recovered"] = (
        artifact.source_id in recovery.protected_source_ids
        and journal.leases()[claim.transaction_id].phase is LeasePhase.COMMITTED
        and journal.reconcile_pending(WorkspaceReferenceOwner(workspace)).committed == ())
    plan = plan_cleanup(journal=journal, policy=CleanupPolicy(), now=clock.now())
    cleaned = apply_cleanup(plan, journal=journal, now=clock.now())
    survivors = {ref.filename for ref in externalizer.references()
                 if (paths.session_artifacts / "tool-results" / ref.filename).exists()}
    checks["cleanup_reference_aware"] = (cleaned.deleted == (orphan.artifact.filename,)
                                         and survivors == {artifact.filename})
    layers["leases_and_cleanup"] = {"recovery": recovery.to_dict(), "plan": plan.to_dict(),
                                    "report": cleaned.to_dict()}
    stage(f"[6] Crash-recovered artifact leases and cleanup — lease "
          f"{journal.leases()[claim.transaction_id].phase.value}, kept 1 referenced, "
          f"deleted {len(cleaned.deleted)} orphan of the same age")

    # [7] compaction with a lying summarizer; a fresh resolver verifies the pointers
    messages = list(transcript.replay_state().messages)
    messages += [{"role": "user", "content": f"Earlier note {i}: " + "detail " * 60}
                 if i % 2 == 0 else {"role": "assistant", "content": f"Noted {i}."}
                 for i in range(10)]
    confirmed = format_timestamp(start)
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
                                policy=CompactionPolicy(token_threshold=300, hard_limit=5_000,
                                                        summary_keep_recent_turns=1))
    resolver = SourcePointerResolver(transcript_root=paths.transcripts,
                                     artifact_root=paths.artifacts)
    resolutions = resolver.resolve_all(state.pointers())
    rendered = render_durable_context(compacted.durable_state, resolutions)
    orphan_status = resolver.resolve(orphan.artifact.source_id).status
    verified = sum(r.status == "available" for r in resolutions)
    checks["compaction_exercised"] = (bool(summaries)
                                      and "conversation_summary" in compacted.applied_layers
                                      and compacted.tokens_after < compacted.tokens_before)
    checks["durable_state_preserved"] = (compacted.durable_state == state
                                         and candidate.summary in rendered
                                         and "Migrate the integration tests." in rendered
                                         and "MongoDB" not in rendered)
    checks["sources_verified"] = verified == 2 and orphan_status == "missing"
    layers["context"] = {"tokens_before": compacted.tokens_before,
                         "tokens_after": compacted.tokens_after,
                         "applied_layers": list(compacted.applied_layers),
                         "resolutions": [{"pointer": r.pointer, "status": r.status,
                                          "evidence_sha256": r.evidence_sha256}
                                         for r in resolutions],
                         "orphan_pointer_status": orphan_status}
    stage(f"[7] Compaction boundary — sources verified={verified} "
          f"(tokens {compacted.tokens_before:,} → {compacted.tokens_after:,}; "
          f"orphan pointer {orphan_status})")

    ok = all(checks[name] for name in CHECKS)
    manifest = {"checks": {name: checks[name] for name in CHECKS}, "layers": layers,
                "artifacts": _tree(paths.home)}
    write_text_atomic(manifest_path, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
    result = WalkthroughResult(ok, {name: checks[name] for name in CHECKS}, tuple(stages),
                               manifest_path)
    if ok:
        out("RESULT: OK — layered memory boundaries survived compaction and restart.")
    else:
        out(f"RESULT: FAILED — {', '.join(result.failing())}")
    return result
