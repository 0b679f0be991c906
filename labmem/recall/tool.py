"""The ``recall_history`` tool, its default store, and the offline s12 demo.

Side effects are deferred on purpose: importing this module creates nothing, and opening
the default store under ``$LABMEM_HOME`` (default ``~/.labmem``) for ``$LABMEM_USER_ID``
writes nothing either. A store holds only what its user (or their agent) wrote: the
chapter's example records go in only when asked for by name — :func:`add_teaching_records`,
``default_runtime(with_examples=True)``, ``labmem examples add`` or ``--with-examples`` —
because an agent host takes whatever a store holds as a fact about its user.

A database URL (``database_url=``, else ``$LABMEM_DATABASE_URL``) puts the store on a
PostgreSQL server instead of the home (the ``postgres`` extra): every host that connects
with it shares its users' records. The home then keeps only what is not a record (the
memory tool's files, an MCP server's preferences and facts). A URL is printed only with
its password masked (:func:`masked_url`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from labmem.core.clock import Clock, FixedClock
from labmem.core.errors import InvalidInputError, validated_as
from labmem.core.provenance import MemorySource, scope_digest
from labmem.core.validation import require_int
from labmem.recall.pipeline import (
    MAX_LIMIT,
    MIN_LIMIT,
    RecallEngine,
    RecallQueryError,
    render_recalled_context,
    render_remote_profile,
)
from labmem.recall.postgres.urls import check_database_url, database_name, masked_url, scrubbed
from labmem.recall.store import (
    MemoryKind,
    RecallStore,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryStore,
)

ENV_HOME = "LABMEM_HOME"
ENV_USER = "LABMEM_USER_ID"
ENV_DATABASE_URL = "LABMEM_DATABASE_URL"
DEFAULT_USER = "learner"
# The tool and `labmem recall` rank with the best scorer measured (bench/locomo_eval.py and
# the labeled set); chapter s12 and RecallEngine's own default stay with "teaching".
DEFAULT_SCORER = "contextual"

RECALL_HISTORY_TOOL = {
    "name": "recall_history",
    "description": (
        "Search this user's long-term conversation history. The search cannot see the "
        "current chat, so write a self-contained query naming the topic (e.g. 'SQLite "
        "WAL persistence decision'), not 'what we discussed last time'. Returns JSON "
        "hits with provenance and an explainable score."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Self-contained description."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
        },
        "required": ["query"],
    },
}


def _record(memory_id, captured_at, title, summary, content, kind="conversation",
            source_type="conversation_transcript"):
    return {
        "memory_id": memory_id,
        "kind": kind,
        "summary": summary,
        "content": content,
        "source": {"source_id": f"transcript-{memory_id}" if kind == "conversation"
                   else f"snapshot-{memory_id}",
                   "source_type": source_type, "title": title, "captured_at": captured_at},
    }


TEACHING_RECORDS: tuple[dict, ...] = (
    _record("conversation-001", "2026-06-03T09:00:00Z", "project kickoff",
            "Agreed to build a notebook series on agent memory.",
            "Kickoff: the series teaches transcript, workspace, user and remote memory."),
    _record("conversation-002", "2026-07-10T14:30:00Z", "persistence decision",
            "Selected SQLite WAL for local persistence.",
            "Compared JSON files and SQLite; chose SQLite in WAL mode for local persistence."),
    _record("conversation-003", "2026-07-31T12:00:00Z", "layered memory design",
            "Separated workspace, user and remote memory boundaries.",
            "Design review (分层记忆): each layer owns its files; recall returns views, "
            "not copies."),
    _record("conversation-004", "2026-07-20T08:15:00Z", "测试策略",
            "用真实子进程测试并发写入。",
            "讨论了测试策略：并发写入用真实子进程和屏障同时释放来测试。"),
    _record("conversation-005", "2026-05-18T16:45:00Z", "deadline planning",
            "Moved the s14 chapter after s13.",
            "Planning call: compaction depends on artifacts, so s14 follows s13."),
    _record("conversation-006", "2026-07-28T11:00:00Z", "tokenizer question",
            "Token estimate counts CJK characters one each.",
            "Decided on a cheap token estimate: CJK characters count 1, other runs len/4."),
    _record("profile-001", "2026-07-01T00:00:00Z", "profile snapshot",
            "", "Prefers concise answers with runnable examples. Writes in English and Chinese.",
            kind="profile", source_type="profile_snapshot"),
)


def add_teaching_records(store: RemoteMemoryStore) -> int:
    """Append the example (teaching) records that are not stored yet; return how many were
    added. Only ever called on request: nothing adds them to a store by itself."""
    added = 0
    for item in TEACHING_RECORDS:
        try:
            store.append(kind=MemoryKind(item["kind"]), content=item["content"],
                         summary=item["summary"], source=MemorySource.from_dict(item["source"]),
                         memory_id=item["memory_id"])
            added += 1
        except RemoteMemoryDuplicateError:
            pass  # another process added it first
    return added


@dataclass(frozen=True)
class RemoteRuntime:
    """The default store and engine (scorer :data:`DEFAULT_SCORER`) for one user: under
    one home directory, or on a database server (``home`` then keeps the other files)."""

    home: Path
    store: RecallStore
    engine: RecallEngine

    @property
    def location(self) -> str:
        """Where the records live, safe to print: the file, or the database's name."""
        if isinstance(self.store, RemoteMemoryStore):
            return str(self.store.path)
        return f"database {self.store.name!r}"


def default_home() -> Path:
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".labmem")


def given_database_url(url: str | None, field: str = "database_url"
                       ) -> tuple[str | None, str]:
    """The database URL to use and the name to give it in errors: ``url`` if given, else a
    non-empty ``$LABMEM_DATABASE_URL``, else ``None`` (the store lives in the home)."""
    if url is None and os.environ.get(ENV_DATABASE_URL):
        return os.environ[ENV_DATABASE_URL], f"${ENV_DATABASE_URL}"
    return url, field


def default_runtime(*, home: str | Path | None = None, user_id: str | None = None,
                    clock: Clock | None = None, with_examples: bool = False,
                    database_url: str | None = None,
                    database_url_field: str = "database_url") -> RemoteRuntime:
    """Open the default remote store of one user under one home, or on a database.

    Opening writes nothing: a new home gets its ``remote-memory/`` folder only when a
    record is appended. ``with_examples=True`` adds the example records that are not
    stored yet (:data:`TEACHING_RECORDS`), for a learner who asked for them.

    A home that cannot hold the store (``$LABMEM_HOME`` naming a file, say) is refused
    with a :class:`RemoteMemoryError` naming it, before anything is read or written.

    ``database_url`` (else ``$LABMEM_DATABASE_URL``) opens the store on that PostgreSQL
    server instead, connecting at once (:func:`open_database_store`); errors name
    ``database_url_field`` (the CLI passes its flag) or the variable.
    """
    database_url, database_url_field = given_database_url(database_url, database_url_field)
    where = "home" if home is not None else f"${ENV_HOME}"
    home = Path(home) if home is not None else default_home()
    user_id = user_id or os.environ.get(ENV_USER) or DEFAULT_USER
    if database_url is not None:
        store = open_database_store(database_url, user_id=user_id, clock=clock,
                                    field=database_url_field)
        if with_examples:
            add_teaching_records(store)
        return RemoteRuntime(home, store, RecallEngine(store, scorer=DEFAULT_SCORER))
    path = home / "remote-memory" / f"{scope_digest(user_id)}.jsonl"
    blocker = next((p for p in (path.parent, *path.parent.parents)
                    if p.exists() or p.is_symlink()), None)
    if blocker is not None and not blocker.is_dir():
        raise RemoteMemoryError(
            f"{where} {str(home)!r}: cannot hold the default store ({blocker} is not a "
            "directory); point it at a directory labmem may write (it is created if missing)")
    store = RemoteMemoryStore(path, user_id=user_id, clock=clock)
    if with_examples:
        add_teaching_records(store)
    return RemoteRuntime(home, store, RecallEngine(store, scorer=DEFAULT_SCORER))


def recall_history(query: str, limit: int = 5, *, runtime: RemoteRuntime | None = None) -> str:
    """The agent tool: recall from ``runtime`` (default: the default store) and return the
    JSON result.

    ``limit`` is checked first, by the library's own rule (an int from ``MIN_LIMIT`` to
    ``MAX_LIMIT``; ``2.7``, ``"3"`` and ``True`` are refused with
    :class:`RecallQueryError`), so a bad one never opens the store.
    """
    validated_as(RecallQueryError, require_int, limit, "limit", minimum=MIN_LIMIT,
                 maximum=MAX_LIMIT)
    runtime = runtime if runtime is not None else default_runtime()
    return runtime.engine.recall(query, limit=limit).to_json()


# -- a store on a PostgreSQL server: ``--database-url`` / ``$LABMEM_DATABASE_URL`` -----

@contextmanager
def _naming(field: str, url: str) -> Iterator[None]:
    """A failure to reach or use the database, re-raised naming ``field`` and the URL
    (password masked)."""
    try:
        yield
    except RemoteMemoryError as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise type(exc)(f"{field} {masked_url(url)!r}: {scrubbed(str(exc), url)}") from None


def open_database_store(url: str, *, user_id: str, clock: Clock | None = None,
                        field: str = "database_url") -> RecallStore:
    """The user's store on the PostgreSQL server at ``url`` (the application role's URL),
    connected now: an unreachable server or a missing schema is said here, naming
    ``field``, not at the first recall."""
    url = check_database_url(url, field)
    from labmem.recall.postgres import PostgresMemoryStore

    store = PostgresMemoryStore(url, user_id=user_id, clock=clock)
    with _naming(field, url):
        store.is_empty()
    return store


@dataclass(frozen=True)
class SchemaChange:
    """What ``labmem db init|upgrade|status`` found and left: schema versions (0: none)."""

    database: str
    before: int
    after: int
    newest: int


def manage_database(action: str, url: str, *, field: str = "database_url") -> SchemaChange:
    """``init``, ``upgrade`` or (only read) ``status`` the labmem schema at ``url``, an
    administrator's URL for ``init`` and ``upgrade``."""
    if action not in ("init", "upgrade", "status"):
        raise InvalidInputError("action", f"{action!r} is not a database action",
                                "use init, upgrade or status")
    url = check_database_url(url, field)
    from labmem.recall.postgres import (
        SCHEMA_VERSION,
        init_database,
        schema_version,
        upgrade_database,
    )

    with _naming(field, url):
        before = after = schema_version(url)
        if action == "init":
            after = init_database(url)
        elif action == "upgrade":
            before, after = upgrade_database(url)
    return SchemaChange(database_name(url), before, after, SCHEMA_VERSION)


# -- the offline demo: ``labmem demo s12`` --------------------------------------------

DEMO_NOW = "2026-08-01T12:00:00Z"


def run_s12_demo(out: Callable[[str], None] = print) -> None:
    """The five recall stages on the teaching records, offline and deterministic."""
    from labmem.recall.pipeline import (
        build_recall_candidates,
        normalize_recall_query,
        stable_rank_recall_candidates,
    )

    with tempfile.TemporaryDirectory(prefix="labmem-demo-") as tmp:
        clock = FixedClock(DEMO_NOW)
        store = RemoteMemoryStore(Path(tmp) / "records.jsonl", user_id="demo-user", clock=clock)
        add_teaching_records(store)
        records = store.read_all()
        searched = sum(1 for r in records if r.kind is MemoryKind.CONVERSATION)
        out(f"store: {len(records)} records for user scope {store.user_scope}: {searched} "
            f"conversation records (searched by recall) and {len(records) - searched} "
            "profile (loaded at session start, never searched)")

        query = normalize_recall_query("  LAYERED   Memory  ", user_scope=store.user_scope,
                                       limit=5, issued_at=clock.now())
        out(f"[1] normalize  text={query.text!r} normalized={query.normalized_text!r} "
            f"terms={list(query.terms)}")
        candidates = build_recall_candidates(query, records)
        out(f"[2] candidate  searched_records={searched} candidate_records={len(candidates)}")
        hits = stable_rank_recall_candidates(query, candidates, as_of=clock.now())
        for hit in hits:
            b = hit.score_breakdown
            out(f"[3] score      {hit.memory_id}: 0.85*{b.lexical_coverage:.6f} + "
                f"0.15*{b.recency:.6f} = {b.total:.6f}")
        out("[4] rank       " + ", ".join(f"#{h.rank} {h.memory_id}" for h in hits))
        result = RecallEngine(store, clock=clock).recall("  LAYERED   Memory  ")
        out("[5] render")
        out(render_recalled_context(result))
        out("session-start profile:")
        out(render_remote_profile(store.latest_profile()))


DEMOS: dict[str, Callable[..., None]] = {"s12": run_s12_demo}
