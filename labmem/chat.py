"""The online agent: ``labmem chat``, a small tool-using loop over the Messages API.

Everything else in labmem runs offline. This module is the one place that talks to a
model, and it does so only when :func:`runtime_client` is called — importing labmem
never needs the SDK, a key or a model name. The loop gives the model the tools
:func:`build_tools` lists — ``recall_history`` (s12, the user's stored conversation
records) and ``read_file`` (confined to the working directory) — each run by the handler
of the same name in :attr:`AgentLoop.handlers`. The latest remote profile snapshot is
injected into the system prompt at session start, with its provenance (s12).

Before every model call the loop books the request (s14, :class:`labmem.mmu.RequestLedger`):
system prompt, tool definitions, history, memory (the profile and the recall results in
the view) and the output reserve, against ``context_limit``. A history that leaves memory
less than ``min_memory_tokens`` is compacted first (s14, :func:`labmem.context.compact_context`),
and a recall result is cut to fewer hits until it fits the room the request has left.
Where the API reports usage, the ledger keeps the reported input tokens beside its estimate.

With ``memory_tool=True`` (``labmem chat --memory-tool``) the model also gets the Messages
API's memory tool (s15): its ``/memories`` commands run on a
:class:`labmem.agents.MemoryDirectory` under the same home and user, with labmem's path
containment, atomic writes, limits and a command log that names each tool use. What the
memory tool shows the model is booked as memory in the ledger, like a recall result.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from labmem.agents import MemoryDirectory
from labmem.context import (
    CompactionPolicy,
    CompactionResult,
    DurableContextState,
    MessageViewLimitExceeded,
    compact_context,
    estimate_messages_tokens,
)
from labmem.core.errors import LabmemError
from labmem.core.text import estimate_tokens
from labmem.core.validation import require_int
from labmem.mmu import RequestLedger, plan_request
from labmem.recall import (
    RECALL_HISTORY_TOOL,
    RemoteRuntime,
    default_runtime,
    recall_history,
    render_remote_profile,
)

MAX_FILE_CHARS = 20_000
DEFAULT_MAX_TOOL_ROUNDS = 8
DEFAULT_MAX_TOKENS = 1_024
DEFAULT_CONTEXT_LIMIT = 200_000
DEFAULT_MIN_MEMORY_TOKENS = 4_000
SUMMARY_LINES, SUMMARY_LINE_CHARS = 40, 160

READ_FILE_TOOL = {
    "name": "read_file",
    "description": "Read a UTF-8 text file under the working directory (relative path).",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                     "required": ["path"]},
}
MEMORY_TOOL = {"type": "memory_20250818", "name": "memory"}  # the client runs its commands
MEMORY_TOOL_BETA = "context-management-2025-06-27"  # the API's beta flag for the memory tool
MEMORY_TOOL_NAMES = ("recall_history", "memory")  # their results are memory, not history
SYSTEM_PROMPT = (
    "You are a coding assistant with long-term memory. Use recall_history with a "
    "self-contained query when past conversations may matter; recalled hits are "
    "candidates with sources, not facts. Use read_file to look at the project."
)


class ChatConfigError(LabmemError):
    """``labmem chat`` cannot start: the extra, the key or the model is missing."""


class NoMemoryRoomError(LabmemError):
    """A recall result does not fit what the request has left, even with one hit."""


def build_tools(*, memory_tool: bool = False) -> list[dict[str, Any]]:
    """The tool definitions sent with every request (a new tool: add it here and give
    :class:`AgentLoop` a handler of the same name)."""
    return [RECALL_HISTORY_TOOL, READ_FILE_TOOL, *([MEMORY_TOOL] if memory_tool else [])]


def extractive_summary(transcript: str) -> str:
    """The chat's summarizer for compaction: the first characters of each earlier message
    (no model call, so compaction costs no request and cannot invent anything)."""
    lines = [line[:SUMMARY_LINE_CHARS] for line in transcript.split("\n") if line.strip()]
    return "\n".join(lines[-SUMMARY_LINES:])


def runtime_client(env: Mapping[str, str] | None = None) -> tuple[Any, str]:
    """The SDK client and model name, or one sentence saying what to set."""
    env = os.environ if env is None else env
    try:
        import anthropic
    except ImportError:
        raise ChatConfigError("labmem chat needs the anthropic SDK: install the online extra "
                              "with pip install -e '.[online]'") from None
    if not env.get("ANTHROPIC_API_KEY"):
        raise ChatConfigError("labmem chat needs an API key: set ANTHROPIC_API_KEY")
    model = env.get("MODEL_ID", "").strip()
    if not model:
        raise ChatConfigError("labmem chat needs a model: set MODEL_ID to the model's name")
    client = anthropic.Anthropic(api_key=env["ANTHROPIC_API_KEY"],
                                 base_url=env.get("ANTHROPIC_BASE_URL") or None)
    return client, model


def require_workdir(workdir: str | os.PathLike[str]) -> Path:
    """``workdir`` as a path, if it is an existing directory; else one sentence saying so."""
    path = Path(workdir)
    if not path.is_dir():
        state = "is not a directory" if path.exists() else "does not exist"
        raise ChatConfigError(f"--workdir {str(path)!r} {state}; pass the directory "
                              "read_file may read (default: the current directory)")
    return path


def read_workspace_file(path: str, root: Path) -> str:
    """A file's text, only if it resolves (symlinks included) inside ``root``."""
    root = root.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise PermissionError(f"{path!r} is outside the working directory")
    text = target.read_text(encoding="utf-8", errors="replace")
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n[cut: {len(text) - MAX_FILE_CHARS:,} more characters]"
    return text


def _block_dict(block: Any) -> dict[str, Any]:
    """An SDK content block as the plain dict we send back in the next request."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(exclude_none=True)


class AgentLoop:
    """One conversation: ask, let the model call tools, return its final text.

    ``system`` is the fixed instruction, ``memory`` the session's memory block (the remote
    profile); both are sent as the system prompt, booked apart in the request ledger.
    """

    def __init__(self, client: Any, model: str, *, workdir: Path,
                 recall: Callable[..., str] | None = None, system: str = SYSTEM_PROMPT,
                 memory: str = "", max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
                 context_limit: int = DEFAULT_CONTEXT_LIMIT,
                 max_tokens: int = DEFAULT_MAX_TOKENS,
                 min_memory_tokens: int = DEFAULT_MIN_MEMORY_TOKENS,
                 memories: MemoryDirectory | None = None) -> None:
        self.client = client
        self.model = model
        self.workdir = Path(workdir)
        self.recall = recall or recall_history
        self.system = system
        self.memory = memory
        self.max_tool_rounds = require_int(max_tool_rounds, "max_tool_rounds", minimum=0)
        self.context_limit = require_int(context_limit, "context_limit", minimum=1)
        self.max_tokens = require_int(max_tokens, "max_tokens", minimum=1)
        self.min_memory_tokens = require_int(min_memory_tokens, "min_memory_tokens", minimum=0)
        self.memories = memories  # the memory tool's /memories, when it is switched on
        self.tools = build_tools(memory_tool=memories is not None)
        self.handlers: dict[str, Callable[[Mapping[str, Any]], str]] = {
            "recall_history": self._recall_history, "read_file": self._read_file}
        if memories is not None:
            self.handlers["memory"] = self._memory
        self._tool_use_id: str | None = None  # the call a handler is running for
        self.messages: list[dict[str, Any]] = []
        self.ledgers: list[RequestLedger] = []  # one per model call, usage filled in
        self.compactions: list[CompactionResult] = []
        fixed = self.plan()  # a window too small for the fixed parts fails here, not mid-chat
        if not fixed.fits:
            raise ChatConfigError(
                f"context_limit {self.context_limit:,} cannot hold the system prompt, tools, "
                f"memory and output reserve ({fixed.estimated_input + fixed.output_reserve:,} "
                "tokens); raise it or lower max_tokens")

    @property
    def system_prompt(self) -> str:
        return self.system + ("\n\n" + self.memory if self.memory else "")

    # -- the request ledger ------------------------------------------------------------
    def _recalled_tokens(self) -> int:
        """Tokens of the recall results in the view: memory, not history."""
        recall_ids = {b["id"] for m in self.messages if m["role"] == "assistant"
                      and isinstance(m["content"], list) for b in m["content"]
                      if b["type"] == "tool_use" and b["name"] in MEMORY_TOOL_NAMES}
        return sum(estimate_tokens(b["content"]) for m in self.messages
                   if isinstance(m["content"], list) for b in m["content"]
                   if b["type"] == "tool_result" and b["tool_use_id"] in recall_ids
                   and isinstance(b["content"], str))

    def plan(self) -> RequestLedger:
        """The ledger of the next request, from the view as it is now."""
        recalled = self._recalled_tokens()
        return plan_request(
            self.context_limit, system=self.system, tools=self.tools,
            history_tokens=estimate_messages_tokens(self.messages) - recalled,
            memory_tokens=estimate_tokens(self.memory) + recalled,
            output_reserve=self.max_tokens)

    def _compact_if_needed(self, ledger: RequestLedger) -> RequestLedger:
        """Compact the view when history crowds memory below its minimum (or the request
        does not fit); the view keeps the policy's shape, pairs whole."""
        if ledger.fits and not ledger.needs_compaction(self.min_memory_tokens):
            return ledger
        threshold = max(1, ledger.history_allowance(self.min_memory_tokens))
        hard = max(threshold, self.context_limit - ledger.system - ledger.tools
                   - ledger.output_reserve - estimate_tokens(self.memory))
        result = compact_context(self.messages, DurableContextState(),
                                 summarizer=extractive_summary,
                                 policy=CompactionPolicy(token_threshold=threshold,
                                                         hard_limit=hard))
        self.compactions.append(result)
        self.messages = [dict(m) for m in result.messages]
        return self.plan()

    # -- tools ---------------------------------------------------------------------------
    def _recall_history(self, tool_input: Mapping[str, Any]) -> str:
        """Recall, with as many hits as fit the room the request has left.

        ``limit`` goes to the library as the model sent it: ``2.7``, ``"3"`` or ``True``
        are refused by the library's own validation, never coerced here.
        """
        limit = tool_input.get("limit", 5)
        output = self.recall(tool_input["query"], limit=limit)
        room = self.plan().free
        while estimate_tokens(output) > room and limit > 1:
            limit -= 1
            output = self.recall(tool_input["query"], limit=limit)
        if estimate_tokens(output) > room:
            raise NoMemoryRoomError(f"no room for recalled memory: {room} tokens left in this "
                                    "request, one hit needs "
                                    f"{estimate_tokens(output)}; ask a narrower question")
        return output

    def _read_file(self, tool_input: Mapping[str, Any]) -> str:
        return read_workspace_file(str(tool_input["path"]), self.workdir)

    def _memory(self, tool_input: Mapping[str, Any]) -> str:
        """One memory-tool command, logged with the id of the tool use that asked for it."""
        assert self.memories is not None
        return self.memories.execute(tool_input, tool_use_id=self._tool_use_id)

    def _run_tool(self, name: str, tool_input: Mapping[str, Any],
                  tool_use_id: str | None = None) -> tuple[str, bool]:
        handler = self.handlers.get(name)
        if handler is None:
            return f"unknown tool {name!r}", True
        self._tool_use_id = tool_use_id
        try:
            return handler(tool_input), False
        except (LabmemError, OSError, KeyError, ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}", True  # the model sees the error, we go on

    # -- the loop ------------------------------------------------------------------------
    def _call(self) -> Any:
        try:
            ledger = self._compact_if_needed(self.plan())
        except MessageViewLimitExceeded as exc:
            raise ChatConfigError(f"the conversation no longer fits the {self.context_limit:,}"
                                  f"-token window: {exc}") from None
        request = {"model": self.model, "max_tokens": self.max_tokens,
                   "system": self.system_prompt, "tools": self.tools, "messages": self.messages}
        if self.memories is not None:  # the memory tool is a beta of the Messages API
            response = self.client.beta.messages.create(**request, betas=[MEMORY_TOOL_BETA])
        else:
            response = self.client.messages.create(**request)
        usage = getattr(response, "usage", None)
        reported = getattr(usage, "input_tokens", None)
        self.ledgers.append(ledger if not isinstance(reported, int)
                            else ledger.with_actual(reported))
        return response

    def ask(self, question: str) -> str:
        self.messages.append({"role": "user", "content": question})
        for _ in range(self.max_tool_rounds + 1):
            response = self._call()
            content = [_block_dict(b) for b in response.content]
            self.messages.append({"role": "assistant", "content": content})
            calls = [b for b in content if b["type"] == "tool_use"]
            if response.stop_reason != "tool_use" or not calls:
                return "".join(b["text"] for b in content if b["type"] == "text")
            results = []
            for block in calls:
                output, failed = self._run_tool(block["name"], block["input"], block["id"])
                result = {"type": "tool_result", "tool_use_id": block["id"], "content": output}
                if failed:
                    result["is_error"] = True
                results.append(result)
            self.messages.append({"role": "user", "content": results})
        return f"(stopped after {self.max_tool_rounds} tool rounds without a final answer)"


def session_memory(runtime: RemoteRuntime | None = None) -> str:
    """The latest remote profile block (of ``runtime``'s store, default the default
    store), or ``""`` when there is none."""
    runtime = runtime if runtime is not None else default_runtime()
    return render_remote_profile(runtime.store.latest_profile()) or ""


def session_system_prompt() -> str:
    """The system prompt plus the latest remote profile block, if there is one."""
    profile = session_memory()
    return SYSTEM_PROMPT + ("\n\n" + profile if profile else "")


def session_memories(env: Mapping[str, str] | None = None,
                     runtime: RemoteRuntime | None = None) -> MemoryDirectory:
    """The memory tool's ``/memories`` for the chat's user, under the chat's home (the
    home and user of ``runtime``, default :func:`labmem.recall.default_runtime`; with a
    database URL the home still holds these files)."""
    env = os.environ if env is None else env
    runtime = runtime if runtime is not None else default_runtime()
    memories = MemoryDirectory(runtime.home, user_id=env.get("LABMEM_USER_ID") or "learner")
    if memories.user_scope != runtime.store.user_scope:
        raise ChatConfigError("the memory tool and recall_history would serve different "
                              "users; set LABMEM_USER_ID")
    return memories


def run_chat(stdin: TextIO | None = None, stdout: TextIO | None = None, *,
             workdir: Path | None = None, memory_tool: bool = False,
             with_examples: bool = False, database_url: str | None = None,
             database_url_field: str = "database_url") -> int:
    """Read questions line by line until EOF; print each answer.

    Everything that can be checked is checked before the session starts: the working
    directory first (``read_file`` is confined to it), then the SDK, key and model.
    ``memory_tool`` also gives the model the memory tool (see the module docstring);
    ``with_examples`` first adds the chapter's example records to the user's store (only
    then: a store holds what its user wrote). ``database_url`` (else
    ``$LABMEM_DATABASE_URL``) puts the store ``recall_history`` searches on that
    PostgreSQL server; errors name ``database_url_field``.
    """
    # read sys.stdin/stdout when called, not when this module was imported: a caller (or a
    # test) that replaced them after the import is who we talk to
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    workdir = require_workdir(Path.cwd() if workdir is None else workdir)
    client, model = runtime_client()
    runtime = default_runtime(with_examples=with_examples, database_url=database_url,
                              database_url_field=database_url_field)
    loop = AgentLoop(client, model, workdir=workdir, memory=session_memory(runtime),
                     recall=partial(recall_history, runtime=runtime),
                     memories=session_memories(runtime=runtime) if memory_tool else None)
    tools = ", ".join(t["name"] for t in loop.tools)
    stdout.write(f"labmem chat — model {model}; tools {tools}; end with Ctrl-D\n")
    for line in stdin:
        question = line.strip()
        if not question:
            continue
        stdout.write(f"assistant> {loop.ask(question)}\n")
        stdout.flush()
    return 0


def tool_log(loop: AgentLoop) -> list[dict[str, Any]]:
    """The tool calls made so far (name and input), for tests and the curious."""
    return [{"name": b["name"], "input": json.loads(json.dumps(b["input"]))}
            for m in loop.messages if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_use"]
