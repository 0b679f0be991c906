"""Notebook hygiene rules, as functions so that the rules themselves can be tested.

A committed chapter must be a clean top-to-bottom run: execution counts 1..N, no
stderr, no SVG, no memory addresses or absolute temp paths in outputs, errors only
in cells marked ``NBVAL_RAISES_EXCEPTION``, every figure with alt text, and no
misspelled nbval markers (a typo would silently turn a checked cell into an unchecked
one).
"""

from __future__ import annotations

import re

KNOWN_MARKERS = {"NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION",
                 "NBVAL_SKIP"}
_MARKER_LIKE = re.compile(r"#\s*(nb[\s_-]?val[\w-]*)", re.IGNORECASE)
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{4,}|0x[0-9a-fA-F]{8,}")
_ABSOLUTE_TMP = re.compile(r"(/tmp/|/var/folders/|/home/\w+|/root/|[A-Z]:\\\\Users)")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _output_texts(output) -> list[str]:
    texts = []
    if "traceback" in output:
        texts.append("\n".join(output["traceback"]))
    if "text" in output:
        t = output["text"]
        texts.append("".join(t) if isinstance(t, list) else t)
    for mime, value in output.get("data", {}).items():
        if mime.startswith("text/"):
            texts.append("".join(value) if isinstance(value, list) else value)
    return texts


def markers_in(source: str) -> list[str]:
    """Every comment token that looks like an nbval marker."""
    return [m.group(1) for m in _MARKER_LIKE.finditer(source)]


def hygiene_problems(nb: dict) -> list[str]:
    """Every hygiene rule the notebook breaks, as readable sentences (empty = clean)."""
    problems = []
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        problems.append(f"execution counts are {counts}, not 1..{len(code)}: "
                        "re-run top to bottom with `make notebooks`")
    for index, cell in enumerate(code, start=1):
        source = _source(cell)
        where = f"code cell {index}"
        for marker in markers_in(source):
            if marker not in KNOWN_MARKERS:
                problems.append(f"{where}: unknown nbval marker {marker!r}")
        raises_ok = "NBVAL_RAISES_EXCEPTION" in source
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream" and output.get("name") == "stderr":
                problems.append(f"{where}: writes to stderr")
            if kind == "error" and not raises_ok:
                problems.append(f"{where}: raises {output.get('ename')} without "
                                "NBVAL_RAISES_EXCEPTION")
            if "image/svg+xml" in output.get("data", {}):
                problems.append(f"{where}: has an SVG output (use PNG)")
            if "image/png" in output.get("data", {}):
                alt = output.get("metadata", {}).get("image/png", {}).get("alt", "")
                if len(alt.split()) < 5:
                    problems.append(f"{where}: a figure without alt text (describe it with "
                                    "labmem.notebook.describe(fig, ...) before plt.show())")
            for text in _output_texts(output):
                if _ADDRESS.search(text):
                    problems.append(f"{where}: output shows a memory address")
                if _ABSOLUTE_TMP.search(text):
                    problems.append(f"{where}: output shows an absolute path")
        if raises_ok and "raises-exception" not in cell.get("metadata", {}).get("tags", []):
            problems.append(f"{where}: NBVAL_RAISES_EXCEPTION cell lacks the 'raises-exception' "
                            "tag that lets `make notebooks` run past it")
        if raises_ok and not any(o.get("output_type") == "error"
                                 for o in cell.get("outputs", [])):
            problems.append(f"{where}: marked NBVAL_RAISES_EXCEPTION but raised nothing")
    return problems
