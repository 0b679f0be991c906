"""The story contract suite: what the case study's scratchpad promises, contract by contract.

``SUITE`` runs on any implementation that offers the operations the chapter builds:

* ``Scratchpad(items=..., next_id=..., clock=...)`` with ``upsert(category=, subject=,
  field=, value=, source_chapter=, evidence=, payload=)`` → an outcome with ``action`` and
  ``item``; ``items``, ``next_id``, ``contradictions()``, ``open_loops()`` and
  ``save(path)``;
* ``MemoryItem(id, layer, category, subject, field, value, payload, status,
  source_chapter, evidence, updated_at)`` and ``claim_action(stored, claim)``;
* ``load_scratchpad(path, clock=...)`` and ``compact(pad, current_chapter=, max_items=,
  timeline_window=)`` → a report with ``before``, ``after`` and ``removed``;
* the errors ``StoryValidationError`` and ``StoryCorruptionError``.

``SCRATCH`` is the chapter's from-scratch module (:mod:`labmem.scratch.story`);
``PRODUCTION`` is :mod:`labmem.story` behind :class:`_Production`, which only says where the
library keeps the same operations. Every check tries its cases smallest first and names
the first one that breaks.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labmem import story as production
from labmem.core.clock import SteppingClock
from labmem.core.i18n import N_
from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, expect, is_a
from labmem.scratch import story as scratch_module

T0 = "2026-09-01T09:00:00Z"


class _Production:
    """The library's story memory under the names the contracts use."""

    Scratchpad = production.Scratchpad
    MemoryItem = production.MemoryItem
    claim_action = staticmethod(production.claim_action)
    load_scratchpad = staticmethod(production.load_scratchpad)
    compact = staticmethod(production.compact)
    StoryValidationError = production.StoryValidationError
    StoryCorruptionError = production.StoryCorruptionError

    def __repr__(self) -> str:
        return "labmem.story"


SCRATCH = scratch_module
PRODUCTION = _Production()


# -- helpers ------------------------------------------------------------------------------

def _pad(impl: Any, items: tuple = (), next_id: int | None = None) -> Any:
    items = list(items)
    return impl.Scratchpad(items=items, next_id=next_id or len(items) + 1,
                           clock=SteppingClock(T0))


def _item(impl: Any, n: int, chapter: int, value: str, status: str = "active", *,
          category: str = "character_state", subject: str = "Mara Venn",
          field: str = "location", payload: dict | None = None) -> Any:
    """A stored item, ``mem-000n``, built directly (no upsert involved)."""
    return impl.MemoryItem(f"mem-{n:04d}", "semantic", category, subject, field, value,
                           dict(payload or {}), status, chapter, (f"chapter:{chapter}",), T0)


def _claim(pad: Any, chapter: int, value: str, *, payload: dict | None = None,
           **key: str) -> Any:
    """Upsert a claim about Mara's location (or ``key``) from ``chapter``."""
    where = {"category": "character_state", "subject": "Mara Venn", "field": "location",
             **key}
    return pad.upsert(**where, value=value, source_chapter=chapter,
                      evidence=(f"chapter:{chapter}",), payload=dict(payload or {}))


def _mark(payload: Any) -> str:
    return "".join(f" {{{k}}}" if v is True else f" {{{k}={v}}}"
                   for k, v in sorted(dict(payload).items()))


def _show(item: Any) -> str:
    return f"ch{item.source_chapter} {item.value!r}{_mark(item.payload)} {item.status}"


def _state(pad: Any) -> list[str]:
    """The pad as its items in short form, ordered by id: ``mem-0001 ch4 'pier' active``."""
    return [f"{i.id} {_show(i)}" for i in sorted(pad.items, key=lambda i: i.id)]


def _claims(claims: tuple) -> str:
    return ", then ".join(f"ch{c[0]} {c[1]!r}{_mark(c[2] if len(c) > 2 else {})}"
                          for c in claims)


def _run(pad: Any, claims: tuple) -> list[Any]:
    return [_claim(pad, c[0], c[1], payload=c[2] if len(c) > 2 else None) for c in claims]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _expect(case: str, got: Any, want: Any) -> None:
    expect(case, got, want, show=_short)


def _refused(error: type, action: Callable[[], Any], case: str) -> BaseException:
    try:
        got = action()
    except Exception as exc:
        if is_a(exc, error):
            return exc
        if isinstance(exc, NotImplementedError):
            raise
        raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, got "
                             f"{type(exc).__name__}: {exc}") from None
    raise ContractBroken(f"smallest case: {case} — expected {error.__name__}, but it was "
                         f"accepted ({_short(getattr(got, 'action', got))})")


def _history(impl: Any, claims: tuple, case_prefix: str = "") -> tuple[Any, list[Any], str]:
    pad = _pad(impl)
    outcomes = _run(pad, claims)
    return pad, outcomes, f"{case_prefix}{_claims(claims)}"


def _check_histories(impl: Any, table: tuple) -> None:
    """Each row: claims upserted in order, the last one's action, the pad afterwards."""
    for claims, action, state in table:
        pad, outcomes, case = _history(impl, claims)
        _expect(f"{case}: the last upsert's action", outcomes[-1].action, action)
        _expect(f"{case}: the scratchpad afterwards", _state(pad), state)


@contextmanager
def _directory() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="labmem-story-contract-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the upsert ---------------------------------------------------------------------------

def a_new_key_is_created_active(impl: Any) -> None:
    pad = _pad(impl)
    outcome = _claim(pad, 4, "the harbor office")
    case = "ch4 'the harbor office' into an empty pad"
    _expect(f"{case}: (action, id, status)", (outcome.action, outcome.item.id,
                                              outcome.item.status),
            ("created", "mem-0001", "active"))
    _expect(f"{case}: (chapter, evidence, next_id)",
            (outcome.item.source_chapter, tuple(outcome.item.evidence), pad.next_id),
            (4, ("chapter:4",), 2))
    second = _claim(pad, 4, "apprentice", field="role")
    case = "ch4 location, then ch4 role (another key)"
    _expect(f"{case}: the second (action, id)", (second.action, second.item.id),
            ("created", "mem-0002"))
    _expect(f"{case}: the scratchpad", _state(pad),
            ["mem-0001 ch4 'the harbor office' active", "mem-0002 ch4 'apprentice' active"])


BAD_CLAIMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("category 'weather'", {"category": "weather"}),
    ("a blank subject", {"subject": "  "}),
    ("value 7", {"value": 7}),
    ("an empty value", {"value": ""}),
    ("source_chapter 0", {"source_chapter": 0}),
    ("source_chapter True", {"source_chapter": True}),
    ("source_chapter '3'", {"source_chapter": "3"}),
    ("payload ['x']", {"payload": ["x"]}),
)


def a_bad_claim_is_refused(impl: Any) -> None:
    for what, change in BAD_CLAIMS:
        pad = _pad(impl, [_item(impl, 1, 2, "the pier")])
        before = (_state(pad), pad.next_id)
        claim = {"category": "character_state", "subject": "Mara Venn", "field": "location",
                 "value": "the harbor", "source_chapter": 3, "payload": {}, **change}
        case = f"a claim with {what} into a pad of one item"
        _refused(impl.StoryValidationError, lambda c=claim, p=pad: p.upsert(**c), case)
        _expect(f"{case}: (the pad, next_id) after the refusal", (_state(pad), pad.next_id),
                before)


def the_same_claim_again_changes_nothing(impl: Any) -> None:
    loop = {"closed": True}
    for claims, again in ((((4, "pier"),), (4, "pier")),
                          (((4, "pier"), (6, "lighthouse")), (4, "pier")),
                          (((4, "pier", loop),), (4, "pier", loop))):
        pad, _, case = _history(impl, claims)
        before = (_state(pad), pad.next_id)
        outcome = _claim(pad, again[0], again[1], payload=again[2] if len(again) > 2 else None)
        case = f"{case}, then {_claims((again,))} again"
        _expect(f"{case}: the action", outcome.action, "unchanged")
        _expect(f"{case}: (the pad, next_id)", (_state(pad), pad.next_id), before)


def a_newer_chapter_supersedes(impl: Any) -> None:
    _check_histories(impl, (
        (((4, "pier"), (6, "lighthouse")), "superseded",
         ["mem-0001 ch4 'pier' outdated", "mem-0002 ch6 'lighthouse' active"]),
        (((4, "pier"), (6, "lighthouse"), (8, "hall")), "superseded",
         ["mem-0001 ch4 'pier' outdated", "mem-0002 ch6 'lighthouse' outdated",
          "mem-0003 ch8 'hall' active"]),
    ))


def a_late_claim_is_history(impl: Any) -> None:
    _check_histories(impl, (
        (((6, "lighthouse"), (4, "pier")), "late",
         ["mem-0001 ch6 'lighthouse' active", "mem-0002 ch4 'pier' {late_arrival} outdated"]),
        (((6, "lighthouse"), (6, "pier"), (5, "market")), "late",
         ["mem-0001 ch6 'lighthouse' contradicted", "mem-0002 ch6 'pier' contradicted",
          "mem-0003 ch5 'market' {late_arrival} outdated"]),
    ))


def a_retried_late_claim_is_unchanged(impl: Any) -> None:
    _check_histories(impl, (
        (((6, "lighthouse"), (4, "pier"), (4, "pier")), "unchanged",
         ["mem-0001 ch6 'lighthouse' active", "mem-0002 ch4 'pier' {late_arrival} outdated"]),
    ))


def one_chapter_two_values_contradict(impl: Any) -> None:
    _check_histories(impl, (
        (((6, "pier"), (6, "lighthouse")), "contradicted",
         ["mem-0001 ch6 'pier' contradicted", "mem-0002 ch6 'lighthouse' contradicted"]),
        (((4, "hall"), (6, "pier"), (6, "lighthouse")), "contradicted",
         ["mem-0001 ch4 'hall' outdated", "mem-0002 ch6 'pier' contradicted",
          "mem-0003 ch6 'lighthouse' contradicted"]),
        (((6, "pier"), (6, "lighthouse"), (8, "hall")), "superseded",
         ["mem-0001 ch6 'pier' outdated", "mem-0002 ch6 'lighthouse' outdated",
          "mem-0003 ch8 'hall' active"]),
    ))
    pad, _, case = _history(impl, ((6, "pier"), (6, "lighthouse")))
    _expect(f"{case}: contradictions()", sorted(i.id for i in pad.contradictions()),
            ["mem-0001", "mem-0002"])


GUESS = {"certainty": "uncertain"}


def an_uncertain_claim_is_tentative(impl: Any) -> None:
    _check_histories(impl, (
        (((6, "pier", GUESS),), "tentative",
         ["mem-0001 ch6 'pier' {certainty=uncertain} tentative"]),
        (((4, "hall"), (6, "pier", GUESS)), "tentative",
         ["mem-0001 ch4 'hall' active", "mem-0002 ch6 'pier' {certainty=uncertain} tentative"]),
        (((4, "hall"), (5, "pier", GUESS), (6, "market", GUESS)), "tentative",
         ["mem-0001 ch4 'hall' active", "mem-0002 ch5 'pier' {certainty=uncertain} outdated",
          "mem-0003 ch6 'market' {certainty=uncertain} tentative"]),
    ))


def a_confirmed_claim_settles_a_tentative(impl: Any) -> None:
    _check_histories(impl, (
        (((6, "pier", GUESS), (6, "hall")), "created",
         ["mem-0001 ch6 'pier' {certainty=uncertain} outdated", "mem-0002 ch6 'hall' active"]),
        (((6, "pier", GUESS), (7, "hall")), "created",
         ["mem-0001 ch6 'pier' {certainty=uncertain} outdated", "mem-0002 ch7 'hall' active"]),
        (((6, "pier", GUESS), (5, "hall")), "created",
         ["mem-0001 ch6 'pier' {certainty=uncertain} tentative", "mem-0002 ch5 'hall' active"]),
    ))


#: (stored items as (chapter, value, status, payload), the claim (chapter, value), action)
DECISIONS: tuple[tuple[tuple, tuple, str], ...] = (
    ((), (1, "a"), "created"),
    (((1, "a", "active", {}),), (1, "a"), "unchanged"),
    (((2, "b", "active", {}),), (1, "a"), "late"),
    (((1, "b", "active", {}),), (1, "a"), "contradicted"),
    (((1, "b", "active", {}),), (2, "a"), "superseded"),
    (((1, "b", "outdated", {}),), (1, "a"), "created"),
    (((3, "b", "tentative", {}),), (1, "a"), "created"),
    (((1, "a", "outdated", {}),), (1, "a"), "unchanged"),
    (((2, "b", "active", {}), (1, "a", "outdated", {"late_arrival": True})), (1, "a"),
     "unchanged"),
    (((2, "b", "contradicted", {}), (2, "c", "contradicted", {})), (1, "a"), "late"),
    (((2, "b", "contradicted", {}), (2, "c", "contradicted", {})), (2, "a"), "contradicted"),
    (((1, "b", "outdated", {}), (3, "c", "active", {})), (2, "a"), "late"),
)


def claim_action_decides_by_the_rules(impl: Any) -> None:
    for stored, (chapter, value), action in DECISIONS:
        items = [_item(impl, n, c, v, s, payload=p)
                 for n, (c, v, s, p) in enumerate(stored, start=1)]
        claim = _item(impl, len(items) + 1, chapter, value)
        shown = "; ".join(_show(i) for i in items) or "nothing"
        case = f"claim_action([{shown}], ch{chapter} {value!r})"
        _expect(case, impl.claim_action(items, claim), action)


# -- reading the pad ----------------------------------------------------------------------

def a_closed_loop_is_not_open(impl: Any) -> None:
    loop = {"category": "open_loops", "field": ""}
    cases = (
        ("an open loop", [_item(impl, 1, 2, "who rings it?", subject="the bell", **loop)],
         ["the bell"]),
        ("a loop closed by a later chapter",
         [_item(impl, 1, 2, "who rings it?", "outdated", subject="the bell", **loop),
          _item(impl, 2, 9, "the keeper", subject="the bell", payload={"closed": True},
                **loop)], []),
        ("one loop closed, one open",
         [_item(impl, 1, 2, "the keeper", subject="the bell", payload={"closed": True},
                **loop), _item(impl, 2, 4, "who?", subject="night walks", **loop)],
         ["night walks"]),
    )
    for case, items, open_subjects in cases:
        pad = _pad(impl, items)
        _expect(f"{case}: open_loops()", [i.subject for i in pad.open_loops()], open_subjects)


def _fingerprint(pad: Any) -> list[tuple]:
    return [(i.id, i.category, i.subject, i.field, i.value, dict(i.payload), i.status,
             i.source_chapter, tuple(i.evidence)) for i in sorted(pad.items, key=lambda i: i.id)]


def the_snapshot_reads_back_equal(impl: Any) -> None:
    with _directory() as root:
        path = root / "memory_scratchpad.json"
        empty = impl.load_scratchpad(path, clock=SteppingClock(T0))
        _expect("load_scratchpad of a missing file: (items, next_id)",
                (list(empty.items), empty.next_id), ([], 1))
        items = [_item(impl, 1, 4, "pier", "outdated"), _item(impl, 2, 6, "the é 中 quay"),
                 _item(impl, 3, 6, "one\u2028two", subject="Ilse", payload={"late": [1, "x"]})]
        for count in (1, 3):
            pad = _pad(impl, items[:count], next_id=7)
            pad.save(path)
            back = impl.load_scratchpad(path, clock=SteppingClock(T0))
            case = f"save() of a pad of {count} item(s), next_id 7, then load_scratchpad()"
            _expect(f"{case}: the items", _fingerprint(back), _fingerprint(pad))
            _expect(f"{case}: next_id", back.next_id, 7)
        leftovers = sorted(p.name for p in root.iterdir() if p.name != path.name
                           and not p.name.endswith(".lock"))
        _expect("the directory after two saves: files beside the snapshot", leftovers, [])


UNREADABLE: tuple[tuple[str, bytes], ...] = (
    ("JSON that never closes", b'{"format": "labmem.story.scratchpad/v1", "items": ['),
    ("a JSON list", b"[]"),
    ("another format", b'{"format": "other/v9", "next_id": 1, "items": []}'),
    ("an item without its status",
     b'{"format": "labmem.story.scratchpad/v1", "next_id": 2, "items": [{"id": "mem-0001", '
     b'"layer": "semantic", "category": "timeline", "subject": "s", "field": "f", '
     b'"value": "v", "payload": {}, "source_chapter": 1, "evidence": [], '
     b'"updated_at": "2026-09-01T09:00:00Z"}]}'),
)


def an_unreadable_snapshot_is_corruption(impl: Any) -> None:
    for what, data in UNREADABLE:
        with _directory() as root:
            path = root / "memory_scratchpad.json"
            path.write_bytes(data)
            case = f"load_scratchpad() of a file holding {what}"
            exc = _refused(impl.StoryCorruptionError,
                           lambda p=path: impl.load_scratchpad(p, clock=SteppingClock(T0)),
                           case)
            if path.name not in str(exc):
                raise ContractBroken(f"smallest case: {case} — expected the message to name "
                                     f"{path.name!r}, got {str(exc)!r}")
            _expect(f"{case}: the file afterwards", path.read_bytes(), data)


# -- compaction ---------------------------------------------------------------------------

def _compaction_pad(impl: Any) -> Any:
    """Nine items: a key with two outdated values, a contradiction, a closed loop with its
    history, an active rule, a tentative guess and an old outdated fact."""
    loop = {"category": "open_loops", "field": "", "subject": "the bell"}
    return _pad(impl, [
        _item(impl, 1, 1, "wall", "outdated"),
        _item(impl, 2, 3, "pier", "outdated"),
        _item(impl, 3, 5, "hall"),
        _item(impl, 4, 4, "guild", "contradicted", field="allegiance"),
        _item(impl, 5, 4, "council", "contradicted", field="allegiance"),
        _item(impl, 6, 2, "who rings it?", "outdated", **loop),
        _item(impl, 7, 6, "the keeper", payload={"closed": True}, **loop),
        _item(impl, 8, 5, "fever", "tentative", field="health",
              payload={"certainty": "uncertain"}),
        _item(impl, 9, 2, "lamp", "outdated", field="tool"),
    ])


#: max_items → the ids that stay (steps 1–2 leave 6; only outdated, then tentative, trim)
COMPACTIONS: tuple[tuple[int, list[str]], ...] = (
    (100, ["mem-0002", "mem-0003", "mem-0004", "mem-0005", "mem-0008", "mem-0009"]),
    (5, ["mem-0002", "mem-0003", "mem-0004", "mem-0005", "mem-0008"]),
    (4, ["mem-0003", "mem-0004", "mem-0005", "mem-0008"]),
    (3, ["mem-0003", "mem-0004", "mem-0005"]),
    (0, ["mem-0003", "mem-0004", "mem-0005"]),
)


def compaction_keeps_the_current_truth(impl: Any) -> None:
    for max_items, kept in COMPACTIONS:
        pad = _compaction_pad(impl)
        case = (f"compact(max_items={max_items}) of nine items (two outdated values of one "
                "key, a contradiction, a closed loop, a tentative guess, an old outdated fact)")
        report = impl.compact(pad, current_chapter=7, max_items=max_items, timeline_window=3)
        _expect(f"{case}: the ids kept", sorted(i.id for i in pad.items), kept)
        _expect(f"{case}: (report.before, report.after)", (report.before, report.after),
                (9, len(kept)))
        _expect(f"{case}: the removed ids reported",
                sorted(item_id for item_id, _ in report.removed),
                sorted({f"mem-{n:04d}" for n in range(1, 10)} - set(kept)))


def _events(pad: Any) -> list[tuple[int, str]]:
    """Every timeline event the pad still knows: live timeline items and folded summaries."""
    return sorted([(i.source_chapter, i.value) for i in pad.items if i.category == "timeline"]
                  + [(i.source_chapter, e) for i in pad.items
                     for e in i.payload.get("events", [])])


def compaction_folds_every_old_event(impl: Any) -> None:
    cases = (((1,), 1), ((1, 1, 3), 2), ((1, 3, 6), 2), ((5, 6), 0))
    for chapters, summaries in cases:
        items = [_item(impl, n, c, f"event {n}", category="timeline", subject=f"chapter {c}",
                       field=f"event {n}") for n, c in enumerate(chapters, start=1)]
        pad = _pad(impl, items)
        before = _events(pad)
        case = (f"compact(current_chapter=7, timeline_window=3) of timeline events of "
                f"chapters {list(chapters)}")
        impl.compact(pad, current_chapter=7, max_items=100, timeline_window=3)
        _expect(f"{case}: the events afterwards", _events(pad), before)
        _expect(f"{case}: timeline items older than chapter 4 left",
                [i.id for i in pad.items if i.category == "timeline" and i.source_chapter < 4],
                [])
        _expect(f"{case}: summary facts", len([i for i in pad.items if "events" in i.payload]),
                summaries)
    pad = _pad(impl, [_item(impl, 1, 1, "event 1", category="timeline", subject="chapter 1",
                            field="event 1")])
    impl.compact(pad, current_chapter=7, max_items=100, timeline_window=3)
    late = _item(impl, pad.next_id, 1, "event 2", category="timeline", subject="chapter 1",
                 field="event 2")
    pad.items.append(late)
    pad.next_id += 1
    impl.compact(pad, current_chapter=8, max_items=100, timeline_window=3)
    case = "a chapter-1 event compacted, then a second chapter-1 event compacted"
    _expect(f"{case}: the events", _events(pad), [(1, "event 1"), (1, "event 2")])
    _expect(f"{case}: summary facts", len([i for i in pad.items if "events" in i.payload]), 1)


SUITE = ContractSuite(N_("scratchpad"), (
    Contract(N_("a claim for a new key is stored active, with the next id, its chapter and "
                "evidence"), a_new_key_is_created_active),
    Contract(N_("a claim that cannot be stored is refused and the pad is unchanged"),
             a_bad_claim_is_refused),
    Contract(N_("the same claim again changes nothing, whatever the stored item's status"),
             the_same_claim_again_changes_nothing),
    Contract(N_("a newer chapter's value supersedes: the old value stays as outdated history"),
             a_newer_chapter_supersedes),
    Contract(N_("a claim from an older chapter arriving late is filed outdated and marked, "
                "demoting nothing"), a_late_claim_is_history),
    Contract(N_("a late claim retried is unchanged: its late mark does not make it new"),
             a_retried_late_claim_is_unchanged),
    Contract(N_("two values for one key in one chapter are both contradicted, until a later "
                "chapter settles them"), one_chapter_two_values_contradict),
    Contract(N_("an uncertain claim is stored tentative and never demotes a confirmed value"),
             an_uncertain_claim_is_tentative),
    Contract(N_("a confirmed claim of the tentative one's chapter or later settles it"),
             a_confirmed_claim_settles_a_tentative),
    Contract(N_("claim_action applies the rules in order: unchanged, created, late, "
                "contradicted, superseded"), claim_action_decides_by_the_rules),
    Contract(N_("a loop a later chapter closed is not open"), a_closed_loop_is_not_open),
    Contract(N_("the snapshot reads back equal, and a missing file is an empty pad"),
             the_snapshot_reads_back_equal),
    Contract(N_("a snapshot that cannot be read is corruption naming the file, never an "
                "empty pad"), an_unreadable_snapshot_is_corruption),
    Contract(N_("compaction keeps the latest outdated value per key, drops closed loops, then "
                "trims outdated before tentative, never active or contradicted"),
             compaction_keeps_the_current_truth),
    Contract(N_("compaction folds every old timeline event, a lone one too, into one summary "
                "per chapter"), compaction_folds_every_old_event),
))
