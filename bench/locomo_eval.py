"""Evaluation: how often does recall bring back the turns a LoCoMo question is about?

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0) is read in place from
``../shared/data/locomo/locomo10.json`` (seen from the repo root) and never copied into
the project; when the file is absent this script says so and exits 0.

How the data becomes labmem records (issue 16's mapping, so that independent checks
agree) — one conversation is one user scope and one store; one turn is one conversation
record, appended in conversation order:

* ``memory_id``   — the turn's ``dia_id`` (``D3:12``);
* ``content``     — the turn's text, with `` [image: <blip_caption>]`` appended when the
  turn shared an image;
* ``summary``     — the first 200 characters of the content;
* ``source``      — ``MemorySource(f"{sample_id}:{dia_id}", "locomo_turn", <speaker>,
  <the session's date_time, e.g. "1:56 pm on 8 May, 2023", read as UTC>)``, so a
  record's thread (its source id up to the last ``:``) is its session;
* queries are the question text, asked ``as_of`` the conversation's last session, with
  ``limit=10``;
* evidence: each evidence entry is split on ``;`` and whitespace, each part stripped; a
  few entries hold two ids, a few ids match no turn (counted and dropped). A question
  whose evidence is empty, or all unresolvable, is counted and not scored.

Metrics, per question, from each engine's top 10: any-evidence recall@k (1 if any
evidence turn is in the top k; LoCoMo's usual "recall@k") for k = 1, 5, 10, and
full-evidence recall@10 (every evidence turn in the top 10). The overall row is
categories 1–4 (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop); category 5
(adversarial) is reported apart.

Splits: the contextual scorer's weights were tuned on the **even-indexed** conversations
(0, 2, 4, 6, 8 in file order) and the labeled set's tune split only
(``bench/tune_contextual.py``); every figure is reported on the **odd-indexed** half
(1, 3, 5, 7, 9, held out), the even half and all ten, with every peer in the same run.

Engines: labmem's ``RecallEngine`` with each scorer (teaching, bm25, bm25_recency,
contextual, dense, fused; the contextual one also over a SQLite store, which must rank
identically; dense also with float16 vectors, to show what int8 costs), and the
peers, each given the record's searchable text (source title, summary, content):
``rank_bm25.BM25Okapi``, ``bm25s`` and SQLite FTS5 ``bm25()`` on labmem's plain terms;
SQLite FTS5 with its own ``porter`` tokenizer (the question's words OR-ed); ``bm25s`` with
its own tokenizer and English stop words, and with the Snowball stemmer too. Peers return
only records sharing a term with the question (score > 0), as labmem does. Latency is
per question, p50, in µs, this machine only.

The ablation adds the contextual scorer's steps one at a time, from plain BM25 (which
the contextual scorer reproduces exactly with plain terms, b = 0.75 and the title
counted with the text) to the full scorer, and reports each step's gain on the held-out
half; a second table measures each step alone on top of plain BM25.

Dense and fused (labmem.recall.dense): the packaged WordLlama model, vectors computed
when a store is first indexed (not timed: a per-question latency counts only the query's
own embedding and the scan). The fused scorer's settings were chosen on the even half and
the labeled tune split only (bench/tune_fused.py). Two more sections: the labeled en+zh
set by language (does the packaged model handle the Chinese queries?), and the exact
dense scan timed at growing store sizes (synthetic int8 rows).

Run it::

    python bench/locomo_eval.py                       # all 10 conversations, ~1 minute
    python bench/locomo_eval.py --limit-conversations 2 --out /tmp/locomo

It writes ``locomo_eval.md``, ``locomo_eval.json`` and ``locomo_eval.png`` to ``--out``
(default ``bench/results/``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from benchlib import REPO_ROOT, RESULTS_DIR, Timing, progress  # bench/ is on sys.path

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.core.metrics import any_hit_at_k, full_hit_at_k
from labmem.core.provenance import MemorySource
from labmem.core.text import term_frequencies
from labmem.recall import (
    ContextualScorer,
    DenseScorer,
    EnglishAnalyzer,
    MemoryKind,
    RecallEngine,
    RemoteMemoryStore,
    SqliteMemoryStore,
    StoredMemory,
    ablation_ladder,
    record_terms,
)

DATA_PATH = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
              5: "adversarial"}
SCORED_CATEGORIES = (1, 2, 3, 4)
TOP_K = 10
KS = (1, 5, 10)
SUMMARY_CHARS = 200
SPLITS = {"odd": "odd half (1, 3, 5, 7, 9: held out)",
          "even": "even half (0, 2, 4, 6, 8: tuned on)", "all": "all ten"}
LABMEM_SCORERS = ("teaching", "bm25", "bm25_recency", "contextual", "dense", "fused")
CONTEXTUAL = "labmem contextual"
DENSE = "labmem dense"
FUSED = "labmem fused"
DENSE_FLOAT16 = "labmem dense (float16 vectors)"
SCAN_SIZES = (1_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000)
CONTEXTUAL_SQLITE = "labmem contextual (SQLite)"
PEERS = ("rank_bm25 BM25Okapi", "bm25s", "SQLite FTS5 bm25", "SQLite FTS5 porter",
         "bm25s (own tokenizer, English stopwords)",
         "bm25s (own tokenizer, stopwords, Snowball stemmer)")
FTS5 = "SQLite FTS5 bm25"
FTS5_PORTER = "SQLite FTS5 porter"
# the lexical peers the contextual scorer is held against (issue 16): FTS5 with the porter
# tokenizer, bm25s with a stemmer, rank_bm25
TARGET_PEERS = ("SQLite FTS5 porter", "bm25s (own tokenizer, stopwords, Snowball stemmer)",
                "rank_bm25 BM25Okapi")
_EVIDENCE_SPLIT = re.compile(r"[;\s]+")
_WORD = re.compile(r"\w+")

# -- the ablation: the contextual scorer's steps, from plain BM25 to the full scorer ------

FINAL = ContextualScorer()
PLAIN_BM25 = ablation_ladder()[0][1]


def ladder() -> list[tuple[str, ContextualScorer]]:
    """Each step adds one thing to the one before; the last is the tuned default."""
    return list(ablation_ladder())


def alone() -> list[tuple[str, ContextualScorer]]:
    """Each step (and each half of the analyzer step) alone, on top of plain BM25."""
    base = PLAIN_BM25
    return [
        ("stemming only (no stop words)",
         replace(base, analyzer=EnglishAnalyzer(stop_words=frozenset()))),
        ("stop words only (no stemming)", replace(base, analyzer=EnglishAnalyzer(stem=False))),
        ("a 33-word stop list (Lucene's) + stemming",
         replace(base, analyzer=EnglishAnalyzer(stop_words=LUCENE_STOP_WORDS))),
        ("stop words and stemming", replace(base, analyzer=FINAL.analyzer)),
        (f"b = {FINAL.b:g}", replace(base, b=FINAL.b)),
        (f"k1 = {FINAL.k1:g}", replace(base, k1=FINAL.k1)),
        ("title and date as fields", replace(base, title=FINAL.title, date=FINAL.date)),
        ("neighbours", replace(base, previous=FINAL.previous, next=FINAL.next)),
        ("thread score", replace(base, thread=FINAL.thread)),
    ]


# Lucene's (and bm25s's) English stop list: the "33-word list" of issue 16.
LUCENE_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split())


# -- reading LoCoMo ------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    captured_at: datetime


@dataclass(frozen=True)
class Question:
    number: int
    text: str
    category: int
    gold: tuple[str, ...]  # resolvable evidence ids (memory ids)
    unresolved: tuple[str, ...]  # evidence ids that match no turn
    had_evidence: bool


@dataclass(frozen=True)
class Conversation:
    index: int  # position in the file: even ones are tuned on, odd ones held out
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    as_of: datetime


def parse_session_time(text: str) -> datetime:
    """"1:56 pm on 8 May, 2023" → an aware UTC datetime (LoCoMo gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(evidence: Sequence[str]) -> list[str]:
    """Every id in an evidence list; one entry may hold several (``"D8:6; D9:17"``)."""
    return [part.strip() for item in evidence for part in _EVIDENCE_SPLIT.split(item)
            if part.strip()]


def read_conversation(index: int, raw: dict) -> Conversation:
    conv = raw["conversation"]
    sessions = sorted((int(m.group(1)), key) for key in conv
                      if (m := re.fullmatch(r"session_(\d+)", key)) and conv[key])
    turns = []
    for number, key in sessions:
        at = parse_session_time(conv[f"session_{number}_date_time"])
        turns += [Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption") or "", at)
                  for t in conv[key]]
    known = {t.dia_id for t in turns}
    questions = []
    for number, qa in enumerate(raw["qa"]):
        ids = evidence_ids(qa.get("evidence", []))
        questions.append(Question(
            number=number, text=qa["question"], category=int(qa["category"]),
            gold=tuple(dict.fromkeys(i for i in ids if i in known)),
            unresolved=tuple(i for i in ids if i not in known),
            had_evidence=bool(qa.get("evidence")),
        ))
    return Conversation(index, raw["sample_id"], tuple(turns), tuple(questions),
                        max(t.captured_at for t in turns))


def turn_content(turn: Turn) -> str:
    return f"{turn.text} [image: {turn.caption}]" if turn.caption else turn.text


def draft_of(sample_id: str, turn: Turn) -> dict:
    """Issue 16's record mapping of one turn."""
    content = turn_content(turn)
    return {
        "kind": MemoryKind.CONVERSATION,
        "content": content,
        "summary": content[:SUMMARY_CHARS],
        "source": MemorySource(f"{sample_id}:{turn.dia_id}", "locomo_turn", turn.speaker,
                               turn.captured_at),
        "memory_id": turn.dia_id,
    }


def load_conversations(path: Path, limit: int | None = None) -> tuple[list, list[Conversation]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    if limit is not None:
        raw = raw[:limit]
    return raw, [read_conversation(i, r) for i, r in enumerate(raw)]


def open_store(conv: Conversation, workdir: Path, backend: str = "jsonl"):
    """One conversation as one user's store, its turns appended in conversation order."""
    clock = FixedClock(conv.as_of)
    if backend == "sqlite":
        store = SqliteMemoryStore(workdir / f"{conv.sample_id}.sqlite", user_id=conv.sample_id,
                                  clock=clock)
    else:
        store = RemoteMemoryStore(workdir / f"{conv.sample_id}.jsonl", user_id=conv.sample_id,
                                  clock=clock)
    store.append_many([draft_of(conv.sample_id, t) for t in conv.turns])
    return store


# -- the labmem side -----------------------------------------------------------------


def labmem_ranker(engine: RecallEngine, as_of: datetime) -> Callable[[str], list[str]]:
    def rank(question: str) -> list[str]:
        try:
            result = engine.recall(question, limit=TOP_K, as_of=as_of)
        except InvalidInputError:  # a question with no searchable term
            return []
        return [hit.memory_id for hit in result.hits]
    return rank


# -- the peers -----------------------------------------------------------------------


def labmem_tokens(text: str) -> list[str]:
    """labmem's plain terms as a token list (bag of words: order does not matter to BM25)."""
    return list(term_frequencies(text).elements())


def top_positive(scores, ids: Sequence[str]) -> list[str]:
    """Ids of the best ``TOP_K`` scores above 0; ties keep storage order."""
    order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
    return [ids[i] for i in order[:TOP_K]]


def rank_bm25_ranker(docs: list[list[str]], ids: list[str]):
    from rank_bm25 import BM25Okapi

    model = BM25Okapi(docs)
    return lambda question: top_positive(model.get_scores(labmem_tokens(question)), ids)


def bm25s_ranker(docs: list[list[str]], ids: list[str], tokenize: Callable[[str], list[str]]):
    import bm25s

    model = bm25s.BM25()
    model.index(docs, show_progress=False)
    k = min(TOP_K, len(ids))

    def rank(question: str) -> list[str]:
        tokens = tokenize(question)
        if not tokens:
            return []
        found, scores = model.retrieve([tokens], k=k, show_progress=False)
        return [ids[int(d)] for d, s in zip(found[0], scores[0], strict=True) if s > 0]
    return rank


def bm25s_own_tokens(text: str, stemmer=None) -> list[str]:
    import bm25s

    return bm25s.tokenize([text], stopwords="en", stemmer=stemmer, return_ids=False,
                          show_progress=False)[0]


def snowball_tokens() -> Callable[[str], list[str]]:
    """bm25s's tokenizer with English stop words and the Snowball (Porter 2) stemmer."""
    import Stemmer  # PyStemmer

    stemmer = Stemmer.Stemmer("english")
    return lambda text: bm25s_own_tokens(text, stemmer)


def fts5_ranker(texts: list[str], ids: list[str], *, porter: bool):
    """SQLite FTS5 ranked by ``bm25()``: over labmem's terms (unicode61), or over the raw
    text with FTS5's own ``porter`` tokenizer, the question's words OR-ed."""
    db = sqlite3.connect(":memory:")
    tokenizer = "porter unicode61" if porter else "unicode61"
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(memory_id UNINDEXED, body, "
               f"tokenize='{tokenizer}')")
    db.executemany("INSERT INTO fts VALUES (?, ?)", zip(ids, texts, strict=True))

    def rank(question: str) -> list[str]:
        words = (sorted(set(_WORD.findall(question.lower()))) if porter
                 else sorted(set(labmem_tokens(question))))
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = db.execute("SELECT memory_id FROM fts WHERE fts MATCH ? "
                          "ORDER BY bm25(fts), rowid LIMIT ?", (match, TOP_K))
        return [row[0] for row in rows]
    return rank


def searchable_text(record: StoredMemory) -> str:
    """Exactly what labmem searches (:func:`labmem.recall.index.record_terms`' input)."""
    return "\n".join((record.source.title, record.summary, record.content))


def peer_rankers(records: Sequence[StoredMemory]) -> dict[str, Callable[[str], list[str]]]:
    ids = [r.memory_id for r in records]
    docs = [list(record_terms(r).elements()) for r in records]
    texts = [searchable_text(r) for r in records]
    stemmed = snowball_tokens()
    return {
        PEERS[0]: rank_bm25_ranker(docs, ids),
        PEERS[1]: bm25s_ranker(docs, ids, labmem_tokens),
        PEERS[2]: fts5_ranker([" ".join(d) for d in docs], ids, porter=False),
        PEERS[3]: fts5_ranker(texts, ids, porter=True),
        PEERS[4]: bm25s_ranker([bm25s_own_tokens(t) for t in texts], ids, bm25s_own_tokens),
        PEERS[5]: bm25s_ranker([stemmed(t) for t in texts], ids, stemmed),
    }


# -- one conversation ----------------------------------------------------------------


def ablation_names() -> list[str]:
    return [f"ladder: {name}" for name, _ in ladder()] + [f"alone: {n}" for n, _ in alone()]


def engine_names() -> list[str]:
    return ([f"labmem {s}" for s in LABMEM_SCORERS] + [DENSE_FLOAT16, CONTEXTUAL_SQLITE]
            + list(PEERS))


def evaluate_conversation(conv: Conversation, workdir: Path, *,
                          ablation: bool = True) -> list[dict]:
    """One row per (engine, scored question): hits, metrics and latency."""
    store = open_store(conv, workdir)
    sqlite_store = open_store(conv, workdir, "sqlite")
    records = store.read_all()
    rankers: dict[str, Callable[[str], list[str]]] = {
        f"labmem {name}": labmem_ranker(RecallEngine(store, scorer=name), conv.as_of)
        for name in LABMEM_SCORERS
    }
    rankers[DENSE_FLOAT16] = labmem_ranker(
        RecallEngine(store, scorer=DenseScorer(encoding="float16")), conv.as_of)
    rankers[CONTEXTUAL_SQLITE] = labmem_ranker(
        RecallEngine(sqlite_store, scorer="contextual"), conv.as_of)
    for engine in ("dense", "fused", DENSE_FLOAT16):  # vectors computed when indexed, not
        name = engine if engine.startswith("labmem") else f"labmem {engine}"  # per question
        rankers[name]("warm up")
    rankers |= peer_rankers(records)
    if ablation:
        shared = RecallEngine(store, scorer=PLAIN_BM25)  # one index for every variant
        for name, scorer in [*(("ladder: " + n, s) for n, s in ladder()),
                             *(("alone: " + n, s) for n, s in alone())]:
            engine = RecallEngine(store, scorer=scorer)
            engine.index = shared.index
            rankers[name] = labmem_ranker(engine, conv.as_of)
    rows = []
    for question in conv.questions:
        if not question.gold:
            continue
        for engine, rank in rankers.items():
            start = time.perf_counter()
            ranked = rank(question.text)
            seconds = time.perf_counter() - start
            row = {"engine": engine, "conversation": conv.sample_id, "index": conv.index,
                   "question": question.number, "category": question.category,
                   "seconds": seconds, "ranked": ranked}
            row |= {f"any@{k}": any_hit_at_k(ranked, question.gold, k) for k in KS}
            row["full@10"] = full_hit_at_k(ranked, question.gold, TOP_K)
            rows.append(row)
    sqlite_store.close()
    return rows


# -- summaries and output ------------------------------------------------------------

METRICS = ("any@1", "any@5", "any@10", "full@10")


def in_split(row: dict, split: str) -> bool:
    return split == "all" or (row["index"] % 2 == 1) == (split == "odd")


def summarize(rows: list[dict], engines: Sequence[str], split: str = "all") -> dict:
    """Per engine: overall (categories 1–4), each category, and p50 latency."""
    out = {}
    for engine in engines:
        mine = [r for r in rows if r["engine"] == engine and in_split(r, split)]
        groups = {"overall (1-4)": [r for r in mine if r["category"] in SCORED_CATEGORIES]}
        for cat, name in CATEGORIES.items():
            groups[f"{cat} {name}"] = [r for r in mine if r["category"] == cat]
        out[engine] = {
            group: {"questions": len(rs)} | {
                m: round(sum(r[m] for r in rs) / len(rs), 4) if rs else None for m in METRICS}
            for group, rs in groups.items()
        }
        out[engine]["p50_us"] = round(Timing.of([r["seconds"] for r in mine]).p50, 1) \
            if mine else None
    return out


def backends_agree(rows: list[dict]) -> dict:
    """Did the JSONL and SQLite contextual engines return the same ranking everywhere?"""
    jsonl = {(r["conversation"], r["question"]): r["ranked"] for r in rows
             if r["engine"] == CONTEXTUAL}
    sqlite = {(r["conversation"], r["question"]): r["ranked"] for r in rows
              if r["engine"] == CONTEXTUAL_SQLITE}
    differ = sum(1 for key, ranked in jsonl.items() if sqlite.get(key) != ranked)
    return {"questions": len(jsonl), "rankings_that_differ": differ}


def fmt_metric(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown_table(summary: dict, group: str) -> list[str]:
    lines = [f"| engine | questions | {' | '.join(METRICS)} | p50 µs |",
             "|---|---:|" + "---:|" * (len(METRICS) + 1)]
    for engine, groups in summary.items():
        g = groups[group]
        cells = " | ".join(fmt_metric(g[m]) for m in METRICS)
        lines.append(f"| {engine} | {g['questions']} | {cells} | {groups['p50_us']:,.0f} |")
    return lines


def category_table(summary: dict, metric: str) -> list[str]:
    groups = ["overall (1-4)"] + [f"{c} {n}" for c, n in CATEGORIES.items()]
    lines = [f"| engine | {' | '.join(groups)} |", "|---|" + "---:|" * len(groups)]
    for engine, per in summary.items():
        cells = " | ".join(fmt_metric(per[g][metric]) for g in groups)
        lines.append(f"| {engine} | {cells} |")
    return lines


def any10(summary: dict, engine: str) -> float:
    return summary[engine]["overall (1-4)"]["any@10"]


def ablation_table(ablations: dict, names: Sequence[str], *, cumulative: bool) -> list[str]:
    """any@10 (categories 1–4) per split; the gain over the row before (ladder) or over
    plain BM25 (alone), on the held-out odd half."""
    base_name = "ladder: " + ladder()[0][0]
    lines = ["| step | odd any@10 | gain (odd) | even any@10 | all any@10 |",
             "|---|---:|---:|---:|---:|"]
    previous = ablations["odd"][base_name]["overall (1-4)"]["any@10"]
    base = previous
    if not cumulative:
        lines.append(f"| plain BM25 | {base:.3f} | — | "
                     f"{any10(ablations['even'], base_name):.3f} | "
                     f"{any10(ablations['all'], base_name):.3f} |")
    for i, name in enumerate(names):
        odd = any10(ablations["odd"], name)
        gain = "—" if cumulative and i == 0 else f"{odd - (previous if cumulative else base):+.3f}"
        label = name.split(": ", 1)[1]
        lines.append(f"| {label} | {odd:.3f} | {gain} | {any10(ablations['even'], name):.3f} | "
                     f"{any10(ablations['all'], name):.3f} |")
        previous = odd
    return lines


def targets(summaries: dict) -> list[str]:
    lines = ["| target | odd half | all ten | met |", "|---|---:|---:|:---:|"]
    odd, full = summaries["odd"], summaries["all"]
    ok = any10(odd, CONTEXTUAL) >= 0.80 and any10(full, CONTEXTUAL) >= 0.80
    lines.append(f"| contextual any@10 ≥ 0.80 | {any10(odd, CONTEXTUAL):.3f} | "
                 f"{any10(full, CONTEXTUAL):.3f} | {'yes' if ok else 'no'} |")
    for peer in TARGET_PEERS:
        d_odd = any10(odd, CONTEXTUAL) - any10(odd, peer)
        d_all = any10(full, CONTEXTUAL) - any10(full, peer)
        ok = d_odd >= 0.15 and d_all >= 0.15
        lines.append(f"| ≥ 0.15 above {peer} | {d_odd:+.3f} | {d_all:+.3f} | "
                     f"{'yes' if ok else 'no'} |")
    ok = any10(odd, FUSED) >= 0.85
    lines.append(f"| fused any@10 ≥ 0.85 (issue 36) | {any10(odd, FUSED):.3f} | "
                 f"{any10(full, FUSED):.3f} | {'yes' if ok else 'no'} |")
    r_odd = odd[FUSED]["p50_us"] / odd[CONTEXTUAL]["p50_us"]
    r_all = full[FUSED]["p50_us"] / full[CONTEXTUAL]["p50_us"]
    lines.append(f"| fused p50 ≤ 2 × contextual's (issue 36) | ×{r_odd:.2f} | ×{r_all:.2f} | "
                 f"{'yes' if r_odd <= 2 and r_all <= 2 else 'no'} |")
    for peer in (FTS5_PORTER, FTS5):
        r_odd = odd[CONTEXTUAL]["p50_us"] / odd[peer]["p50_us"]
        r_all = full[CONTEXTUAL]["p50_us"] / full[peer]["p50_us"]
        ok = r_odd <= 2 and r_all <= 2
        lines.append(f"| p50 ≤ 2 × {peer}'s | ×{r_odd:.2f} | ×{r_all:.2f} | "
                     f"{'yes' if ok else 'no'} |")
    return lines


def render_markdown(report: dict) -> str:
    facts = report["data"]
    lines = [
        "# LoCoMo evidence recall (bench/locomo_eval.py)", "",
        f"Data: `locomo10.json` sha256 `{facts['sha256']}`; {facts['conversations']} "
        f"conversations, {facts['turns']:,} turns ({facts['captioned_turns']:,} with an image "
        f"caption, appended to the content), {facts['questions']:,} questions "
        f"({facts['scored_questions']:,} scored, of which {facts['scored_1_4']:,} in "
        f"categories 1–4). Evidence ids matching no turn: {facts['unresolvable_evidence_ids']}; "
        f"questions without evidence: {facts['questions_without_evidence']}; with evidence "
        f"but none resolvable: {facts['questions_all_unresolvable']}.", "",
        "Each engine searches one conversation's turns (one user scope) and returns its top "
        "10. `any@k` = share of questions with at least one evidence turn in the top k; "
        "`full@10` = every evidence turn in the top 10. The contextual scorer was tuned on "
        "the even half and the labeled set's tune split only (bench/tune_contextual.py); "
        "the odd half is held out. Latency: per question, p50, this machine only.", "",
        f"The JSONL and SQLite contextual engines returned the same ranking for "
        f"{report['backends']['questions'] - report['backends']['rankings_that_differ']} of "
        f"{report['backends']['questions']} questions.", "",
    ]
    if set(report["splits"]) == set(SPLITS):  # both halves present (not a smoke run)
        ladder_names = [n for n in report["ablation"]["odd"] if n.startswith("ladder: ")]
        alone_names = [n for n in report["ablation"]["odd"] if n.startswith("alone: ")]
        lines += [
            "## Targets", "", *targets(report["splits"]), "",
            *dense_summary(report),
            "## Ablation: each step's gain on the held-out odd half (any@10, categories 1–4)",
            "", *ablation_table(report["ablation"], ladder_names, cumulative=True), "",
            "Each step alone, on top of plain BM25:", "",
            *ablation_table(report["ablation"], alone_names, cumulative=False), "",
        ]
    for split, title in SPLITS.items():
        if split not in report["splits"]:
            continue
        summary = report["splits"][split]
        lines += [
            f"## {title[0].upper() + title[1:]}", "",
            "Overall (categories 1–4):", "", *markdown_table(summary, "overall (1-4)"), "",
            "Category 5 (adversarial; reported apart):", "",
            *markdown_table(summary, "5 adversarial"), "",
            "any@10 per category:", "", *category_table(summary, "any@10"), "",
        ]
    lines += ["## full@10 per category (all conversations run)", "",
              *category_table(report["splits"]["all"], "full@10"), ""]
    lines += labeled_section(report["labeled"]) + scan_section(report["dense_scan"])
    return "\n".join(lines)


def dense_summary(report: dict) -> list[str]:
    """What the dense and fused rows say, in numbers from this run."""
    splits = report["splits"]
    rows = ["## Dense and fused, in short", "",
            "| any@10 (categories 1–4) | odd half | even half | all ten |",
            "|---|---:|---:|---:|"]
    for engine in (CONTEXTUAL, DENSE, DENSE_FLOAT16, FUSED):
        rows.append(f"| {engine} | " + " | ".join(f"{any10(splits[s], engine):.3f}"
                                                  for s in ("odd", "even", "all")) + " |")
    gain = {s: any10(splits[s], FUSED) - any10(splits[s], CONTEXTUAL) for s in splits}
    p50 = {e: splits["all"][e]["p50_us"] for e in (CONTEXTUAL, DENSE, FUSED)}
    by = {(r["engine"], r["language"]): r for r in report["labeled"]["rows"]}
    zh, en = by[(DENSE, "zh")], by[(DENSE, "en")]
    rows += [
        "",
        f"The packaged model alone finds an evidence turn in the top 10 for "
        f"{any10(splits['odd'], DENSE):.0%} of the held-out questions, the contextual "
        f"scorer for {any10(splits['odd'], CONTEXTUAL):.0%}. Fusing them (weighted "
        f"reciprocal rank, settings from bench/tune_fused.py) changes any@10 by "
        f"{gain['odd']:+.3f} on the held-out half ({gain['even']:+.3f} on the even half it "
        f"was tuned on); p50 over all ten: contextual {p50[CONTEXTUAL]:,.0f} µs, dense "
        f"{p50[DENSE]:,.0f} µs, fused {p50[FUSED]:,.0f} µs "
        f"(×{p50[FUSED] / p50[CONTEXTUAL]:.2f} the contextual scorer's).",
        "",
        f"On the labeled set the packaged model "
        f"{'handles' if zh['hit@10'] >= en['hit@10'] - 0.1 else 'does not handle'} the "
        f"Chinese queries as well as the English ones: dense MRR "
        f"{zh['mrr']:.3f} on zh vs {en['mrr']:.3f} on en (hit@10 {zh['hit@10']:.3f} vs "
        f"{en['hit@10']:.3f}); fused MRR {by[(FUSED, 'zh')]['mrr']:.3f} on zh vs the "
        f"contextual scorer's {by[(CONTEXTUAL, 'zh')]['mrr']:.3f}.", "",
    ]
    return rows


def labeled_section(labeled: dict) -> list[str]:
    lines = ["## The labeled en+zh set, by language (data/recall/labeled_recall.json)", "",
             "All queries (tune and test); hit@10 = any gold record in the top 10.", "",
             "| engine | language | queries | hit@1 | hit@10 | MRR |",
             "|---|---|---:|---:|---:|---:|"]
    for row in labeled["rows"]:
        lines.append(f"| {row['engine']} | {row['language']} | {row['queries']} | "
                     f"{row['hit@1']:.3f} | {row['hit@10']:.3f} | {row['mrr']:.3f} |")
    return lines + [""]


def scan_section(scan: dict) -> list[str]:
    lines = ["## The exact dense scan, by store size", "",
             f"`labmem.recall.vectors.scan_cosines` over synthetic int8 rows of "
             f"{scan['dimensions']} dimensions (what DenseScorer scans per query), p50 of "
             f"{scan['repeats']} runs, this machine only (2 cores shared with other work).", "",
             "| records | p50 ms | int8 vectors MB |", "|---:|---:|---:|"]
    for row in scan["rows"]:
        lines.append(f"| {row['records']:,} | {row['p50_ms']:.2f} | {row['megabytes']:.1f} |")
    return lines + ["", f"Largest size measured under 10 ms: {scan['under_10ms']:,} records.",
                    ""]


def labeled_by_language() -> dict:
    """Contextual, dense and fused on the labeled en+zh set, per query language."""
    from labmem.recall import evaluate, load_into_store, load_labeled_set

    labeled = load_labeled_set()
    with tempfile.TemporaryDirectory(prefix="labeled-") as tmp:
        store = load_into_store(labeled, Path(tmp))
        engines = {f"labmem {s}": RecallEngine(store, scorer=s)
                   for s in ("contextual", "dense", "fused")}
        outcomes = evaluate(engines, labeled.queries, as_of=labeled.as_of, ks=(1, 10))
    rows = []
    for engine in engines:
        for language in sorted({q.language for q in labeled.queries}):
            mine = [o for o in outcomes if o.engine == engine and o.language == language]
            rows.append({"engine": engine, "language": language, "queries": len(mine),
                         "hit@1": sum(o.any_hit[1] for o in mine) / len(mine),
                         "hit@10": sum(o.any_hit[10] for o in mine) / len(mine),
                         "mrr": sum(o.reciprocal_rank for o in mine) / len(mine)})
    return {"rows": rows}


def dense_scan(repeats: int = 15, dimensions: int = 256) -> dict:
    """p50 time of one exact scan of n int8 rows, for growing n."""
    import numpy as np

    from labmem.recall.vectors import scan_cosines

    rng = np.random.default_rng(36)
    query = rng.standard_normal(dimensions)
    query /= np.linalg.norm(query)
    rows = []
    for n in SCAN_SIZES:
        codes = rng.integers(-127, 128, (n, dimensions), dtype=np.int8)
        inv = (1 / np.linalg.norm(codes.astype(np.float32), axis=1)).astype(np.float32)
        timings = []
        for _ in range(repeats):
            start = time.perf_counter()
            scan_cosines(codes, inv, query)
            timings.append(time.perf_counter() - start)
        rows.append({"records": n, "p50_ms": round(Timing.of(timings).p50 / 1000, 3),
                     "megabytes": round((codes.nbytes + inv.nbytes) / 1e6, 1)})
    under = [r["records"] for r in rows if r["p50_ms"] < 10]
    return {"dimensions": dimensions, "repeats": repeats, "rows": rows,
            "under_10ms": max(under) if under else 0}


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8),
                                      gridspec_kw={"width_ratios": [1.2, 1]})
    shown = [s for s in ("odd", "all") if s in report["splits"]]
    engines = list(report["splits"]["all"])
    x = np.arange(len(engines))
    width = 0.8 / len(shown)
    for i, split in enumerate(shown):
        values = [any10(report["splits"][split], e) for e in engines]
        left.bar(x + (i - (len(shown) - 1) / 2) * width, values, width, label=SPLITS[split])
    left.set_xticks(x, engines, rotation=40, ha="right", fontsize=7)
    left.set_ylim(0, 1)
    left.set_ylabel("any-evidence recall@10 (categories 1–4)")
    left.set_title("labmem and peers, same run")
    left.legend(fontsize=8)
    held_out = "odd" if "odd" in report["ablation"] else "all"
    steps = [n for n in report["ablation"][held_out] if n.startswith("ladder: ")]
    values = [any10(report["ablation"][held_out], n) for n in steps]
    right.plot(range(len(steps)), values, marker="o")
    for i, v in enumerate(values):
        right.annotate(f"{v:.3f}", (i, v), textcoords="offset points", xytext=(0, 6),
                       ha="center", fontsize=7)
    right.set_xticks(range(len(steps)), [n.split(": ", 1)[1] for n in steps], rotation=40,
                     ha="right", fontsize=7)
    right.set_ylim(min(values) - 0.05, min(1.0, max(values) + 0.05))
    right.set_title(f"ablation on the {SPLITS[held_out].split(' (')[0]}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def data_facts(path: Path, conversations: list[Conversation]) -> dict:
    questions = [q for c in conversations for q in c.questions]
    return {
        "file": path.name,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "scored_questions": sum(1 for q in questions if q.gold),
        "scored_1_4": sum(1 for q in questions if q.gold and q.category in SCORED_CATEGORIES),
        "unresolvable_evidence_ids": sum(len(q.unresolved) for q in questions),
        "questions_without_evidence": sum(1 for q in questions if not q.had_evidence),
        "questions_all_unresolvable": sum(1 for q in questions if q.had_evidence and not q.gold),
        "captioned_turns": sum(1 for c in conversations for t in c.turns if t.caption),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA_PATH)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.data.is_file():
        print(f"LoCoMo data not found at ../shared/data/locomo/{args.data.name}; "
              "nothing to evaluate (this is not an error).")
        return 0
    _, conversations = load_conversations(args.data, args.limit_conversations)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        for conv in conversations:
            progress(f"{conv.sample_id}: {len(conv.turns)} turns, "
                     f"{len(conv.questions)} questions")
            rows += evaluate_conversation(conv, Path(tmp))
    engines = engine_names()
    present = [s for s in SPLITS if any(in_split(r, s) for r in rows)]
    report = {
        "data": data_facts(args.data, conversations),
        "settings": {"top_k": TOP_K, "ks": list(KS), "summary_chars": SUMMARY_CHARS,
                     "categories": {str(k): v for k, v in CATEGORIES.items()},
                     "overall_categories": list(SCORED_CATEGORIES),
                     "contextual": repr(FINAL), "splits": SPLITS},
        "backends": backends_agree(rows),
        "splits": {split: summarize(rows, engines, split) for split in present},
        "ablation": {split: summarize(rows, ablation_names(), split) for split in present},
        "labeled": labeled_by_language(),
        "dense_scan": dense_scan(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(report)
    (args.out / "locomo_eval.md").write_text(markdown, encoding="utf-8")
    (args.out / "locomo_eval.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    plot(report, args.out / "locomo_eval.png")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
