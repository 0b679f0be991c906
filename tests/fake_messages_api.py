"""A tiny local server that speaks the part of the Messages API the chat loop uses.

It runs on 127.0.0.1 only. The first request of a conversation gets a ``tool_use``
turn (recall_history, then read_file); once the request carries tool results, it
answers with text that quotes what the tools returned — so a test can see the whole
round trip went through the real SDK, over HTTP, and back.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeMessagesAPI:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append({"path": self.path, "body": body,
                                     "api_key": self.headers.get("x-api-key")
                                     or self.headers.get("authorization", "").removeprefix(
                                         "Bearer ")})
                reply = json.dumps(api.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeMessagesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def reply(body: dict) -> dict:
        last = body["messages"][-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(last, list) else []
        rounds = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if not results:
            content = [{"type": "text", "text": "Let me check your history."},
                       {"type": "tool_use", "id": "toolu_1", "name": "recall_history",
                        "input": {"query": "SQLite persistence decision", "limit": 2}}]
            stop = "tool_use"
        elif rounds == 1:
            content = [{"type": "tool_use", "id": "toolu_2", "name": "read_file",
                        "input": {"path": "notes.txt"}}]
            stop = "tool_use"
        else:
            quoted = [json.loads(r["content"])["hits"][0]["memory_id"]
                      if r["content"].startswith("{") else r["content"]
                      for m in body["messages"] if isinstance(m["content"], list)
                      for r in m["content"] if r.get("type") == "tool_result"]
            content = [{"type": "text", "text": "Answer based on " + " and ".join(quoted)}]
            stop = "end_turn"
        return {"id": f"msg_{rounds}", "type": "message", "role": "assistant",
                "model": body["model"], "content": content, "stop_reason": stop,
                "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
