"""What memory knew before a chapter: the view every pack and ``state.json`` are built from.

The scratchpad holds the story's latest state. A pack for chapter N — built while writing
chapter N, or rebuilt later, after chapters N+1… were committed — may only use what the
results of chapters *before* N reported. :func:`known_before` is that view: items reported
at or after N are left out, and each key whose history lost an item is settled again among
the items that remain, by the scratchpad's own rule (the newest chapter wins, two values of
one chapter contradict, an uncertain claim stays tentative). A key no later chapter touched
keeps its stored items exactly.

The working memory reads three things off the same view: the protagonist snapshot (a
contradicted field shows both claims, never the last write), the open plot threads, and the
keys awaiting disambiguation (contradicted, waiting for a later chapter or a human).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from labmem.story.scratchpad import ACTIVE, CONTRADICTED, OUTDATED, TENTATIVE, MemoryItem

#: The protagonist snapshot's value for a contradicted field: ``{CONTRADICTED_MARK: [v, …]}``.
CONTRADICTED_MARK = "contradicted"


def known_before(items: Iterable[MemoryItem], chapter: int) -> list[MemoryItem]:
    """The items as memory held them before ``chapter`` was written (story order kept)."""
    items = list(items)
    hidden_keys = {item.key for item in items if item.reported_chapter >= chapter}
    if not hidden_keys:
        return items
    visible = [item for item in items if item.reported_chapter < chapter]
    settled: dict[str, MemoryItem] = {}
    for key in hidden_keys:
        settled.update((item.id, item) for item in
                       _settle([item for item in visible if item.key == key]))
    return [settled.get(item.id, item) for item in visible]


def _settle(history: list[MemoryItem]) -> list[MemoryItem]:
    """One key's remaining items, with the statuses the upsert rules give them."""
    confirmed = [item for item in history if not item.is_uncertain]
    newest = max((item.source_chapter for item in confirmed), default=0)
    current = [item for item in confirmed if item.source_chapter == newest]
    current_status = CONTRADICTED if len({item.value for item in current}) > 1 else ACTIVE
    uncertain = [item for item in history if item.is_uncertain and item.source_chapter > newest]
    last_guess = max(uncertain, key=lambda i: (i.source_chapter, i.id), default=None)

    def status(item: MemoryItem) -> str:
        if item in current:
            # one value of the newest chapter: its first report is current, repeats history
            first = next(i for i in current if i.value == item.value)
            return current_status if current_status == CONTRADICTED or first is item \
                else OUTDATED
        return TENTATIVE if item is last_guess else OUTDATED

    return [replace(item, status=status(item)) if status(item) != item.status else item
            for item in history]


def open_threads(items: Iterable[MemoryItem]) -> list[str]:
    """Subjects of the plot threads still open (active loops no chapter closed), sorted."""
    return sorted({item.subject for item in items if item.category == "open_loops"
                   and item.status == ACTIVE and not item.is_closed})


def awaiting_disambiguation(items: Iterable[MemoryItem]) -> list[str]:
    """Names of the keys whose claims contradict each other, sorted (``category:name``)."""
    return sorted({f"{item.category}:{item.name}" for item in items
                   if item.status == CONTRADICTED})


def protagonist_snapshot(recorded: Mapping[str, Any], all_items: Iterable[MemoryItem],
                         known: Iterable[MemoryItem]) -> dict[str, Any]:
    """The protagonist's fields from memory's ``known`` items, over the ``recorded`` ones.

    ``recorded`` is ``state.json``'s snapshot. A field memory keeps (any item in
    ``all_items``) takes its value from ``known``: the current value, or
    ``{"contradicted": [values]}`` while claims contradict, and nothing when only a later
    chapter reported it. A field memory never stored keeps its recorded value.
    """
    name = recorded.get("name")
    if not name:
        return dict(recorded)
    fields = {item.field for item in all_items
              if item.category == "character_state" and item.subject == name}
    snapshot = {k: v for k, v in recorded.items() if k == "name" or k not in fields}
    claims: dict[str, list[str]] = {}
    for item in known:
        if item.category == "character_state" and item.subject == name:
            if item.status == ACTIVE:
                snapshot[item.field] = item.value
            elif item.status == CONTRADICTED:
                claims.setdefault(item.field, []).append(item.value)
    snapshot.update({field: {CONTRADICTED_MARK: values} for field, values in claims.items()})
    return dict(sorted(snapshot.items()))
