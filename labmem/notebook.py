"""Helpers the chapter notebooks share: setup, tables, plots, a scratch directory.

Chapters call :func:`setup_notebook` first. It fixes what would otherwise make
stored outputs differ between machines (figure format, display widths, warnings)
and prints nothing. Everything here imports pandas/matplotlib lazily, so importing
``labmem`` stays cheap for code that never draws.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import textwrap
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

# the chapters' label helper: `label("recall@10")` is the text in the notebook's language
from labmem.core.i18n import N_, _, label, language  # noqa: F401 (label: for the chapters)

FIGURE_SIZE = (7.0, 3.6)
FIGURE_DPI = 80
TABLE_COLUMN_CHARS = 200
MESSAGE_NOTE_PT = 8  # the notes of draw_message_views: readable at FIGURE_DPI


def setup_notebook() -> None:
    """Deterministic display settings for a chapter: PNG figures, wide tables, no noise."""
    import matplotlib
    import pandas as pd

    pd.set_option("display.width", 120)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_colwidth", TABLE_COLUMN_CHARS)  # show what a cell asks to read
    pd.set_option("display.precision", 6)
    # the Chinese edition's tables: a CJK character takes two columns in the text a table
    # prints, so pandas pads by display width there (English text is unaffected)
    pd.set_option("display.unicode.east_asian_width", language() != "en")
    matplotlib.rcParams.update({
        "figure.figsize": FIGURE_SIZE,
        "figure.dpi": FIGURE_DPI,
        "savefig.dpi": FIGURE_DPI,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.hashsalt": "labmem",
    })
    _use_label_font()
    _configure_kernel()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


#: the CJK font bundled for figures in the Chinese edition: Noto Sans CJK SC (SIL Open Font
#: License), cut down by tools/i18n.py to the characters the runtime catalogue uses
LABEL_FONT = Path(__file__).resolve().parent / "locale" / "fonts" / "NotoSansSC-labels.otf"
LABEL_FONT_FAMILY = "Noto Sans CJK SC"


def _use_label_font() -> None:
    """Figures in the Chinese edition: Latin text in DejaVu Sans as in English, CJK glyphs
    from the bundled font (matplotlib falls back glyph by glyph along the family list)."""
    import matplotlib
    from matplotlib import font_manager

    if language() == "en" or not LABEL_FONT.exists():
        matplotlib.rcParams["font.family"] = matplotlib.rcParamsDefault["font.family"]
        return
    if LABEL_FONT_FAMILY not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(LABEL_FONT))
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", LABEL_FONT_FAMILY]


def describe(fig, alt: str):
    """Give ``fig`` its alt text: the sentence a reader who cannot see it reads instead.

    The notebook stores it with the PNG (output metadata ``alt``), and the offline HTML
    writes it into the image's ``alt`` attribute. Returns ``fig``, so a cell can end with
    ``describe(fig, "...")`` followed by ``plt.show()``.
    """
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("alt: describe what the figure shows in a sentence (it was empty)")
    fig._labmem_alt = " ".join(label(alt).split())
    return fig


def _shown(text: Any) -> Any:
    """``text`` as a figure shows it: a string in the reader's language, anything else as is."""
    return label(text) if isinstance(text, str) else text


_CJK_RANGES = ((0x3000, 0x303F), (0x3400, 0x9FFF), (0xF900, 0xFAFF), (0xFF00, 0xFFEF))


def _fill(text: str, width: int) -> str:
    """``textwrap.fill``, with a CJK character counted as two columns (it is about twice
    as wide as a Latin letter), so translated text wraps to the same width; Chinese text
    breaks after its punctuation (、，；) where it can, else between characters."""
    if not any(_is_wide(c) for c in text):
        return textwrap.fill(text, width)
    lines, line = [], ""
    for token in re.findall(r"[^、，；： ]+[、，；： ]?|[、，；： ]", text):
        if line and _columns(line + token.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        for char in token:
            if line and _columns(line + char) > width:
                lines.append(line.rstrip())
                line = ""
            line += char
    return "\n".join([*lines, line.rstrip()])


def _is_wide(char: str) -> bool:
    return any(lo <= ord(char) <= hi for lo, hi in _CJK_RANGES)


def _columns(text: str) -> int:
    return sum(2 if _is_wide(c) else 1 for c in text)


def _attach_alt_text(shell) -> None:
    """Wrap the kernel's PNG formatter so a figure's alt text travels with its image."""
    from matplotlib.figure import Figure

    formatter = shell.display_formatter.formatters["image/png"]
    draw_png = formatter.lookup_by_type(Figure)
    if getattr(draw_png, "_labmem_alt_aware", False):
        return

    def png_with_alt(fig):
        data = draw_png(fig)
        alt = getattr(fig, "_labmem_alt", None)
        return (data, {"alt": alt}) if alt and data is not None else data

    png_with_alt._labmem_alt_aware = True
    formatter.for_type(Figure, png_with_alt)


def _configure_kernel() -> None:
    """Inside a Jupyter kernel: inline PNG figures (SVG embeds ids that change per run),
    short tracebacks."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # plain Python: nothing to configure
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return
    shell.run_line_magic("matplotlib", "inline")  # even if MPLBACKEND says otherwise
    set_matplotlib_formats("png")
    _attach_alt_text(shell)
    # failure cells show "ErrorType: message" — the lesson — without a stack of
    # library frames and machine-specific paths
    shell.InteractiveTB.set_mode(mode="Minimal")  # the %xmode magic would print


SCRATCH_PREFIX = "labmem-scratch-"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _sweep_dead_scratch_dirs(parent: Path) -> None:
    """Remove scratch dirs left by kernels that died without running atexit."""
    for path in parent.glob(f"{SCRATCH_PREFIX}*"):
        pid = path.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def scratch_dir(name: str) -> Path:
    """A fresh temporary working directory for one chapter, removed at exit.

    Print paths *relative* to it (see :func:`relative`), never the absolute path,
    which differs on every machine and run. A kernel that is shut down hard never
    runs its exit handlers, so each call also removes the leftovers of dead processes.
    """
    parent = Path(tempfile.gettempdir())
    _sweep_dead_scratch_dirs(parent)
    root = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-{name}-", dir=parent))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def relative(path: str | Path, root: str | Path) -> str:
    """``path`` relative to ``root`` in POSIX form, for printing."""
    return Path(path).relative_to(root).as_posix()


def table(rows: Iterable[Any], columns: Sequence[str] | None = None):
    """A DataFrame from dicts, dataclasses or objects with ``to_dict()``."""
    import pandas as pd

    def as_row(item: Any) -> Mapping[str, Any]:
        if isinstance(item, Mapping):
            return item
        if hasattr(item, "to_dict"):
            return item.to_dict()
        if is_dataclass(item):
            return asdict(item)
        raise TypeError(f"cannot turn {type(item).__name__} into a table row")

    return pd.DataFrame([as_row(row) for row in rows], columns=columns)


@dataclass(frozen=True)
class FullTextTable:
    """A table whose text cells are shown whole: wrapped, with newlines as line breaks.

    pandas shows a newline as ``\\n`` and cuts long cells; a chapter that asks the learner
    to read a rendered prompt block or a summary must show all of it. In JupyterLab (HTML)
    cells wrap in place; as plain text (what nbval compares, and a terminal shows) each row
    is printed as ``column: value`` lines, wrapped at ``width`` characters.
    """

    frame: Any  # a pandas DataFrame
    width: int = 88

    def __repr__(self) -> str:
        blocks = []
        names = [str(c) for c in self.frame.columns]
        pad = max((_columns(n) for n in names), default=0)  # a Chinese heading: 2 a character
        for index, row in self.frame.iterrows():
            lines = [f"[{index}]"]
            for name, value in zip(names, row, strict=True):
                text = str(value).split("\n")
                wrapped = [part for line in text
                           for part in (textwrap.wrap(line, self.width - pad - 2) or [""])]
                lines.append(f"{' ' * (pad - _columns(name))}{name}: {wrapped[0]}")
                lines += [f"{' ' * pad}  {part}" for part in wrapped[1:]]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    def _repr_html_(self) -> str:
        from html import escape

        head = "".join(f"<th>{escape(str(c))}</th>" for c in self.frame.columns)
        body = "".join(
            "<tr><th>" + escape(str(index)) + "</th>"
            + "".join('<td style="white-space: pre-wrap; text-align: left; '
                      'vertical-align: top">' + escape(str(v)) + "</td>" for v in row)
            + "</tr>" for index, row in self.frame.iterrows())
        return f'<table class="dataframe"><thead><tr><th></th>{head}</tr></thead>' \
               f"<tbody>{body}</tbody></table>"


def full_text(rows: Any, columns: Sequence[str] | None = None, *, width: int = 88):
    """:class:`FullTextTable` of a DataFrame, or of rows as :func:`table` accepts them."""
    import pandas as pd

    frame = rows if isinstance(rows, pd.DataFrame) else table(rows, columns)
    return FullTextTable(frame, width)


def stacked_bars(ax, labels: Sequence[str], parts: Mapping[str, Sequence[float]], *,
                 title: str = "", ylabel: str = "") -> None:
    """Stacked bars: one bar per label, one coloured segment per entry of ``parts``."""
    bottoms = [0.0] * len(labels)
    labels = [_shown(text) for text in labels]
    for name, values in parts.items():
        ax.bar(labels, values, bottom=bottoms, label=_shown(name))
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for x, total in enumerate(bottoms):
        ax.annotate(f"{total:.3f}", (x, total), ha="center", va="bottom", fontsize=8)
    ax.set_title(label(title))
    ax.set_ylabel(label(ylabel))
    ax.legend(loc="upper right", fontsize=8)


# -- the course map ---------------------------------------------------------------------


@dataclass(frozen=True)
class Chapter:
    """One notebook of the series: where it sits on the map and what it adds.

    ``column`` is the memory layer (0 = s09 … 5 = s14); ``row`` 0 is the main line,
    1 a second chapter on the same layer, 2 the chapters that compose every layer.
    (Reading and exercise times are measured from the notebooks by ``tools/reading_time.py``.)
    """

    code: str
    notebook: str
    title: str
    adds: str
    column: float
    row: int


CHAPTERS: tuple[Chapter, ...] = (
    Chapter("s09", "s09_transcript.ipynb", N_("Transcript"),
            N_("append-only session evidence"), 0, 0),
    Chapter("s10", "s10_workspace_memory.ipynb", N_("Workspace memory"),
            N_("fact log, distill, curated view"), 1, 0),
    Chapter("s11", "s11_user_memory.ipynb", N_("User memory"),
            N_("keyed preferences, scope"), 2, 0),
    Chapter("s12", "s12_remote_recall.ipynb", N_("Remote recall"),
            N_("five recall stages"), 3, 0),
    Chapter("s12b", "s12b_choosing_a_ranker.ipynb", N_("Engineering a ranker"),
            N_("BM25, recall@k, scale"), 3, 1),
    Chapter("s13", "s13_artifacts.ipynb", N_("Artifacts"),
            N_("pointers, leases, cleanup"), 4, 0),
    Chapter("s14", "s14_context_compaction.ipynb", N_("Context compaction"),
            N_("summaries that own no facts"), 5, 0),
    Chapter("s14 MMU", "s14_context_mmu.ipynb", N_("The Context MMU"),
            N_("L0/L1/L2 under a budget"), 5, 1),
    Chapter(N_("walkthrough"), "walkthrough_layered_memory.ipynb", N_("Layered walkthrough"),
            N_("every layer, one restart-safe run"), 1.5, 2),
    Chapter(N_("case study"), "case_story_memory.ipynb", N_("Story memory"),
            N_("a novel-writing tool's memory"), 3.5, 2),
    Chapter("s15", "s15_connecting_memory_to_an_agent.ipynb", N_("Connecting to agents"),
            N_("an MCP server, the memory tool"), 5.5, 2),
)

START_PAGE = "00_start_here.ipynb"
GLOSSARY = "glossary.md"


def reading_order() -> tuple[str, ...]:
    """The notebooks in the order a learner reads them, the start page first."""
    return (START_PAGE, *(chapter.notebook for chapter in CHAPTERS))


def neighbours(notebook: str) -> tuple[str | None, str | None]:
    """(previous, next) notebook of ``notebook`` in :func:`reading_order`."""
    order = reading_order()
    if notebook not in order:
        raise ValueError(f"notebook: {notebook!r} is not in the series; "
                         f"pass one of {', '.join(order)}")
    i = order.index(notebook)
    return (order[i - 1] if i else None, order[i + 1] if i + 1 < len(order) else None)


_ROW_COLOURS = ("#dbe9f6", "#fde9c9", "#e3f1de")


def draw_chapter_map(chapters: Sequence[Chapter] = CHAPTERS):
    """The series as a picture: one box per chapter, the layers left to right.

    Arrows follow the main line s09 → s14; a second chapter on a layer hangs below it; the
    walkthrough and the case study, which use every layer, sit underneath. Returns the
    figure (the boxes are its ``patches`` of the axes, in ``chapters`` order).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = plt.subplots(figsize=(11.0, 4.8), dpi=FIGURE_DPI)
    width, height, gap = 1.5, 0.8, 1.75
    centre = {}
    for chapter in chapters:
        x, y = chapter.column * gap, -chapter.row * 1.15
        centre[chapter.code] = (x, y)
        ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                    boxstyle="round,pad=0.02", linewidth=1.0,
                                    edgecolor="#444444", facecolor=_ROW_COLOURS[chapter.row]))
        ax.text(x, y + 0.2, label(chapter.code), ha="center", va="center", fontsize=9,
                fontweight="bold")
        ax.text(x, y + 0.02, label(chapter.title), ha="center", va="center", fontsize=8)
        ax.text(x, y - 0.22, _fill(label(chapter.adds), 22), ha="center", va="center",
                fontsize=7, color="#333333")
    main = [c for c in chapters if c.row == 0]
    for left, right in zip(main, main[1:], strict=False):
        (x0, y0), (x1, y1) = centre[left.code], centre[right.code]
        ax.add_patch(FancyArrowPatch((x0 + width / 2, y0), (x1 - width / 2, y1),
                                     arrowstyle="-|>", mutation_scale=10, color="#444444"))
    for chapter in chapters:
        if chapter.row == 1:
            above = next(c for c in main if c.column == chapter.column)
            (x, y0), (_x, y1) = centre[above.code], centre[chapter.code]
            ax.add_patch(FancyArrowPatch((x, y0 - height / 2), (x, y1 + height / 2),
                                         arrowstyle="-|>", mutation_scale=10, color="#444444"))
    ax.text(-gap / 2 + 0.2, -2.3, _("uses every\nlayer:"), ha="right", va="center",
            fontsize=8, style="italic")
    ax.set_xlim(-gap / 2 - 0.9, max(c.column for c in chapters) * gap + gap / 2)
    ax.set_ylim(-2.8, 0.55)
    ax.axis("off")
    ax.set_title(_("The chapters, layer by layer (read left to right, then the row below)"),
                 fontsize=9)
    fig.tight_layout()
    main_line = " → ".join(f"{c.code} {label(c.title)}" for c in main)
    above = {c.column: c.code for c in main}
    below = _("; ").join(_("{code} {title} under {above}").format(
        code=c.code, title=label(c.title), above=above[c.column]) for c in chapters if c.row == 1)
    composed = _(" and ").join(f"{c.code} ({label(c.title)})" for c in chapters if c.row == 2)
    return describe(fig, _("The chapters as boxes, left to right: {main_line}. A second chapter "
                           "on a layer hangs below it: {below}. Underneath, {composed} use "
                           "every layer.").format(main_line=main_line, below=below,
                                                  composed=composed))


# -- drawn diagrams of each chapter's data flow ---------------------------------------------
#
# A diagram is data: boxes at grid positions and arrows between them. The drawing code sizes
# each box from its text, so a picture never depends on a font's exact metrics, and tests can
# check the data (no overlapping boxes, no arrow to a missing box) like any other figure.

CHAR_WIDTH_PT = 4.6  # average width of one character of the 8 pt sans-serif text
LINE_HEIGHT_PT = 11.0
_BOX_STYLES = {
    # kind: (face colour, edge colour, line style)
    "step": ("#dbe9f6", "#2b5d8a", "solid"),  # a function or component of the library
    "store": ("#fde9c9", "#9a6a1f", "solid"),  # a file or table on disk: the truth
    "view": ("#e3f1de", "#3f7a35", "dashed"),  # derived, rebuilt, never the truth
    "outside": ("#f0f0f0", "#777777", "solid"),  # the agent, the model, a human
    "refuse": ("#f8dcdc", "#a33a3a", "solid"),  # an outcome that writes nothing
}
KIND_MEANINGS = {"step": N_("library code"), "store": N_("on disk (the truth)"),
                 "view": N_("derived view"), "outside": N_("outside the library"),
                 "refuse": N_("refused / no protection")}


@dataclass(frozen=True)
class Box:
    """One box: ``label`` (lines split on ``\\n``) centred at grid position (x, y).

    x counts characters from the left, y counts lines downwards from the top.
    """

    key: str
    label: str
    x: float
    y: float
    kind: str = "step"

    @property
    def size(self) -> tuple[float, float]:
        """(width in characters, height in lines), with a margin around the text."""
        lines = self.label.split("\n")
        return max(len(line) for line in lines) + 3.0, len(lines) + 0.9

    def bounds(self) -> tuple[float, float, float, float]:
        width, height = self.size
        return self.x - width / 2, self.y - height / 2, self.x + width / 2, self.y + height / 2


@dataclass(frozen=True)
class Arrow:
    """An arrow from box ``start`` to box ``end``, with an optional label at its middle."""

    start: str
    end: str
    label: str = ""
    dashed: bool = False


@dataclass(frozen=True)
class Diagram:
    """A chapter's picture, and the sentence that describes it for readers who cannot see it."""

    title: str
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]
    alt: str

    def box(self, key: str) -> Box:
        for box in self.boxes:
            if box.key == key:
                return box
        raise KeyError(f"diagram {self.title!r} has no box {key!r}")

    def problems(self) -> list[str]:
        """What would make the picture wrong: unknown kinds, dangling arrows, overlaps."""
        keys = [box.key for box in self.boxes]
        found = [f"duplicate box {k!r}" for k in sorted(set(keys)) if keys.count(k) > 1]
        found += [f"box {b.key!r} has unknown kind {b.kind!r}" for b in self.boxes
                  if b.kind not in _BOX_STYLES]
        found += [f"arrow {a.start!r} -> {a.end!r} names a missing box" for a in self.arrows
                  if a.start not in keys or a.end not in keys]
        for i, first in enumerate(self.boxes):
            for second in self.boxes[i + 1:]:
                a, b = first.bounds(), second.bounds()
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    found.append(f"boxes {first.key!r} and {second.key!r} overlap")
        for arrow in self.arrows:
            if arrow.start in keys and arrow.end in keys:
                found += [f"arrow {arrow.start!r} -> {arrow.end!r} crosses box {key!r}"
                          for key in self._crossed(arrow)]
        if not self.alt.strip():
            found.append("no alt text")
        return found

    def _crossed(self, arrow: Arrow) -> list[str]:
        """Boxes other than its ends that the arrow's straight line passes through."""
        start, end = self.box(arrow.start), self.box(arrow.end)
        p0, p1 = _edge_point(start, (end.x, end.y)), _edge_point(end, (start.x, start.y))
        crossed = []
        for box in self.boxes:
            if box.key in (arrow.start, arrow.end):
                continue
            x0, y0, x1, y1 = box.bounds()
            for i in range(1, 40):
                t = i / 40
                x, y = p0[0] + (p1[0] - p0[0]) * t, p0[1] + (p1[1] - p0[1]) * t
                if x0 < x < x1 and y0 < y < y1:
                    crossed.append(box.key)
                    break
        return crossed


def _edge_point(box: Box, toward: tuple[float, float]) -> tuple[float, float]:
    """Where the line from ``box``'s centre toward a point leaves the box."""
    x0, y0, x1, y1 = box.bounds()
    dx, dy = toward[0] - box.x, toward[1] - box.y
    if dx == 0 and dy == 0:
        return box.x, box.y
    scales = []
    if dx:
        scales.append(((x1 if dx > 0 else x0) - box.x) / dx)
    if dy:
        scales.append(((y1 if dy > 0 else y0) - box.y) / dy)
    t = min(s for s in scales if s > 0)
    return box.x + dx * t, box.y + dy * t


def draw_diagram(diagram: Diagram):
    """Draw ``diagram`` with matplotlib; returns the figure (alt text in ``fig._labmem_alt``)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    problems = diagram.problems()
    if problems:
        raise ValueError(f"diagram {diagram.title!r}: {'; '.join(problems)}")
    left = min(b.bounds()[0] for b in diagram.boxes) - 1
    right = max(b.bounds()[2] for b in diagram.boxes) + 1
    top = min(b.bounds()[1] for b in diagram.boxes) - 1.5
    bottom = max(b.bounds()[3] for b in diagram.boxes) + 2.5  # room for the legend
    width_in = (right - left) * CHAR_WIDTH_PT / 72
    height_in = (bottom - top) * LINE_HEIGHT_PT / 72
    fig, ax = plt.subplots(figsize=(width_in, height_in), dpi=FIGURE_DPI)
    fig.subplots_adjust(0, 0, 1, 1)
    for box in diagram.boxes:
        face, edge, line = _BOX_STYLES[box.kind]
        x0, y0, x1, y1 = box.bounds()
        ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0.1",
                                    facecolor=face, edgecolor=edge, linestyle=line,
                                    linewidth=1.0))
        ax.text(box.x, box.y, label(box.label), ha="center", va="center", fontsize=8,
                linespacing=1.15)
    for arrow in diagram.arrows:
        start, end = diagram.box(arrow.start), diagram.box(arrow.end)
        p0, p1 = _edge_point(start, (end.x, end.y)), _edge_point(end, (start.x, start.y))
        ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle="-|>", mutation_scale=9,
                                     color="#444444", linewidth=0.9,
                                     linestyle="--" if arrow.dashed else "-"))
        if arrow.label:
            ax.text((p0[0] + p1[0]) / 2, (p0[1] + p1[1]) / 2, label(arrow.label), ha="center",
                    va="center", fontsize=7, color="#333333",
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white",
                          "edgecolor": "none", "alpha": 0.9})
    ax.text(left + 0.5, top + 0.6, label(diagram.title), ha="left", va="center", fontsize=9,
            fontweight="bold")
    x = left + 0.5
    for kind in dict.fromkeys(box.kind for box in diagram.boxes):  # a legend, in order of use
        face, edge, line = _BOX_STYLES[kind]
        ax.add_patch(FancyBboxPatch((x, bottom - 1.6), 2.0, 0.8, boxstyle="round,pad=0.05",
                                    facecolor=face, edgecolor=edge, linestyle=line))
        ax.text(x + 2.6, bottom - 1.2, label(KIND_MEANINGS[kind]), ha="left", va="center",
                fontsize=7)
        x += len(KIND_MEANINGS[kind]) + 6  # the English length: the same layout in both
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, top)  # y grows downwards, like the text it replaces
    ax.axis("off")
    fig._labmem_alt = label(diagram.alt)
    return fig


def _diagram(title: str, alt: str, boxes: Iterable[tuple], arrows: Iterable[tuple]) -> Diagram:
    return Diagram(title, tuple(Box(*b) for b in boxes), tuple(Arrow(*a) for a in arrows), alt)


DIAGRAMS: Mapping[str, Diagram] = {
    "s09": _diagram(
        N_("s09: one append-only log, three ways to read it"),
        N_("The agent appends each event to session-1.jsonl: the transcript gives it an envelope "
           "(sequence, event_id, recorded_at) and writes one fsynced line that is never "
           "rewritten; only a torn, unterminated tail is cut off before the next append. Three "
           "readers use the log: replay_state folds it into a window of messages plus title, "
           "file snapshots, counts and pending tool calls (derived, never stored); lookup "
           "returns one event even outside the window; select_memory_candidate returns a "
           "pointer to a message or file-snapshot event with a summary and a reason, but no "
           "content."),
        [("agent", N_("agent turn\n(an event without\nan envelope)"), 8, 3, "outside"),
         ("append", N_("append(event)\nadds sequence, event_id,\nrecorded_at"), 38, 3),
         ("log", N_("session-1.jsonl\none fsync'd line per event;\ncomplete lines are never "
                    "rewritten,\na torn tail is cut off"), 78, 3, "store"),
         ("replay", N_("replay_state(max_items)\n→ a window of messages,\ntitle, file "
                       "snapshots, counts,\npending tool calls,\nnext_sequence"), 17, 14, "view"),
         ("lookup", N_("lookup(event_id)\n→ one record, even\noutside the window\n(s14 "
                       "resolves sources\nwith it)"), 50, 14),
         ("select", N_("select_memory_candidate(\nevent_id, summary, reason)\n→ MemorySource "
                       "+ summary\n+ reason (no content);\nmessages and snapshots only"), 85, 14)],
        [("agent", "append"), ("append", "log"), ("log", "replay", N_("fold")),
         ("log", "lookup"), ("log", "select")]),
    "s10": _diagram(
        N_("s10: facts are logged, memory is distilled"),
        N_("The agent appends facts to one JSONL file per day. distill reads only the files up to "
           "the cutoff day and applies the rules: a fact must be old enough and of a stable "
           "kind; an unkeyed group is promoted when one fact has importance 4 or more or the "
           "group has 2 independent evidence ids; a key's first qualifying value is revision 1, "
           "a rival needs 2 newer evidence ids, older rival evidence is stale, and equally "
           "strong rivals become a conflict that changes nothing. curated.json is the canonical "
           "result, which a human may resolve after an audit line; MEMORY.md and the agent's "
           "context are projections of it, the context adding the newest unkeyed facts."),
        [("agent", N_("agent"), 6, 3, "outside"),
         ("daily", N_("daily/2026-06-02.jsonl\ndaily/2026-06-03.jsonl …\none fact per line, "
                      "fsync'd,\nevery line carries the scope"), 42, 3, "store"),
         ("distill", N_("distill(policy, as_of)\nonly files up to the cutoff day"), 42, 11),
         ("rules", N_("old enough? stable kind?\nunkeyed: importance ≥ 4 or ≥ 2 evidence ids\n"
                      "keyed: first value = revision 1; a rival\nneeds ≥ 2 newer evidence ids; "
                      "older = stale;\nequally strong rivals → CONFLICT"), 42, 20),
         ("wait", N_("not yet: wait\n(or never, if not a stable kind)"), 98, 20, "refuse"),
         ("curated", N_("curated.json\nentries, revision chains,\nconflict cases (canonical)"),
          42, 30, "store"),
         ("human", N_("human: resolve_conflict\n(audit line first:\nresolutions.jsonl)"), 98, 30,
          "outside"),
         ("memorymd", N_("MEMORY.md\n(projection; hand edits\nare repaired)"), 18, 39, "view"),
         ("context", N_("get_context_for_agent()\n= projection + newest\nunkeyed facts "
                        "(newest\ndaily files only)"), 66, 39, "view")],
        [("agent", "daily", N_("append_fact()")), ("daily", "distill"), ("distill", "rules"),
         ("rules", "wait", N_("no")), ("rules", "curated", N_("promote")), ("human", "curated"),
         ("curated", "memorymd", N_("render")), ("curated", "context")]),
    "s11": _diagram(
        N_("s11: one keyed preference write"),
        N_("set_preference or delete_preference takes the user's lock and reads the snapshot and "
           "its revision log again, refusing a file of another user's scope. A write with the "
           "same value, expiry and source (or a second delete) is UNCHANGED: no write, same "
           "revision. A change whose updated_at is not later than the stored one, a tombstone's "
           "included, raises StalePreferenceUpdateError and writes nothing. Otherwise the key "
           "is created, updated or deleted (a tombstone) at revision + 1: one line appended to "
           "preferences.jsonl is the commit, and MEMORY.md is re-projected. The files under "
           "users/<scope_digest>/ are the truth, and the log is compacted into preferences.json "
           "on a first write, on every delete and when it grows long. MEMORY.md holds the "
           "preferences active at the last write or refresh; get_context_for_agent renders the "
           "ones active at as_of from the files each time."),
        [("caller", N_("set_preference(key, value, expires_at,\nsource_event_id, updated_at)\n"
                       "or delete_preference(key, deleted_at)"), 55, 3, "outside"),
         ("lock", N_("take user.lock, read the snapshot\nand its log again (refuse a file\n"
                     "of another user's scope)"), 55, 11),
         ("unchanged", N_("UNCHANGED\nsame value, expiry and source\n(or a second delete):"
                          "\nno write, same revision"), 16, 22),
         ("stale", N_("StalePreferenceUpdateError\na change whose updated_at is\nnot later "
                      "than the stored one\n(a tombstone's too): no write"), 55, 22, "refuse"),
         ("write", N_("CREATED / UPDATED / DELETED\nrevision + 1: append one line\nto "
                      "preferences.jsonl (the commit),\nre-project MEMORY.md, unlock"), 94, 22),
         ("files", N_("users/<scope_digest>/\npreferences.jsonl: one line per change\n"
                      "preferences.json: the log compacted\n(first write, every delete, long "
                      "log)\nprofile.json; each names its user_scope"), 94, 33, "store"),
         ("memorymd", N_("MEMORY.md\nprofile + preferences active\nat the last write or "
                         "refresh"), 55, 44, "view"),
         ("context", N_("get_context_for_agent(as_of)\nrendered from the files each time:"
                        "\nprofile + preferences with\nas_of < expires_at"), 94, 45, "view")],
        [("caller", "lock"), ("lock", "unchanged", N_("same state")),
         ("lock", "stale", N_("a change, not later")), ("lock", "write", N_("a change, later")),
         ("write", "files"), ("files", "memorymd", N_("project")), ("files", "context")]),
    "s12": _diagram(
        N_("s12: two paths leave the store"),
        N_("Transcripts and profile snapshots become StoredMemory records in one user's JSONL "
           "store. The latest profile record is rendered once at session start as "
           "remote_profile and is never searched. A query goes through five stages: normalize "
           "into terms, candidates by term overlap with the conversation records only, an "
           "explainable score, a stable rank by total, coverage, time and id, and a rendered "
           "recalled_context block; no hit is written back to the store."),
        [("source", N_("transcript / profile snapshot\n(the source)"), 16, 3, "outside"),
         ("store", N_("RemoteMemoryStore (JSONL, one user)\nStoredMemory(memory_id, user_scope, "
                      "kind,\ncontent, summary, source, stored_at)"), 64, 3, "store"),
         ("profile", N_("latest PROFILE record\n→ <remote_profile> at session start\n"
                        "(never searched)"), 114, 11, "view"),
         ("query", N_('"  LAYERED   Memory  "'), 10, 21, "outside"),
         ("s1", N_("1 normalize\nRecallQuery(terms)"), 35, 21),
         ("s2", N_("2 candidate\n(term overlap)"), 58, 21),
         ("s3", N_("3 score\n(breakdown)"), 77, 21),
         ("s4", N_("4 stable rank\n(total, coverage,\ntime, id)"), 96, 21),
         ("s5", N_("5 render\n<recalled_context>"), 120, 21, "view")],
        [("source", "store"), ("store", "s2", N_("conversation records")),
         ("store", "profile", N_("latest profile")), ("query", "s1"), ("s1", "s2"), ("s2", "s3"),
         ("s3", "s4"), ("s4", "s5")]),
    "s12_server": _diagram(
        N_("s12: from a file to a database server"),
        N_("Two agent hosts, on two machines, each open a PostgresMemoryStore for the same user. "
           "Each store connects as the role labmem_app (no superuser, owns no table) and sets "
           "labmem.user_scope once. The PostgreSQL server owns the memories table: one row per "
           "record, a UNIQUE (user_scope, memory_id) index, a GIN index over each record's "
           "analyzed terms, and row-level security that shows and accepts only rows whose "
           "user_scope equals the connection's setting. A second INSERT of a stored id fails "
           "on the unique index, rolls back, and reaches the caller as "
           "RemoteMemoryDuplicateError. Recall reads its candidates through the GIN index; "
           "scoring, the stable rank and the render stay labmem's."),
        [("host_a", N_("agent host A\n(labmem mcp, chat)"), 12, 3, "outside"),
         ("host_b", N_("agent host B\n(another machine)"), 12, 15, "outside"),
         ("store_a", N_("PostgresMemoryStore\nuser_id=alice, as labmem_app\n"
                        "SET labmem.user_scope"), 48, 3),
         ("store_b", N_("PostgresMemoryStore\nuser_id=alice, as labmem_app\n"
                        "SET labmem.user_scope"), 48, 15),
         ("server", N_("PostgreSQL server: table memories\nUNIQUE (user_scope, memory_id)\n"
                       "row-level security: user_scope =\nthe connection's labmem.user_scope\n"
                       "GIN index over analyzed terms"), 98, 9, "store"),
         ("refused", N_("a second INSERT of the id:\nunique violation, rolled back\n"
                        "→ RemoteMemoryDuplicateError"), 98, 24, "refuse"),
         ("recall", N_("RecallEngine: candidates\nthrough the GIN index; score,\n"
                       "rank, render stay labmem's"), 48, 26, "view")],
        [("host_a", "store_a"), ("host_b", "store_b"),
         ("store_a", "server", N_("INSERT / SELECT")), ("store_b", "server", N_("INSERT / SELECT")),
         ("server", "refused", N_("duplicate id")), ("server", "recall", N_("candidates"))]),
    "s12b": _diagram(
        N_("s12b: one index, an analyzer, a scorer that reads the neighbours"),
        N_("The query is normalized into surface terms. The store's TermIndex maps each surface "
           "term to postings of position, count, length and capture time; the JSONL and SQLite "
           "backends give the same index. An analyzer maps each surface term to the term a "
           "scorer counts: plain keeps it, english drops stop words and merges Snowball stems, "
           "so at query time the postings of the surface forms of one stem are merged. The "
           "record context adds each record's thread, its previous and next record in the "
           "thread, and its title and date as words. The scorer estimates every candidate at "
           "once: teaching, bm25 and bm25_recency read the postings; contextual adds weighted "
           "title, date and neighbour fields and a thread score. Only the shortlist is explained "
           "exactly, term by term and field by field; then the stable rank of s12 and the "
           "render."),
        [("query", N_("query text"), 8, 3, "outside"),
         ("norm", N_("1 normalize\n→ surface terms"), 32, 3),
         ("store", N_("store\n(JSONL or SQLite)"), 10, 12, "store"),
         ("index", N_("TermIndex: surface term → postings\n[(position, tf, length, "
                      "captured_at)]"), 58, 12),
         ("analyzer", N_("analyzer: plain | english\n(stop words out, Snowball stems;\n"
                         "postings merged per stem)"), 104, 3),
         ("context", N_("record context: thread,\nprevious / next record,\ntitle and date "
                        "as words"), 104, 21),
         ("estimate", N_("3a estimate every candidate (numpy)\nteaching | bm25 | bm25_recency\n"
                         "| contextual (own, title, date,\nneighbours, thread)"), 58, 24),
         ("explain", N_("3b explain the shortlist:\nterm by term, field by field"), 58, 33),
         ("rank", N_("4 stable rank (total ↓, coverage ↓,\ncaptured_at ↓, memory_id ↑)"), 58,
          42),
         ("render", N_("5 render"), 104, 42, "view")],
        [("query", "norm"), ("norm", "index", N_("terms")), ("store", "index"),
         ("analyzer", "index", N_("stem → surfaces")),
         ("index", "estimate", N_("union of the postings")), ("context", "estimate"),
         ("estimate", "explain", N_("the k best (+ ties)")), ("explain", "rank"),
         ("rank", "render")]),
    "s13": _diagram(
        N_("s13: a reference is not a copy"),
        N_("The externalizer keeps small tool output inline and writes large output to its own "
           "file under tool-results, recorded in artifacts.jsonl. The context gets a pointer with "
           "source id, summary, digest and a bounded preview; a memory gets a reference with "
           "summary, digest and source but no body. Every memory write takes a lease in a "
           "hash-chained journal; reconciliation settles unknown outcomes with the owner; "
           "cleanup plans read-only and applies under the journal lock after re-hashing."),
        [("tool", N_("tool output"), 8, 3, "outside"),
         ("ext", N_("ToolResultExternalizer\nbash: > 30,000 characters\nothers: > 51,200 bytes"),
          38, 3),
         ("inline", N_("small: inline\nin the context"), 76, 3, "view"),
         ("body", N_("session/tool-results/000001-bash-<sha12>.txt\n(O_EXCL, fsync) + "
                     "artifacts.jsonl"), 38, 12, "store"),
         ("pointer", N_("pointer in the context:\nsource id · summary · sha256 ·\nhead/tail "
                        "preview (≤ 32 KB)"), 92, 12, "view"),
         ("memref", N_("memory reference: summary ·\ndigest · source (no body, no path)"), 92,
          21, "view"),
         ("journal", N_("LeaseJournal: leases.jsonl\nhash-chained, locked, fsynced"), 38, 21,
          "store"),
         ("owner", N_("reconcile_pending(owner):\npublished → commit · absent → seal,\nabort · "
                      "unknown → wait"), 92, 30, "outside"),
         ("plan", N_("plan_cleanup (read-only)\n→ a decision per file"), 22, 30),
         ("apply", N_("apply_cleanup: journal lock,\nre-hash, unlink"), 38, 38)],
        [("tool", "ext"), ("ext", "inline", N_("small")), ("ext", "body", N_("large")),
         ("body", "pointer", N_("context_text")), ("body", "memref", N_("for_memory()")),
         ("memref", "journal", N_("lease first")),
         ("journal", "owner", N_("pending"), True),
         ("journal", "plan", N_("protected")), ("plan", "apply")]),
    "s13_leases": _diagram(
        N_("s13: the life of a lease"),
        N_("A memory write first calls prepare, which makes the lease PREPARED, fsynced before "
           "the publisher runs; a PREPARED lease protects its artifact. When the publisher "
           "succeeds, or the owner later answers published with the same digest, it becomes "
           "COMMITTED and still protects; release makes it RELEASED, which protects nothing, so "
           "cleanup may delete the file after the TTL. A rejected publication, or an owner that "
           "answers absent and seals the transaction, makes it ABORTED, which never protects and "
           "never commits. A crash or an unknown outcome leaves it PREPARED: after the restart "
           "recover() folds the journal and the lease keeps protecting until reconciliation "
           "settles it."),
        [("start", N_("memory write:\nprepare(claim)"), 9, 4, "outside"),
         ("prepared", N_("PREPARED\n(protects)"), 42, 4),
         ("committed", N_("COMMITTED\n(protects)"), 84, 4),
         ("released", N_("RELEASED\n(protects nothing:\ncleanup may go)"), 122, 4, "refuse"),
         ("aborted", N_("ABORTED\n(never protects,\nnever commits)"), 84, 17, "refuse"),
         ("crash", N_("crash or unknown outcome:\nstays PREPARED,\nstill protects"), 24, 17,
          "outside")],
        [("start", "prepared", N_("fsync")),
         ("prepared", "committed", N_("publisher ok, or\nowner: published")),
         ("committed", "released", N_("release")),
         ("prepared", "aborted", N_("rejected, or owner:\nabsent (sealed first)")),
         ("crash", "prepared", N_("restart:\nrecover()"), True)]),
    "s14_compaction": _diagram(
        N_("s14: a summary does not own facts"),
        N_("Replayed transcript messages are copied and compacted in four layers: tool result "
           "truncation, file read dedup, turn pruning and a conversation summary written by a "
           "summarizer that may lie. The durable context state of facts, pending items and "
           "evidence bypasses compaction; its source pointers are re-resolved by a fresh resolver "
           "on every assembly, and anything not available is rendered as unavailable."),
        [("transcript", N_("transcript (s09)"), 10, 3, "store"),
         ("messages", N_("messages\n(a copy)"), 34, 3, "view"),
         ("compact", N_("compact_context\n[1] tool_result_truncation\n[2] file_read_dedup\n"
                        "[3] turn_pruning\n[4] conversation_summary"), 62, 5),
         ("summarizer", N_("summarizer\n(may lie)"), 98, 5, "outside"),
         ("compacted", N_("compacted messages"), 62, 15, "view"),
         ("durable", N_("DurableContextState\n(facts, pending, evidence)"), 24, 21, "store"),
         ("render", N_("render_durable_context"), 62, 24),
         ("prompt", N_("next prompt"), 100, 20, "outside"),
         ("resolver", N_("SourcePointerResolver (fresh,\nevery assembly): transcript.lookup,\n"
                         "externalizer.verify → available |\nmissing | denied | corrupt | "
                         "unsupported"), 24, 31)],
        [("transcript", "messages", N_("replay")), ("messages", "compact"),
         ("summarizer", "compact", N_("layer 4")), ("compact", "compacted"),
         ("compacted", "prompt"), ("durable", "render", N_("unchanged")), ("render", "prompt"),
         ("durable", "resolver", N_("pointers")), ("resolver", "render", N_("status"))]),
    "s14_mmu": _diagram(
        N_("s14: long-term memory keeps, the Context MMU loads"),
        N_("A task outcome reaches the write gate: a planned or failed task, or one without "
           "evidence, is refused and nothing is written; a succeeded one with evidence becomes a "
           "canonical MemoryRecord in records.jsonl. The MMU derives a Page from each record, "
           "COLD with only metadata and its L0 abstract. A query is filtered by scope, matched "
           "through the term index and factor-scored; the best candidates are promoted COLD to "
           "WARM (L1 overview) and the top of those WARM to HOT (L2 full text). Each promotion "
           "must fit the budget: if it fits it is charged to the ledger; if not, pages with the "
           "lowest keep score are evicted to make room; if even that cannot free enough, the "
           "promotion is rejected and recorded in the trace."),
        [("outcome", N_("task outcome\n(status + evidence ids)"), 12, 3, "outside"),
         ("gate", N_("write gate\ncheck_write_gate"), 44, 3),
         ("record", N_("MemoryRecord in records.jsonl\ncanonical, survives restart"), 84, 3,
          "store"),
         ("refused", N_("planned / failed / no evidence:\nWriteGateError, nothing written"), 44,
          10, "refuse"),
         ("page", N_("Page (derived, disposable)\nCOLD: metadata + L0 abstract"), 84, 10, "view"),
         ("query", N_("query\n+ scope"), 8, 17, "outside"),
         ("pipeline", N_("scope filter → term index →\ncandidates → factor score →\n"
                         "heap keeps the best"), 40, 17),
         ("promote", N_("top warm_top_k: COLD → WARM (L1)\n"
                        "top l2_top_k of those: WARM → HOT (L2)"), 84, 17),
         ("fits", N_("fits?  need ≤ budget − token_used"), 84, 24),
         ("ledger", N_("charge it: HOT pays L2 tokens,\nWARM pays L1 tokens\n"
                       "ledger: token_used = Σ charged"), 22, 31, "view"),
         ("evict", N_("evict lowest keep score\n(choose_evictions),\nthen check again"), 64, 31),
         ("reject", N_("still no room: REJECT\n(reason, need, free\nin the trace)"), 104, 31,
          "refuse")],
        [("outcome", "gate"), ("gate", "record", N_("succeeded")),
         ("gate", "refused", N_("refused")),
         ("record", "page", N_("derive")), ("query", "pipeline"),
         ("page", "pipeline", N_("candidates")), ("pipeline", "promote"), ("promote", "fits"),
         ("fits", "ledger", N_("yes")), ("fits", "evict", N_("no")),
         ("evict", "ledger", N_("room made")),
         ("evict", "reject", N_("not enough"))]),
    "walkthrough": _diagram(
        N_("The walkthrough: one decision through every layer, a restart, then the context"),
        N_("One session's two transcript events start it. The user's event becomes alice's "
           "keyed preference (written twice, unchanged; bob sees none). The assistant's event, "
           "the decision, is selected as a memory candidate, stored as an s12 record and "
           "recalled with that event as its source; it is also logged as two workspace facts of "
           "importance 3, from two sessions, which distill curates into one entry only because "
           "the repeat reaches the threshold. The test log becomes an artifact behind a pointer "
           "with a digest, published into the workspace under a lease. Then every object is "
           "dropped and rebuilt from disk: the lease journal is recovered and cleanup keeps the "
           "referenced log but deletes an orphan; compaction replaces the conversation with a "
           "lying summary, while the durable fact and pending item, re-verified by a fresh "
           "resolver, reach the next prompt unchanged."),
        [("ev1", N_("s09 event #1 (user)\n“… I always want SQLite\nin WAL mode”"), 16, 3, "store"),
         ("ev2", N_("s09 event #2 (assistant)\n“Migrated: SQLite in WAL\nmode; the suite passes”"),
          54, 3, "store"),
         ("log", N_("s13 artifact: the test log\n49,000 bytes + sha256"), 94, 3, "store"),
         ("pref", N_("s11 alice's preference\nwritten twice: UNCHANGED\n(bob sees none)"), 16, 12,
          "store"),
         ("cand", N_("memory candidate\n(source = event #2)"), 54, 12, "view"),
         ("ptr", N_("pointer + digest\n(no body)"), 94, 12, "view"),
         ("facts", N_("s10: 2 facts, importance 3,\nfrom 2 sessions"), 16, 21, "store"),
         ("record", N_("s12 stored record"), 54, 21, "store"),
         ("lease", N_("s13 lease: prepared →\noutcome fact → committed"), 94, 21, "store"),
         ("curated", N_("curated entry, 2 evidence ids\n(the repeat promotes it)"), 16, 29,
          "store"),
         ("hit", N_("recall hit\n(source = event #2)"), 54, 29, "view"),
         ("restart", N_("drop every object; rebuild fresh instances from disk"), 54, 36,
          "outside"),
         ("durable", N_("s14 durable state: the decision\n+ a pending item (the log)"), 18, 43,
          "store"),
         ("comp", N_("s14 compaction: a lying\nsummary replaces the talk"), 56, 43),
         ("cleanup", N_("s13 journal recovered;\ncleanup keeps the log,\ndeletes the orphan"), 94,
          43),
         ("resolver", N_("fresh resolver: both\nsources available"), 18, 51),
         ("prompt", N_("next prompt: compacted talk +\ndurable block (the decision,\nnot the lie)"),
          56, 51, "view")],
        [("ev1", "pref", N_("set_preference")), ("ev2", "cand", N_("select")),
         ("log", "ptr", N_("externalize")), ("cand", "record", N_("store")),
         ("cand", "facts", N_("log")),
         ("ptr", "lease", N_("publish")), ("facts", "curated", N_("distill")),
         ("record", "hit", N_("recall")), ("durable", "resolver", N_("pointers")),
         ("lease", "cleanup", N_("restart: fold"), True), ("comp", "prompt"),
         ("resolver", "prompt", N_("status"))]),
    "case_study": _diagram(
        N_("Case study: the memory of a serialized-novel writing tool"),
        N_("A chapter result, its summary with foreshadowing and its outline go to "
           "commit_chapter, which validates them and then writes the SQLite chapter index, the "
           "summary, the outline, state.json and, through MemoryWriter's upsert by dedup key, "
           "the scratchpad, which is compacted past a threshold. Before the next chapter, "
           "build_memory_pack reads all five stores and builds the prompt within a token "
           "budget, listing every line it cut."),
        [("result", N_("chapter result (JSON)"), 20, 3, "outside"),
         ("summary", N_("summary + foreshadowing"), 58, 3, "outside"),
         ("outline", N_("outline"), 92, 3, "outside"),
         ("adapter", N_("MemoryContractAdapter.commit_chapter\n"
                        "(validates everything before writing)"), 58, 10),
         ("state", N_("state.json\nprotagonist,\nplot threads"), 10, 19, "store"),
         ("index", N_("index.db (SQLite)\nstate changes,\nrelationships,\nappearances"),
          34, 19, "store"),
         ("summaries", N_("summaries/\nchNNN.md"), 58, 19, "store"),
         ("outlines", N_("outlines/\nchNNN"), 78, 19, "store"),
         ("writer", N_("MemoryWriter\nupsert by dedup key\n(claim_action)"), 104, 19),
         ("pad", N_("memory_scratchpad.json\nactive / outdated / contradicted\n"
                    "compacted past max_items"), 104, 28, "store"),
         ("orchestrator", N_("MemoryOrchestrator.build_memory_pack(chapter, outline, budget)\n"
                             "working · episodic · semantic · active constraints ·\n"
                             "recent changes · warnings · cut · stats"), 50, 37),
         ("prompt", N_("the prompt for the next chapter\n(≤ budget tokens)"), 50, 45, "view")],
        [("result", "adapter"), ("summary", "adapter"), ("outline", "adapter"),
         ("adapter", "state"), ("adapter", "index"), ("adapter", "summaries"),
         ("adapter", "outlines"), ("adapter", "writer"), ("writer", "pad"),
         ("state", "orchestrator"), ("index", "orchestrator"),
         ("summaries", "orchestrator"), ("outlines", "orchestrator"),
         ("pad", "orchestrator"), ("orchestrator", "prompt")]),
    "s15": _diagram(
        N_("s15: two real interfaces, one set of guarantees"),
        N_("An agent host starts labmem mcp and calls its tools over stdin and stdout; the "
           "model of the Messages API asks for memory commands, which the SDK's tool runner "
           "hands to LabmemMemoryTool. MCP calls go through MemoryToolbox: a strict JSON schema, "
           "then the library's own validation, then the layers' logs and snapshots under one "
           "home. Memory commands go through MemoryDirectory: every path contained, no "
           "symbolic links, size limits, atomic writes into the user's memories tree, and "
           "every command in commands.jsonl. A bad argument or path on either side becomes a "
           "tool error with labmem's one-line message, and nothing is written."),
        [("host", N_("agent host\n(an IDE, a desktop or CLI agent)"), 18, 3, "outside"),
         ("model", N_("the model\n(Messages API, memory tool)"), 88, 3, "outside"),
         ("mcp", N_("labmem mcp --home DIR\nJSON-RPC over stdin/stdout"), 18, 11),
         ("tool", N_("LabmemMemoryTool\ncalled by the SDK's tool runner"), 88, 11),
         ("toolbox", N_("MemoryToolbox\nstrict JSON schema, then\nthe library's validation"),
          18, 20),
         ("refuse", N_("refused: a tool error\nwith labmem's message;\nnothing written"), 53, 20,
          "refuse"),
         ("memdir", N_("MemoryDirectory\npaths contained, no links,\nlimits, atomic writes"),
          88, 20),
         ("layers", N_("s10–s14 layers, one home\nlogs + snapshots per scope"), 18, 29,
          "store"),
         ("files", N_("memory-tool/<scope>/memories/\n+ commands.jsonl"), 88, 29, "store")],
        [("host", "mcp", N_("tools/call")), ("model", "tool", N_("tool_use")), ("mcp", "toolbox"),
         ("tool", "memdir"), ("toolbox", "refuse", N_("bad input"), True),
         ("memdir", "refuse", N_("bad path"), True), ("toolbox", "layers", N_("write")),
         ("memdir", "files", N_("write"))]),
}


def draw_grid(rows: Sequence[str], columns: Sequence[str], cells: Mapping[tuple[str, str], str],
              *, title: str, alt: str, row_label: str = "", column_label: str = ""):
    """A labelled matrix: ``cells[(row, column)]`` is written in that cell and shaded; cells
    without an entry stay blank. (The MMU's residency × level grid is one.)"""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    unknown = [key for key in cells if key[0] not in rows or key[1] not in columns]
    if unknown:
        raise ValueError(f"cells: {unknown[0]!r} is not a (row, column) of this grid")
    fig, ax = plt.subplots(figsize=(1.8 + 2.0 * len(columns), 1.4 + 0.75 * len(rows)),
                           dpi=FIGURE_DPI, layout="constrained")
    for i, row in enumerate(rows):
        for j, column in enumerate(columns):
            text = cells.get((row, column), "")
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor="#dbe9f6" if text else "white",
                                   edgecolor="#555555"))
            if text:
                ax.text(j + 0.5, i + 0.5, _shown(text), ha="center", va="center", fontsize=8)
    ax.set_xticks([j + 0.5 for j in range(len(columns))], [_shown(c) for c in columns])
    ax.set_yticks([i + 0.5 for i in range(len(rows))], [_shown(r) for r in rows])
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    ax.set_xlim(-0.02, len(columns) + 0.02)
    ax.set_ylim(len(rows) + 0.02, -0.02)
    ax.set_xlabel(label(column_label))
    ax.xaxis.set_label_position("top")
    ax.set_ylabel(label(row_label))
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(label(title), fontsize=9, pad=24)
    fig._labmem_alt = label(alt)
    return fig


def draw_message_views(views: Mapping[str, Sequence[tuple[str, int, str]]], *, title: str,
                       alt: str):
    """The message list as it stands after each step, side by side.

    ``views`` maps a step's name to its messages as (role, tokens, short note); each message
    is a bar whose length is its tokens, coloured by role (a legend under the panels names
    the roles shown), with the note written on it.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colours = {"user": "#4c78a8", "assistant": "#f58518", "tool": "#54a24b",
               "system": "#b279a2"}
    names = list(views)
    most = max((len(messages) for messages in views.values()), default=0)
    longest = max((len(note or role) for messages in views.values()
                   for role, _, note in messages), default=10)
    panel = max(2.0, longest * MESSAGE_NOTE_PT * 0.6 / 72 + 0.3)  # the longest note fits
    fig, axes = plt.subplots(1, len(names), figsize=(panel * len(names), 1.9 + 0.3 * most),
                             dpi=FIGURE_DPI, sharey=True, squeeze=False, layout="constrained")
    widest = max((t for messages in views.values() for _, t, _ in messages), default=1)
    for ax, name in zip(axes[0], names, strict=True):
        for i, (role, tokens, note) in enumerate(views[name]):
            ax.barh(i, tokens, color=colours.get(role, "#999999"), height=0.75, alpha=0.55)
            ax.text(widest * 0.02, i, label(note or role), va="center",
                    fontsize=MESSAGE_NOTE_PT, color="black")
        total = sum(tokens for _role, tokens, _note in views[name])
        ax.set_title(label(name) + "\n" + _("{count} messages, {total:,} tokens").format(
            count=len(views[name]), total=total), fontsize=9)
        ax.set_xlim(0, widest * 1.05)
        ax.set_ylim(most - 0.5, -0.5)
        ax.set_yticks([])
        ax.tick_params(labelsize=8)
        ax.set_xlabel(_("tokens"), fontsize=8)
    roles = list(dict.fromkeys(role for messages in views.values() for role, _, _ in messages))
    fig.legend(handles=[Patch(color=colours.get(role, "#999999"), alpha=0.55, label=role)
                        for role in roles], loc="outside lower center", ncols=len(roles) or 1,
               fontsize=8, frameon=False)
    fig.suptitle(label(title), fontsize=10)
    fig._labmem_alt = label(alt)
    return fig


# -- a directory as a picture -----------------------------------------------------------

TREE_FONT_PT = 9  # the tree's text: readable at FIGURE_DPI
_TREE_COLOURS = ("#fde9c9", "#dbe9f6", "#e3f1de", "#f8dcdc", "#e8dff5", "#fff3b0", "#f0f0f0")


@dataclass(frozen=True)
class TreeRow:
    """One line of a directory tree: the glyphs before the name, the name (a folder's ends
    in ``/``), its relative path (``""`` for the root), its size in bytes (a folder's is the
    sum of its files) and its group (a file's ``owner``; a folder's when all its files share
    one, else ``None``)."""

    prefix: str
    name: str
    path: str
    size: int
    group: str | None
    is_dir: bool


def tree_rows(files: Iterable[Mapping[str, Any]], root: str = ".") -> tuple[TreeRow, ...]:
    """The rows of ``tree``-style listing of ``files`` — mappings with ``path`` (relative,
    POSIX), ``bytes`` and optionally ``owner`` — under a root folder named ``root``.
    Entries of a folder are sorted by name; each folder comes before its contents."""
    tree: dict[str, Any] = {}
    for file in files:
        parts = str(file["path"]).split("/")
        if not all(parts):
            raise ValueError(f"files: {file['path']!r} is not a relative file path")
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part + "/", {})
            if not isinstance(node, dict):
                raise ValueError(f"files: {file['path']!r} lies under a file")
        node[parts[-1]] = (int(file["bytes"]), file.get("owner"))

    def total(node) -> tuple[int, set]:
        if isinstance(node, tuple):
            return node[0], {node[1]}
        sizes = [total(child) for child in node.values()]
        return sum(s for s, _ in sizes), set().union(*(g for _, g in sizes))

    def group_of(groups: set) -> str | None:
        return next(iter(groups)) if len(groups) == 1 else None

    size, groups = total(tree)
    rows = [TreeRow("", root.rstrip("/") + "/", "", size, group_of(groups), True)]

    def walk(node: dict, path: str, indent: str) -> None:
        names = sorted(node)
        for i, name in enumerate(names):
            last = i == len(names) - 1
            child = node[name]
            size, groups = total(child)
            rows.append(TreeRow(indent + ("└── " if last else "├── "), name, path + name,
                                size, group_of(groups), isinstance(child, dict)))
            if isinstance(child, dict):
                walk(child, path + name, indent + ("    " if last else "│   "))

    walk(tree, "", "")
    return tuple(rows)


def draw_tree(files: Sequence[Mapping[str, Any]], *, root: str = ".", title: str,
              alt: str | None = None):
    """Draw :func:`tree_rows` of ``files``: one line per folder or file with its size, each
    file shaded by its ``owner``, and a key of owners (files, bytes; sorted) under the tree.

    Without ``alt`` the figure describes itself: the number of files and folders, and each
    owner's files and bytes."""
    import matplotlib.pyplot as plt

    rows = tree_rows(files, root)
    title = label(title)
    groups = sorted({f.get("owner") or "?" for f in files})
    colours = {g: _TREE_COLOURS[i % len(_TREE_COLOURS)] for i, g in enumerate(groups)}
    per_group = {g: (sum(1 for f in files if (f.get("owner") or "?") == g),
                     sum(int(f["bytes"]) for f in files if (f.get("owner") or "?") == g))
                 for g in groups}
    name_width = max(len(r.prefix + r.name) for r in rows) + 2
    size_width = max(len(f"{r.size:,} B") for r in rows)
    # the key's width as the English layout always measured it ("files", however many),
    # or the drawn line's when that is wider (Chinese: two columns a character)
    key_width = max((max(len(f"{g}: {n} files, {b:,} B"), _columns(_owner_key(g, n, b))) + 4
                     for g, (n, b) in per_group.items()), default=0)
    columns = max(name_width + size_width + 2, key_width, len(title) * 1.1)
    lines = len(rows) + len(groups) + 3
    char_in, line_in = TREE_FONT_PT * 0.6 / 72, TREE_FONT_PT * 1.55 / 72
    fig, ax = plt.subplots(figsize=(columns * char_in + 0.3, lines * line_in + 0.2),
                           dpi=FIGURE_DPI)
    fig.subplots_adjust(0, 0, 1, 1)
    font = {"family": _monospace(), "fontsize": TREE_FONT_PT, "va": "center"}
    ax.text(0.5, 0.6, title, fontsize=TREE_FONT_PT + 1, fontweight="bold", va="center")
    for y, row in enumerate(rows, start=2):
        ax.text(0.5, y, row.prefix, color="#777777", **font)
        shade = None if row.is_dir or row.group is None else colours[row.group or "?"]
        ax.text(0.5 + len(row.prefix), y, row.name, fontweight="bold" if row.is_dir else None,
                bbox=None if shade is None else {"boxstyle": "square,pad=0.15",
                                                 "facecolor": shade, "edgecolor": "none"},
                **font)
        ax.text(name_width + size_width + 0.5, y, f"{row.size:,} B", ha="right",
                color="#555555" if row.is_dir else "black", **font)
    for y, group in enumerate(groups, start=len(rows) + 3):
        count, size = per_group[group]
        ax.text(0.5, y, "  ", bbox={"boxstyle": "square,pad=0.15", "facecolor": colours[group],
                                    "edgecolor": "#999999"}, **font)
        ax.text(3.5, y, _owner_key(group, count, size), **font)
    ax.set_xlim(0, columns + 0.5)
    ax.set_ylim(lines + 0.2, -0.2)
    ax.axis("off")
    if alt is None:
        folders = sum(r.is_dir for r in rows) - 1
        owners = _("; ").join(
            (_("{owner}, {count} file of {size:,} bytes") if n == 1
             else _("{owner}, {count} files of {size:,} bytes")).format(owner=g, count=n, size=b)
            for g, (n, b) in per_group.items())
        alt = _("{title}: a tree of {files} files in {folders} folders under {root}/, "
                "{size:,} bytes in all. By owner: {owners}.").format(
            title=title, files=len(files), folders=folders, root=root, size=rows[0].size,
            owners=owners)
    fig._labmem_alt = label(alt)
    return fig


def _monospace() -> str | list[str]:
    """The tree's font family: monospace, with the bundled CJK font as the fallback for a
    translated key line in the Chinese edition."""
    if language() == "en" or not LABEL_FONT.exists():
        return "monospace"
    return ["DejaVu Sans Mono", LABEL_FONT_FAMILY]


def _owner_key(owner: str, count: int, size: int) -> str:
    """One line of :func:`draw_tree`'s key: an owner's files and bytes."""
    text = _("{owner}: {count} file, {size:,} B") if count == 1 else _(
        "{owner}: {count} files, {size:,} B")
    return text.format(owner=owner, count=count, size=size)


#: the repository the chapters run from (labmem is installed from it, editable): its data/ and
#: bench/results/ are found from here whichever folder a notebook runs in (notebooks/zh/ too)
REPOSITORY = Path(__file__).resolve().parents[1]
