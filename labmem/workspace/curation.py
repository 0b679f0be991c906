"""s10 curation: how raw facts become curated memory, as pure functions.

``distill`` reads facts that are old enough (``recorded_at <= as_of - minimum_age_days``)
and of a *stable* kind, and folds them into the curated state:

* **Unkeyed facts** merge by ``(kind, normalized content)``. A group becomes a curated
  entry when one of its facts is important enough or when it is backed by enough
  *independent* evidence ids (a repeat). The entry keeps every evidence id, every fact
  id and the occurrence count; later repeats update it.
* **Keyed facts** (``memory_key``) form a revision chain. Revision 1 is the first value
  (walking time forward) that qualifies like an unkeyed group. After that, the active
  revision changes only when a rival value has enough independent evidence *newer than
  everything the active revision rests on*; older rival evidence is **stale** and cannot
  roll the key back. When the strongest rival values are equally strong the key **fails
  closed**: nothing changes and a :class:`ConflictCase` waits for a human.

Nothing here touches a file: :mod:`labmem.workspace.memory` loads the state, calls
these functions and writes the result. Because the fold only ever adds facts that are
not yet curated, running it twice with the same inputs gives the same state.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.core.errors import validated_as
from labmem.core.text import normalize_text as _normalize_text
from labmem.core.validation import require_int
from labmem.workspace.facts import (
    KINDS,
    STABLE_KINDS,
    Fact,
    WorkspaceValidationError,
    check_importance,
)

__all__ = ["DistillPolicy", "DistillReport", "CuratedEntry", "Candidate", "ConflictCase",
           "Resolution", "CuratedState", "RivalVerdict", "distill_facts", "fold_facts",
           "apply_resolution", "is_promotable", "judge_rivals"]

ACTIVE, SUPERSEDED = "active", "superseded"

#: The fold compares normalized texts again and again (each repeat of a fact, each step
#: of a key's chain): normalizing is pure, so each distinct text is normalized once.
normalize_text = functools.lru_cache(maxsize=1 << 16)(_normalize_text)

#: The same order as :attr:`Fact.order` (time, day file, line), without building the day's
#: name: a fact's day file is the UTC day of its ``recorded_at``, so equal times mean the
#: same file, and the line decides.
_in_order = operator.attrgetter("recorded_at", "line")
OPEN, RESOLVED = "open", "resolved"
KEEP, SUPERSEDE, CONFLICT = "keep", "supersede", "conflict"
# (``map`` with these walks a group's facts in C)
_importance = operator.attrgetter("importance")
_fact_id = operator.attrgetter("fact_id")
_evidence = operator.attrgetter("evidence")


def _evidence_union(facts: Sequence[Fact]) -> set[str]:
    """Every fact's :attr:`Fact.evidence_ids`, as one set."""
    evidence = list(map(_evidence, facts))
    if all(evidence):  # the common case: each fact names its evidence
        return set().union(*evidence)
    return set().union(*(f.evidence_ids for f in facts))


def _count(name: str, value: Any, minimum: int) -> int:
    return validated_as(WorkspaceValidationError, require_int, value, f"policy.{name}",
                        minimum=minimum)


@dataclass(frozen=True)
class DistillPolicy:
    """When a logged fact is trusted enough to become curated memory."""

    minimum_age_days: int = 30
    minimum_importance: int = 4
    repeat_threshold: int = 2
    supersession_repeat_threshold: int = 2
    stable_kinds: frozenset[str] = STABLE_KINDS

    def __post_init__(self) -> None:
        _count("minimum_age_days", self.minimum_age_days, 0)
        try:
            check_importance(self.minimum_importance)
        except WorkspaceValidationError as exc:
            raise WorkspaceValidationError("policy.minimum_importance", exc.problem) from None
        _count("repeat_threshold", self.repeat_threshold, 1)
        _count("supersession_repeat_threshold", self.supersession_repeat_threshold, 1)
        kinds = self.stable_kinds
        if isinstance(kinds, str) or not isinstance(kinds, Iterable) or \
                not set(kinds) <= set(KINDS):
            raise WorkspaceValidationError(
                "policy.stable_kinds", f"must be a set of fact kinds, got {kinds!r}",
                f"choose from {', '.join(KINDS)}")
        object.__setattr__(self, "stable_kinds", frozenset(kinds))

    def cutoff(self, as_of: datetime) -> datetime:
        """Facts recorded at or before this instant are old enough to distill."""
        return as_of - timedelta(days=self.minimum_age_days)

    def to_dict(self) -> dict[str, Any]:
        return {"minimum_age_days": self.minimum_age_days,
                "minimum_importance": self.minimum_importance,
                "repeat_threshold": self.repeat_threshold,
                "supersession_repeat_threshold": self.supersession_repeat_threshold,
                "stable_kinds": sorted(self.stable_kinds)}


@dataclass(frozen=True)
class DistillReport:
    """What one ``distill`` run saw and did.

    ``scanned``, ``eligible``, ``skipped`` and ``stale`` count facts (eligible facts that
    were curated earlier count only as eligible); ``created``, ``updated`` and
    ``superseded`` count curated entries; ``conflicts`` counts the keys that are held by
    an open conflict after the run (new or still waiting for a human).
    """

    scanned: int = 0
    eligible: int = 0
    created: int = 0
    updated: int = 0
    skipped: int = 0
    superseded: int = 0
    conflicts: int = 0
    stale: int = 0

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in (
            "scanned", "eligible", "created", "updated", "skipped", "superseded", "conflicts",
            "stale")}


def _ts(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def _parse(value: Any, name: str) -> datetime | None:
    return None if value is None else parse_timestamp(value, field=name)


@dataclass(frozen=True)
class CuratedEntry:
    """One curated memory: a merged fact group, or one revision of a keyed value."""

    entry_id: str
    kind: str
    content: str
    memory_key: str | None
    revision: int | None
    status: str
    importance: int
    evidence_ids: tuple[str, ...]
    fact_ids: tuple[str, ...]
    occurrences: int
    first_recorded_at: datetime
    last_recorded_at: datetime
    supersedes: str | None = None
    superseded_by: str | None = None
    resolved_by: str | None = None

    def merged(self, facts: list[Fact]) -> CuratedEntry:
        """This entry with more facts of the same content folded in."""
        return self._absorbed(_Group.of(facts)) if facts else self

    def _absorbed(self, group: _Group) -> CuratedEntry:
        """:meth:`merged` with the group's facts already summed up."""
        return replace(
            self,
            importance=max(self.importance, group.importance),
            evidence_ids=tuple(sorted(group.evidence.union(self.evidence_ids))),
            fact_ids=tuple(sorted(set(self.fact_ids).union(group.fact_ids))),
            occurrences=self.occurrences + len(group.facts),
            first_recorded_at=min(self.first_recorded_at, group.first_order[0]),
            last_recorded_at=max(self.last_recorded_at, group.last),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id, "kind": self.kind, "content": self.content,
            "memory_key": self.memory_key, "revision": self.revision, "status": self.status,
            "importance": self.importance, "evidence_ids": list(self.evidence_ids),
            "fact_ids": list(self.fact_ids), "occurrences": self.occurrences,
            "first_recorded_at": _ts(self.first_recorded_at),
            "last_recorded_at": _ts(self.last_recorded_at),
            "supersedes": self.supersedes, "superseded_by": self.superseded_by,
            "resolved_by": self.resolved_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CuratedEntry:
        return cls(
            entry_id=data["entry_id"], kind=data["kind"], content=data["content"],
            memory_key=data["memory_key"], revision=data["revision"], status=data["status"],
            importance=data["importance"], evidence_ids=tuple(data["evidence_ids"]),
            fact_ids=tuple(data["fact_ids"]), occurrences=data["occurrences"],
            first_recorded_at=parse_timestamp(data["first_recorded_at"], field="first"),
            last_recorded_at=parse_timestamp(data["last_recorded_at"], field="last"),
            supersedes=data["supersedes"], superseded_by=data["superseded_by"],
            resolved_by=data["resolved_by"],
        )


def _new_entry(entry_id: str, facts: list[Fact] | _Group, *, memory_key: str | None = None,
               revision: int | None = None, supersedes: str | None = None) -> CuratedEntry:
    group = facts if isinstance(facts, _Group) else _Group.of(facts)
    first = group.first  # the earliest fact gives the entry its wording
    # = an entry of no facts with the first fact's wording and time, _absorbed(group)
    return CuratedEntry(entry_id=entry_id, kind=first.kind, content=first.content,
                        memory_key=memory_key, revision=revision, status=ACTIVE,
                        importance=group.importance,
                        evidence_ids=tuple(sorted(group.evidence)),
                        fact_ids=tuple(sorted(set(group.fact_ids))),
                        occurrences=len(group.facts), first_recorded_at=first.recorded_at,
                        last_recorded_at=group.last, supersedes=supersedes)


class _Group:
    """Facts of one value, summed up in one walk: what an entry takes from them.

    A group's facts lie all over the history (and all over memory): one walk that takes
    every sum costs less than a walk per sum (highest importance, evidence, first fact,
    last time, ids).
    """

    __slots__ = ("facts", "importance", "evidence", "first", "first_order", "last")

    def __init__(self, fact: Fact) -> None:
        self.facts = [fact]
        self.importance = fact.importance
        self.evidence = set(fact.evidence_ids)
        self.first = fact  # the earliest by Fact.order: (time, line) within a day's file
        self.first_order = (fact.recorded_at, fact.line)
        self.last = fact.recorded_at

    @property
    def fact_ids(self) -> Iterator[str]:
        return map(_fact_id, self.facts)

    @classmethod
    def of(cls, facts: Sequence[Fact]) -> _Group:
        """The group of ``facts`` (not empty), summed in one loop with no call per fact (a
        first distill sums 60k facts into groups; a test holds it to a fact-by-fact sum)."""
        group = cls(facts[0])
        importance, evidence, first, first_order, last = \
            group.importance, group.evidence, group.first, group.first_order, group.last
        for fact in itertools.islice(facts, 1, None):
            if fact.importance > importance:
                importance = fact.importance
            evidence.update(fact.evidence or fact.evidence_ids)
            at = fact.recorded_at
            if at <= first_order[0] and (at, fact.line) < first_order:
                first, first_order = fact, (at, fact.line)
            if at > last:
                last = at
        group.facts = list(facts)
        group.importance, group.first, group.first_order, group.last = \
            importance, first, first_order, last
        return group


@functools.lru_cache(maxsize=1 << 16)
def group_id(kind: str, content: str) -> str:
    """The id of an unkeyed entry: same kind + same normalized content = same entry."""
    digest = hashlib.sha256(f"{kind}\n{normalize_text(content)}".encode()).hexdigest()
    return f"entry:{digest[:12]}"


def revision_id(memory_key: str, revision: int) -> str:
    return f"{memory_key}#r{revision}"


@dataclass(frozen=True)
class Candidate:
    """One rival value in a conflict, with the evidence behind it."""

    candidate_id: str
    content: str
    kind: str
    importance: int
    evidence_ids: tuple[str, ...]
    fact_ids: tuple[str, ...]
    first_recorded_at: datetime
    last_recorded_at: datetime

    @property
    def strength(self) -> int:
        return len(self.evidence_ids)

    def to_dict(self) -> dict[str, Any]:
        return {"candidate_id": self.candidate_id, "content": self.content, "kind": self.kind,
                "importance": self.importance, "strength": self.strength,
                "evidence_ids": list(self.evidence_ids), "fact_ids": list(self.fact_ids),
                "first_recorded_at": _ts(self.first_recorded_at),
                "last_recorded_at": _ts(self.last_recorded_at)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        return cls(data["candidate_id"], data["content"], data["kind"], data["importance"],
                   tuple(data["evidence_ids"]), tuple(data["fact_ids"]),
                   parse_timestamp(data["first_recorded_at"], field="first_recorded_at"),
                   parse_timestamp(data["last_recorded_at"], field="last_recorded_at"))


@dataclass(frozen=True)
class Resolution:
    """A human's decision on a conflict — also the line in the append-only audit log."""

    resolution_id: str
    conflict_id: str
    memory_key: str
    candidate_id: str
    expected_revision: int
    actor: str
    rationale: str
    resolved_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"resolution_id": self.resolution_id, "conflict_id": self.conflict_id,
                "memory_key": self.memory_key, "candidate_id": self.candidate_id,
                "expected_revision": self.expected_revision, "actor": self.actor,
                "rationale": self.rationale, "resolved_at": _ts(self.resolved_at)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Resolution:
        return cls(data["resolution_id"], data["conflict_id"], data["memory_key"],
                   data["candidate_id"], data["expected_revision"], data["actor"],
                   data["rationale"], parse_timestamp(data["resolved_at"], field="resolved_at"))


@dataclass(frozen=True)
class ConflictCase:
    """Equally strong rival values for one key: the key is frozen until a human decides.

    ``base_revision`` is the key's active revision when the conflict was found (0 when
    the key had no value yet); a resolution must name it as ``expected_revision``.
    """

    conflict_id: str
    memory_key: str
    base_revision: int
    base_entry_id: str | None
    detected_at: datetime
    candidates: tuple[Candidate, ...]
    status: str = OPEN
    resolution: Resolution | None = None

    def candidate(self, candidate_id: str) -> Candidate | None:
        return next((c for c in self.candidates if c.candidate_id == candidate_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {"conflict_id": self.conflict_id, "memory_key": self.memory_key,
                "base_revision": self.base_revision, "base_entry_id": self.base_entry_id,
                "detected_at": _ts(self.detected_at), "status": self.status,
                "candidates": [c.to_dict() for c in self.candidates],
                "resolution": None if self.resolution is None else self.resolution.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConflictCase:
        resolution = data["resolution"]
        return cls(data["conflict_id"], data["memory_key"], data["base_revision"],
                   data["base_entry_id"], parse_timestamp(data["detected_at"], field="detected"),
                   tuple(Candidate.from_dict(c) for c in data["candidates"]), data["status"],
                   None if resolution is None else Resolution.from_dict(resolution))


@dataclass(frozen=True)
class CuratedState:
    """Everything ``curated.json`` holds (besides its header)."""

    entries: Mapping[str, CuratedEntry] = field(default_factory=dict)
    conflicts: Mapping[str, ConflictCase] = field(default_factory=dict)

    def active_revision(self, memory_key: str) -> CuratedEntry | None:
        found = [e for e in self.entries.values()
                 if e.memory_key == memory_key and e.status == ACTIVE]
        return found[0] if found else None

    def open_conflict(self, memory_key: str) -> ConflictCase | None:
        found = [c for c in self.conflicts.values()
                 if c.memory_key == memory_key and c.status == OPEN]
        return found[0] if found else None

    def curated_fact_ids(self) -> set[str]:
        return {fid for entry in self.entries.values() for fid in entry.fact_ids}

    def to_dict(self) -> dict[str, Any]:
        return {"entries": [self.entries[k].to_dict() for k in sorted(self.entries)],
                "conflicts": [self.conflicts[k].to_dict() for k in sorted(self.conflicts)]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CuratedState:
        """The state a ``curated.json`` holds; a ``ValueError`` if it breaks an invariant.

        Each id appears once, and a key has at most one active revision (and at most one
        open conflict): two active revisions would put two contradictory values of one key
        into MEMORY.md and the agent's context, so such a document is corruption.
        """
        entries: dict[str, CuratedEntry] = {}
        active: dict[str, str] = {}  # memory key -> its active entry id
        for raw in data["entries"]:
            entry = CuratedEntry.from_dict(raw)
            if entry.entry_id in entries:
                raise ValueError(f"entry_id {entry.entry_id!r} appears twice")
            entries[entry.entry_id] = entry
            if entry.memory_key is not None and entry.status == ACTIVE:
                other = active.setdefault(entry.memory_key, entry.entry_id)
                if other != entry.entry_id:
                    raise ValueError(f"memory_key {entry.memory_key!r} has two active "
                                     f"revisions, {other!r} and {entry.entry_id!r}")
        conflicts: dict[str, ConflictCase] = {}
        open_keys: dict[str, str] = {}  # memory key -> its open conflict id
        for raw in data["conflicts"]:
            case = ConflictCase.from_dict(raw)
            if case.conflict_id in conflicts:
                raise ValueError(f"conflict_id {case.conflict_id!r} appears twice")
            conflicts[case.conflict_id] = case
            if case.status == OPEN:
                other = open_keys.setdefault(case.memory_key, case.conflict_id)
                if other != case.conflict_id:
                    raise ValueError(f"memory_key {case.memory_key!r} has two open "
                                     f"conflicts, {other!r} and {case.conflict_id!r}")
        return cls(entries, conflicts)


# -- the fold ------------------------------------------------------------------------

@dataclass
class _Tally:
    created: set[str] = field(default_factory=set)
    updated: set[str] = field(default_factory=set)
    superseded: set[str] = field(default_factory=set)
    skipped: int = 0
    stale: int = 0


def _strength(facts: Iterable[Fact]) -> int:
    """Independent evidence: distinct evidence ids, not the number of lines."""
    return len(_evidence_union(facts if isinstance(facts, (list, tuple)) else list(facts)))


def is_promotable(facts: Sequence[Fact], policy: DistillPolicy) -> bool:
    """May this group of same-valued facts become a curated entry?

    Yes when one of them is important enough on its own, or when together they rest on
    enough *independent* evidence (distinct evidence ids — the same transcript event
    logged twice is one piece of evidence, not a repeat). Age and kind are checked before
    a fact reaches a group; this is only the "proven itself" part of the rule.
    """
    return _qualifies(max(map(_importance, facts)), lambda: _strength(facts), policy)


def _qualifies(importance: int, strength: Callable[[], int], policy: DistillPolicy) -> bool:
    """:func:`is_promotable` on a group's sums: its highest importance, and (asked only
    when that is not enough) its number of distinct evidence ids."""
    return importance >= policy.minimum_importance or strength() >= policy.repeat_threshold


@dataclass(frozen=True)
class RivalVerdict:
    """What a key's rival facts come to against its active revision, in one step.

    ``outcome`` is ``"keep"`` (no rival value has enough new evidence: nothing changes),
    ``"supersede"`` (``values`` holds the one winning value, which becomes the next
    revision) or ``"conflict"`` (``values`` holds the equally strong strongest values,
    sorted: the key fails closed and waits for a human). Values are normalized text.
    ``stale`` lists the ids of the rival facts that are not newer than the active
    revision: they are counted and ignored, so old notes can never roll a key back.
    """

    outcome: str
    values: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()


def _by_value(facts: Iterable[Fact]) -> dict[str, list[Fact]]:
    groups: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        groups[normalize_text(fact.content)].append(fact)
    return groups


def _outcome(qualified: Mapping[str, list[Fact]]) -> tuple[str, tuple[str, ...]]:
    """The outcome among qualified values, and the values with the most independent
    evidence, sorted: none qualified keeps, one strongest supersedes, a tie conflicts."""
    if not qualified:
        return KEEP, ()
    best = max(_strength(fs) for fs in qualified.values())
    strongest = tuple(sorted(v for v, fs in qualified.items() if _strength(fs) == best))
    return (SUPERSEDE if len(strongest) == 1 else CONFLICT), strongest


def judge_rivals(rivals: Sequence[Fact], newer_than: datetime,
                 threshold: int) -> RivalVerdict:
    """The supersession rule for one key that already has an active revision.

    ``rivals`` are the key's new facts that do not confirm the active value;
    ``newer_than`` is the active revision's ``last_recorded_at``; ``threshold`` is the
    policy's ``supersession_repeat_threshold``. A rival at or before ``newer_than`` is
    stale. The newer ones are grouped by normalized value; a value qualifies with at
    least ``threshold`` distinct evidence ids. The single strongest qualified value
    supersedes; equally strong strongest values are a conflict; no qualified value keeps.
    """
    stale = tuple(f.fact_id for f in rivals if f.recorded_at <= newer_than)
    groups = _by_value(f for f in rivals if f.recorded_at > newer_than)
    qualified = {v: fs for v, fs in groups.items() if _strength(fs) >= threshold}
    outcome, values = _outcome(qualified)
    return RivalVerdict(outcome, values, stale)


def distill_facts(state: CuratedState, facts: Iterable[Fact], *, policy: DistillPolicy,
                  as_of: datetime) -> tuple[CuratedState, DistillReport]:
    """Fold the scanned ``facts`` into ``state``; return the new state and the report."""
    new_state, report, _ = fold_facts(state, facts, policy=policy, as_of=as_of)
    return new_state, report


def fold_facts(state: CuratedState, facts: Iterable[Fact], *, policy: DistillPolicy,
               as_of: datetime) -> tuple[CuratedState, DistillReport, list[Fact]]:
    """:func:`distill_facts`, and the eligible facts that are not curated after it
    (skipped, stale, frozen or in a conflict), so that a caller need not look at every
    fact again to find them."""
    cutoff = policy.cutoff(as_of)
    entries = dict(state.entries)
    conflicts = dict(state.conflicts)
    curated = state.curated_fact_ids()
    tally = _Tally()
    facts = facts if isinstance(facts, list) else list(facts)
    scanned, eligible = len(facts), 0
    by_text: dict[tuple[str, str], list[Fact]] = defaultdict(list)  # exact text first
    keyed: dict[str, list[Fact]] = defaultdict(list)
    stable = policy.stable_kinds
    for fact in facts:
        kind = fact.kind
        if fact.recorded_at > cutoff or kind not in stable:
            continue
        eligible += 1
        if curated and fact.fact_id in curated:  # (none yet: a first distill)
            continue
        key = fact.memory_key
        if key is None:
            by_text[kind, fact.content].append(fact)
        else:
            keyed[key].append(fact)
    unkeyed: dict[str, list[Fact]] = defaultdict(list)  # then by normalized text
    for (kind, content), same_text in by_text.items():
        unkeyed[group_id(kind, content)] += same_text

    uncurated: list[Fact] = []  # may still be curated: checked against the state below
    for entry_id in sorted(unkeyed):
        group = _Group.of(unkeyed[entry_id])  # its sums, in one walk over its facts
        if entry_id in entries:
            entries[entry_id] = entries[entry_id]._absorbed(group)
            tally.updated.add(entry_id)
        elif _qualifies(group.importance, group.evidence.__len__, policy):
            entries[entry_id] = _new_entry(entry_id, group)
            tally.created.add(entry_id)
        else:
            tally.skipped += len(group.facts)
            uncurated += group.facts

    active_by_key = {e.memory_key: e for e in entries.values()
                     if e.memory_key is not None and e.status == ACTIVE}
    held_keys = {c.memory_key for c in conflicts.values() if c.status == OPEN}
    for key in sorted(keyed):
        facts_of_key = sorted(keyed[key], key=_in_order)
        uncurated += facts_of_key
        if key in held_keys:
            tally.skipped += len(facts_of_key)  # frozen until a human resolves it
            continue
        _fold_key(key, facts_of_key, active_by_key.get(key), entries, conflicts, policy,
                  as_of, tally)

    new_state = CuratedState(entries, conflicts)
    held = sum(1 for c in conflicts.values() if c.status == OPEN)
    report = DistillReport(
        scanned=scanned, eligible=eligible, created=len(tally.created),
        updated=len(tally.updated - tally.created), skipped=tally.skipped,
        superseded=len(tally.superseded), conflicts=held, stale=tally.stale)
    now_curated = new_state.curated_fact_ids()
    return new_state, report, [f for f in uncurated if f.fact_id not in now_curated]


def _fold_key(key: str, facts: list[Fact], active: CuratedEntry | None,
              entries: dict[str, CuratedEntry], conflicts: dict[str, ConflictCase],
              policy: DistillPolicy, as_of: datetime, tally: _Tally) -> None:
    """Apply one key's new facts: confirm, supersede, refuse as stale, or fail closed."""
    pending = facts
    while True:
        if active is not None:
            # a confirmation must be newer than the revision this one replaced; an older
            # fact of the same value was stale against that revision, and stays stale
            floor = None if active.supersedes is None else \
                entries[active.supersedes].last_recorded_at
            value = normalize_text(active.content)
            same: list[Fact] = []
            rivals: list[Fact] = []  # (one pass: fact ids are unique in the logs)
            for f in pending:
                if normalize_text(f.content) == value and (floor is None or
                                                           f.recorded_at > floor):
                    same.append(f)
                else:
                    rivals.append(f)
            if same:
                active = active.merged(same)
                entries[active.entry_id] = active
                if active.entry_id not in tally.created:
                    tally.updated.add(active.entry_id)
            verdict = judge_rivals(rivals, newer_than=active.last_recorded_at,
                                   threshold=policy.supersession_repeat_threshold)
            tally.stale += len(verdict.stale)
            stale_ids = set(verdict.stale)
            pending = [f for f in rivals if f.fact_id not in stale_ids] if stale_ids \
                else rivals
            outcome, strongest = verdict.outcome, verdict.values
            if outcome == KEEP:
                tally.skipped += len(pending)
                return
            groups = _by_value(pending)
        else:
            groups = _first_to_qualify(pending, policy)  # the key's first value
            outcome, strongest = _outcome(groups)
        if outcome == KEEP:
            tally.skipped += len(pending)
            return
        if outcome == CONFLICT:
            case = _conflict(key, active, [groups[v] for v in strongest], as_of)
            conflicts[case.conflict_id] = case
            tally.skipped += len(pending)
            return
        winner = groups[strongest[0]]
        active = _supersede(key, active, winner, entries, tally)
        won = {f.fact_id for f in winner}
        pending = [f for f in pending if f.fact_id not in won]


def _first_to_qualify(facts: list[Fact], policy: DistillPolicy) -> dict[str, list[Fact]]:
    """A key's first value: the one that became promotable first, walking time forward.

    Facts recorded at the same instant are taken together, so two values that qualify
    at the same moment are both returned (and compared by strength by the caller).
    """
    by_value: dict[str, list[Fact]] = defaultdict(list)
    i = 0
    while i < len(facts):
        moment = facts[i].recorded_at
        while i < len(facts) and facts[i].recorded_at == moment:
            by_value[normalize_text(facts[i].content)].append(facts[i])
            i += 1
        qualified = {v: list(fs) for v, fs in by_value.items() if is_promotable(fs, policy)}
        if qualified:
            return qualified
    return {}


def _link(key: str, active: CuratedEntry | None, new: CuratedEntry,
          entries: dict[str, CuratedEntry], tally: _Tally) -> CuratedEntry:
    """Store ``new`` as the key's active revision; mark the one it replaces."""
    if active is not None:
        entries[active.entry_id] = replace(active, status=SUPERSEDED,
                                           superseded_by=new.entry_id)
        tally.superseded.add(active.entry_id)
    entries[new.entry_id] = new
    tally.created.add(new.entry_id)
    return new


def _supersede(key: str, active: CuratedEntry | None, facts: list[Fact],
               entries: dict[str, CuratedEntry], tally: _Tally) -> CuratedEntry:
    """Make ``facts`` the key's next revision."""
    revision = 1 if active is None else active.revision + 1
    new = _new_entry(revision_id(key, revision), facts, memory_key=key, revision=revision,
                     supersedes=None if active is None else active.entry_id)
    return _link(key, active, new, entries, tally)


def _conflict(key: str, active: CuratedEntry | None, groups: list[list[Fact]],
              as_of: datetime) -> ConflictCase:
    base = 0 if active is None else active.revision
    candidates = []
    for i, facts in enumerate(groups, start=1):
        first = min(facts, key=_in_order)
        candidates.append(Candidate(
            candidate_id=f"c{i}", content=first.content, kind=first.kind,
            importance=max(f.importance for f in facts),
            evidence_ids=tuple(sorted(set().union(*(f.evidence_ids for f in facts)))),
            fact_ids=tuple(sorted(f.fact_id for f in facts)),
            first_recorded_at=first.recorded_at,
            last_recorded_at=max(f.recorded_at for f in facts)))
    return ConflictCase(conflict_id=f"conflict:{key}:r{base}", memory_key=key,
                        base_revision=base,
                        base_entry_id=None if active is None else active.entry_id,
                        detected_at=as_of, candidates=tuple(candidates))


def apply_resolution(state: CuratedState, resolution: Resolution) -> CuratedState:
    """The state after a human picked one candidate of an open conflict.

    The chosen value becomes the key's next revision. Its ``last_recorded_at`` covers
    *every* candidate's evidence, so the rivals the human has seen are stale from now
    on and cannot reopen the same argument.
    """
    case = state.conflicts[resolution.conflict_id]
    chosen = case.candidate(resolution.candidate_id)
    if case.status != OPEN or chosen is None:
        raise ValueError(f"{resolution.conflict_id} cannot take {resolution.candidate_id}")
    entries = dict(state.entries)
    conflicts = dict(state.conflicts)
    active = state.active_revision(case.memory_key)
    revision = 1 if active is None else active.revision + 1
    new = CuratedEntry(
        entry_id=revision_id(case.memory_key, revision), kind=chosen.kind,
        content=chosen.content, memory_key=case.memory_key, revision=revision, status=ACTIVE,
        importance=chosen.importance, evidence_ids=chosen.evidence_ids,
        fact_ids=chosen.fact_ids, occurrences=len(chosen.fact_ids),
        first_recorded_at=chosen.first_recorded_at,
        last_recorded_at=max(c.last_recorded_at for c in case.candidates),
        supersedes=None if active is None else active.entry_id,
        resolved_by=resolution.resolution_id)
    _link(case.memory_key, active, new, entries, _Tally())
    conflicts[case.conflict_id] = replace(case, status=RESOLVED, resolution=resolution)
    return CuratedState(entries, conflicts)
