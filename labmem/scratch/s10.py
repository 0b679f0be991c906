# Generated from notebooks/s10_workspace_memory.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""Workspace memory from scratch: a daily fact log, distill, and the curated view.

Facts are appended to one JSONL file per day and never rewritten. ``distill`` folds the
facts that are old enough into a curated view (entries, revision chains, conflicts),
written atomically to ``curated.json``; ``MEMORY.md`` is rendered from the view and never
parsed back. Written in chapter s10, cell by cell.
"""

import hashlib
import json
import os
import tempfile
import unicodedata
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

STABLE_KINDS = frozenset({"decision", "convention", "pitfall"})  # an "outcome" is not


@dataclass(frozen=True)
class Fact:
    """One logged fact: what was learned, how much it matters, what it rests on."""

    fact_id: str
    recorded_at: datetime
    kind: str
    content: str
    importance: int = 3
    memory_key: str | None = None
    evidence: tuple[str, ...] = ()

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        """What makes this fact independent: its evidence, else the fact itself."""
        return self.evidence or (self.fact_id,)


@dataclass(frozen=True)
class DistillPolicy:
    """When a logged fact has proven itself enough to become curated memory."""

    minimum_age_days: int = 30
    minimum_importance: int = 4
    repeat_threshold: int = 2
    supersession_repeat_threshold: int = 2


def normalize(text: str) -> str:
    """Case, width and spacing stop mattering: two wordings of one fact compare equal."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def complete_lines(path: Path) -> list[bytes]:
    """The file's complete lines; an unterminated last line (a torn write) is not one."""
    data = path.read_bytes() if path.exists() else b""
    return data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]


def append_line(path: Path, record: dict) -> None:
    """Cut a torn tail, then write one JSON line with one ``os.write`` and ``fsync`` it."""
    created = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    if not created:
        os.truncate(path, sum(len(line) + 1 for line in complete_lines(path)))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:  # the new file's name must survive a crash too
        fsync_directory(path.parent)


def read_facts(root: Path) -> list[Fact]:
    """Every fact, day by day and line by line; a damaged line is named, never skipped."""
    facts = []
    for path in sorted((root / "daily").glob("*.jsonl")):
        for number, raw in enumerate(complete_lines(path), start=1):
            try:
                record = json.loads(raw)
                facts.append(Fact(**{**record, "evidence": tuple(record["evidence"]),
                                     "recorded_at": datetime.fromisoformat(
                                         record["recorded_at"])}))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path.name} line {number}: not a fact ({exc})") from None
    return facts


def is_promotable(facts: list[Fact], policy: DistillPolicy) -> bool:
    """May this group of same-valued facts become a curated entry?"""
    if max(f.importance for f in facts) >= policy.minimum_importance:
        return True
    evidence = {e for f in facts for e in f.evidence_ids}
    return len(evidence) >= policy.repeat_threshold


@dataclass(frozen=True)
class Entry:
    """One curated memory: a merged group of facts, or one revision of a keyed value."""

    entry_id: str
    kind: str
    content: str
    memory_key: str | None
    revision: int | None
    status: str  # "active", "superseded", or "candidate" in a conflict
    importance: int
    evidence_ids: tuple[str, ...]
    fact_ids: tuple[str, ...]
    first_recorded_at: datetime
    last_recorded_at: datetime
    supersedes: str | None = None
    superseded_by: str | None = None
    resolved_by: str | None = None

    @property
    def occurrences(self) -> int:
        return len(self.fact_ids)


def entry_of(entry_id: str, facts: list[Fact], status: str = "active") -> Entry:
    """The entry ``facts`` make: the earliest wording, every id, the highest importance."""
    first = min(facts, key=lambda f: f.recorded_at)
    return Entry(entry_id, first.kind, first.content, first.memory_key, None, status,
                 max(f.importance for f in facts), evidence_ids(facts),
                 tuple(sorted(f.fact_id for f in facts)), first.recorded_at,
                 max(f.recorded_at for f in facts))


def evidence_ids(facts: list[Fact]) -> tuple[str, ...]:
    return tuple(sorted({e for f in facts for e in f.evidence_ids}))


def merged(entry: Entry, facts: list[Fact]) -> Entry:
    """``entry`` with more facts of its value folded in: a repeat, not a second copy."""
    more = entry_of(entry.entry_id, facts)
    return replace(entry, importance=max(entry.importance, more.importance),
                   evidence_ids=tuple(sorted({*entry.evidence_ids, *more.evidence_ids})),
                   fact_ids=tuple(sorted({*entry.fact_ids, *more.fact_ids})),
                   first_recorded_at=min(entry.first_recorded_at, more.first_recorded_at),
                   last_recorded_at=max(entry.last_recorded_at, more.last_recorded_at))


def group_id(fact: Fact) -> str:
    """Same kind + same normalized text = same entry, however it was worded."""
    digest = hashlib.sha256(f"{fact.kind}\n{normalize(fact.content)}".encode()).hexdigest()
    return f"entry:{digest[:12]}"


@dataclass(frozen=True)
class Verdict:
    outcome: str                  # "keep", "supersede" or "conflict"
    values: tuple[str, ...] = ()  # the winner, or the tied values (normalized, sorted)
    stale: tuple[str, ...] = ()   # ids of the rivals not newer than the active revision


def by_value(facts: list[Fact]) -> dict[str, list[Fact]]:
    groups = defaultdict(list)
    for fact in facts:
        groups[normalize(fact.content)].append(fact)
    return groups


def strongest(qualified: dict[str, list[Fact]]) -> tuple[str, tuple[str, ...]]:
    """None qualified keeps; one strongest value supersedes; a tie at the top conflicts."""
    if not qualified:
        return "keep", ()
    best = max(len(evidence_ids(fs)) for fs in qualified.values())
    top = tuple(sorted(v for v, fs in qualified.items() if len(evidence_ids(fs)) == best))
    return ("supersede" if len(top) == 1 else "conflict"), top


def judge_rivals(rivals: list[Fact], newer_than: datetime, threshold: int) -> Verdict:
    """The supersession rule for a key that already has an active revision."""
    stale = tuple(f.fact_id for f in rivals if f.recorded_at <= newer_than)
    groups = by_value([f for f in rivals if f.recorded_at > newer_than])
    qualified = {v: fs for v, fs in groups.items() if len(evidence_ids(fs)) >= threshold}
    return Verdict(*strongest(qualified), stale)


@dataclass(frozen=True)
class Conflict:
    """Equally strong rival values: the key is frozen until a human picks a candidate."""

    conflict_id: str
    memory_key: str
    base_revision: int
    candidates: tuple[Entry, ...]  # entry ids "c1", "c2", ...
    status: str = "open"
    chosen: str | None = None


@dataclass(frozen=True)
class View:
    """The curated view, as curated.json holds it: entries and conflicts by id."""

    entries: dict
    conflicts: dict

    def chain(self, key: str) -> list[Entry]:
        return sorted((e for e in self.entries.values() if e.memory_key == key),
                      key=lambda e: e.revision)

    def active(self, key: str) -> Entry | None:
        return next((e for e in self.chain(key) if e.status == "active"), None)


def link(view: View, new: Entry) -> Entry:
    """Store ``new`` as its key's next revision and link the chain both ways."""
    active = view.active(new.memory_key)
    revision = 1 if active is None else active.revision + 1
    new = replace(new, entry_id=f"{new.memory_key}#r{revision}", revision=revision,
                  status="active", supersedes=active and active.entry_id)
    if active is not None:
        view.entries[active.entry_id] = replace(active, status="superseded",
                                                superseded_by=new.entry_id)
    view.entries[new.entry_id] = new
    return new


def first_to_qualify(facts: list[Fact], policy: DistillPolicy) -> dict[str, list[Fact]]:
    """A key's first value: promotable first, walking time forward (all that tie)."""
    for moment in sorted({f.recorded_at for f in facts}):
        groups = by_value([f for f in facts if f.recorded_at <= moment])
        qualified = {v: fs for v, fs in groups.items() if is_promotable(fs, policy)}
        if qualified:
            return qualified
    return {}


def fold_key(view: View, key: str, pending: list[Fact], policy: DistillPolicy,
             report: dict) -> None:
    """One key's new facts, oldest first: confirm, supersede, go stale, or fail closed."""
    active = view.active(key)
    while True:
        if active is None:
            groups = first_to_qualify(pending, policy)
            outcome, values = strongest(groups)
        else:  # a confirmation must be newer than the revision the active one replaced
            floor = active.supersedes and view.entries[active.supersedes].last_recorded_at
            same = {f.fact_id for f in pending if normalize(f.content) == normalize(
                active.content) and (floor is None or f.recorded_at > floor)}
            if same:
                active = view.entries[active.entry_id] = merged(
                    active, [f for f in pending if f.fact_id in same])
                report["touched"].add(active.entry_id)
            verdict = judge_rivals([f for f in pending if f.fact_id not in same],
                                   active.last_recorded_at, policy.supersession_repeat_threshold)
            report["stale"] += len(verdict.stale)
            pending = [f for f in pending if f.fact_id not in same | set(verdict.stale)]
            outcome, values, groups = verdict.outcome, verdict.values, by_value(pending)
        if outcome != "supersede":  # keep, or a conflict: these facts wait in the log
            report["skipped"] += len(pending)
            if outcome == "conflict":
                base = 0 if active is None else active.revision
                view.conflicts[f"conflict:{key}:r{base}"] = Conflict(
                    f"conflict:{key}:r{base}", key, base, tuple(
                        entry_of(f"c{i}", groups[v], "candidate")
                        for i, v in enumerate(values, start=1)))
            return
        active = link(view, entry_of("new", groups[values[0]]))
        report["touched"].add(active.entry_id)
        report["superseded"] += active.revision > 1
        pending = [f for f in pending if f not in groups[values[0]]]


def distill(view: View, facts: list[Fact], policy: DistillPolicy, as_of: datetime) -> dict:
    """Fold every old-enough fact of a stable kind that is not curated yet into ``view``
    (in place); return the counts of what it saw and did."""
    cutoff = as_of - timedelta(days=policy.minimum_age_days)
    eligible = [f for f in facts if f.recorded_at <= cutoff and f.kind in STABLE_KINDS]
    curated = {i for e in view.entries.values() for i in e.fact_ids}
    new = [f for f in eligible if f.fact_id not in curated]
    before = set(view.entries)
    report = {"scanned": len(facts), "eligible": len(eligible), "skipped": 0,
              "superseded": 0, "stale": 0, "touched": set()}
    groups = defaultdict(list)
    for fact in (f for f in new if f.memory_key is None):
        groups[group_id(fact)].append(fact)
    for entry_id, group in sorted(groups.items()):
        if entry_id in view.entries:
            view.entries[entry_id] = merged(view.entries[entry_id], group)
        elif is_promotable(group, policy):
            view.entries[entry_id] = entry_of(entry_id, group)
        else:
            report["skipped"] += len(group)
            continue
        report["touched"].add(entry_id)
    held = {c.memory_key for c in view.conflicts.values() if c.status == "open"}
    for key in sorted({f.memory_key for f in new if f.memory_key is not None}):
        of_key = sorted((f for f in new if f.memory_key == key), key=lambda f: f.recorded_at)
        if key in held:  # frozen until a human decides
            report["skipped"] += len(of_key)
        else:
            fold_key(view, key, of_key, policy, report)
    touched = report.pop("touched")
    return {**report, "created": len(touched - before), "updated": len(touched & before),
            "conflicts": sum(c.status == "open" for c in view.conflicts.values())}


def resolve(view: View, conflict_id: str, candidate_id: str, expected_revision: int) -> Entry:
    """A human's decision: the chosen candidate becomes the key's next revision, dated
    at the newest evidence of *every* candidate, so the rivals the human has seen are
    stale from now on and cannot reopen the argument."""
    case = view.conflicts[conflict_id]
    if case.status != "open":  # a retry of the same decision is answered, not redone
        if case.chosen != candidate_id:
            raise ValueError(f"candidate_id: {conflict_id} was already resolved with "
                             f"{case.chosen!r}; a settled conflict is not reopened")
        return view.active(case.memory_key)
    chosen = next(c for c in case.candidates if c.entry_id == candidate_id)
    if expected_revision != case.base_revision:
        raise ValueError(f"expected_revision: {expected_revision} is not revision "
                         f"{case.base_revision}, which {conflict_id} was recorded against")
    new = link(view, replace(chosen, resolved_by=f"resolution:{conflict_id}",
                             last_recorded_at=max(c.last_recorded_at for c in case.candidates)))
    view.conflicts[conflict_id] = replace(case, status="resolved", chosen=candidate_id)
    return new


def write_atomically(path: Path, text: str) -> None:
    """Temp file, fsync, rename, fsync the directory: the old file or the new, never half."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    fsync_directory(path.parent)


def encode_view(view: View) -> str:
    return json.dumps({"entries": [asdict(view.entries[k]) for k in sorted(view.entries)],
                       "conflicts": [asdict(view.conflicts[k]) for k in sorted(view.conflicts)]},
                      ensure_ascii=False, indent=1, default=datetime.isoformat)


def decode_view(text: str) -> View:
    def entry(d: dict) -> Entry:
        return Entry(**{**d, "evidence_ids": tuple(d["evidence_ids"]),
                        "fact_ids": tuple(d["fact_ids"]),
                        "first_recorded_at": datetime.fromisoformat(d["first_recorded_at"]),
                        "last_recorded_at": datetime.fromisoformat(d["last_recorded_at"])})
    document = json.loads(text)
    return View({d["entry_id"]: entry(d) for d in document["entries"]},
                {d["conflict_id"]: Conflict(**{**d, "candidates": tuple(
                    entry(c) for c in d["candidates"])}) for d in document["conflicts"]})


def render_memory_md(view: View) -> str:
    """The projection people read: active entries, then the conflicts awaiting a human."""
    lines = ["# Workspace memory", ""]
    for e in sorted((e for e in view.entries.values() if e.status == "active"),
                    key=lambda e: (e.memory_key is None, e.memory_key or "", e.entry_id)):
        label = f"`{e.memory_key}` (revision {e.revision}): " if e.memory_key else ""
        lines.append(f"- {label}{e.content} — evidence: {', '.join(e.evidence_ids)}")
    for c in (view.conflicts[k] for k in sorted(view.conflicts)):
        if c.status == "open":
            lines.append(f"- open conflict on `{c.memory_key}`: " + "; ".join(
                f"{x.entry_id}: {x.content}" for x in c.candidates))
    return "\n".join(lines) + "\n"


class Workspace:
    """One project's memory directory: ``daily/*.jsonl``, ``curated.json``, ``MEMORY.md``."""

    def __init__(self, root: str | os.PathLike, clock) -> None:
        self.root, self.clock = Path(root), clock
        self.root.mkdir(parents=True, exist_ok=True)

    def append(self, content: str, *, kind: str, importance: int = 3,
               memory_key: str | None = None, evidence: tuple[str, ...] = (),
               recorded_at: datetime | None = None) -> Fact:
        """Log one fact in its day's file; a fact dated in the future is refused."""
        now = self.clock.now()
        at = now if recorded_at is None else recorded_at
        if at > now:
            raise ValueError(f"recorded_at: {at.isoformat()} is later than now "
                             f"({now.isoformat()}); a fact cannot be recorded in the future")
        path = self.root / "daily" / f"{at.date().isoformat()}.jsonl"
        fact = Fact(f"fact:{at.date().isoformat()}:{len(complete_lines(path)) + 1}", at,
                    kind, content, importance, memory_key, tuple(sorted(set(evidence))))
        append_line(path, {**asdict(fact), "recorded_at": at.isoformat()})
        return fact

    def facts(self) -> list[Fact]:
        return read_facts(self.root)

    def view(self) -> View:
        path = self.root / "curated.json"
        return decode_view(path.read_text("utf-8")) if path.exists() else View({}, {})

    def distill(self, policy: DistillPolicy, as_of: datetime) -> dict:
        """Read every fact, fold the new ones into the stored view, write both files."""
        view = self.view()
        report = distill(view, self.facts(), policy, as_of)
        self.save(view)
        return report

    def resolve(self, conflict_id: str, candidate_id: str, expected_revision: int) -> Entry:
        view = self.view()
        entry = resolve(view, conflict_id, candidate_id, expected_revision)
        self.save(view)
        return entry

    def save(self, view: View) -> None:
        write_atomically(self.root / "curated.json", encode_view(view))
        write_atomically(self.root / "MEMORY.md", render_memory_md(view))
