"""s12b recall quality: a labeled set, ranking metrics, and where scorers disagree.

Speed says nothing about whether recall finds the *right* record. This module measures
that against queries labeled by hand (``data/recall/labeled_recall.json``):

1. :func:`load_labeled_set` — read and validate the labeled set (records, queries with
   their gold memory ids, one ``as_of``); a malformed file names the field that is wrong.
2. :func:`load_into_store` — put its records into a fresh store, as ordinary
   conversation records, so the real :class:`~labmem.recall.pipeline.RecallEngine` searches them.
3. :func:`evaluate` — run every query through every engine; one :class:`QueryOutcome`
   per (engine, query) with recall@k, any-hit@k and reciprocal rank.
4. :func:`summarize` and :func:`disagreements` — means per engine (and per query kind),
   and the queries on which engines rank differently, with each engine's top hits and
   the per-term contributions that put them there.

The metrics come from :mod:`labmem.core.metrics` (re-exported here) and take plain id lists,
so a benchmark over another data set (LoCoMo's "evidence turns") and the Context MMU use
the very same definitions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from labmem.core.clock import FixedClock, format_timestamp, parse_timestamp
from labmem.core.errors import InvalidInputError
from labmem.core.metrics import any_hit_at_k, full_hit_at_k, recall_at_k, reciprocal_rank
from labmem.core.provenance import MemorySource
from labmem.core.validation import parse_json, require_int, require_text
from labmem.recall.protocols import AppendsInBatches, offers
from labmem.recall.store import MEMORY_ID_PATTERN, MemoryKind, RemoteMemoryStore

__all__ = [
    "LabeledRecord", "LabeledQuery", "LabeledRecallSet", "QueryOutcome", "RankedHit",
    "Disagreement", "default_labeled_set_path", "load_labeled_set", "parse_labeled_set",
    "load_into_store", "scorer_engines", "evaluate", "summarize", "summarize_by",
    "disagreements", "outcomes_frame", "recall_at_k", "any_hit_at_k", "full_hit_at_k",
    "reciprocal_rank", "describe_set", "DEFAULT_KS", "LANGUAGES", "SPLITS",
]

DEFAULT_KS = (1, 3, 5, 10)
LANGUAGES = ("en", "zh")
SPLITS = ("tune", "test")
SOURCE_TYPE = "conversation"


# -- metrics (defined once, in labmem.core.metrics) --------------------------------------


def _check_k(k: int) -> None:
    require_int(k, "k", minimum=1)


# -- the labeled set ---------------------------------------------------------------


@dataclass(frozen=True)
class LabeledRecord:
    """One conversation memory of the labeled set, before it is stored."""

    memory_id: str
    title: str
    summary: str
    content: str
    captured_at: datetime


@dataclass(frozen=True)
class LabeledQuery:
    """A question with the memory ids a good recall should return (``gold``).

    ``kind`` says what the query probes (``rare_term``, ``recency``, ``cjk_bigram``, …);
    ``split`` keeps tuning (``tune``) apart from the held-out check (``test``).
    """

    query_id: str
    text: str
    gold: tuple[str, ...]
    language: str
    kind: str
    split: str


@dataclass(frozen=True)
class LabeledRecallSet:
    """Records, queries, and the one moment (``as_of``) every query is asked at."""

    user_id: str
    as_of: datetime
    records: tuple[LabeledRecord, ...]
    queries: tuple[LabeledQuery, ...]

    def queries_in(self, split: str) -> tuple[LabeledQuery, ...]:
        """The queries of one split (``"tune"`` or ``"test"``)."""
        if split not in SPLITS:
            raise InvalidInputError("split", f"{split!r} is not a split",
                                    f"use one of {', '.join(SPLITS)}")
        return tuple(q for q in self.queries if q.split == split)


def default_labeled_set_path() -> Path:
    """``data/recall/labeled_recall.json`` of the project checkout."""
    return Path(__file__).resolve().parents[2] / "data" / "recall" / "labeled_recall.json"


def _field(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise InvalidInputError(where, f"must be a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise InvalidInputError(f"{where}.{key}", "is missing", f"add {key!r} to {where}")
    return obj[key]


def _text(obj: Mapping[str, Any], key: str, where: str, *, allow_blank: bool = False) -> str:
    return require_text(_field(obj, key, where), f"{where}.{key}", allow_blank=allow_blank)


def _choice(obj: Mapping[str, Any], key: str, where: str, allowed: Sequence[str]) -> str:
    value = _field(obj, key, where)
    if value not in allowed:
        raise InvalidInputError(f"{where}.{key}", f"{value!r} is not allowed",
                                f"use one of {', '.join(allowed)}")
    return value


def _parse_record(obj: Any, where: str) -> LabeledRecord:
    memory_id = _text(obj, "memory_id", where)
    if not MEMORY_ID_PATTERN.fullmatch(memory_id):
        raise InvalidInputError(f"{where}.memory_id", f"{memory_id!r} is not a valid id",
                                "use 1-128 characters from A-Z a-z 0-9 . _ : -")
    return LabeledRecord(
        memory_id=memory_id,
        title=_text(obj, "title", where),
        summary=_text(obj, "summary", where, allow_blank=True),
        content=_text(obj, "content", where),
        captured_at=parse_timestamp(_field(obj, "captured_at", where),
                                    field=f"{where}.captured_at"),
    )


def _parse_query(obj: Any, where: str, known_ids: frozenset[str]) -> LabeledQuery:
    gold = _field(obj, "gold", where)
    if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
        raise InvalidInputError(f"{where}.gold", "must be a non-empty list of memory ids")
    unknown = [g for g in gold if g not in known_ids]
    if unknown:
        raise InvalidInputError(f"{where}.gold", f"names unknown memory ids {unknown}",
                                "every gold id must be the memory_id of a record")
    return LabeledQuery(
        query_id=_text(obj, "query_id", where),
        text=_text(obj, "text", where),
        gold=tuple(dict.fromkeys(gold)),
        language=_choice(obj, "language", where, LANGUAGES),
        kind=_text(obj, "kind", where),
        split=_choice(obj, "split", where, SPLITS),
    )


def _unique(ids: Iterable[str], field_name: str) -> None:
    seen: set[str] = set()
    for value in ids:
        if value in seen:
            raise InvalidInputError(field_name, f"{value!r} occurs twice", "ids must be unique")
        seen.add(value)


def parse_labeled_set(document: Any) -> LabeledRecallSet:
    """Validate a decoded labeled-set document; errors name the field (``queries[3].gold``)."""
    as_of = parse_timestamp(_field(document, "as_of", "labeled_set"), field="labeled_set.as_of")
    raw_records = _field(document, "records", "labeled_set")
    raw_queries = _field(document, "queries", "labeled_set")
    for name, raw in (("records", raw_records), ("queries", raw_queries)):
        if not isinstance(raw, list) or not raw:
            raise InvalidInputError(f"labeled_set.{name}", "must be a non-empty list")
    records = tuple(_parse_record(obj, f"records[{i}]") for i, obj in enumerate(raw_records))
    _unique((r.memory_id for r in records), "records.memory_id")
    known = frozenset(r.memory_id for r in records)
    queries = tuple(_parse_query(obj, f"queries[{i}]", known)
                    for i, obj in enumerate(raw_queries))
    _unique((q.query_id for q in queries), "queries.query_id")
    return LabeledRecallSet(_text(document, "user_id", "labeled_set"), as_of, records, queries)


def load_labeled_set(path: str | os.PathLike[str] | None = None) -> LabeledRecallSet:
    """Read and validate a labeled set (default: :func:`default_labeled_set_path`)."""
    path = Path(path) if path is not None else default_labeled_set_path()
    try:
        document = parse_json(path.read_bytes())  # bounded depth, no NaN, no lone surrogate
    except FileNotFoundError:
        raise InvalidInputError("path", f"{path.name} does not exist",
                                "pass the path of a labeled recall set JSON file") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError("path", f"{path.name} is not JSON ({exc.msg}, line {exc.lineno})",
                                "fix the file's syntax") from None
    except ValueError as exc:  # not UTF-8, nested too deep, NaN, a lone surrogate
        raise InvalidInputError("path", f"{path.name} cannot be read ({exc})",
                                "fix the file: labmem reads plain UTF-8 JSON") from None
    return parse_labeled_set(document)


def load_into_store(labeled: LabeledRecallSet, directory: str | os.PathLike[str], *,
                    store_class: type = RemoteMemoryStore, filename: str = "records.jsonl"):
    """A fresh store in ``directory`` holding the labeled records as conversation memories.

    Each record keeps its id; its title becomes the source title (searchable, like any
    conversation title). ``stored_at`` is the set's ``as_of``, so nothing depends on the
    wall clock. The batch goes in through ``append_many`` when the store offers it
    (:class:`~labmem.recall.protocols.AppendsInBatches`).
    """
    store = store_class(Path(directory) / filename, user_id=labeled.user_id,
                        clock=FixedClock(labeled.as_of))
    drafts = [
        {
            "kind": MemoryKind.CONVERSATION,
            "content": r.content,
            "summary": r.summary,
            "source": MemorySource(f"conversation:{r.memory_id}", SOURCE_TYPE, r.title,
                                   r.captured_at),
            "memory_id": r.memory_id,
        }
        for r in labeled.records
    ]
    if offers(store, AppendsInBatches):
        store.append_many(drafts)
    else:
        for draft in drafts:
            store.append(**draft)
    return store


def scorer_engines(store, scorers: Iterable[Any] = ("teaching", "bm25", "bm25_recency")
                   ) -> dict:
    """``{name: RecallEngine(store, scorer=…)}``; a scorer object is named by its ``key``."""
    from labmem.recall.pipeline import RecallEngine  # recall imports numpy; keep this module light
    from labmem.recall.scorers import Scorer

    engines = {}
    for scorer in scorers:
        name = (scorer if isinstance(scorer, str)
                else scorer.key if isinstance(scorer, Scorer) else repr(scorer))
        engines[name] = RecallEngine(store, scorer=scorer)
    return engines


# -- evaluation ----------------------------------------------------------------------


@dataclass(frozen=True)
class RankedHit:
    """One returned record, with the per-term reasons from its score breakdown."""

    memory_id: str
    rank: int
    total: float
    term_contributions: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class QueryOutcome:
    """One engine's answer to one labeled query, and how good it was."""

    engine: str
    query_id: str
    text: str
    kind: str
    language: str
    split: str
    gold: tuple[str, ...]
    hits: tuple[RankedHit, ...]
    recall: Mapping[int, float]  # k -> share of gold in the top k
    any_hit: Mapping[int, float]  # k -> 1.0 if any gold in the top k
    reciprocal_rank: float

    @property
    def ranked_ids(self) -> tuple[str, ...]:
        return tuple(hit.memory_id for hit in self.hits)

    def to_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "engine": self.engine, "query_id": self.query_id, "kind": self.kind,
            "language": self.language, "split": self.split,
            "top1": self.hits[0].memory_id if self.hits else "",
            "gold": ", ".join(self.gold),
        }
        row.update({f"recall@{k}": v for k, v in self.recall.items()})
        row.update({f"hit@{k}": v for k, v in self.any_hit.items()})
        row["rr"] = self.reciprocal_rank
        return row


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(ks)
    if not ks:
        raise InvalidInputError("ks", "must name at least one cut-off k")
    for k in ks:
        _check_k(k)
    if max(ks) > 10:
        raise InvalidInputError("ks", f"{max(ks)} is more than recall returns",
                                "use cut-offs from 1 to 10 (recall's largest limit)")
    return tuple(sorted(set(ks)))


def _hits_of(result) -> tuple[RankedHit, ...]:
    return tuple(
        RankedHit(hit.memory_id, hit.rank, hit.score_breakdown.total,
                  MappingProxyType(dict(hit.score_breakdown.term_contributions)))
        for hit in result.hits
    )


def evaluate(engines: Mapping[str, Any], queries: Iterable[LabeledQuery], *,
             as_of: datetime | str, ks: Sequence[int] = DEFAULT_KS) -> tuple[QueryOutcome, ...]:
    """Every query through every engine (``{name: engine with .recall}``), asked at ``as_of``.

    Each engine returns ``max(ks)`` hits; the metrics of every cut-off come from that one
    ranking. Outcomes are ordered by engine (as given), then query (as given).
    """
    ks = _check_ks(ks)
    if not isinstance(engines, Mapping) or not engines:
        raise InvalidInputError("engines", "must be a non-empty mapping of name -> engine",
                                "e.g. scorer_engines(store)")
    as_of = parse_timestamp(as_of, field="as_of")
    queries = tuple(queries)
    outcomes = []
    for name, engine in engines.items():
        for query in queries:
            hits = _hits_of(engine.recall(query.text, limit=max(ks), as_of=as_of))
            ranked = [hit.memory_id for hit in hits]
            outcomes.append(QueryOutcome(
                engine=name, query_id=query.query_id, text=query.text, kind=query.kind,
                language=query.language, split=query.split, gold=query.gold, hits=hits,
                recall=MappingProxyType({k: recall_at_k(ranked, query.gold, k) for k in ks}),
                any_hit=MappingProxyType({k: any_hit_at_k(ranked, query.gold, k) for k in ks}),
                reciprocal_rank=reciprocal_rank(ranked, query.gold),
            ))
    return tuple(outcomes)


def outcomes_frame(outcomes: Iterable[QueryOutcome]):
    """One row per (engine, query): top-1, gold, recall@k, hit@k, rr (pandas)."""
    import pandas as pd

    return pd.DataFrame([o.to_row() for o in outcomes])


def summarize_by(outcomes: Iterable[QueryOutcome], by: Sequence[str] = ("engine",)):
    """Mean of every metric per group (``engine``, ``kind``, ``language``, ``split``)."""
    frame = outcomes_frame(outcomes)
    metrics = [c for c in frame.columns if c.startswith(("recall@", "hit@")) or c == "rr"]
    grouped = frame.groupby(list(by), sort=False)[metrics].mean()
    grouped.insert(0, "queries", frame.groupby(list(by), sort=False).size())
    return grouped.round(3).reset_index()


def summarize(outcomes: Iterable[QueryOutcome]):
    """Mean metrics per engine: the headline table (MRR is the ``rr`` column)."""
    return summarize_by(outcomes, ("engine",))


@dataclass(frozen=True)
class Disagreement:
    """A query whose engines did not return the same top ``k`` (in order)."""

    query_id: str
    text: str
    kind: str
    gold: tuple[str, ...]
    tops: Mapping[str, tuple[RankedHit, ...]]  # engine -> its top k hits

    def winners(self) -> tuple[str, ...]:
        """Engines whose first hit is a gold id."""
        return tuple(name for name, hits in self.tops.items()
                     if hits and hits[0].memory_id in self.gold)

    def to_rows(self) -> list[dict[str, Any]]:
        """One row per (engine, hit) with the terms that carried it, largest first."""
        rows = []
        for name, hits in self.tops.items():
            for hit in hits:
                terms = sorted(hit.term_contributions.items(), key=lambda kv: (-kv[1], kv[0]))
                rows.append({
                    "query_id": self.query_id, "engine": name, "rank": hit.rank,
                    "memory_id": hit.memory_id, "gold": hit.memory_id in self.gold,
                    "total": hit.total,
                    "terms": ", ".join(f"{t}={v:.3f}" for t, v in terms),
                })
        return rows


def disagreements(outcomes: Iterable[QueryOutcome], *, k: int = 1) -> tuple[Disagreement, ...]:
    """The queries on which the engines' top ``k`` ids differ, in query order."""
    _check_k(k)
    by_query: dict[str, dict[str, QueryOutcome]] = {}
    for outcome in outcomes:
        by_query.setdefault(outcome.query_id, {})[outcome.engine] = outcome
    found = []
    for query_id, per_engine in by_query.items():
        tops = {name: o.hits[:k] for name, o in per_engine.items()}
        if len({tuple(h.memory_id for h in hits) for hits in tops.values()}) > 1:
            first = next(iter(per_engine.values()))
            found.append(Disagreement(query_id, first.text, first.kind, first.gold,
                                      MappingProxyType(tops)))
    return tuple(found)


def describe_set(labeled: LabeledRecallSet) -> dict[str, Any]:
    """Counts a reader checks first: records, queries per split, kind and language."""
    def count(values: Iterable[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for value in values:
            out[value] = out.get(value, 0) + 1
        return dict(sorted(out.items()))

    return {
        "records": len(labeled.records),
        "queries": len(labeled.queries),
        "as_of": format_timestamp(labeled.as_of),
        "split": count(q.split for q in labeled.queries),
        "language": count(q.language for q in labeled.queries),
        "kind": count(q.kind for q in labeled.queries),
    }
