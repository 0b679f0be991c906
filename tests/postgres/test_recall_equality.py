"""Recall on the server's data equals recall on the JSONL store, for every scorer.

Candidates come from the database (a GIN index over the terms labmem's analyzer gave
each row); scores, the stable rank and the breakdown are labmem's. A property test over
generated stores holds the two backends to the same :class:`RecallResult` — hits, ranks,
scores, breakdowns — for every registered scorer, before and after more appends (the
index follows them). Each example is a new user on one database, not a new server.
"""

import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import MemorySource
from labmem.recall import SCORER_NAMES, RecallEngine, RemoteMemoryStore
from labmem.recall.postgres import PostgresMemoryStore

WORDS = ["postgres", "sqlite", "memory", "shared", "lock", "duplicate", "index", "tea",
         "agent", "recall", "记忆", "数据库", "服务器"]
NOW = FixedClock("2026-08-20T00:00:00Z")
_users = itertools.count(1)

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
drafts = st.builds(
    lambda content, title, day, kind, thread: {
        "kind": kind, "content": content, "summary": "",
        "source": MemorySource(f"thread-{thread}", "conversation_transcript", title,
                               f"2026-08-{day:02d}T09:00:00Z")},
    texts, st.sampled_from(["Decision", "Tea time", "Storage 选择"]),
    st.integers(1, 19), st.sampled_from(["conversation"] * 4 + ["profile"]),
    st.integers(1, 3))
stores = st.lists(drafts, min_size=1, max_size=12)
queries = st.lists(texts, min_size=1, max_size=2)


def load(store, batch):
    """Append one at a time; a draft that repeats an earlier one is a duplicate on both."""
    for draft in batch:
        try:
            store.append(**draft)
        except Exception as exc:  # noqa: BLE001 — the same refusal on both backends
            assert type(exc).__name__ == "RemoteMemoryDuplicateError"


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=stores, later=stores, asked=queries)
def test_every_scorer_ranks_the_same_on_postgres_as_on_jsonl(pg_url, first, later, asked):
    user = f"equal-{next(_users)}"
    with tempfile.TemporaryDirectory() as folder, PostgresMemoryStore(
            pg_url, user_id=user, clock=NOW) as pg:
        jsonl = RemoteMemoryStore(Path(folder) / "records.jsonl", user_id=user, clock=NOW)
        for store in (pg, jsonl):
            load(store, first)
        engines = {name: (RecallEngine(pg, scorer=name), RecallEngine(jsonl, scorer=name))
                   for name in SCORER_NAMES}
        for round_ in (1, 2):
            for name, (on_pg, on_jsonl) in engines.items():
                for text in asked:
                    assert on_pg.recall(text, limit=4) == on_jsonl.recall(text, limit=4), (
                        name, text, round_)
            for store in (pg, jsonl):  # appended after the engines were made
                load(store, later)
        assert pg.read_all() == jsonl.read_all()


def test_the_reference_backend_agrees_on_postgres(pg_url, tmp_path):
    with PostgresMemoryStore(pg_url, user_id="alice", clock=NOW) as pg:
        for i, word in enumerate(WORDS):
            pg.append(kind="conversation", content=f"{word} {WORDS[i - 1]} note {i}",
                      summary="", source=MemorySource(f"t-{i}", "conversation_transcript",
                                                      "Notes", f"2026-08-{i + 1:02d}T00:00:00Z"))
        compared = []
        for name in SCORER_NAMES:
            try:
                reference = RecallEngine(pg, scorer=name, backend="reference").recall(
                    "postgres memory 记忆")
            except InvalidInputError:  # the reference backend implements some scorers
                continue
            fast = RecallEngine(pg, scorer=name).recall("postgres memory 记忆")
            assert fast == reference and fast.hits, name
            compared.append(name)
        assert "bm25" in compared


def test_recall_never_writes_a_row(pg_url, pg_admin_url):
    """Recall reads records and their index; not one row of them changes (dense recall
    keeps its vectors, a cache computed from the records, in a table of its own)."""
    from tests.postgres.cluster import admin_execute

    def fingerprint():
        return [admin_execute(pg_admin_url, f"SELECT md5(string_agg(t::text, '|' ORDER BY "
                              f"t::text)), count(*) FROM {table} t")
                for table in ("memories", "scope_stats", "vocabulary")]

    with PostgresMemoryStore(pg_url, user_id="alice", clock=NOW) as pg:
        for i, word in enumerate(WORDS):
            pg.append(kind="conversation", content=f"{word} note {i}", summary="",
                      source=MemorySource(f"t-{i}", "conversation_transcript", "Notes",
                                          "2026-08-01T00:00:00Z"))
        before = fingerprint()
        for name in SCORER_NAMES:
            for text in ("postgres note", "记忆", "nothing matches zzz"):
                RecallEngine(pg, scorer=name).recall(text)
        assert fingerprint() == before
