"""Child-process code for the sidecar tests (importable under 'spawn')."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

NOW = datetime(2026, 8, 1, 12, tzinfo=timezone.utc)
WORDS = ("wal sqlite memory layered budget recall index sidecar crash append thread "
         "dog shelter adopted may garden 记忆 分层 测试").split()


def drafts(start: int, count: int, tag: str = "m") -> list[dict]:
    """``count`` conversation drafts with threads, titles, dates and varied words."""
    out = []
    for n in range(start, start + count):
        words = [WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(3 + n % 5)]
        out.append({
            "kind": "conversation", "memory_id": f"{tag}-{n:05d}",
            "content": " ".join(words), "summary": "" if n % 4 else f"note {words[0]}",
            "source": {"source_id": f"chat-{n % 6}:{n}", "source_type": "conversation_transcript",
                       "title": ("Ana", "Bo", "Chen 陈")[n % 3],
                       "captured_at": (NOW - timedelta(days=n % 40, hours=n % 7)).isoformat()},
        })
    return out


PROFILE = {"kind": "profile", "content": "likes dogs", "summary": "",
           "source": {"source_id": "p1", "source_type": "profile_snapshot", "title": "p",
                      "captured_at": "2026-07-01T00:00:00Z"}}


def write_records(path, first: int, then: int):
    """``first`` drafts, a profile, then ``then`` more drafts: the files the tests share."""
    store = open_store(path)
    store.append_many(drafts(0, first))
    store.append_many([PROFILE])
    store.append_many(drafts(first, then))
    return path


def engine(path, scorer="bm25", *, sidecar=True):
    """A recall engine over ``path`` whose index writes its sidecar at any size."""
    from labmem.recall.index import InMemoryTermIndex
    from labmem.recall.pipeline import RecallEngine

    store = open_store(path)
    e = RecallEngine(store, scorer=scorer)
    e.index = InMemoryTermIndex(store, sidecar=sidecar, sidecar_min_records=0)
    return e


def open_store(path):
    from labmem.core.clock import FixedClock
    from labmem.recall.store import RemoteMemoryStore

    return RemoteMemoryStore(path, user_id="alice", clock=FixedClock(NOW))


def rewrite_sidecar_forever(path, started):
    """Write the sidecar of ``path`` again and again until killed (kill -9 lands mid-write)."""
    from labmem.recall.index import InMemoryTermIndex

    index = InMemoryTermIndex(open_store(path), sidecar_min_records=0)
    index.refresh()
    started.set()
    while True:
        index._persist()


def append_batches(path, tag, batches, size, start):
    """One appender: ``batches`` batches of ``size`` records, ids prefixed by ``tag``."""
    store = open_store(path)
    start.wait()
    for batch in range(batches):
        store.append_many(drafts(batch * size, size, tag))


def recall_while_appending(path, start, results, rounds):
    """The recaller: one engine (sidecar on, written often) recalling while others append.

    Reports (searched_records, hit ids) per round; counts must never go backwards."""
    from labmem.recall.index import InMemoryTermIndex
    from labmem.recall.pipeline import RecallEngine

    store = open_store(path)
    engine = RecallEngine(store, scorer="bm25")
    engine.index = InMemoryTermIndex(store, sidecar_min_records=10)
    start.wait()
    seen = []
    for _ in range(rounds):
        result = engine.recall("sidecar crash dog", limit=5)
        seen.append((result.searched_records, [h.memory_id for h in result.hits]))
    results.put(seen)


def play_role(role, *args):
    """``append`` (:func:`append_batches`) or ``recall`` (:func:`recall_while_appending`)."""
    (append_batches if role == "append" else recall_while_appending)(*args)
