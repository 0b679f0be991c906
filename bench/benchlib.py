"""Shared pieces of the benchmarks in bench/: timing summaries, tables, CSV output.

Benchmarks are scripts, not tests: they print aligned tables with ratios against
peers measured in the same run, and write every column to ``bench/results/*.csv``
(git-ignored). Compare the ratios, not the microseconds — those belong to one machine.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only annotations: importing benchlib stays light (no pandas)
    import pandas as pd


BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the results."""
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Timing:
    """Summary of one operation's samples, in microseconds."""

    mean: float
    p50: float
    p95: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timing:
        """Mean and nearest-rank percentiles of ``seconds``, converted to µs."""
        ordered = sorted(seconds)

        def rank(p: float) -> float:
            return ordered[max(0, math.ceil(p * len(ordered)) - 1)] * 1e6

        return cls(mean=sum(ordered) / len(ordered) * 1e6, p50=rank(0.50), p95=rank(0.95))


def seconds_since(start: float) -> float:
    return time.perf_counter() - start


# Each table: (group label, [(column label, results column, format)]) — a group's label
# is centred over its columns, like a spreadsheet's merged header cell.
Columns = list[tuple[str, list[tuple[str, str, str]]]]
COUNT, MS, US, RATIO = "{:,.0f}", "{:,.1f}", "{:,.0f}", "{:.2f}"


def render_table(results: pd.DataFrame, table: Columns) -> str:
    """An aligned plain-text table with a two-line header; absent columns are left out."""
    blocks = []  # one block of equal-width lines per group
    for group, columns in table:
        cells = [[label] + [fmt.format(v) for v in results[key]]
                 for label, key, fmt in columns if key in results]
        if not cells:
            continue
        widths = [max(map(len, column)) for column in cells]
        span = sum(widths) + 2 * (len(widths) - 1)
        if len(group) > span:  # widen the first column so the group label fits
            widths[0] += len(group) - span
            span = len(group)
        rows = ["  ".join(column[i].rjust(w) for column, w in zip(cells, widths, strict=True))
                for i in range(len(cells[0]))]
        blocks.append([group.center(span)] + rows)
    return "\n".join("   ".join(block[i] for block in blocks).rstrip()
                     for i in range(len(blocks[0])))


def write_csv(results: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    results.to_csv(path, index=False, float_format="%.3f")
    try:
        shown = path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        shown = Path(path.name)
    print(f"Wrote {shown}")


# -- synthetic vocabularies shared by the corpus generators -----------------------------

_ONSETS = ("b c d f g h j k l m n p r s t v w z br cl dr fl gr pl st tr sh ch th").split()
_VOWELS = ("a e i o u ai ea oo ou").split()
_CODAS = ("", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng")
_HANZI = ("记忆系统用户偏好会话历史检索模型上下文压缩工具任务计划项目代码测试数据文件"
          "时间地点朋友家庭工作学习旅行音乐电影天气城市公司产品问题答案设计早晚饭菜咖啡"
          "茶水书本图片照片")


def pseudo_english_words(rng: random.Random, count: int,
                         syllables: Sequence[int] = (1, 2, 2, 3)) -> list[str]:
    """``count`` distinct English-like words ("brastoo", "kelm"), in first-drawn order.

    A real word list is not something we can ship; syllables give words that tokenize
    like English. A dict keeps first-seen order (a set would not), so the list is stable.
    """
    words: dict[str, None] = {}
    while len(words) < count:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                       for _ in range(rng.choice(syllables)))
        if len(word) >= 3:
            words.setdefault(word, None)
    return list(words)


def chinese_words(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct two-character words; each is exactly one CJK bigram term."""
    words: dict[str, None] = {}
    while len(words) < count:
        first, second = rng.sample(_HANZI, 2)
        words.setdefault(first + second, None)
    return list(words)
