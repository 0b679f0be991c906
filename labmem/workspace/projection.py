"""s10 projection: MEMORY.md and the agent's context, rendered from the curated state.

``curated.json`` is canonical; ``MEMORY.md`` is a *projection* of it for people (and for
agents that read files). It is never parsed back: a hand edit is simply replaced by a
fresh rendering the next time the memory is read or distilled.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from labmem.core.clock import format_timestamp
from labmem.workspace.curation import ACTIVE, OPEN, CuratedState
from labmem.workspace.facts import KINDS, Fact

__all__ = ["render_memory_md", "WorkspaceContext"]

MAX_EVIDENCE_SHOWN = 5
SECTION_TITLES = {"decision": "Decisions", "convention": "Conventions",
                  "pitfall": "Pitfalls", "outcome": "Outcomes"}


def _one_line(text: str) -> str:
    """Keep one entry on one Markdown line, whatever the stored text contains."""
    return " ".join(text.split())


def _evidence(ids: tuple[str, ...]) -> str:
    """The first few evidence ids: curated.json keeps them all, a prompt needs a pointer."""
    shown = ", ".join(ids[:MAX_EVIDENCE_SHOWN])
    more = len(ids) - MAX_EVIDENCE_SHOWN
    return shown if more <= 0 else f"{shown} (+{more} more in curated.json)"


def render_memory_md(workspace_scope: str, state: CuratedState) -> str:
    """The human-readable view: active entries by kind, then conflicts awaiting a human."""
    lines = ["# Workspace memory", "",
             f"<!-- projection of curated.json; workspace_scope: {workspace_scope}; "
             "hand edits are replaced on the next read -->"]
    active = sorted((e for e in state.entries.values() if e.status == ACTIVE),
                    key=lambda e: (e.memory_key is None, e.memory_key or "", e.entry_id))
    for kind in KINDS:
        of_kind = [e for e in active if e.kind == kind]
        if not of_kind:
            continue
        lines += ["", f"## {SECTION_TITLES[kind]}", ""]
        for entry in of_kind:
            label = "" if entry.memory_key is None else (
                f"`{entry.memory_key}` (revision {entry.revision}): ")
            lines.append(f"- {label}{_one_line(entry.content)} — {entry.occurrences} "
                         f"occurrence(s), evidence: {_evidence(entry.evidence_ids)}")
    if len(lines) == 3:
        lines += ["", "_(nothing curated yet)_"]
    waiting = [state.conflicts[k] for k in sorted(state.conflicts)
               if state.conflicts[k].status == OPEN]
    if waiting:
        lines += ["", "## Open conflicts (nothing changed; a human decides)", ""]
        for case in waiting:
            rivals = "; ".join(f"{c.candidate_id}: {_one_line(c.content)}"
                               for c in case.candidates)
            lines.append(f"- `{case.memory_key}` ({case.conflict_id}): {rivals}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class WorkspaceContext:
    """What ``get_context_for_agent`` hands a model: the projection + recent facts.

    ``daily_files_read`` and ``bytes_read`` show the cost: only the newest daily files
    needed for ``recent_limit`` facts are opened, never the whole history.
    """

    workspace_scope: str
    memory_md: str
    recent_facts: tuple[Fact, ...]
    daily_files_read: int
    bytes_read: int

    @property
    def text(self) -> str:
        """One prompt block; stored text is escaped so it cannot close an element."""
        curated = [line for line in self.memory_md.rstrip("\n").split("\n")
                   if not line.startswith("<!--")]  # the file's header note is for people
        body = "\n".join(curated).replace("\n\n\n", "\n\n")
        lines = [f'<workspace_memory workspace_scope="{self.workspace_scope}">', "<curated>",
                 escape(body, quote=False), "</curated>", "<recent_facts>"]
        for fact in self.recent_facts:
            lines.append(f'  <fact id="{escape(fact.fact_id)}" kind="{fact.kind}" '
                         f'recorded_at="{format_timestamp(fact.recorded_at)}">'
                         f"{escape(_one_line(fact.content), quote=False)}</fact>")
        lines += ["</recent_facts>", "</workspace_memory>"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text
