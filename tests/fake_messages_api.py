"""The local Messages API server the chat tests use, on 127.0.0.1 only.

The server itself is :class:`labmem.agents.LocalMessagesAPI` (the chapter s15 drives the
SDK's tool runner with it too); this subclass only scripts the chat loop's conversation.
The first request of a conversation gets a ``tool_use`` turn (recall_history, then
read_file); once the request carries tool results, it answers with text that quotes
what the tools returned — so a test can see the whole round trip went through the real
SDK, over HTTP, and back.
"""

from __future__ import annotations

import json

from labmem.agents import LocalMessagesAPI, assistant_turns, message, tool_results


class FakeMessagesAPI(LocalMessagesAPI):
    def __init__(self) -> None:
        super().__init__()

    def reply(self, body: dict) -> dict:
        results = tool_results(body)
        rounds = assistant_turns(body)
        if not results:
            content = [{"type": "text", "text": "Let me check your history."},
                       {"type": "tool_use", "id": "toolu_1", "name": "recall_history",
                        "input": {"query": "SQLite persistence decision", "limit": 2}}]
        elif rounds == 1:
            content = [{"type": "tool_use", "id": "toolu_2", "name": "read_file",
                        "input": {"path": "notes.txt"}}]
        else:
            quoted = [json.loads(r["content"])["hits"][0]["memory_id"]
                      if r["content"].startswith("{") else r["content"]
                      for m in body["messages"] if isinstance(m["content"], list)
                      for r in m["content"] if r.get("type") == "tool_result"]
            content = [{"type": "text", "text": "Answer based on " + " and ".join(quoted)}]
        return message(content, model=body["model"], turn=rounds)
