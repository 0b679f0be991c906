"""A real HTTP server on 127.0.0.1 that answers the Messages API from a script.

It lets the official SDK (its client, its tool runner) run offline: the SDK sends real
requests over a real socket, and each reply is the next scripted assistant turn. The
chapter uses it to show what the model would do to its memory; the tests use it to
drive the SDK's tool runner end to end. Every request body is kept in ``requests``, and
the whole conversation it stood for in ``conversations`` (see :meth:`answer`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from labmem.core.validation import parse_json

Reply = Callable[[dict[str, Any]], dict[str, Any]]


def assistant_turns(body: dict[str, Any]) -> int:
    """How many assistant turns the conversation in a request body already has."""
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a request's last message (the answers to the tools)."""
    last = body["messages"][-1]["content"]
    return [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(last, list) else []


def message(content: list[dict[str, Any]], *, model: str, turn: int) -> dict[str, Any]:
    """One assistant message; ``tool_use`` is its stop reason when it calls a tool."""
    calls = any(block["type"] == "tool_use" for block in content)
    return {"id": f"msg_{turn}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def scripted(turns: Sequence[list[dict[str, Any]]]) -> Reply:
    """A reply function that answers turn ``n`` of the conversation with ``turns[n]``."""
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        turn = assistant_turns(body)
        if turn >= len(turns):
            return message([{"type": "text", "text": "(the script has ended)"}],
                           model=body["model"], turn=turn + 1)
        return message(list(turns[turn]), model=body["model"], turn=turn + 1)
    return reply


class LocalMessagesAPI:
    """``with LocalMessagesAPI(reply) as api:`` serves on ``api.url`` until the block ends."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        # the whole conversation each request stood for (threads expanded), in order
        self.conversations: list[list[dict[str, Any]]] = []
        self._threads: dict[str, list[dict[str, Any]]] = {}  # reply id -> conversation
        self._lock = threading.Lock()
        self._reply = reply
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet: tests and notebooks
                pass

            def do_POST(self) -> None:
                try:  # the one validating parser: too deep or not JSON is a 400, not a crash
                    body = parse_json(self.rfile.read(int(self.headers["Content-Length"])))
                except ValueError as exc:
                    body, refused = None, str(exc)
                else:
                    refused = None
                if refused is not None or not isinstance(body, dict):
                    data = json.dumps({"type": "error", "error": {
                        "type": "invalid_request_error",
                        "message": refused or "the body must be a JSON object"}}).encode()
                    self.send_response(400)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                key = self.headers.get("x-api-key") or \
                    self.headers.get("authorization", "").removeprefix("Bearer ")
                api.requests.append({"path": self.path, "body": body, "api_key": key,
                                     "beta": self.headers.get("anthropic-beta")})
                status, answer = api.answer(body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The HTTP status and body for one request, with server-side threads.

        A request may carry ``thread``: ``create`` starts a stored conversation,
        ``continue`` with ``previous_message_id`` sends only the new messages and the
        server prepends what it holds (the SDK's tool runner works this way). The script
        always sees the whole conversation.
        """
        thread = body.get("thread") or {}
        with self._lock:
            prior: list[dict[str, Any]] = []
            if thread.get("type") == "continue":
                previous = thread.get("previous_message_id")
                if previous not in self._threads:
                    return 400, {"type": "error", "error": {
                        "type": "invalid_request_error",
                        "message": f"thread.previous_message_id {previous!r} is unknown"}}
                prior = self._threads[previous]
            whole = {**body, "messages": prior + list(body["messages"])}
            reply = self.reply(whole)
            reply["id"] = f"msg_{len(self.requests):03d}"  # unique on this server
            self.conversations.append(whole["messages"])
            if thread.get("type") in ("create", "continue"):
                self._threads[reply["id"]] = whole["messages"] + [
                    {"role": "assistant", "content": reply["content"]}]
        return 200, reply

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._reply is None:
            raise NotImplementedError("pass a reply function, or override reply()")
        return self._reply(body)

    def __enter__(self) -> LocalMessagesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
