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


def first_hit(result: dict) -> str:
    """The first hit's id, or what an empty store's recall says."""
    hits = result["hits"]
    return hits[0]["memory_id"] if hits else f"no hits in {result['searched_records']} records"


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
            quoted = [first_hit(json.loads(r["content"]))
                      if r["content"].startswith("{") else r["content"]
                      for m in body["messages"] if isinstance(m["content"], list)
                      for r in m["content"] if r.get("type") == "tool_result"]
            content = [{"type": "text", "text": "Answer based on " + " and ".join(quoted)}]
        return message(content, model=body["model"], turn=rounds)
