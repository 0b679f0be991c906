"""Helpers the chapter notebooks share: setup, tables, plots, a scratch directory.

Chapters call :func:`setup_notebook` first. It fixes what would otherwise make
stored outputs differ between machines (figure format, display widths, warnings)
and prints nothing. Everything here imports pandas/matplotlib lazily, so importing
``labmem`` stays cheap for code that never draws.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

FIGURE_SIZE = (7.0, 3.6)
FIGURE_DPI = 80


def setup_notebook() -> None:
    """Deterministic display settings for a chapter: PNG figures, wide tables, no noise."""
    import matplotlib
    import pandas as pd

    pd.set_option("display.width", 120)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_colwidth", 60)
    pd.set_option("display.precision", 6)
    matplotlib.rcParams.update({
        "figure.figsize": FIGURE_SIZE,
        "figure.dpi": FIGURE_DPI,
        "savefig.dpi": FIGURE_DPI,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.hashsalt": "labmem",
    })
    _configure_kernel()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


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


def stacked_bars(ax, labels: Sequence[str], parts: Mapping[str, Sequence[float]], *,
                 title: str = "", ylabel: str = "") -> None:
    """Stacked bars: one bar per label, one coloured segment per entry of ``parts``."""
    bottoms = [0.0] * len(labels)
    for name, values in parts.items():
        ax.bar(labels, values, bottom=bottoms, label=name)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for x, total in enumerate(bottoms):
        ax.annotate(f"{total:.3f}", (x, total), ha="center", va="bottom", fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper right", fontsize=8)
