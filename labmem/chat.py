"""The online agent: ``labmem chat``, a small tool-using loop over the Messages API.

Everything else in labmem runs offline. This module is the one place that talks to a
model, and it does so only when :func:`runtime_client` is called — importing labmem
never needs the SDK, a key or a model name. The loop gives the model two tools:
``recall_history`` (s12, the user's stored conversation records) and ``read_file``
(confined to the working directory). The latest remote profile snapshot is injected
into the system prompt at session start, with its provenance (s12).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from labmem.core.errors import LabmemError
from labmem.recall import RECALL_HISTORY_TOOL, default_runtime, render_remote_profile

MAX_FILE_CHARS = 20_000
DEFAULT_MAX_TOOL_ROUNDS = 8
DEFAULT_MAX_TOKENS = 1_024

READ_FILE_TOOL = {
    "name": "read_file",
    "description": "Read a UTF-8 text file under the working directory (relative path).",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                     "required": ["path"]},
}
SYSTEM_PROMPT = (
    "You are a coding assistant with long-term memory. Use recall_history with a "
    "self-contained query when past conversations may matter; recalled hits are "
    "candidates with sources, not facts. Use read_file to look at the project."
)


class ChatConfigError(LabmemError):
    """``labmem chat`` cannot start: the extra, the key or the model is missing."""


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
    """One conversation: ask, let the model call tools, return its final text."""

    def __init__(self, client: Any, model: str, *, workdir: Path,
                 recall: Callable[..., str] | None = None, system: str = SYSTEM_PROMPT,
                 max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS) -> None:
        self.client = client
        self.model = model
        self.workdir = Path(workdir)
        self.recall = recall or (lambda query, limit=5: default_runtime().engine
                                 .recall(query, limit=limit).to_json())
        self.system = system
        self.max_tool_rounds = max_tool_rounds
        self.messages: list[dict[str, Any]] = []

    def _run_tool(self, name: str, tool_input: Mapping[str, Any]) -> tuple[str, bool]:
        try:
            if name == "recall_history":
                limit = int(tool_input.get("limit", 5))
                return self.recall(tool_input["query"], limit=limit), False
            if name == "read_file":
                return read_workspace_file(str(tool_input["path"]), self.workdir), False
            return f"unknown tool {name!r}", True
        except (LabmemError, OSError, KeyError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}", True  # the model sees the error, we go on

    def ask(self, question: str) -> str:
        self.messages.append({"role": "user", "content": question})
        for _ in range(self.max_tool_rounds + 1):
            response = self.client.messages.create(
                model=self.model, max_tokens=DEFAULT_MAX_TOKENS, system=self.system,
                tools=[RECALL_HISTORY_TOOL, READ_FILE_TOOL], messages=self.messages)
            content = [_block_dict(b) for b in response.content]
            self.messages.append({"role": "assistant", "content": content})
            calls = [b for b in content if b["type"] == "tool_use"]
            if response.stop_reason != "tool_use" or not calls:
                return "".join(b["text"] for b in content if b["type"] == "text")
            results = []
            for block in calls:
                output, failed = self._run_tool(block["name"], block["input"])
                result = {"type": "tool_result", "tool_use_id": block["id"], "content": output}
                if failed:
                    result["is_error"] = True
                results.append(result)
            self.messages.append({"role": "user", "content": results})
        return f"(stopped after {self.max_tool_rounds} tool rounds without a final answer)"


def session_system_prompt() -> str:
    """The system prompt plus the latest remote profile block, if there is one."""
    profile = render_remote_profile(default_runtime().store.latest_profile())
    return SYSTEM_PROMPT + ("\n\n" + profile if profile else "")


def run_chat(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout, *,
             workdir: Path | None = None) -> int:
    """Read questions line by line until EOF; print each answer.

    Everything that can be checked is checked before the session starts: the working
    directory first (``read_file`` is confined to it), then the SDK, key and model.
    """
    workdir = require_workdir(Path.cwd() if workdir is None else workdir)
    client, model = runtime_client()
    loop = AgentLoop(client, model, workdir=workdir, system=session_system_prompt())
    stdout.write(f"labmem chat — model {model}; end with Ctrl-D\n")
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
