"""MemoryOrchestrator: one memory pack per chapter, inside a token budget.

The pack has three memory layers plus what the writer must not break::

    working_memory     outline of this chapter, protagonist snapshot, latest summaries,
                       open plot threads, keys awaiting disambiguation
    episodic_memory    recent evidence from index.db (state changes, relations, appearances),
                       each under the story chapter it is about; late reports are marked
    semantic_memory    current scratchpad items the outline mentions (subject, field or
                       value) or from recent chapters; tentative ones marked ``[tentative]``
    active_constraints world rules and still-open loops
    recent_changes     values that a recent chapter replaced (old → new)
    warnings           contradictions, a missing outline

The pack for chapter N is built from what chapters before N reported
(:func:`labmem.story.known.known_before`), whatever order the chapters were committed in:
a pack rebuilt after chapter N+1 was committed does not leak N+1's facts.

Fixes over the original: a missing outline gives a warning *and* ``outline=None`` (the
warning text is never used as the outline, where it would "mention" random items);
the budget is enforced: every line is costed with :func:`labmem.core.text.estimate_tokens`,
the cheapest-to-lose lines go first, and each cut line is listed in ``cut``; and stored
values are printed through :data:`PACK_FORMAT` (:mod:`labmem.core.render`), so a value
holding a newline and ``[active_constraints]`` cannot forge a section or a rule: every
line break is escaped, and so are ``[``, ``]`` and ``=`` (plus, per field, the delimiter
that follows it on its line).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Any

from labmem.core.render import BlockFormat, join_lines
from labmem.core.text import estimate_tokens
from labmem.story.errors import StoryValidationError
from labmem.story.evidence import read_state, read_summary, summary_chapters
from labmem.story.index import ChapterIndex
from labmem.story.known import (
    CONTRADICTED_MARK,
    awaiting_disambiguation,
    known_before,
    open_threads,
    protagonist_snapshot,
)
from labmem.story.matching import MentionText
from labmem.story.project import StoryProject, require_chapter
from labmem.story.scratchpad import (
    ACTIVE,
    CONTRADICTED,
    OUTDATED,
    TENTATIVE,
    MemoryItem,
    load_scratchpad,
)

SECTIONS = ("working_memory", "episodic_memory", "semantic_memory", "active_constraints",
            "recent_changes", "warnings")
CONSTRAINT_CATEGORIES = ("world_rules", "open_loops")

#: Cut order: lower tiers go first; inside a tier, the oldest chapter goes first. Plot
#: threads repeat the open loops' subjects, so they go before the loops themselves; keys
#: awaiting disambiguation go late, just before the constraints.
CUT_TIERS = {"episodic_memory": 0, "recent_changes": 1, "semantic_tentative": 2,
             "semantic_window": 3, "recent_summaries": 4, "plot_threads": 5,
             "semantic_mentioned": 6, "disambiguation": 7, "open_loops": 8, "world_rules": 9}
#: Working-memory lines that are cut like the others (the outline and protagonist are not).
WORKING_TIERS = ("recent_summaries", "plot_threads", "disambiguation")
#: Marks the renderer adds after a line's fields; stored text cannot print ``[`` or ``]``.
TENTATIVE_MARK = " [tentative]"


#: The pack's syntax: ``[section]`` headers, ``[category] name = value (ch N)`` items,
#: ``key=value; …`` attributes. Stored text never prints ``[``, ``]`` or ``=`` raw.
PACK_FORMAT = BlockFormat("memory_pack", reserved="[]=")


def pack_text(value: str, field: str, delimiters: str = "") -> str:
    """Stored text as one field of a pack line (``delimiters``: what follows the field)."""
    return PACK_FORMAT.text(value, field, reserved=delimiters)


def line_cost(text: str) -> int:
    """Tokens one rendered line adds to the pack: its text plus the newline."""
    return estimate_tokens(text) + 1


def item_name(item: MemoryItem) -> str:
    """``subject.field`` (or the subject alone), before escaping."""
    return item.name


def render_item(item: MemoryItem) -> str:
    """``[category] name = value (ch N)``, plus ``[tentative]`` for an uncertain claim."""
    return (f"[{item.category}] {pack_text(item_name(item), 'item.name')} = "
            f"{pack_text(item.value, 'item.value')} (ch {item.source_chapter})"
            + (TENTATIVE_MARK if item.status == TENTATIVE else ""))


@dataclass(frozen=True)
class MemoryPack:
    chapter: int
    working_memory: dict[str, Any]
    episodic_memory: tuple[str, ...]
    semantic_memory: tuple[str, ...]
    active_constraints: tuple[str, ...]
    recent_changes: tuple[str, ...]
    warnings: tuple[str, ...]
    cut: tuple[dict[str, Any], ...]
    stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"chapter": self.chapter, "working_memory": self.working_memory,
                "episodic_memory": list(self.episodic_memory),
                "semantic_memory": list(self.semantic_memory),
                "active_constraints": list(self.active_constraints),
                "recent_changes": list(self.recent_changes), "warnings": list(self.warnings),
                "cut": list(self.cut), "stats": self.stats}

    def render(self) -> str:
        """The text a prompt would receive; ``estimate_tokens`` of it ≤ the budget."""
        wm = self.working_memory
        lines = ["[working_memory]"]
        if wm["outline"] is not None:
            lines.append(_outline_line(wm["outline"]))
        lines.append(_protagonist_line(wm["protagonist"]))
        for name in WORKING_TIERS:
            lines += wm[name]
        for name in SECTIONS[1:]:
            lines.append(f"[{name}]")
            lines += getattr(self, name)
        return join_lines(lines, "memory_pack")


def _outline_line(outline: str) -> str:
    return f"outline: {pack_text(outline, 'outline')}"


def _protagonist_value(value: Any) -> str:
    """A field's value, or ``[contradicted] a | b`` while its claims contradict."""
    if isinstance(value, dict) and set(value) == {CONTRADICTED_MARK}:
        return f"[{CONTRADICTED_MARK}] " + " | ".join(
            pack_text(str(v), "protagonist.value", ";|") for v in value[CONTRADICTED_MARK])
    return pack_text(str(value), "protagonist.value", ";|")


def _protagonist_line(protagonist: dict[str, Any]) -> str:
    pairs = [f"{pack_text(str(k), 'protagonist.key', ';')}={_protagonist_value(v)}"
             for k, v in protagonist.items()]
    return "protagonist: " + ("; ".join(pairs) or "unknown")


def _late_mark(story_chapter: int, reported_chapter: int) -> str:
    return f" [late: reported in ch{reported_chapter}]" if story_chapter < reported_chapter \
        else ""


@dataclass(frozen=True)
class _Line:
    section: str
    tier: str
    chapter: int
    order: int
    text: str


class MemoryOrchestrator:
    """Reads every store of one project; writes nothing."""

    def __init__(self, project: StoryProject, *, chapter_window: int = 3,
                 summary_count: int = 2) -> None:
        self.project = project
        self.chapter_window = chapter_window
        self.summary_count = summary_count

    def build_memory_pack(self, chapter: int, *, outline: str | None = None,
                          budget: int) -> MemoryPack:
        chapter = require_chapter(chapter)
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
            raise StoryValidationError("budget", f"must be a positive token count, got {budget!r}")
        warnings: list[str] = []
        if outline is None and self.project.outline_path(chapter).exists():
            outline = self.project.outline_path(chapter).read_text(encoding="utf-8").strip()
        if outline is None or not str(outline).strip():
            warnings.append(f"no outline for chapter {chapter}: semantic memory uses the "
                            f"chapter window only")
            outline = None
        pad = load_scratchpad(self.project.scratchpad_path)
        known = known_before(pad.items, chapter)  # nothing chapter N or later reported
        warnings += _contradiction_warnings(known)
        protagonist = protagonist_snapshot(read_state(self.project)["protagonist"], pad.items,
                                           known)
        first = max(1, chapter - self.chapter_window)
        lines = self._candidate_lines(known, chapter, first, outline)

        fixed = [f"[{name}]" for name in SECTIONS] + [_protagonist_line(protagonist), *warnings]
        if outline is not None:
            fixed.append(_outline_line(outline))
        fixed_cost = sum(line_cost(t) for t in fixed)
        if fixed_cost > budget:
            raise StoryValidationError(
                "budget", f"is {budget} tokens but the outline, protagonist and warnings alone "
                          f"need {fixed_cost}", "raise the budget or shorten the outline")
        total = fixed_cost + sum(line_cost(line.text) for line in lines)
        before = total
        heap = [(CUT_TIERS[line.tier], line.chapter, line.order, line) for line in lines]
        heapq.heapify(heap)  # pop only as many as the budget needs, no full sort
        cut_ids: set[int] = set()
        cut: list[dict[str, Any]] = []
        while total > budget:
            _, _, order, line = heapq.heappop(heap)
            total -= line_cost(line.text)
            cut_ids.add(order)
            cut.append({"section": line.section, "tier": line.tier, "text": line.text,
                        "tokens": line_cost(line.text)})
        kept = [line for line in lines if line.order not in cut_ids]

        def section(name: str) -> tuple[str, ...]:
            return tuple(line.text for line in kept if line.section == name)

        pack = MemoryPack(
            chapter=chapter,
            working_memory={"outline": outline, "protagonist": protagonist,
                            **{name: list(section(name)) for name in WORKING_TIERS}},
            episodic_memory=section("episodic_memory"),
            semantic_memory=section("semantic_memory"),
            active_constraints=section("active_constraints"),
            recent_changes=section("recent_changes"), warnings=tuple(warnings),
            cut=tuple(cut))
        stats = {"budget": budget, "tokens_before_cut": before, "tokens": total,
                 "rendered_tokens": estimate_tokens(pack.render()), "lines_cut": len(cut),
                 "semantic_items": len(pack.semantic_memory)}
        return replace(pack, stats=stats)

    def _candidate_lines(self, items: list[MemoryItem], chapter: int, first: int,
                         outline: str | None) -> list[_Line]:
        lines: list[_Line] = []

        def add(section: str, tier: str, source_chapter: int, text: str) -> None:
            lines.append(_Line(section, tier, source_chapter, len(lines), text))

        for number in [c for c in summary_chapters(self.project) if c < chapter][
                -self.summary_count:]:
            summary = read_summary(self.project, number)
            add("recent_summaries", "recent_summaries", number,
                f"ch{number} {pack_text(summary.title, 'summary.title', ':')}: "
                f"{pack_text(summary.text, 'summary.text')}")
        for thread in open_threads(items):
            add("plot_threads", "plot_threads", chapter,
                f"plot thread: {pack_text(thread, 'plot_thread')}")
        for name in awaiting_disambiguation(items):
            add("disambiguation", "disambiguation", chapter,
                f"awaiting disambiguation: {pack_text(name, 'disambiguation')}")
        index = ChapterIndex(self.project.index_path)
        for row in index.state_changes(first, chapter - 1):
            # the chapter the fact is about, not the one that reported it (Limit 5)
            add("episodic_memory", "episodic_memory", row.chapter,
                f"ch{row.source_chapter} state "
                f"{pack_text(f'{row.entity}.{row.field}', 'state.name', '>')} -> "
                f"{pack_text(row.new, 'state.new')}"
                + _late_mark(row.source_chapter, row.chapter)
                + ("" if row.certainty == "confirmed" else TENTATIVE_MARK))
        for rel in index.relationships(first, chapter - 1):
            add("episodic_memory", "episodic_memory", rel.chapter,
                f"ch{rel.chapter} relation {pack_text(rel.source, 'relation.source', '>')} -> "
                f"{pack_text(rel.target, 'relation.target', ':')}: "
                f"{pack_text(rel.kind, 'relation.kind')}")
        seen: dict[int, list[str]] = {}
        for number, entity in index.appearances(first, chapter - 1):
            seen.setdefault(number, []).append(entity)
        for number, names in seen.items():
            add("episodic_memory", "episodic_memory", number,
                f"ch{number} appearances: "
                + ", ".join(pack_text(name, "appearance", ",") for name in names))

        mention_text = MentionText.of(outline) if outline is not None else None
        for item in items:
            if item.status not in (ACTIVE, TENTATIVE) or item.is_closed:
                continue
            mentioned = mention_text is not None and _mentioned(item, mention_text)
            if item.status == TENTATIVE:  # shown as such, never a constraint, cut early
                if mentioned or item.source_chapter >= first:
                    add("semantic_memory", "semantic_tentative", item.source_chapter,
                        render_item(item))
            elif item.category in CONSTRAINT_CATEGORIES:
                add("active_constraints", item.category, item.source_chapter, render_item(item))
            elif mentioned:
                add("semantic_memory", "semantic_mentioned", item.source_chapter,
                    render_item(item))
            elif item.source_chapter >= first:
                add("semantic_memory", "semantic_window", item.source_chapter, render_item(item))
        for text, source_chapter in _recent_changes(items, first):
            add("recent_changes", "recent_changes", source_chapter, text)
        return lines


def _mentioned(item: MemoryItem, outline: MentionText) -> bool:
    """The outline names the item's subject, its field or its value (Limit 2: the original
    looked at subject and field only)."""
    return any(outline.mentions(part) for part in (item.subject, item.field, item.value)
               if part)


def _contradiction_warnings(items: list[MemoryItem]) -> list[str]:
    groups: dict[tuple[str, ...], list[MemoryItem]] = {}
    for item in items:
        if item.status == CONTRADICTED:
            groups.setdefault(item.key, []).append(item)
    warnings = []
    for key in sorted(groups):
        claims = groups[key]
        name = "/".join(part for part in key[1:] if part)
        values = " vs ".join(pack_text(repr(i.value), "contradiction.value") for i in claims)
        warnings.append(f"contradiction: {key[0]} {pack_text(name, 'contradiction.name', ':')} "
                        f"at chapter {claims[0].source_chapter}: {values}")
    return warnings


def _recent_changes(items: list[MemoryItem], first: int) -> list[tuple[str, int]]:
    """Active values set in the window that replaced an older value of the same key."""
    previous: dict[tuple[str, ...], MemoryItem] = {}
    for item in items:
        if item.status == OUTDATED and not item.payload.get("late_arrival"):
            best = previous.get(item.key)
            if best is None or item.source_chapter > best.source_chapter:
                previous[item.key] = item
    changes = []
    for item in items:
        old = previous.get(item.key)
        if item.status == ACTIVE and item.source_chapter >= first and old is not None \
                and old.source_chapter < item.source_chapter:
            name = pack_text(item_name(item), "change.name", ":")
            changes.append((f"ch{item.source_chapter} {name}: "
                            f"{pack_text(old.value, 'change.old', '>')} -> "
                            f"{pack_text(item.value, 'change.new')}", item.source_chapter))
    return changes
