"""Tune the BM25 and bm25_recency scorers on the labeled set's ``tune`` split; check on ``test``.

The grid: BM25 ``k1`` ∈ {0.6, 0.8, …, 2.0} (term-frequency saturation), ``b`` ∈ {0.3,
0.4, …, 1.0} (length normalization), and for bm25_recency also ``recency_weight`` ∈ {0,
0.05, 0.1, 0.15, 0.2, 0.3, 0.4}. Every setting is scored by mean reciprocal rank (MRR)
over the ``tune`` queries of ``data/recall/labeled_recall.json`` only; ties are broken by
hit@1, then by closeness to the defaults (k1 1.2, b 0.75, recency 0.15) — with 21
queries many settings tie, and the table says how many. The chosen settings are then
scored once on the held-out ``test`` queries, next to the defaults and the teaching
scorer. LoCoMo is never used here: it is evaluation data (bench/locomo_eval.py).

Run it::

    python bench/tune_scorers.py            # a few seconds; writes bench/results/tune_scorers.md
    python bench/tune_scorers.py --out /tmp/tune
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchlib import RESULTS_DIR, progress  # bench/ is on sys.path

from labmem.recall import (
    Bm25RecencyScorer,
    Bm25Scorer,
    RecallEngine,
    TeachingScorer,
    evaluate,
    load_into_store,
    load_labeled_set,
    summarize_by,
)

K1S = (0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
BS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0)
RECENCY = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)
DEFAULT = {"k1": 1.2, "b": 0.75, "recency_weight": 0.15}
KS = (1, 3, 5, 10)


def score(store, scorer, queries, as_of) -> dict:
    """MRR, hit@1, hit@3 and recall@10 of one scorer over ``queries``."""
    outcomes = evaluate({"x": RecallEngine(store, scorer=scorer)}, queries, as_of=as_of, ks=KS)
    row = summarize_by(outcomes, ("engine",)).iloc[0]
    return {"mrr": float(row["rr"]), "hit@1": float(row["hit@1"]),
            "hit@3": float(row["hit@3"]), "recall@10": float(row["recall@10"])}


def distance(setting: dict) -> float:
    return sum(abs(setting[k] - DEFAULT[k]) for k in setting)


def search(store, make, grid: list[dict], queries, as_of) -> tuple[dict, dict, list]:
    """Score every setting on ``queries``; the best by (MRR, hit@1, −distance to default)."""
    scored = [(setting, score(store, make(**setting), queries, as_of)) for setting in grid]
    key = lambda item: (item[1]["mrr"], item[1]["hit@1"], -distance(item[0]))  # noqa: E731
    best_setting, best = max(scored, key=key)
    return best_setting, best, scored


def fmt(setting: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in setting.items())


def metrics_cells(m: dict) -> str:
    return f"{m['mrr']:.3f} | {m['hit@1']:.3f} | {m['hit@3']:.3f} | {m['recall@10']:.3f}"


def by_kind_table(store, scorers: dict, queries, as_of) -> list[str]:
    outcomes = evaluate({n: RecallEngine(store, scorer=s) for n, s in scorers.items()},
                        queries, as_of=as_of, ks=KS)
    table = summarize_by(outcomes, ("kind", "engine"))
    kinds = list(dict.fromkeys(table["kind"]))
    lines = [f"| kind (queries) | {' | '.join(scorers)} |", "|---|" + "---:|" * len(scorers)]
    for kind in kinds:
        rows = table[table["kind"] == kind].set_index("engine")
        cells = " | ".join(f"{rows.loc[n, 'rr']:.2f}" for n in scorers)
        lines.append(f"| {kind} ({int(rows['queries'].iloc[0])}) | {cells} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    labeled = load_labeled_set()
    tune, test = labeled.queries_in("tune"), labeled.queries_in("test")
    as_of = labeled.as_of
    with tempfile.TemporaryDirectory(prefix="tune-") as tmp:
        store = load_into_store(labeled, tmp)
        progress(f"BM25: {len(K1S) * len(BS)} settings on {len(tune)} tune queries")
        bm25_grid = [{"k1": k1, "b": b} for k1 in K1S for b in BS]
        bm25_best, bm25_tune, bm25_all = search(store, Bm25Scorer, bm25_grid, tune, as_of)
        progress(f"bm25_recency: {len(bm25_grid) * len(RECENCY)} settings")
        hybrid_grid = [s | {"recency_weight": w} for s in bm25_grid for w in RECENCY]
        hybrid_best, hybrid_tune, hybrid_all = search(store, Bm25RecencyScorer, hybrid_grid, tune,
                                                      as_of)
        candidates = {
            "teaching": TeachingScorer(),
            "bm25 (default)": Bm25Scorer(),
            "bm25 (tuned)": Bm25Scorer(**bm25_best),
            "bm25_recency (default)": Bm25RecencyScorer(),
            "bm25_recency (tuned)": Bm25RecencyScorer(**hybrid_best),
        }
        results = {name: (score(store, s, tune, as_of), score(store, s, test, as_of))
                   for name, s in candidates.items()}
        # the recency sweep at the tuned k1 and b: what recency alone changes
        sweep = [(w, score(store, Bm25RecencyScorer(bm25_best["k1"], bm25_best["b"], w), tune,
                           as_of),
                  score(store, Bm25RecencyScorer(bm25_best["k1"], bm25_best["b"], w), test, as_of))
                 for w in RECENCY]
        kinds = by_kind_table(store, candidates, test, as_of)
    ties_bm25 = sum(1 for _, m in bm25_all if m["mrr"] == bm25_tune["mrr"])
    ties_hybrid = sum(1 for _, m in hybrid_all if m["mrr"] == hybrid_tune["mrr"])
    heat = {(s["k1"], s["b"]): m["mrr"] for s, m in bm25_all}
    lines = [
        "# Scorer tuning on the labeled recall set (bench/tune_scorers.py)", "",
        f"Labeled set: {len(labeled.records)} records, {len(tune)} tune and {len(test)} test "
        f"queries, asked as of {as_of:%Y-%m-%d}. Settings chosen by MRR on **tune** only "
        "(ties: hit@1, then closeness to the defaults); LoCoMo is never used for tuning.", "",
        f"- best BM25: **{fmt(bm25_best)}** (tune MRR {bm25_tune['mrr']:.3f}; "
        f"{ties_bm25} of {len(bm25_all)} settings tie on MRR)",
        f"- best bm25_recency: **{fmt(hybrid_best)}** (tune MRR {hybrid_tune['mrr']:.3f}; "
        f"{ties_hybrid} of {len(hybrid_all)} settings tie on MRR)", "",
        "## Tune vs held-out test", "",
        "| scorer | settings | tune MRR | hit@1 | hit@3 | recall@10 | test MRR | hit@1 | hit@3 "
        "| recall@10 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, scorer in candidates.items():
        tune_m, test_m = results[name]
        setting = repr(scorer).split("(", 1)[1].rstrip(")") or "—"
        lines.append(f"| {name} | {setting} | {metrics_cells(tune_m)} | {metrics_cells(test_m)} |")
    lines += [
        "", f"## Recency weight at k1={bm25_best['k1']:g}, b={bm25_best['b']:g}", "",
        "| recency_weight | tune MRR | tune hit@1 | test MRR | test hit@1 |",
        "|---:|---:|---:|---:|---:|",
        *(f"| {w:g} | {a['mrr']:.3f} | {a['hit@1']:.3f} | {t['mrr']:.3f} | {t['hit@1']:.3f} |"
          for w, a, t in sweep),
        "", "## Test MRR per query kind", "", *kinds,
        "", "## BM25 tune MRR over k1 × b", "",
        "| k1 \\ b | " + " | ".join(f"{b:g}" for b in BS) + " |",
        "|---:|" + "---:|" * len(BS),
        *(f"| {k1:g} | " + " | ".join(f"{heat[(k1, b)]:.3f}" for b in BS) + " |" for k1 in K1S),
        "",
    ]
    markdown = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tune_scorers.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
