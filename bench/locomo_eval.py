"""Evaluation: how often does recall bring back the turns a LoCoMo question is about?

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0) is read in place from
``../shared/data/locomo/locomo10.json`` (seen from the repo root) and never copied into
the project; when the file is absent this script says so and exits 0.

How the data becomes labmem records — one conversation is one user scope (its own store
in a temporary directory), one turn is one conversation record:

* ``memory_id``   — the turn's ``dia_id`` made id-safe (``D3:12`` is already valid);
* ``content``     — ``"<speaker>: <text>"``;
* ``title``       — the speaker's name. The source title is searchable, but the name is
  already in the content, so the title adds no term a turn did not have;
* ``summary``     — ``""`` by default. ``--captions`` puts ``"shared a photo:
  <blip_caption>"`` there when the turn shared an image (1,226 of 5,882 turns). The
  caption is machine-written ("a photo of a person holding a dog") and, measured, it
  does not help: every BM25 row loses 0.004–0.008 any@10 (categories 1–4) with it,
  so it stays out;
* ``captured_at`` — the session's ``date_time`` (e.g. "1:56 pm on 8 May, 2023") read as
  UTC; every turn of a session shares it. Queries are asked ``as_of`` the conversation's
  last session, so recency favours later sessions.

Evidence ids: an evidence string holding several ids (``"D8:6; D9:17"``) is split on
``;``, ``,`` and spaces; ids that still match no turn are counted and dropped. A question
whose evidence is empty, or all unresolvable, is counted and not scored.

Metrics, per question, from each engine's top 10 (labmem's largest ``limit``):
any-evidence recall@k (1 if any evidence turn is in the top k; LoCoMo's usual "recall@k")
for k = 1, 5, 10, and full-evidence recall@10 (every evidence turn in the top 10). The
overall row is categories 1–4 (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, as
most published work reads them); category 5 (adversarial) is reported apart.

Engines: labmem's ``RecallEngine`` with each scorer (teaching, bm25, hybrid), and peers
restricted to the same conversation and given the same searchable text (source title,
summary, content) as **labmem's tokens** (ASCII words and CJK bigrams, no stop words):
``rank_bm25.BM25Okapi``, ``bm25s`` and SQLite FTS5 ranked by ``bm25()``. One more row,
"bm25s (own tokenizer, English stopwords)", indexes the same text with bm25s's standard
tokenizer (``\\w\\w+``, lower-cased, English stop words removed), so the reader sees what
tokenization alone changes; a last row adds the Snowball stemmer (PyStemmer), so the reader
sees what stemming changes (labmem's tokenizer does not stem). Peers return only records
sharing a term with the question (score > 0), as labmem does. Latency is per question,
p50, in µs, for this machine only.

Run it::

    python bench/locomo_eval.py                       # all 10 conversations, ~15 s
    python bench/locomo_eval.py --limit-conversations 1 --out /tmp/locomo

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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchlib import REPO_ROOT, RESULTS_DIR, Timing, progress  # bench/ is on sys.path

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.core.metrics import any_hit_at_k, full_hit_at_k
from labmem.core.provenance import MemorySource
from labmem.core.text import term_frequencies
from labmem.recall import (
    MemoryKind,
    RecallEngine,
    RemoteMemoryStore,
    StoredMemory,
    record_terms,
)

DATA_PATH = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
              5: "adversarial"}
SCORED_CATEGORIES = (1, 2, 3, 4)
TOP_K = 10
KS = (1, 5, 10)
LABMEM_SCORERS = ("teaching", "bm25", "hybrid")
PEERS = ("rank_bm25 BM25Okapi", "bm25s", "SQLite FTS5 bm25")
OWN_TOKENIZER = "bm25s (own tokenizer, English stopwords)"
STEMMED = "bm25s (own tokenizer, stopwords, Snowball stemmer)"
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


# -- reading LoCoMo ------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    memory_id: str
    speaker: str
    text: str
    caption: str
    captured_at: datetime


@dataclass(frozen=True)
class Question:
    number: int
    text: str
    category: int
    gold: tuple[str, ...]  # resolvable evidence ids, as memory ids
    unresolved: tuple[str, ...]  # evidence ids that match no turn
    had_evidence: bool


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    as_of: datetime


def memory_id_of(dia_id: str) -> str:
    """A LoCoMo ``dia_id`` as a labmem memory id (``D3:12`` is already one)."""
    return _ID_UNSAFE.sub("_", dia_id.strip())


def parse_session_time(text: str) -> datetime:
    """"1:56 pm on 8 May, 2023" → an aware UTC datetime (LoCoMo gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(evidence: Sequence[str]) -> list[str]:
    """Every id in an evidence list; one string may hold several (``"D8:6; D9:17"``)."""
    return [part for item in evidence for part in _EVIDENCE_SPLIT.split(item) if part]


def read_conversation(raw: dict) -> Conversation:
    conv = raw["conversation"]
    sessions = sorted((int(m.group(1)), key) for key in conv
                      if (m := re.fullmatch(r"session_(\d+)", key)) and conv[key])
    turns = []
    for number, key in sessions:
        at = parse_session_time(conv[f"session_{number}_date_time"])
        turns += [Turn(memory_id_of(t["dia_id"]), t["speaker"], t["text"],
                       t.get("blip_caption") or "", at) for t in conv[key]]
    known = {t.memory_id for t in turns}
    questions = []
    for number, qa in enumerate(raw["qa"]):
        ids = [memory_id_of(e) for e in evidence_ids(qa.get("evidence", []))]
        questions.append(Question(
            number=number, text=qa["question"], category=int(qa["category"]),
            gold=tuple(dict.fromkeys(i for i in ids if i in known)),
            unresolved=tuple(i for i in ids if i not in known),
            had_evidence=bool(qa.get("evidence")),
        ))
    return Conversation(raw["sample_id"], tuple(turns), tuple(questions),
                        max(t.captured_at for t in turns))


# -- the labmem side -----------------------------------------------------------------


def draft_of(turn: Turn, *, captions: bool) -> dict:
    summary = f"shared a photo: {turn.caption}" if captions and turn.caption else ""
    return {
        "kind": MemoryKind.CONVERSATION,
        "content": f"{turn.speaker}: {turn.text}",
        "summary": summary,
        "source": MemorySource(f"locomo:{turn.memory_id}", "conversation_turn",
                               turn.speaker, turn.captured_at),
        "memory_id": turn.memory_id,
    }


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
    """labmem's terms as a token list (bag of words: order does not matter to BM25)."""
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
    import Stemmer  # PyStemmer, from the bench extra

    stemmer = Stemmer.Stemmer("english")
    return lambda text: bm25s_own_tokens(text, stemmer)


def fts5_ranker(docs: list[list[str]], ids: list[str]):
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(memory_id UNINDEXED, terms, "
               "tokenize='unicode61')")
    db.executemany("INSERT INTO fts VALUES (?, ?)",
                   ((i, " ".join(d)) for i, d in zip(ids, docs, strict=True)))

    def rank(question: str) -> list[str]:
        terms = sorted(set(labmem_tokens(question)))
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = db.execute("SELECT memory_id FROM fts WHERE fts MATCH ? "
                          "ORDER BY bm25(fts), rowid LIMIT ?", (match, TOP_K))
        return [row[0] for row in rows]
    return rank


def searchable_text(record: StoredMemory) -> str:
    """Exactly what labmem searches (:func:`labmem.recall.pipeline.record_terms`' input)."""
    return "\n".join((record.source.title, record.summary, record.content))


# -- one conversation ----------------------------------------------------------------


def evaluate_conversation(conv: Conversation, workdir: Path, *, captions: bool) -> list[dict]:
    """One row per (engine, scored question): hits, metrics and latency."""
    store = RemoteMemoryStore(workdir / f"{conv.sample_id}.jsonl", user_id=conv.sample_id,
                              clock=FixedClock(conv.as_of))
    records = store.append_many([draft_of(t, captions=captions) for t in conv.turns])
    ids = [r.memory_id for r in records]
    docs = [list(record_terms(r).elements()) for r in records]
    rankers: dict[str, Callable[[str], list[str]]] = {
        f"labmem {name}": labmem_ranker(RecallEngine(store, scorer=name), conv.as_of)
        for name in LABMEM_SCORERS
    }
    rankers[PEERS[0]] = rank_bm25_ranker(docs, ids)
    rankers[PEERS[1]] = bm25s_ranker(docs, ids, labmem_tokens)
    rankers[PEERS[2]] = fts5_ranker(docs, ids)
    own = [bm25s_own_tokens(searchable_text(r)) for r in records]
    rankers[OWN_TOKENIZER] = bm25s_ranker(own, ids, bm25s_own_tokens)
    stemmed = snowball_tokens()
    rankers[STEMMED] = bm25s_ranker([stemmed(searchable_text(r)) for r in records], ids, stemmed)
    rows = []
    for question in conv.questions:
        if not question.gold:
            continue
        for engine, rank in rankers.items():
            start = time.perf_counter()
            ranked = rank(question.text)
            seconds = time.perf_counter() - start
            row = {"engine": engine, "conversation": conv.sample_id,
                   "question": question.number, "category": question.category,
                   "seconds": seconds}
            row |= {f"any@{k}": any_hit_at_k(ranked, question.gold, k) for k in KS}
            row["full@10"] = full_hit_at_k(ranked, question.gold, TOP_K)
            rows.append(row)
    return rows


# -- summaries and output ------------------------------------------------------------

METRICS = ("any@1", "any@5", "any@10", "full@10")


def summarize(rows: list[dict], engines: Sequence[str]) -> dict:
    """Per engine: overall (categories 1–4), each category, and p50 latency."""
    out = {}
    for engine in engines:
        mine = [r for r in rows if r["engine"] == engine]
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


def markdown_table(summary: dict, group: str) -> list[str]:
    lines = [f"| engine | questions | {' | '.join(METRICS)} | p50 µs |",
             "|---|---:|" + "---:|" * (len(METRICS) + 1)]
    for engine, groups in summary.items():
        g = groups[group]
        cells = " | ".join("–" if g[m] is None else f"{g[m]:.3f}" for m in METRICS)
        lines.append(f"| {engine} | {g['questions']} | {cells} | {groups['p50_us']:,.0f} |")
    return lines


def category_table(summary: dict, metric: str) -> list[str]:
    groups = ["overall (1-4)"] + [f"{c} {n}" for c, n in CATEGORIES.items()]
    lines = [f"| engine | {' | '.join(groups)} |", "|---|" + "---:|" * len(groups)]
    for engine, per in summary.items():
        cells = " | ".join("–" if per[g][metric] is None else f"{per[g][metric]:.3f}"
                           for g in groups)
        lines.append(f"| {engine} | {cells} |")
    return lines


def render_markdown(report: dict) -> str:
    facts = report["data"]
    summary = report["engines"]
    lines = [
        "# LoCoMo evidence recall (bench/locomo_eval.py)", "",
        f"Data: `locomo10.json` sha256 `{facts['sha256']}`; {facts['conversations']} "
        f"conversations, {facts['turns']:,} turns, {facts['questions']:,} questions "
        f"({facts['scored_questions']:,} scored, of which {facts['scored_1_4']:,} in "
        f"categories 1–4). Evidence ids matching no turn: {facts['unresolvable_evidence_ids']} "
        f"(raw strings: {facts['unresolvable_raw_evidence']}); questions without evidence: "
        f"{facts['questions_without_evidence']}; with evidence but none resolvable: "
        f"{facts['questions_all_unresolvable']}. Image captions in the summary: "
        f"{'yes' if report['settings']['captions'] else 'no'}.", "",
        "Each engine searches one conversation's turns (one user scope) and returns its top 10. "
        "`any@k` = share of questions with at least one evidence turn in the top k; "
        "`full@10` = every evidence turn in the top 10. Peers see labmem's tokens (ASCII "
        "words and CJK bigrams, no stop words) except the last two rows, which use bm25s's own "
        "tokenizer with English stop words, the last one also the Snowball stemmer. "
        "Latency: per question, p50, this machine only.",
        "", "## Overall (categories 1–4)", "",
        *markdown_table(summary, "overall (1-4)"),
        "", "## Category 5 (adversarial; reported apart)", "",
        *markdown_table(summary, "5 adversarial"),
        "", "## any@10 per category", "", *category_table(summary, "any@10"),
        "", "## full@10 per category", "", *category_table(summary, "full@10"), "",
    ]
    return "\n".join(lines)


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    groups = ["overall (1-4)"] + [f"{c} {n}" for c, n in CATEGORIES.items()]
    engines = list(summary)
    width = 0.8 / len(engines)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    x = np.arange(len(groups))
    for i, engine in enumerate(engines):
        values = [summary[engine][g]["any@10"] or 0.0 for g in groups]
        ax.bar(x + (i - (len(engines) - 1) / 2) * width, values, width, label=engine)
    ax.set_xticks(x, groups)
    ax.set_ylim(0, 1)
    ax.set_ylabel("any-evidence recall@10")
    ax.set_title("LoCoMo: share of questions with an evidence turn in the top 10")
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def data_facts(path: Path, raw: list, conversations: list[Conversation]) -> dict:
    questions = [q for c in conversations for q in c.questions]
    known = {(c.sample_id, t.memory_id) for c in conversations for t in c.turns}
    raw_unresolvable = sum(
        1 for r in raw for qa in r["qa"] for e in qa.get("evidence", [])
        if (r["sample_id"], e) not in known)
    return {
        "file": path.name,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "scored_questions": sum(1 for q in questions if q.gold),
        "scored_1_4": sum(1 for q in questions if q.gold and q.category in SCORED_CATEGORIES),
        "unresolvable_evidence_ids": sum(len(q.unresolved) for q in questions),
        "unresolvable_raw_evidence": raw_unresolvable,
        "questions_without_evidence": sum(1 for q in questions if not q.had_evidence),
        "questions_all_unresolvable": sum(1 for q in questions if q.had_evidence and not q.gold),
        "captioned_turns": sum(1 for c in conversations for t in c.turns if t.caption),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA_PATH)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--captions", action="store_true",
                        help="put each shared image's blip_caption in the record's summary")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.data.is_file():
        print(f"LoCoMo data not found at ../shared/data/locomo/{args.data.name}; "
              "nothing to evaluate (this is not an error).")
        return 0
    raw = json.loads(args.data.read_text(encoding="utf-8"))
    if args.limit_conversations is not None:
        raw = raw[:args.limit_conversations]
    conversations = [read_conversation(r) for r in raw]
    captions = args.captions
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        for conv in conversations:
            progress(f"{conv.sample_id}: {len(conv.turns)} turns, "
                     f"{len(conv.questions)} questions")
            rows += evaluate_conversation(conv, Path(tmp), captions=captions)
    engines = [f"labmem {s}" for s in LABMEM_SCORERS] + list(PEERS) + [OWN_TOKENIZER, STEMMED]
    report = {
        "data": data_facts(args.data, raw, conversations),
        "settings": {"captions": captions, "top_k": TOP_K, "ks": list(KS),
                     "categories": {str(k): v for k, v in CATEGORIES.items()},
                     "overall_categories": list(SCORED_CATEGORIES)},
        "engines": summarize(rows, engines),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(report)
    (args.out / "locomo_eval.md").write_text(markdown, encoding="utf-8")
    (args.out / "locomo_eval.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    plot(report["engines"], args.out / "locomo_eval.png")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
