"""Tune the contextual scorer on the allowed data only, and record the weights chosen.

Allowed data (issue 16's protocol): the labeled set's ``tune`` split
(``data/recall/labeled_recall.json``) and the **even-indexed** LoCoMo conversations (0, 2,
4, 6, 8 in file order). The odd-indexed conversations are never loaded here — they are
the held-out half that ``bench/locomo_eval.py`` reports on — and neither is the labeled
set's ``test`` split, except once at the end, to report the chosen weights.

The search is coordinate ascent from the issue's recipe (stop words and stems, b = 0,
title and date fields, neighbours with previous > next, a thread score): each round tries
every value of one parameter's grid with the others fixed and keeps the best, until a
round changes nothing. A setting is scored by the even half's any-evidence recall@10
(categories 1–4). A value replaces the current one only when it is better by more than
:data:`TOLERANCE` (about two of the ~770 questions): among the values within that of the
best, the one nearest the start wins (then the higher labeled tune MRR), so a flat grid
keeps the recipe's values instead of drifting to its edges. A setting whose labeled tune
MRR falls below the best existing scorer's (bm25_recency) is not eligible: the contextual
scorer must not trade the labeled set away for LoCoMo.

Run it::

    python bench/tune_contextual.py          # a few minutes; writes bench/results/
    python bench/tune_contextual.py --out /tmp/tune --rounds 1

It writes ``tune_contextual.md`` and ``tune_contextual.json``; the defaults of
``labmem.recall.ContextualScorer`` are the chosen weights (a test checks they agree).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from benchlib import RESULTS_DIR, progress  # bench/ is on sys.path
from locomo_eval import (
    DATA_PATH,
    SCORED_CATEGORIES,
    TOP_K,
    Conversation,
    open_store,
    read_conversation,
)

from labmem.core.metrics import any_hit_at_k
from labmem.recall import (
    ContextualScorer,
    RecallEngine,
    evaluate,
    load_into_store,
    load_labeled_set,
    resolve_scorer,
    summarize_by,
)

START = ContextualScorer(analyzer="english", k1=1.2, b=0.0, own=1.0, title=0.5, date=0.5,
                         previous=0.5, next=0.25, thread=0.1)
GRID = {
    "k1": (0.6, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 4.0),
    "b": (0.0, 0.1, 0.25, 0.5, 0.75),
    "title": (0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0),
    "date": (0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0),
    "previous": (0.0, 0.25, 0.4, 0.5, 0.6, 0.75, 1.0),
    "next": (0.0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75),
    "thread": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5),
}
PARAMETERS = tuple(GRID)
TOLERANCE = 0.003


def even_conversations(path: Path) -> list[Conversation]:
    """The even-indexed conversations only: the odd ones are never read into a store here."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [read_conversation(i, r) for i, r in enumerate(raw) if i % 2 == 0]


class Objective:
    """Scores one setting on the even LoCoMo half and on the labeled tune split."""

    def __init__(self, conversations: list[Conversation], workdir: Path) -> None:
        self.labeled = load_labeled_set()
        self.locomo = []
        for conv in conversations:
            engine = RecallEngine(open_store(conv, workdir), scorer=START)
            questions = [q for q in conv.questions
                         if q.gold and q.category in SCORED_CATEGORIES]
            self.locomo.append((conv, engine, questions))
        self.labeled_engine = RecallEngine(load_into_store(self.labeled, workdir / "labeled"),
                                           scorer=START)
        self.cache: dict[ContextualScorer, dict] = {}

    def locomo_any10(self, scorer: ContextualScorer) -> float:
        hits = total = 0
        for conv, engine, questions in self.locomo:
            engine.scorer = scorer  # the same index and record context for every setting
            for q in questions:
                result = engine.recall(q.text, limit=TOP_K, as_of=conv.as_of)
                hits += any_hit_at_k([h.memory_id for h in result.hits], q.gold, TOP_K)
                total += 1
        return hits / total

    def labeled_mrr(self, scorer, split: str) -> float:
        self.labeled_engine.scorer = resolve_scorer(scorer)
        outcomes = evaluate({"x": self.labeled_engine}, self.labeled.queries_in(split),
                            as_of=self.labeled.as_of, ks=(1, 10))
        return float(summarize_by(outcomes, ("engine",)).iloc[0]["rr"])

    def __call__(self, scorer: ContextualScorer) -> dict:
        if scorer not in self.cache:
            self.cache[scorer] = {"even_any@10": self.locomo_any10(scorer),
                                  "labeled_tune_mrr": self.labeled_mrr(scorer, "tune")}
        return self.cache[scorer]


def choose(scored: list[tuple[float, dict]], start: float, floor: float) -> tuple[float, dict]:
    """The value to keep: eligible, within TOLERANCE of the best, nearest the start."""
    eligible = [(v, r) for v, r in scored if r["labeled_tune_mrr"] >= floor]
    best = max(r["even_any@10"] for _, r in eligible)
    near = [(v, r) for v, r in eligible if r["even_any@10"] >= best - TOLERANCE]
    return min(near, key=lambda item: (abs(item[0] - start), -item[1]["labeled_tune_mrr"]))


def search(objective: Objective, floor: float, rounds: int) -> tuple[ContextualScorer, list]:
    best = START
    trace = []
    for round_number in range(1, rounds + 1):
        changed = False
        for name in PARAMETERS:
            scored = [(value, objective(replace(best, **{name: value})))
                      for value in GRID[name]]
            value, result = choose(scored, getattr(START, name), floor)
            trace.append({"round": round_number, "parameter": name,
                          "tried": {f"{v:g}": r for v, r in scored}, "chosen": value})
            progress(f"round {round_number}: {name} = {value:g} "
                     f"(even any@10 {result['even_any@10']:.3f}, "
                     f"labeled tune MRR {result['labeled_tune_mrr']:.3f})")
            if value != getattr(best, name):
                best = replace(best, **{name: value})
                changed = True
        if not changed:
            break
    return best, trace


def settings_of(scorer: ContextualScorer) -> dict:
    return {name: getattr(scorer, name) for name in ("k1", "b", "own", *PARAMETERS[2:])}


def render(report: dict) -> str:
    chosen = report["chosen"]
    lines = [
        "# Contextual scorer tuning (bench/tune_contextual.py)", "",
        "Tuned on the even-indexed LoCoMo conversations "
        f"({', '.join(report['even_conversations'])}) and the labeled set's tune split "
        f"({report['labeled_tune_queries']} queries) only; the odd half and the labeled test "
        "split were not used to choose anything. Objective: even-half any-evidence recall@10 "
        f"(categories 1–4); a value must beat the current one by more than {TOLERANCE} "
        "(values within that of the best: the one nearest the start); settings with labeled "
        f"tune MRR below bm25_recency's ({report['floor']:.3f}) are not eligible.", "",
        "Chosen (now `ContextualScorer()`'s defaults): **"
        + ", ".join(f"{k}={v:g}" for k, v in chosen.items()) + f"**, analyzer "
        f"`{report['analyzer']}`.", "",
        "| setting | even any@10 | labeled tune MRR | labeled test MRR | labeled all MRR |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in report["summary"].items():
        even = "–" if row["even_any@10"] is None else f"{row['even_any@10']:.3f}"
        lines.append(f"| {name} | {even} | {row['labeled_tune_mrr']:.3f} | "
                     f"{row['labeled_test_mrr']:.3f} | {row['labeled_all_mrr']:.3f} |")
    lines += ["", "## Search trace (even any@10 / labeled tune MRR per value tried)", "",
              "| round | parameter | values tried | chosen |", "|---:|---|---|---:|"]
    for step in report["trace"]:
        tried = "; ".join(f"{v}: {r['even_any@10']:.3f} / {r['labeled_tune_mrr']:.3f}"
                          for v, r in step["tried"].items())
        lines.append(f"| {step['round']} | {step['parameter']} | {tried} | "
                     f"{step['chosen']:g} |")
    lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA_PATH)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"LoCoMo data not found at ../shared/data/locomo/{args.data.name}; "
              "nothing to tune (this is not an error).")
        return 0
    conversations = even_conversations(args.data)
    with tempfile.TemporaryDirectory(prefix="tune-contextual-") as tmp:
        objective = Objective(conversations, Path(tmp))
        floor = objective.labeled_mrr("bm25_recency", "tune")
        best, trace = search(objective, floor, args.rounds)
        summary = {}
        for name, scorer in (("teaching", "teaching"), ("bm25", "bm25"),
                             ("bm25_recency", "bm25_recency"),
                             ("contextual, start (the issue's recipe)", START),
                             ("contextual, chosen", best)):
            row = {"even_any@10": objective(scorer)["even_any@10"]
                   if isinstance(scorer, ContextualScorer) else None}
            for split in ("tune", "test"):
                row[f"labeled_{split}_mrr"] = objective.labeled_mrr(scorer, split)
            tune_n = len(objective.labeled.queries_in("tune"))
            test_n = len(objective.labeled.queries_in("test"))
            row["labeled_all_mrr"] = ((row["labeled_tune_mrr"] * tune_n
                                       + row["labeled_test_mrr"] * test_n) / (tune_n + test_n))
            summary[name] = row
    report = {
        "even_conversations": [c.sample_id for c in conversations],
        "labeled_tune_queries": len(objective.labeled.queries_in("tune")),
        "floor": floor,
        "analyzer": repr(best.analyzer),
        "chosen": settings_of(best),
        "summary": summary,
        "trace": trace,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = render(report)
    (args.out / "tune_contextual.md").write_text(markdown, encoding="utf-8")
    (args.out / "tune_contextual.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
