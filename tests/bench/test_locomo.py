"""bench/locomo_eval.py runs end to end on one LoCoMo conversation (numbers not checked
against the literature here — only that they are well-formed)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "locomo_eval.py"
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
ENGINES = ["labmem teaching", "labmem bm25", "labmem hybrid", "rank_bm25 BM25Okapi", "bm25s",
           "SQLite FTS5 bm25", "bm25s (own tokenizer, English stopwords)",
           "bm25s (own tokenizer, stopwords, Snowball stemmer)"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


@pytest.mark.skipif(not DATA.is_file(), reason="LoCoMo is not at ../shared/data/locomo/")
def test_locomo_eval_runs_on_one_conversation(tmp_path):
    done = run("--limit-conversations", "1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "locomo_eval.json").read_text(encoding="utf-8"))
    assert (tmp_path / "locomo_eval.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (tmp_path / "locomo_eval.md").read_text(encoding="utf-8")
    assert "## Overall (categories 1–4)" in markdown and str(tmp_path) not in markdown
    facts = report["data"]
    assert facts["conversations"] == 1 and facts["turns"] > 100
    assert facts["scored_questions"] <= facts["questions"]
    assert list(report["engines"]) == ENGINES
    for engine, groups in report["engines"].items():
        overall = groups["overall (1-4)"]
        assert overall["questions"] == facts["scored_1_4"], engine
        assert 0 <= overall["full@10"] <= overall["any@10"] <= 1, engine
        assert overall["any@1"] <= overall["any@5"] <= overall["any@10"], engine
    # a BM25 scorer must find *something*: well above zero on single-hop questions
    assert report["engines"]["labmem bm25"]["4 single-hop"]["any@10"] > 0.3


def test_locomo_eval_without_data_exits_cleanly(tmp_path):
    done = run("--data", str(tmp_path / "locomo10.json"), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "not found" in done.stdout
    assert not (tmp_path / "locomo_eval.json").exists()


def test_evidence_and_session_time_parsing():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import locomo_eval
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert locomo_eval.evidence_ids(["D8:6; D9:17", "D1:2"]) == ["D8:6", "D9:17", "D1:2"]
    assert locomo_eval.evidence_ids(["D9:1 D4:4"]) == ["D9:1", "D4:4"]
    at = locomo_eval.parse_session_time("1:56 pm on 8 May, 2023")
    assert at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert locomo_eval.memory_id_of("D3:12") == "D3:12"
    assert locomo_eval.memory_id_of("D 3/1") == "D_3_1"
