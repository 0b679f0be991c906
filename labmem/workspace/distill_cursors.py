"""s10, a performance trick: a distill reads only what was appended since the last one.

``curated.json`` also records, in the same atomic write as the entries, a cursor per daily
file (bytes and lines read, and how many of them were eligible), the facts that were
eligible but are not curated yet (the *pending* facts: a group short of evidence, a rival
short of independent evidence, a key frozen by a conflict), and how many facts each key
holds that can never count again (older than its active revision: *stale* for good).
:func:`distill_since` folds the pending facts with the lines appended since the cursors —
the same result, state and report, as folding every line again (a property test holds it
to :func:`~labmem.workspace.curation.distill_facts` over every fact). A new policy, or an
earlier cutoff, reads everything again.

The seam: :class:`DistillCursors` is everything the trick remembers; ``distill_since``
with ``cursors=None`` is the plain distill (every daily file up to the cutoff day read
again), and how each file is read is a :class:`~labmem.workspace.facts.DailyReader`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.workspace.curation import (
    ACTIVE,
    OPEN,
    CuratedState,
    DistillPolicy,
    DistillReport,
    fold_facts,
)
from labmem.workspace.facts import SCHEMA_VERSION, DailyReader, Fact, day_of_file, decode_fact

__all__ = ["DistillCursors", "distill_since"]


@dataclass
class DistillCursors:
    """What ``curated.json`` remembers about the daily logs, beside the curated state.

    ``files``: for each daily file older than the cutoff day, ``[offset, lines, eligible]``
    — the bytes and lines read, and how many of those facts were eligible. The cutoff
    day's own file is read again each time (its facts cross the cutoff); ``open_file`` is
    its ``[name, offset]`` as read. ``pending``: the eligible facts of the cursored files
    that are not curated and can still count. ``dead``: per key, the eligible facts of the
    cursored files that can never count again (not newer than the key's active revision).
    ``report``: what a distill with nothing new would report (``None``: run the fold).
    ``marker``: the ``daily/`` directory's mtime (ns) when the distill that wrote these
    cursors listed the logs; ``None`` when a later write kept the cursors without listing
    them again (then the next distill with nothing new checks each file; see
    :mod:`labmem.workspace.change_marker`).
    """

    policy: dict[str, Any]
    cutoff: datetime
    files: dict[str, list[int]] = field(default_factory=dict)
    open_file: list[Any] | None = None
    resolutions: int = 0
    memory_md: str = ""
    memory_md_bytes: int = 0
    report: dict[str, int] | None = None
    pending: list[Fact] = field(default_factory=list)
    dead: dict[str, int] = field(default_factory=dict)
    marker: int | None = None

    def header(self) -> dict[str, Any]:
        """The ``distill`` member: small, so a distill with nothing new parses only it."""
        return {"policy": self.policy, "cutoff": format_timestamp(self.cutoff),
                "marker": self.marker, "open_file": self.open_file,
                "resolutions": self.resolutions, "memory_md": self.memory_md,
                "memory_md_bytes": self.memory_md_bytes, "report": self.report}

    @classmethod
    def from_document(cls, header: Mapping[str, Any], files: Mapping[str, Any],
                      pending: Sequence[Any], dead: Mapping[str, Any]) -> DistillCursors:
        marker = header["marker"]
        if marker is not None and type(marker) is not int:
            raise ValueError(f"marker {marker!r} is not a time in nanoseconds")
        return cls(policy=dict(header["policy"]),
                   cutoff=parse_timestamp(header["cutoff"], field="cutoff"),
                   files={str(k): [int(n) for n in v] for k, v in files.items()},
                   open_file=header["open_file"], resolutions=int(header["resolutions"]),
                   memory_md=str(header["memory_md"]),
                   memory_md_bytes=int(header["memory_md_bytes"]), report=header["report"],
                   pending=[decode_fact({**f, "schema_version": SCHEMA_VERSION}, f["line"])
                            for f in pending],
                   dead={str(k): int(v) for k, v in dead.items()}, marker=marker)


def distill_since(state: CuratedState, cursors: DistillCursors | None, policy: DistillPolicy,
                  as_of: datetime, last_day: date, *, daily_files: Sequence[Path],
                  workspace_scope: str, read_daily: DailyReader, marker: int | None,
                  audited: int) -> tuple[CuratedState, DistillReport, DistillCursors]:
    """Fold the pending facts and the lines appended since the cursors into ``state``.

    Equal, state and report, to folding every line of every daily file up to the
    cutoff day again: a fact a cursor has passed is curated, pending (folded again
    here) or dead (counted, as the full fold would count it, but never read again).
    ``daily_files`` are the logs oldest first, ``marker`` the change marker read before
    listing them, ``audited`` the size of the resolutions log.
    """
    cutoff = policy.cutoff(as_of)
    if cursors is None or cursors.policy != policy.to_dict() or cutoff < cursors.cutoff:
        cursors = DistillCursors(policy.to_dict(), cutoff)  # read everything again
    stable = policy.stable_kinds
    kept_dead = dict(cursors.dead)
    files: dict[str, list[int]] = {}
    candidates = list(cursors.pending)
    scanned = eligible = 0
    open_file = None
    for path in daily_files:
        day = day_of_file(path)
        if day > last_day:
            break
        cursor = cursors.files.get(path.name) if day < last_day else None
        offset, lines, counted = cursor if cursor is not None else (0, 0, 0)
        # the facts of a stable kind (no other can count under this policy), each
        # line checked all the same
        new, offset, lines = read_daily(path, workspace_scope, (offset, lines), stable)
        candidates += new
        if day < last_day:
            counted += len(new)
            files[path.name] = [offset, lines, counted]
            eligible += counted
        else:
            open_file = [path.name, offset]
            eligible += sum(1 for f in new if f.recorded_at <= cutoff)
        scanned += lines
    held_before = {c.memory_key for c in state.conflicts.values() if c.status == OPEN}
    after, folded, uncurated = fold_facts(state, candidates, policy=policy, as_of=as_of)

    # what stays: the eligible facts that are not curated, pending or dead for good
    active = {e.memory_key: e for e in after.entries.values()
              if e.memory_key is not None and e.status == ACTIVE}
    held = {c.memory_key for c in after.conflicts.values() if c.status == OPEN}
    cutoff_day = datetime.combine(last_day, datetime.min.time(), cutoff.tzinfo)
    pending: list[Fact] = []  # (a fact before the cutoff day is in a cursored file)
    dead: Counter[str] = Counter(kept_dead)
    again_pending = 0
    again_dead: Counter[str] = Counter(kept_dead)
    newest = {k: e.last_recorded_at for k, e in active.items()}
    for fact in uncurated:
        key, at = fact.memory_key, fact.recorded_at
        if key is not None and key in newest and at <= newest[key]:
            again_dead[key] += 1
            if at < cutoff_day:
                dead[key] += 1
        else:
            again_pending += 1
            if at < cutoff_day:
                pending.append(fact)

    def split(counts: Mapping[str, int], frozen: set[str]) -> tuple[int, int]:
        return (sum(n for k, n in counts.items() if k in frozen),
                sum(n for k, n in counts.items() if k not in frozen))

    held_dead, stale_dead = split(kept_dead, held_before)
    report = DistillReport(
        scanned=scanned, eligible=eligible, created=folded.created,
        updated=folded.updated, skipped=folded.skipped + held_dead,
        superseded=folded.superseded, conflicts=folded.conflicts,
        stale=folded.stale + stale_dead)
    again_held, again_stale = split(again_dead, held)
    again = DistillReport(scanned=scanned, eligible=eligible,
                          skipped=again_pending + again_held,
                          conflicts=folded.conflicts, stale=again_stale)
    pending.sort(key=lambda f: (f.recorded_at, f.line))  # = Fact.order
    return after, report, DistillCursors(
        policy=policy.to_dict(), cutoff=cutoff, files=files, open_file=open_file,
        resolutions=audited, report=again.to_dict(), pending=pending,
        dead={k: n for k, n in sorted(dead.items()) if n}, marker=marker)
