"""The memory tools an agent host calls, independent of the protocol that carries them.

One :class:`MemoryToolbox` opens one labmem home for one user and one workspace and
offers ten tools over four layers: recall over remote memory (s12), remembering a
record with its source (s12), user preferences (s11), workspace facts and the agent's
workspace context (s10), and the memory service's remember / forget / recall (s14).

Each tool has a JSON schema at least as strict as the library's own validation:
required fields, types, bounds, enums and id patterns, and ``additionalProperties:
false`` everywhere, so an unknown argument is refused rather than ignored. Arguments
are checked against the schema first, then by the library; either refusal raises a
labmem error before anything is written. :mod:`labmem.agents.mcp_server` serves these
tools over MCP; nothing here imports the MCP SDK.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labmem.core.clock import Clock
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import OPAQUE_ID_PATTERN, scope_digest
from labmem.mmu import MEMORY_TYPES, SOURCE_KINDS, FileMemoryService
from labmem.recall import (
    ENV_DATABASE_URL,
    MAX_QUERY_TERMS,
    MEMORY_ID_PATTERN,
    default_runtime,
    given_database_url,
)
from labmem.user import KEY_PATTERN, MAX_VALUE_CHARS, UserMemory
from labmem.workspace import KINDS, WorkspaceMemory

# bounds the library enforces whose constants its packages keep private; a test holds
# each of them equal to the library's own
MAX_QUERY_CHARS = 2_000
MAX_RECORD_CONTENT_CHARS = 20_000
MAX_RECORD_SUMMARY_CHARS = 2_000
MAX_FACT_CHARS = 4_000
MAX_EVIDENCE_IDS = 50
MAX_RECENT_LIMIT = 1_000
MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 200_000
MAX_RECALL_K = 20
OUTCOMES = ("succeeded", "planned", "failed", "cancelled")
FACT_KEY = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
FACT_ID = r"^[A-Za-z0-9][A-Za-z0-9._:#@/-]{0,199}$"


class ToolArgumentError(InvalidInputError):
    """A tool call's arguments do not match the tool's input schema."""


def _text(max_chars: int, description: str, *, min_chars: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars,
            "description": description}


def _anchored(pattern: str) -> str:
    return f"^{pattern}$"


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}


SOURCE_SCHEMA = _object({
    "source_id": _text(500, "Id of the original object, e.g. a transcript id."),
    "source_type": _text(200, "What the source is, e.g. 'conversation_transcript'."),
    "title": _text(500, "A short human title of the source."),
    "captured_at": _text(40, "When the source happened: ISO-8601 with a zone, "
                             "e.g. '2026-07-10T14:30:00Z'."),
}, ("source_id", "source_type", "title", "captured_at"))
PREFERENCE_KEY = {"type": "string", "pattern": _anchored(KEY_PATTERN.pattern),
                  "description": "1-64 characters from a-z 0-9 _ . -, e.g. 'answer.style'."}
EVIDENCE = {"type": "array", "maxItems": MAX_EVIDENCE_IDS,
            "items": _text(200, "An evidence id (a transcript event, a test run).")}
UNIT = {"type": "number", "minimum": 0, "maximum": 1}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what it is for, and the schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]
    layer: str  # the labmem package behind it

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "inputSchema": self.input_schema}


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("recall_history", "Search this user's long-term conversation records with the "
             "best measured scorer. Write a self-contained query naming the topic. Returns "
             "ranked hits, each with its source (provenance) and score.",
             _object({"query": _text(MAX_QUERY_CHARS, "What to recall, self-contained, in "
                                      f"at most {MAX_QUERY_TERMS} distinct words."),
                      "limit": {"type": "integer", "minimum": 1, "maximum": 10,
                                "default": 5}}, ("query",)), "labmem.recall"),
    ToolSpec("remember_record", "Store one record in remote memory with the source it came "
             "from. A record with the same id is refused, never overwritten.",
             _object({"kind": {"type": "string", "enum": ["conversation", "profile"]},
                      "content": _text(MAX_RECORD_CONTENT_CHARS, "The record's text."),
                      "summary": _text(MAX_RECORD_SUMMARY_CHARS, "One-line summary.",
                                       min_chars=0),
                      "source": SOURCE_SCHEMA,
                      "memory_id": {"type": "string",
                                    "pattern": _anchored(MEMORY_ID_PATTERN.pattern),
                                    "description": "Optional id; derived from the content "
                                                   "when omitted."}},
                     ("kind", "content", "summary", "source")), "labmem.recall"),
    ToolSpec("get_preferences", "Read the user's active preferences, or one key's stored "
             "state (a deleted key shows its tombstone).",
             _object({"key": PREFERENCE_KEY}), "labmem.user"),
    ToolSpec("set_preference", "Create, update or confirm one keyed user preference. "
             "Setting the same value again is 'unchanged'.",
             _object({"key": PREFERENCE_KEY,
                      "value": _text(MAX_VALUE_CHARS, "The preference's value."),
                      "expires_at": _text(40, "Optional expiry, ISO-8601 with a zone."),
                      "source_event_id": {"type": "string",
                                          "pattern": _anchored(OPAQUE_ID_PATTERN.pattern),
                                          "description": "Optional id of the event that "
                                                         "stated it."}},
                     ("key", "value")), "labmem.user"),
    ToolSpec("delete_preference", "Delete one preference: a tombstone replaces its value "
             "in every file.", _object({"key": PREFERENCE_KEY}, ("key",)), "labmem.user"),
    ToolSpec("append_fact", "Log one workspace fact (a decision, convention, pitfall or "
             "outcome) with its source and evidence.",
             _object({"content": _text(MAX_FACT_CHARS, "The fact, one statement."),
                      "kind": {"type": "string", "enum": list(KINDS)},
                      "importance": {"type": "integer", "minimum": 1, "maximum": 5,
                                     "default": 3},
                      "memory_key": {"type": "string", "pattern": FACT_KEY,
                                     "description": "Optional key that later facts may "
                                                    "supersede, e.g. 'storage.engine'."},
                      "source": SOURCE_SCHEMA, "evidence": EVIDENCE,
                      "fact_id": {"type": "string", "pattern": FACT_ID,
                                  "description": "Optional caller id: makes a retry safe."}},
                     ("content", "kind")), "labmem.workspace"),
    ToolSpec("workspace_context", "The workspace memory block for the agent's prompt: the "
             "curated MEMORY.md and the most recent unkeyed facts, escaped.",
             _object({"recent_limit": {"type": "integer", "minimum": 0,
                                       "maximum": MAX_RECENT_LIMIT, "default": 20}}),
             "labmem.workspace"),
    ToolSpec("memory_remember", "Write one long-term record through the memory service's "
             "write gate: only a succeeded task with evidence is kept.",
             _object({"memory_type": {"type": "string", "enum": list(MEMORY_TYPES)},
                      "title": _text(MAX_TITLE_CHARS, "A short title."),
                      "text": _text(MAX_TEXT_CHARS, "What to remember."),
                      "outcome": {"type": "string", "enum": list(OUTCOMES)},
                      "evidence": {**EVIDENCE, "minItems": 1},
                      "source_kind": {"type": "string", "enum": list(SOURCE_KINDS)},
                      "origin_key": _text(200, "What this memory is about; the same key "
                                               "merges or contradicts."),
                      "importance": UNIT, "confidence": UNIT, "utility": UNIT,
                      "salience": UNIT},
                     ("memory_type", "title", "text", "outcome", "evidence", "source_kind",
                      "origin_key")), "labmem.mmu"),
    ToolSpec("memory_forget", "Archive one long-term record: it stays as history, no "
             "recall sees it, and a replayed remember does not bring it back.",
             _object({"record_id": _text(200, "The record's id, e.g. 'alice:m-000001'.")},
                     ("record_id",)), "labmem.mmu"),
    ToolSpec("memory_recall", "The top k long-term records of this user by query-term "
             "coverage.",
             _object({"query": _text(MAX_QUERY_CHARS, "What to recall."),
                      "k": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL_K,
                            "default": 5},
                      "memory_type": {"type": "string", "enum": list(MEMORY_TYPES)}},
                     ("query",)), "labmem.mmu"),
)
TOOL_NAMES: tuple[str, ...] = tuple(spec.name for spec in TOOL_SPECS)


def check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """``arguments`` if they satisfy ``spec``'s schema; else a refusal naming the field."""
    from jsonschema import Draft202012Validator  # installed with the mcp extra

    if not isinstance(arguments, Mapping):
        raise ToolArgumentError("arguments", f"must be an object, got {type(arguments).__name__}")
    errors = sorted(Draft202012Validator(spec.input_schema).iter_errors(dict(arguments)),
                    key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    if errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.absolute_path) or "arguments"
        problem = first.message if len(first.message) <= 200 else first.message[:200] + "…"
        raise ToolArgumentError(where, problem,
                                f"see the input schema of {spec.name} in the tool list")
    return dict(arguments)


#: The tools whose data a database server holds: all a toolbox without a home offers.
DATABASE_TOOLS = ("recall_history", "remember_record")


class MemoryToolbox:
    """The tools of one user and one workspace under one labmem home.

    Every layer is opened here, so a later refused call has nothing left to create.

    With a database URL (``database_url``, else ``$LABMEM_DATABASE_URL``) the remote-memory
    records (``recall_history``, ``remember_record``) live on that PostgreSQL server,
    shared by every host that connects to it; the other tools keep their files under
    ``home``. Without a home (``home=None``, a URL required) the toolbox offers only the
    :data:`DATABASE_TOOLS`: nothing of it is a file on this host.
    """

    def __init__(self, home: str | os.PathLike[str] | None, *, user_id: str,
                 workspace_id: str, clock: Clock | None = None,
                 database_url: str | None = None,
                 database_url_field: str = "database_url") -> None:
        if home is None and given_database_url(database_url)[0] is None:
            raise InvalidInputError("home", "is required when no database URL is given",
                                    "pass a home directory, or a database URL "
                                    f"(database_url or ${ENV_DATABASE_URL})")
        self.home = Path(home) if home is not None else None
        self.remote = default_runtime(home=self.home, user_id=user_id, clock=clock,
                                      database_url=database_url,
                                      database_url_field=database_url_field)
        self.specs = {spec.name: spec for spec in TOOL_SPECS}
        self._handlers: dict[str, Callable[..., dict[str, Any]]] = {
            "recall_history": self._recall_history, "remember_record": self._remember_record}
        self.scope = self.remote.store.user_scope
        if self.home is None:
            self.specs = {name: self.specs[name] for name in DATABASE_TOOLS}
            return
        self.user = UserMemory(self.home, user_id=user_id, clock=clock)
        self.user.directory.mkdir(parents=True, exist_ok=True)
        self.workspace = WorkspaceMemory(
            self.home / "workspaces" / scope_digest(workspace_id, field="workspace_id"),
            workspace_id=workspace_id, clock=clock)
        self.service = FileMemoryService(self.home / "memory-service", clock=clock)
        self._handlers.update({
            "get_preferences": self._get_preferences, "set_preference": self._set_preference,
            "delete_preference": self._delete_preference, "append_fact": self._append_fact,
            "workspace_context": self._workspace_context,
            "memory_remember": self._memory_remember, "memory_forget": self._memory_forget,
            "memory_recall": self._memory_recall})

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The tools this toolbox offers, in :data:`TOOL_SPECS` order (what a server lists)."""
        return tuple(self.specs.values())

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run one tool; a refusal is a labmem error raised before anything is written."""
        if name not in self.specs:
            fix = f"use one of: {', '.join(self.specs)}"
            if name in TOOL_NAMES:
                fix += " (the other tools keep files: start the server with a home too)"
            raise ToolArgumentError("name", f"{name!r} is not a tool of this server", fix)
        return self._handlers[name](**check_arguments(self.specs[name], arguments))

    # -- s12 remote memory ---------------------------------------------------------
    def _recall_history(self, query: str, limit: int = 5) -> dict[str, Any]:
        return self.remote.engine.recall(query, limit=limit).to_dict()

    def _remember_record(self, **fields: Any) -> dict[str, Any]:
        return self.remote.store.append(**fields).to_dict()

    # -- s11 user memory -------------------------------------------------------------
    def _get_preferences(self, key: str | None = None) -> dict[str, Any]:
        if key is not None:
            pref = self.user.get_preference(key)
            return {"key": key, "preference": None if pref is None else pref.to_dict()}
        return {"preferences": [p.to_dict() for p in self.user.list_active_preferences()]}

    def _set_preference(self, **fields: Any) -> dict[str, Any]:
        return self.user.set_preference(**fields).to_dict()

    def _delete_preference(self, key: str) -> dict[str, Any]:
        return self.user.delete_preference(key).to_dict()

    # -- s10 workspace memory --------------------------------------------------------
    def _append_fact(self, content: str, **fields: Any) -> dict[str, Any]:
        return self.workspace.append_fact(content, **fields).to_dict()

    def _workspace_context(self, recent_limit: int = 20) -> dict[str, Any]:
        context = self.workspace.get_context_for_agent(recent_limit)
        return {"workspace_scope": context.workspace_scope, "text": context.text,
                "recent_facts": len(context.recent_facts)}

    # -- s14 memory service ----------------------------------------------------------
    def _memory_remember(self, memory_type: str, **fields: Any) -> dict[str, Any]:
        return self.service.remember(memory_type, scope=self.scope, **fields).to_dict()

    def _memory_forget(self, record_id: str) -> dict[str, Any]:
        return self.service.forget(record_id, scope=self.scope).to_dict()

    def _memory_recall(self, query: str, k: int = 5,
                       memory_type: str | None = None) -> dict[str, Any]:
        hits = self.service.recall_query(query, k, scope=self.scope, memory_type=memory_type)
        return {"hits": [{"record": h.record.to_dict(), "score": h.score,
                          "matched_terms": list(h.matched_terms)} for h in hits]}
