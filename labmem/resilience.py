"""The resilience scorecard: fault injection against the real storage layers.

Each case sets up a fault — concurrent writers, a copied file, a torn line, a
``SIGKILL`` mid-stream, a tampered artifact, a crash inside a lease publication, records
cut off the lease journal's end, a publication retried after a lost acknowledgement, a
symlinked ``tool-results/`` — and observes what the layer does. A case returns
:class:`CaseResult` (passed + what was observed); an unexpected exception is that case's
failure, and the other cases still run.

Cases take the system under test as a parameter (``make_store`` for the s12 store), so
the test suite can run each case against a deliberately broken double and watch it
fail: a scorecard whose cases cannot fail would prove nothing.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from labmem.core.clock import FixedClock
from labmem.core.errors import CorruptionError, DuplicateError, ScopeError
from labmem.core.provenance import MemorySource
from labmem.recall import MemoryKind, RecallEngine, RemoteMemoryStore

NOW = "2026-08-01T12:00:00Z"
StoreFactory = Callable[..., RemoteMemoryStore]


@dataclass(frozen=True)
class CaseResult:
    """One case's verdict and what was observed (numbers, never record text)."""

    case: str
    passed: bool
    observed: str


def pause_before(owner: type, method: str, barrier: Any, timeout: float = 2.0) -> None:
    """Fault injection for race tests: ``owner.method`` first waits at ``barrier``.

    Like a slow disk, it widens the window between a check and the write after it, so
    that a race happens every time instead of once in a while. With a working lock only
    one process is ever inside the window, the barrier times out, and the writer goes
    on. Meant for child processes only: it patches the class for the whole process.
    """
    original = getattr(owner, method)

    def paused(self, *args, **kwargs):
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=timeout)
        return original(self, *args, **kwargs)

    setattr(owner, method, paused)


def real_store(path: str | os.PathLike[str], user_id: str) -> RemoteMemoryStore:
    """The system under test: labmem's own store on a fixed clock."""
    return RemoteMemoryStore(path, user_id=user_id, clock=FixedClock(NOW))


def _source(n: int | str) -> MemorySource:
    return MemorySource(f"transcript-{n}", "conversation_transcript", f"decision {n}", NOW)


def _add(store: RemoteMemoryStore, memory_id: str, content: str = "Chose SQLite WAL."):
    return store.append(kind=MemoryKind.CONVERSATION, memory_id=memory_id, content=content,
                        summary=content, source=_source(memory_id))


# -- the cases -------------------------------------------------------------------------


def _race_writer(make_store, path, start, pause, results):
    """A writer that pauses between its duplicate check and its write (a slow disk)."""
    from labmem.core import storage

    store = make_store(path, "alice")
    store.read_all()
    pause_before(storage.JsonlLog, "append", pause)
    start.wait()
    try:
        _add(store, "memory-42")
        results.put("stored")
    except DuplicateError:
        results.put("duplicate")
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        results.put(type(exc).__name__)


def concurrent_duplicate_write(workdir: Path, make_store: StoreFactory = real_store,
                               writers: int = 4) -> CaseResult:
    path = workdir / "race.jsonl"
    ctx = multiprocessing.get_context("spawn")
    start, pause, results = ctx.Barrier(writers), ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_race_writer, args=(make_store, str(path), start, pause,
                                                    results)) for _ in range(writers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    outcomes = sorted(results.get(timeout=10) for _ in procs)
    lines = [line for line in path.read_bytes().split(b"\n") if line] if path.exists() else []
    passed = outcomes == ["duplicate"] * (writers - 1) + ["stored"] and len(lines) == 1
    return CaseResult("concurrent_duplicate_write", passed,
                      f"{writers} writers, one id: {outcomes.count('stored')} stored, "
                      f"{outcomes.count('duplicate')} duplicate errors, {len(lines)} lines")


def id_collision_different_content(workdir: Path,
                                   make_store: StoreFactory = real_store) -> CaseResult:
    path = workdir / "collision.jsonl"
    _add(make_store(path, "alice"), "memory-7", "first content")
    refused = False
    try:
        _add(make_store(path, "alice"), "memory-7", "different content")
    except DuplicateError:
        refused = True
    records = make_store(path, "alice").read_all()
    kept = [r.content for r in records if r.memory_id == "memory-7"]
    passed = refused and kept == ["first content"]
    return CaseResult("id_collision_different_content", passed,
                      f"second write refused={refused}; copies of the id stored={len(kept)}; "
                      f"first content kept={kept == ['first content']}")


def cross_scope_open(workdir: Path, make_store: StoreFactory = real_store) -> CaseResult:
    path = workdir / "scoped.jsonl"
    _add(make_store(path, "alice"), "memory-1")
    bob = make_store(path, "bob")
    refused = []
    for name, read in (("read_all", bob.read_all), ("get", lambda: bob.get("memory-1")),
                       ("latest_profile", bob.latest_profile),
                       ("recall", lambda: RecallEngine(bob).recall("sqlite"))):
        try:
            read()
        except ScopeError:
            refused.append(name)
    return CaseResult("cross_scope_open", len(refused) == 4,
                      f"another user's file refused on {len(refused)}/4 read paths")


def torn_complete_line(workdir: Path, make_store: StoreFactory = real_store) -> CaseResult:
    path = workdir / "torn.jsonl"
    store = make_store(path, "alice")
    for n in range(3):
        _add(store, f"memory-{n}")
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][: len(lines[1]) // 2]  # a torn write that did get its newline
    path.write_bytes(b"\n".join(lines))
    try:
        count = len(make_store(path, "alice").read_all())
        return CaseResult("torn_complete_line", False,
                          f"read {count} records; the damaged line was skipped silently")
    except CorruptionError as exc:
        return CaseResult("torn_complete_line", exc.line == 2,
                          f"corruption reported at line {exc.line}")


def unterminated_tail(workdir: Path, make_store: StoreFactory = real_store) -> CaseResult:
    path = workdir / "tail.jsonl"
    store = make_store(path, "alice")
    for n in range(3):
        _add(store, f"memory-{n}")
    with open(path, "ab") as handle:
        handle.write(b'{"memory_id":"memory-3","user_sc')
    reopened = make_store(path, "alice")
    seen = len(reopened.read_all())
    _add(reopened, "memory-4")
    try:
        after = len(make_store(path, "alice").read_all())
    except CorruptionError as exc:
        return CaseResult("unterminated_tail", False, f"after the next append: {exc}")
    passed = seen == 3 and after == 4 and path.read_bytes().endswith(b"\n")
    return CaseResult("unterminated_tail", passed,
                      f"{seen} records with the tail ignored; {after} after the next append")


KILL_WRITER = textwrap.dedent("""
    import sys
    from labmem.resilience import _add, load_factory
    store = load_factory(sys.argv[2])(sys.argv[1], "alice")
    n = 0
    while True:
        _add(store, f"memory-{n}", "x" * 2000)
        print(n, flush=True)  # acknowledged only after append() returned
        n += 1
""")


def load_factory(spec: str) -> StoreFactory:
    """``"module:function"`` → the store factory (so a child process can build the same one)."""
    module, _, name = spec.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


def sigkill_mid_stream(workdir: Path, factory_spec: str = "labmem.resilience:real_store",
                       acknowledged_before_kill: int = 30) -> CaseResult:
    path = workdir / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", KILL_WRITER, str(path), factory_spec],
                            stdout=subprocess.PIPE, text=True, env=env)
    acked = []
    for line in proc.stdout:
        acked.append(f"memory-{line.strip()}")
        if len(acked) == acknowledged_before_kill:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    make_store = load_factory(factory_spec)
    stored = [r.memory_id for r in make_store(path, "alice").read_all()]
    missing = sorted(set(acked) - set(stored))
    duplicated = len(stored) - len(set(stored))
    passed = not missing and not duplicated
    # Only acknowledged writes are promised. How many more the writer finished before the
    # signal landed depends on timing, so the observation does not report that number.
    return CaseResult("sigkill_mid_stream", passed,
                      f"{len(acked)} acknowledged before SIGKILL, "
                      f"{len(acked) - len(missing)} of them stored after it; "
                      f"missing {len(missing)}, duplicated {duplicated}")


def recall_after_restart(workdir: Path, make_store: StoreFactory = real_store,
                         make_engine: Callable[..., Any] = RecallEngine) -> CaseResult:
    path = workdir / "recall.jsonl"
    store = make_store(path, "alice")
    for n, text in enumerate(["SQLite WAL chosen", "layered memory design", "分层记忆 设计",
                              "WAL checkpoint tuning"]):
        _add(store, f"memory-{n}", text)
    queries = ["sqlite wal", "memory design", "分层记忆"]
    before = [make_engine(store).recall(q, as_of=NOW).to_dict()["hits"] for q in queries]
    snapshot = path.read_bytes()
    fresh = make_store(path, "alice")
    after = [make_engine(fresh).recall(q, as_of=NOW).to_dict()["hits"] for q in queries]
    unchanged = path.read_bytes() == snapshot
    same = before == after
    return CaseResult("recall_after_restart", same and unchanged,
                      f"{sum(map(len, before))} hits over {len(queries)} queries; identical "
                      f"after restart={same}; store bytes unchanged={unchanged}")


def real_externalizer(session_dir: str | os.PathLike[str]):
    """s13's externalizer on a fixed clock."""
    from labmem.artifacts import ToolResultExternalizer

    return ToolResultExternalizer(session_dir, clock=FixedClock(NOW))


def tampered_artifact(workdir: Path, make_externalizer: Callable[..., Any] = real_externalizer
                      ) -> CaseResult:
    from labmem.artifacts import ArtifactIntegrityError

    externalizer = make_externalizer(workdir / "s1")
    artifact = externalizer.externalize("build line\n" * 5_000, "bash").artifact
    body = workdir / "s1" / "tool-results" / artifact.filename
    body.write_bytes(body.read_bytes().replace(b"build", b"BUILD", 1))  # same size, new bytes
    refused = []
    for name, read in (("read_artifact", lambda: externalizer.read_artifact(artifact)),
                       ("verify", lambda: externalizer.verify(artifact.source_id)),
                       ("fresh read", lambda: make_externalizer(workdir / "s1")
                        .read_artifact(artifact.source_id))):
        try:
            read()
        except ArtifactIntegrityError:
            refused.append(name)
    return CaseResult("tampered_artifact", len(refused) == 3,
                      f"a same-size edit of the body detected on {len(refused)}/3 reads")


CRASH_POINTS = ("after_prepare", "after_publish", "after_commit")
PUBLISH_CHILD = textwrap.dedent("""
    import os, sys
    from labmem.core.clock import FixedClock
    from labmem.resilience import NOW, load_factory, real_externalizer
    session, marker, point, journal_spec = sys.argv[1:5]
    artifact = real_externalizer(session).externalize("log line\\n" * 5_000, "bash").artifact
    journal = load_factory(journal_spec)(session)
    from labmem.artifacts import RetentionClaim
    claim = RetentionClaim.for_reference("tx-1", artifact)
    print(artifact.source_id, flush=True)

    def publisher(claim):
        if point == "after_prepare":
            os._exit(9)  # died before the memory write
        with open(marker, "w") as handle:  # the memory now holds the reference
            handle.write(claim.source_id)
            handle.flush()
            os.fsync(handle.fileno())
        if point == "after_publish":
            os._exit(9)  # died before the commit
        return "ok"

    journal.publish_reference(claim, publisher)
    if point == "after_commit":
        os._exit(9)
""")


def real_journal(session_dir: str | os.PathLike[str]):
    """s13's lease journal on a fixed clock."""
    from labmem.artifacts import LeaseJournal

    return LeaseJournal(session_dir, clock=FixedClock(NOW))


def lease_publication_crash(workdir: Path,
                            journal_spec: str = "labmem.resilience:real_journal") -> CaseResult:
    """Kill the publishing process at each durable step; a reference the memory may hold
    must always be protected after recovery."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    observed, passed = [], True
    for point in CRASH_POINTS:
        session, marker = workdir / point / "s1", workdir / point / "memory-reference"
        session.parent.mkdir(parents=True)
        done = subprocess.run([sys.executable, "-c", PUBLISH_CHILD, str(session), str(marker),
                               point, journal_spec], capture_output=True, text=True, env=env,
                              timeout=60)
        source_id = done.stdout.strip()
        protected = source_id in load_factory(journal_spec)(session).recover() \
            .protected_source_ids
        published = marker.exists()
        ok = done.returncode == 9 and (protected or not published)
        passed = passed and ok
        observed.append(f"{point}: published={published} protected={protected}")
    return CaseResult("lease_publication_crash", passed, "; ".join(observed))


def _journal_artifacts(session: Path, count: int) -> list[Any]:
    externalizer = real_externalizer(session)
    return [externalizer.externalize(f"log line {n}\n" * 5_000, "bash").artifact
            for n in range(count)]


def lease_journal_truncation(workdir: Path, make_journal: Callable[..., Any] = real_journal
                             ) -> CaseResult:
    """Cut the last records (a whole committed lease) off the journal; a fresh journal must
    refuse it, and so must cleanup — or the artifact that lease protected would go."""
    from labmem.artifacts import LeaseJournalError, RetentionClaim, plan_cleanup

    session = workdir / "s1"
    artifacts = _journal_artifacts(session, 2)
    journal = make_journal(session)
    for n, artifact in enumerate(artifacts):
        journal.publish_reference(RetentionClaim.for_reference(f"tx-{n}", artifact),
                                  lambda claim: "published")
    path = session / "leases.jsonl"
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"".join(line + b"\n" for line in lines[:-2]))  # tx-1 leaves no trace
    refused, doomed = [], False
    for name, read in (("recover", lambda: make_journal(session).recover()),
                       ("plan_cleanup", lambda: plan_cleanup(
                           journal=make_journal(session), now="2026-08-03T12:00:00Z"))):
        try:
            outcome = read()
        except LeaseJournalError:
            refused.append(name)
            continue
        if name == "plan_cleanup":
            doomed = artifacts[1].filename in [d.filename for d in outcome.to_delete]
    return CaseResult("lease_journal_truncation", len(refused) == 2,
                      f"2 of {len(lines)} records cut off the end: refused on "
                      f"{len(refused)}/2 reads (recover, plan_cleanup)"
                      + ("; cleanup would delete the artifact the lost lease protected"
                         if doomed else ""))


def publish_retry_after_unknown_outcome(workdir: Path,
                                        make_journal: Callable[..., Any] = real_journal
                                        ) -> CaseResult:
    """The memory stores the reference and the acknowledgement is lost; the caller retries.

    The retry must be refused without running the publisher (the memory would hold the
    reference twice) and without writing; reconciliation then commits the lease."""
    from labmem.artifacts import LeaseJournalError, OwnerStatus, RetentionClaim

    session = workdir / "s1"
    (artifact,) = _journal_artifacts(session, 1)
    claim = RetentionClaim.for_reference("tx-1", artifact)
    held: list[str] = []

    def publish_then_lose_the_ack(claim):
        held.append(claim.transaction_id)
        raise TimeoutError("the memory service did not answer")

    class Owner:
        def status(self, transaction_id):
            if transaction_id in held:
                return OwnerStatus("published", claim.source_id, claim.sha256)
            return OwnerStatus("absent")

        def seal_absent(self, transaction_id):
            return 1

    with contextlib.suppress(TimeoutError):
        make_journal(session).publish_reference(claim, publish_then_lose_the_ack)
    before = (session / "leases.jsonl").read_bytes()
    refused = False
    try:
        make_journal(session).publish_reference(claim, publish_then_lose_the_ack)
    except LeaseJournalError:
        refused = True
    except TimeoutError:
        pass
    unchanged = (session / "leases.jsonl").read_bytes() == before
    committed = make_journal(session).reconcile_pending(Owner()).committed == ("tx-1",)
    passed = refused and len(held) == 1 and unchanged and committed
    return CaseResult("publish_retry_after_unknown_outcome", passed,
                      f"retry refused={refused}; publisher ran {len(held)} time(s); journal "
                      f"unchanged={unchanged}; reconciled to committed={committed}")


def symlinked_tool_results(workdir: Path,
                           make_externalizer: Callable[..., Any] = real_externalizer
                           ) -> CaseResult:
    """``tool-results/`` swapped for a symlink out of the session: nothing may be written
    through it, and the source resolver must say ``denied``."""
    from labmem.artifacts import ArtifactAccessError
    from labmem.context import SourcePointerResolver

    root, outside = workdir / "artifacts", workdir / "outside"
    session = root / "s1"
    artifact = make_externalizer(session).externalize("build line\n" * 5_000, "bash").artifact
    outside.mkdir()
    (session / "tool-results").rename(outside / "tool-results")
    os.symlink(outside / "tool-results", session / "tool-results")
    refused = False
    try:
        make_externalizer(session).externalize("other line\n" * 5_000, "bash")
    except ArtifactAccessError:
        refused = True
    written = len(list((outside / "tool-results").iterdir())) - 1
    status = SourcePointerResolver(transcript_root=root, artifact_root=root).resolve(
        artifact.source_id).status
    passed = refused and written == 0 and status == "denied"
    return CaseResult("symlinked_tool_results", passed,
                      f"externalize refused={refused}; bodies written outside the session="
                      f"{written}; resolver status={status}")


STORE_CASES: dict[str, Callable[[Path], CaseResult]] = {
    "concurrent_duplicate_write": concurrent_duplicate_write,
    "id_collision_different_content": id_collision_different_content,
    "cross_scope_open": cross_scope_open,
    "torn_complete_line": torn_complete_line,
    "unterminated_tail": unterminated_tail,
    "sigkill_mid_stream": sigkill_mid_stream,
    "recall_after_restart": recall_after_restart,
}


ARTIFACT_CASES: dict[str, Callable[[Path], CaseResult]] = {
    "tampered_artifact": tampered_artifact,
    "lease_publication_crash": lease_publication_crash,
    "lease_journal_truncation": lease_journal_truncation,
    "publish_retry_after_unknown_outcome": publish_retry_after_unknown_outcome,
    "symlinked_tool_results": symlinked_tool_results,
}


def all_cases() -> dict[str, Callable[[Path], CaseResult]]:
    """Every case of the scorecard, in the order they run."""
    return {**STORE_CASES, **ARTIFACT_CASES}


# -- running ------------------------------------------------------------------------------


def run_case(name: str, case: Callable[[Path], CaseResult], root: Path) -> CaseResult:
    """Run one case in its own directory; an unexpected exception is a failure."""
    workdir = root / name
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        return case(workdir)
    except Exception as exc:  # noqa: BLE001 - the scorecard reports, it does not crash
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return CaseResult(name, False, f"unexpected {type(exc).__name__}: {exc} "
                                       f"(at {Path(last.filename).name}:{last.lineno})")


def run_scorecard(output_dir: Path | None = None,
                  cases: dict[str, Callable[[Path], CaseResult]] | None = None,
                  out: Callable[[str], None] = print) -> tuple[list[CaseResult], Path | None]:
    """Run every case, print ``[PASS|FAIL] case: observed`` lines; with ``output_dir``, write
    the JSON report there and return its path (without one, nothing is left behind: the
    cases run in a scratch directory that is removed, and the report path is ``None``)."""
    cases = all_cases() if cases is None else cases
    results = []
    with tempfile.TemporaryDirectory(prefix="labmem-cases-") as scratch:
        for name, case in cases.items():
            result = run_case(name, case, Path(scratch))
            results.append(result)
            out(f"[{'PASS' if result.passed else 'FAIL'}] {result.case}: {result.observed}")
    passed = sum(r.passed for r in results)
    out(f"Passed: {passed}/{len(results)}")
    if output_dir is None:
        out("Report: not written (add --output-dir DIR to keep resilience_report.json)")
        return results, None
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    report = output_dir / "resilience_report.json"
    report.write_text(json.dumps({"passed": passed, "total": len(results),
                                  "cases": [asdict(r) for r in results]}, indent=2) + "\n",
                      encoding="utf-8")
    out(f"Report: {report}")
    return results, report
