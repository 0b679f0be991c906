"""Choose the fused scorer's fusion rule and settings on the allowed data only.

Allowed data (the protocol of ``bench/tune_contextual.py``): the **even-indexed** LoCoMo
conversations (0, 2, 4, 6, 8) and the labeled set's ``tune`` split. The odd half is never
loaded here (``bench/locomo_eval.py`` reports on it); the labeled ``test`` split is read
once at the end, to report the chosen setting.

For every allowed question the contextual (lexical) and dense rankings are computed once,
to the largest depth tried, with their scores; each candidate rule is then applied to those
lists (cut to its depth), so the grid costs list arithmetic, not recall:

* reciprocal-rank fusion (:func:`labmem.recall.dense.fuse_rankings`): ``k`` × the dense
  weight × the depth;
* for comparison, a weighted sum of scores normalized per query (the lexical total over
  the query's best, the cosine over the query's best), over the same lists.

Objective: even-half any-evidence recall@10 (categories 1–4); ties go to the higher
labeled tune MRR, then the smaller depth (less work per query), then the setting nearest
the textbook RRF (k = 60, weight ½). Also reported: what storing vectors as int8 or float16
costs against float32, on the even half (dense any@10).

Run it::

    python bench/tune_fused.py            # about a minute; writes bench/results/

It writes ``tune_fused.md`` and ``tune_fused.json``; the defaults of
``labmem.recall.FusedScorer`` are the chosen setting (a test checks they agree).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from benchlib import RESULTS_DIR, progress  # bench/ is on sys.path
from locomo_eval import DATA_PATH, SCORED_CATEGORIES, TOP_K, open_store
from tune_contextual import even_conversations

from labmem.core.metrics import any_hit_at_k, reciprocal_rank
from labmem.recall import (
    ContextualScorer,
    DenseScorer,
    RecallEngine,
    fuse_rankings,
    load_into_store,
    load_labeled_set,
    normalize_recall_query,
)
from labmem.recall.embedding import default_embedder, record_text

KS = (5.0, 10.0, 20.0, 30.0, 60.0, 100.0)
WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
DEPTHS = (10, 20, 50, 100)
SUM_WEIGHTS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
TEXTBOOK = ("rrf", 60.0, 0.5, 50)  # Cormack et al.'s k, equal weights: ties lean here


class Lists:
    """One question's lexical and dense rankings (id, score), best first, to max depth."""

    def __init__(self, lexical, dense, gold):
        self.lexical, self.dense, self.gold = lexical, dense, gold


def rankings(store, questions, as_of, depth: int) -> list[Lists]:
    lexical, dense = ContextualScorer(), DenseScorer()
    engine = RecallEngine(store, scorer=lexical)
    out = []
    for text, gold in questions:
        query = replace(normalize_recall_query(text, user_scope=store.user_scope, limit=10),
                        limit=depth)
        lex = lexical.rank_index(engine.index, query, as_of=as_of)
        den = dense.rank_index(engine.index, query, as_of=as_of)
        out.append(Lists([(h.memory_id, h.score) for h in lex.hits],
                         [(h.memory_id, h.score) for h in den.hits], gold))
    return out


def rrf(lists: Lists, k: float, weight: float, depth: int) -> list[str]:
    fused = fuse_rankings([m for m, _ in lists.lexical[:depth]],
                          [m for m, _ in lists.dense[:depth]], k=k, dense_weight=weight)
    return [f.memory_id for f in fused[:TOP_K]]


def weighted_sum(lists: Lists, weight: float, depth: int) -> list[str]:
    lex, den = lists.lexical[:depth], lists.dense[:depth]
    top_lex = lex[0][1] if lex and lex[0][1] > 0 else 1.0
    top_den = den[0][1] if den and den[0][1] > 0 else 1.0
    scores: dict[str, float] = {}
    for memory_id, score in lex:
        scores[memory_id] = (1 - weight) * score / top_lex
    for memory_id, score in den:
        scores[memory_id] = scores.get(memory_id, 0.0) + weight * score / top_den
    return [m for m, _ in sorted(scores.items(), key=lambda i: (-i[1], i[0]))[:TOP_K]]


def rank_of(setting, lists: Lists) -> list[str]:
    kind, k, weight, depth = setting
    if kind in ("lexical", "dense"):  # one ranking alone
        return [m for m, _ in getattr(lists, kind)[:TOP_K]]
    return rrf(lists, k, weight, depth) if kind == "rrf" else weighted_sum(lists, weight, depth)


def score(setting, locomo: list[Lists], labeled: list[Lists]) -> dict:
    return {
        "even_any@10": float(np.mean([any_hit_at_k(rank_of(setting, q), q.gold, TOP_K)
                                      for q in locomo])),
        "labeled_tune_mrr": float(np.mean([reciprocal_rank(rank_of(setting, q), q.gold)
                                           for q in labeled])),
    }


def encoding_costs(conversations, workdir: Path) -> dict:
    """Dense any@10 on the even half with float32 (exact), float16 and int8 vectors."""
    embedder = default_embedder()
    hits = {"float32": 0, "float16": 0, "int8": 0}
    total = 0
    for conv in conversations:
        store = open_store(conv, workdir / f"enc-{conv.sample_id}")
        records = store.read_all()
        ids = [r.memory_id for r in records]
        exact = embedder.embed([record_text(r) for r in records])
        questions = [q for q in conv.questions if q.gold and q.category in SCORED_CATEGORIES]
        engines = {enc: RecallEngine(store, scorer=DenseScorer(encoding=enc))
                   for enc in ("float16", "int8")}
        for q in questions:
            total += 1
            qv = embedder.embed([q.text])[0]
            order = np.lexsort((np.arange(len(ids)), -(exact @ qv)))[:TOP_K]
            hits["float32"] += any_hit_at_k([ids[i] for i in order], q.gold, TOP_K)
            for enc, engine in engines.items():
                ranked = [h.memory_id for h in engine.recall(q.text, limit=TOP_K,
                                                             as_of=conv.as_of).hits]
                hits[enc] += any_hit_at_k(ranked, q.gold, TOP_K)
    dims = embedder.dimensions
    return {enc: {"even_dense_any@10": round(h / total, 4),
                  "bytes_per_record": {"float32": 4 * dims, "float16": 2 * dims + 4,
                                       "int8": dims + 4}[enc]}
            for enc, h in hits.items()}


def render(report: dict) -> str:
    chosen = report["chosen"]
    lines = [
        "# Fused scorer tuning (bench/tune_fused.py)", "",
        f"Tuned on the even-indexed LoCoMo conversations ({report['even_questions']} questions, "
        f"categories 1–4) and the labeled set's tune split ({report['labeled_tune_queries']} "
        "queries) only. Objective: even any@10; ties: the higher labeled tune MRR, then the "
        "smaller depth, then nearest k = 60, weight ½.", "",
        f"Chosen: **{chosen['rule']}**, k = {chosen['k']:g}, dense weight = "
        f"{chosen['dense_weight']:g}, depth = {chosen['depth']} (even any@10 "
        f"{chosen['even_any@10']:.3f}, labeled tune MRR {chosen['labeled_tune_mrr']:.3f}, "
        f"labeled test MRR {report['chosen_test_mrr']:.3f}).", "",
        "Alone, on the same questions: contextual even any@10 "
        f"{report['alone']['contextual']['even_any@10']:.3f} (tune MRR "
        f"{report['alone']['contextual']['labeled_tune_mrr']:.3f}); dense "
        f"{report['alone']['dense']['even_any@10']:.3f} (tune MRR "
        f"{report['alone']['dense']['labeled_tune_mrr']:.3f}).", "",
        "## Best of each rule", "",
        "| rule | k | dense weight | depth | even any@10 | labeled tune MRR |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["best_by_rule"]:
        k = "–" if row["k"] is None else f"{row['k']:g}"
        lines.append(f"| {row['rule']} | {k} | {row['dense_weight']:g} | {row['depth']} | "
                     f"{row['even_any@10']:.3f} | {row['labeled_tune_mrr']:.3f} |")
    lines += ["", "## Stored vector encodings (dense alone, even half)", "",
              "| encoding | bytes per record (256 dims) | even dense any@10 |",
              "|---|---:|---:|"]
    for enc, row in report["encodings"].items():
        lines.append(f"| {enc} | {row['bytes_per_record']} | {row['even_dense_any@10']:.3f} |")
    lines += ["", "## Every RRF setting (even any@10 / labeled tune MRR)", "",
              "| k | weight | " + " | ".join(f"depth {d}" for d in DEPTHS) + " |",
              "|---:|---:|" + "---|" * len(DEPTHS)]
    table = {(r["k"], r["dense_weight"], r["depth"]): r for r in report["grid"]
             if r["rule"] == "rrf"}
    for k, w in itertools.product(KS, WEIGHTS):
        cells = " | ".join(f"{table[k, w, d]['even_any@10']:.3f} / "
                           f"{table[k, w, d]['labeled_tune_mrr']:.3f}" for d in DEPTHS)
        lines.append(f"| {k:g} | {w:g} | {cells} |")
    lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA_PATH)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"LoCoMo data not found at ../shared/data/locomo/{args.data.name}; "
              "nothing to tune (this is not an error).")
        return 0
    conversations = even_conversations(args.data)
    depth = max(DEPTHS)
    with tempfile.TemporaryDirectory(prefix="tune-fused-") as tmp:
        workdir = Path(tmp)
        locomo: list[Lists] = []
        for conv in conversations:
            progress(f"{conv.sample_id}: rankings to depth {depth}")
            questions = [(q.text, q.gold) for q in conv.questions
                         if q.gold and q.category in SCORED_CATEGORIES]
            locomo += rankings(open_store(conv, workdir), questions, conv.as_of, depth)
        labeled_set = load_labeled_set()
        labeled_store = load_into_store(labeled_set, workdir / "labeled")
        split = {s: rankings(labeled_store, [(q.text, q.gold) for q in
                                             labeled_set.queries_in(s)],
                             labeled_set.as_of, depth) for s in ("tune", "test")}
        progress("encodings")
        encodings = encoding_costs(conversations, workdir)
    settings = [("rrf", k, w, d) for k, w, d in itertools.product(KS, WEIGHTS, DEPTHS)]
    settings += [("weighted sum", None, w, d) for w, d in itertools.product(SUM_WEIGHTS, DEPTHS)]
    grid = [{"rule": s[0], "k": s[1], "dense_weight": s[2], "depth": s[3],
             **score(s, locomo, split["tune"])} for s in settings]
    def order(r):
        return (-r["even_any@10"], -r["labeled_tune_mrr"], r["depth"], r["rule"] != "rrf",
                abs((r["k"] or 0) - TEXTBOOK[1]) / 60
                + abs(r["dense_weight"] - TEXTBOOK[2]) * 2)
    chosen = min(grid, key=order)
    setting = (chosen["rule"], chosen["k"], chosen["dense_weight"], chosen["depth"])
    alone = {"contextual": ("lexical", None, 0.0, TOP_K), "dense": ("dense", None, 1.0, TOP_K)}
    report = {
        "even_conversations": [c.sample_id for c in conversations],
        "even_questions": len(locomo),
        "labeled_tune_queries": len(split["tune"]),
        "chosen": chosen,
        "chosen_test_mrr": score(setting, locomo, split["test"])["labeled_tune_mrr"],
        "alone": {name: score(s, locomo, split["tune"]) for name, s in alone.items()},
        "best_by_rule": [max((r for r in grid if r["rule"] == rule),
                             key=lambda r: (r["even_any@10"], r["labeled_tune_mrr"]))
                         for rule in ("rrf", "weighted sum")],
        "encodings": encodings,
        "grid": grid,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = render(report)
    (args.out / "tune_fused.md").write_text(markdown, encoding="utf-8")
    (args.out / "tune_fused.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
