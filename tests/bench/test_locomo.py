"""bench/locomo_eval.py runs end to end on two LoCoMo conversations (one of each half;
numbers not checked against the literature here — only that they are well-formed), and
maps the data exactly as issue 16 says."""

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "locomo_eval.py"
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
ENGINES = ["labmem teaching", "labmem bm25", "labmem bm25_recency", "labmem contextual",
           "labmem dense", "labmem fused", "labmem dense (float16 vectors)",
           "labmem contextual (SQLite)", "rank_bm25 BM25Okapi", "bm25s", "SQLite FTS5 bm25",
           "SQLite FTS5 porter", "bm25s (own tokenizer, English stopwords)",
           "bm25s (own tokenizer, stopwords, Snowball stemmer)"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def bench_module():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import locomo_eval
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return locomo_eval


@pytest.mark.skipif(not DATA.is_file(), reason="LoCoMo is not at ../shared/data/locomo/")
def test_locomo_eval_runs_on_two_conversations(tmp_path):
    done = run("--limit-conversations", "2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "locomo_eval.json").read_text(encoding="utf-8"))
    assert (tmp_path / "locomo_eval.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (tmp_path / "locomo_eval.md").read_text(encoding="utf-8")
    for heading in ("## Targets", "## Ablation", "## Odd half", "## Even half", "## All ten",
                    "## The labeled en+zh set", "## The exact dense scan"):
        assert heading in markdown, heading
    assert str(tmp_path) not in markdown
    facts = report["data"]
    assert facts["conversations"] == 2 and facts["turns"] > 100
    assert facts["scored_questions"] <= facts["questions"]
    assert set(report["splits"]) == {"odd", "even", "all"}
    assert list(report["splits"]["all"]) == ENGINES
    assert report["backends"]["rankings_that_differ"] == 0  # JSONL and SQLite agree
    for split, engines in report["splits"].items():
        for engine, groups in engines.items():
            overall = groups["overall (1-4)"]
            assert 0 <= overall["full@10"] <= overall["any@10"] <= 1, (split, engine)
            assert overall["any@1"] <= overall["any@5"] <= overall["any@10"], (split, engine)
            assert groups["p50_us"] > 0
    everything = report["splits"]["all"]
    assert (everything["labmem contextual"]["overall (1-4)"]["questions"]
            == facts["scored_1_4"])
    # the ablation's first step is plain BM25, which is exactly labmem's bm25 scorer
    ablation = report["ablation"]["all"]
    first = next(iter(ablation))
    assert ablation[first]["overall (1-4)"]["any@10"] == pytest.approx(
        everything["labmem bm25"]["overall (1-4)"]["any@10"], abs=0.002)
    assert everything["labmem contextual"]["4 single-hop"]["any@10"] > 0.5


def test_locomo_eval_without_data_exits_cleanly(tmp_path):
    done = run("--data", str(tmp_path / "locomo10.json"), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "not found" in done.stdout
    assert not (tmp_path / "locomo_eval.json").exists()


def test_evidence_and_session_time_parsing():
    locomo_eval = bench_module()
    assert locomo_eval.evidence_ids(["D8:6; D9:17", "D1:2"]) == ["D8:6", "D9:17", "D1:2"]
    assert locomo_eval.evidence_ids(["D9:1 D4:4", " D2:3 "]) == ["D9:1", "D4:4", "D2:3"]
    at = locomo_eval.parse_session_time("1:56 pm on 8 May, 2023")
    assert at.isoformat() == "2023-05-08T13:56:00+00:00"


def test_the_record_mapping_is_issue_16s():
    locomo_eval = bench_module()
    at = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    text = "x" * 190 + " and a long tail"
    turn = locomo_eval.Turn("D1:3", "Caroline", text, "a photo of a dog", at)
    draft = locomo_eval.draft_of("conv-26", turn)
    content = text + " [image: a photo of a dog]"
    assert draft["memory_id"] == "D1:3" and draft["content"] == content
    assert draft["summary"] == content[:200] and len(draft["summary"]) == 200
    source = draft["source"]
    assert (source.source_id, source.source_type, source.title, source.captured_at) == (
        "conv-26:D1:3", "locomo_turn", "Caroline", at)
    plain = locomo_eval.draft_of("conv-26", locomo_eval.Turn("D1:4", "Mel", "hi", "", at))
    assert plain["content"] == "hi" and plain["summary"] == "hi"
    split = {c: locomo_eval.in_split({"index": c}, "odd") for c in range(4)}
    assert split == {0: False, 1: True, 2: False, 3: True}
