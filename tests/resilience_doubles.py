"""Deliberately broken stores and engines: each resilience case must fail against one.

Importable by child processes (spawn, and the SIGKILL writer) because tests/ is on
their sys.path.
"""

from __future__ import annotations

import contextlib
import json

from labmem.core.clock import FixedClock
from labmem.core.provenance import scope_digest
from labmem.core.storage import encode_json_line
from labmem.recall.pipeline import RecallEngine
from labmem.recall.store import RemoteMemoryDuplicateError, RemoteMemoryStore, StoredMemory
from labmem.resilience import NOW, _add


def no_lock_store(path, user_id):
    """The lock replaced by a no-op: the duplicate check is no longer atomic."""
    return RemoteMemoryStore(path, user_id=user_id, clock=FixedClock(NOW),
                             lock_factory=lambda p: contextlib.nullcontext())


class SwallowingStore(RemoteMemoryStore):
    """Reports success when the id is taken (a 'retry-friendly' bug)."""

    def append(self, **kwargs):
        try:
            return super().append(**kwargs)
        except RemoteMemoryDuplicateError:
            return None


def swallowing_store(path, user_id):
    return SwallowingStore(path, user_id=user_id, clock=FixedClock(NOW))


def scope_blind_store(path, user_id):
    """Every user gets Alice's scope: the scope check can never fire."""
    store = RemoteMemoryStore(path, user_id=user_id, clock=FixedClock(NOW))
    store.user_scope = scope_digest("alice")
    return store


class LenientStore(RemoteMemoryStore):
    """Skips lines it cannot parse — the silent data loss the scorecard forbids."""

    def read_all(self):
        records = []
        for line in self.path.read_bytes().split(b"\n"):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                records.append(StoredMemory.from_dict(json.loads(line)))
        return tuple(records)


def lenient_store(path, user_id):
    return LenientStore(path, user_id=user_id, clock=FixedClock(NOW))


class TailBlindStore(RemoteMemoryStore):
    """Appends with a plain 'ab' write, after whatever torn tail is there."""

    def append(self, *, kind, content, summary, source, memory_id=None):
        record = StoredMemory(memory_id, self.user_scope, kind, content, summary, source,
                              self.clock.now())
        with open(self.path, "ab") as handle:
            handle.write(encode_json_line(record.to_dict()))
        return record


def tail_blind_store(path, user_id):
    return TailBlindStore(path, user_id=user_id, clock=FixedClock(NOW))


class BufferingStore(RemoteMemoryStore):
    """Acknowledges appends before they are durable (flushes every 1,000)."""

    pending: list

    def append(self, **kwargs):
        self.pending = getattr(self, "pending", [])
        self.pending.append(kwargs)
        if len(self.pending) == 1_000:
            for item in self.pending:
                super().append(**item)
            self.pending = []


def buffering_store(path, user_id):
    return BufferingStore(path, user_id=user_id, clock=FixedClock(NOW))


class WritingEngine(RecallEngine):
    """Logs every recall back into the store — recall is no longer read-only."""

    def recall(self, text, **kwargs):
        result = super().recall(text, **kwargs)
        _add(self.store, f"recall-log-{len(self.store)}", f"recalled {text}")
        return result


def trusting_externalizer(session_dir):
    """Reads artifact bodies without re-checking their digest."""
    from labmem.artifacts.externalize import ToolResultExternalizer

    class Trusting(ToolResultExternalizer):
        def _read_verified(self, reference):
            return (self.tool_results_dir / reference.filename).read_bytes()

    return Trusting(session_dir, clock=FixedClock(NOW))


def publish_first_journal(session_dir):
    """Runs the memory write *before* the prepare record is durable."""
    from labmem.artifacts.leases import LeaseJournal

    class PublishFirst(LeaseJournal):
        def publish_reference(self, claim, publisher, *, verify=None):
            result = publisher(claim)
            self.prepare(claim)
            self.commit(claim.transaction_id)
            return result

    return PublishFirst(session_dir, clock=FixedClock(NOW))


def headless_journal(session_dir):
    """Trusts the hash chain alone: nothing anchors the journal's end (records cut off the
    tail leave a valid, shorter chain)."""
    from labmem.artifacts.leases import LeaseJournal

    class Headless(LeaseJournal):
        def _head_problem(self, head, *, strict):
            return None

    return Headless(session_dir, clock=FixedClock(NOW))


def republishing_journal(session_dir):
    """A retry of a pending publication runs the publisher again (prepare is a no-op)."""
    from labmem.artifacts.leases import LeaseJournal, PublicationRejected

    class Republishing(LeaseJournal):
        def publish_reference(self, claim, publisher, *, verify=None):
            self.prepare(claim)
            try:
                result = publisher(claim)
            except PublicationRejected:
                self.abort(claim.transaction_id)
                raise
            self.commit(claim.transaction_id)
            return result

    return Republishing(session_dir, clock=FixedClock(NOW))


def symlink_following_externalizer(session_dir):
    """Writes and reads through whatever ``tool-results/`` points at."""
    from labmem.artifacts.externalize import ToolResultExternalizer

    class Following(ToolResultExternalizer):
        def check_confinement(self):
            return None

    return Following(session_dir, clock=FixedClock(NOW))
