"""The Chinese edition (中文版): catalogues beside the English notebooks, notebooks built from them.

Usage: python tools/i18n.py update  [SOURCE ...]   re-extract, merge into the catalogues
       python tools/i18n.py build   [SOURCE ...]   write and run the Chinese notebooks
       python tools/i18n.py check                  exit 1 if anything is missing or stale
       python tools/i18n.py status                 translated / fuzzy / missing per catalogue
(``make zh`` runs update, then build. SOURCE is an English notebook or notebooks/glossary.md;
none means all of them.)

The English notebooks are the source. ``update`` extracts every message a reader sees into
a gettext catalogue per source, ``locale/zh_CN/LC_MESSAGES/<notebooks|solutions>/<name>.po``:
each markdown block (a paragraph, list, table, heading or fenced block: text between blank
lines) and each explanatory comment in a code cell. It merges them with Babel's
``Catalog.update``, the merge ``pybabel update`` does: a message whose English changed keeps
its old translation marked *fuzzy*, a new one starts empty; English whose numbers alone
changed (a measured time, a count) gets the same translation with the new numbers. Strings
the code shows at run time (``label("…")`` and ``describe(fig, "…")`` in a code cell) stay
in the chapter's catalogue; the library's (``_("…")``, ``N_("…")``) go to
``locale/zh_CN/LC_MESSAGES/labmem.po``; all of them are compiled into
``labmem/locale/zh_CN/LC_MESSAGES/labmem.mo`` for :mod:`labmem.core.i18n`.

``build`` writes ``notebooks/zh/`` and ``solutions/zh/``: every markdown block translated,
code cells identical to the English ones except their comments, links re-pointed at the
Chinese pages, the same cell ids, metadata and slide layout. It then *executes* the Chinese
notebook (same kernel, its folder as working directory, so ``label()`` answers in Chinese):
figures and checker feedback must be drawn again in Chinese, so copying the English outputs
cannot work for them; everything else comes out identical to the English outputs, which
tests/i18n checks. A notebook is rebuilt only when its English source, its catalogue or the
runtime catalogue changed (the fingerprint in ``metadata.labmem.edition``).
"""

from __future__ import annotations

import argparse
import ast
import copy
import datetime as dt
import hashlib
import io
import json
import posixpath
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

from labmem.notebook import LABEL_FONT as NOTEBOOK_LABEL_FONT
from labmem.notebook import LABEL_FONT_FAMILY

ROOT = Path(__file__).resolve().parents[1]
LANG = "zh_CN"
EDITION = "zh"  # the folder of the edition beside each source folder
LOCALE = ROOT / "locale" / LANG / "LC_MESSAGES"
RUNTIME_PO = LOCALE / "labmem.po"
RUNTIME_MO = ROOT / "labmem" / "locale" / LANG / "LC_MESSAGES" / "labmem.mo"
GLOSSARY = "notebooks/glossary.md"
# the figures' CJK font: Noto Sans CJK SC from the system (Debian's fonts-noto-cjk), cut down
# to the characters a figure can show, and bundled so a learner's lab needs no system font
SYSTEM_CJK_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
FONT_FACE, LABEL_FONT = LABEL_FONT_FAMILY, NOTEBOOK_LABEL_FONT  # where labmem.notebook reads it
FIGURE_CHARS = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")
# a fixed date in the catalogue headers: a rebuild from the same inputs writes the same bytes
STAMP = dt.datetime(2026, 12, 4, tzinfo=dt.timezone.utc)
PROJECT = "labmem"
HEADER = ("# labmem 中文版: translations of the English course, one catalogue per notebook.\n"
          "# Edit msgstr only; `make zh` re-extracts the English (changed text turns fuzzy)\n"
          "# and rebuilds the Chinese notebooks.\n#")
# comments that are instructions to a tool, not explanations: never translated
DIRECTIVE = re.compile(r"^\s*(scratch:|NBVAL_|noqa|type:|pragma|fmt:|ruff:|pylint:|!)")
LETTER = re.compile(r"[A-Za-z]")
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# the calls whose first argument is a runtime message (labmem.core.i18n)
RUNTIME_KEYWORDS = ("label", "_", "N_")
COMMENT, LABEL = "code comment", "label: shown at run time"


# ---------------------------------------------------------------- sources and their paths

def sources() -> list[str]:
    """Every English source, as a repository path: chapters, solutions, the glossary."""
    found = sorted(p.relative_to(ROOT).as_posix() for folder in ("notebooks", "solutions")
                   for p in (ROOT / folder).glob("*.ipynb"))
    return found + [GLOSSARY]


def catalogue_path(source: str) -> Path:
    folder, name = source.split("/", 1)
    return LOCALE / folder / (Path(name).stem + ".po")


def edition_path(source: str) -> str:
    folder, name = source.split("/", 1)
    return f"{folder}/{EDITION}/{name}"


# ---------------------------------------------------------------- markdown blocks

def split_blocks(text: str) -> list[tuple[bool, str]]:
    """``text`` as alternating (is_block, piece): blocks are runs of non-blank lines (a fenced
    block counts as one, blank lines and all); the pieces joined give ``text`` back."""
    pieces: list[tuple[bool, str]] = []
    lines = text.splitlines(keepends=True)
    current: list[str] = []
    gap: list[str] = []
    fence = None
    for line in lines:
        stripped = line.strip()
        if fence is None and not stripped:
            if current:
                pieces.append((True, "".join(current)))
                current = []
            gap.append(line)
            continue
        if gap:
            pieces.append((False, "".join(gap)))
            gap = []
        current.append(line)
        marker = re.match(r"^\s*(```+|~~~+)", line)
        if marker:
            if fence is None:
                fence = marker.group(1)
            elif stripped.startswith(fence) and not stripped[len(fence):].strip():
                fence = None
    if current:
        pieces.append((True, "".join(current)))
    if gap:
        pieces.append((False, "".join(gap)))
    return pieces


def _message(block: str) -> str:
    """The message of a block: its text without the final line break."""
    return block.rstrip("\n")


def markdown_messages(text: str) -> list[str]:
    return [_message(piece) for is_block, piece in split_blocks(text)
            if is_block and LETTER.search(piece)]


def translate_markdown(text: str, table: dict[str, str]) -> str:
    out = []
    for is_block, piece in split_blocks(text):
        key = _message(piece) if is_block else None
        if key is not None and table.get(key):
            out.append(table[key] + piece[len(key):])
        else:
            out.append(piece)
    return "".join(out)


# ---------------------------------------------------------------- code comments and labels

@dataclass(frozen=True)
class Comment:
    """An explanatory comment in a code cell: one line after code, or a run of full lines."""

    first: int  # 0-based line numbers, inclusive
    last: int
    column: int
    inline: bool
    text: str  # the message: each line without '#' and one space, joined by newlines


def _parseable(code: str) -> str:
    """``code`` with IPython's magic and shell lines (``%time``, ``!ls``) blanked, so that
    :mod:`ast` can parse it; :mod:`tokenize` reads them as they are."""
    return "".join("\n" if re.match(r"^[%!]", line) else line
                   for line in code.splitlines(keepends=True))


def _comment_body(token: str) -> str:
    body = token[1:]
    return body[1:] if body.startswith(" ") else body


def comments(code: str) -> list[Comment]:
    """The explanatory comments of ``code`` (directives such as ``# scratch:`` left out)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    lines = code.splitlines()
    found: list[Comment] = []
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start[0] - 1, tok.start[1]
        body = _comment_body(tok.string)
        if DIRECTIVE.match(body) or not LETTER.search(body):
            continue
        inline = bool(lines[row][:col].strip())
        prev = found[-1] if found else None
        if (not inline and prev is not None and not prev.inline and prev.last == row - 1
                and prev.column == col):
            found[-1] = Comment(prev.first, row, col, False, prev.text + "\n" + body)
        else:
            found.append(Comment(row, row, col, inline, body))
    return found


def translate_code(code: str, table: dict[str, str]) -> str:
    """``code`` with each comment that has a translation replaced by it; code untouched."""
    lines = code.splitlines(keepends=True)
    for c in reversed(comments(code)):
        translated = table.get(c.text)
        if not translated:
            continue
        ending = "\n" if lines[c.last].endswith("\n") else ""
        if c.inline:
            head = lines[c.first][:c.column]
            lines[c.first] = head + "# " + " ".join(translated.split("\n")) + ending
        else:
            pad = " " * c.column
            new = [pad + ("# " + t if t else "#") + "\n" for t in translated.split("\n")]
            new[-1] = new[-1].rstrip("\n") + ending
            lines[c.first:c.last + 1] = new
    return "".join(lines)


def label_literals(code: str) -> list[str]:
    """The English strings a code cell shows through ``label()`` (or ``_``/``N_``), and the
    alt text it gives a figure with ``describe()``."""
    try:
        tree = ast.parse(_parseable(code))
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        # label("…"), and describe(fig, "…"): a figure's alt text is translated like its title
        position = {**{k: 0 for k in RUNTIME_KEYWORDS}, "describe": 1}.get(node.func.id)
        args = list(node.args) + [k.value for k in node.keywords if k.arg == "alt"]
        if position is not None and len(args) > position and isinstance(
                args[position], ast.Constant) and isinstance(args[position].value, str):
            found.append(args[position].value)
    return found


# ---------------------------------------------------------------- catalogues

def _new_catalogue():
    from babel.messages.catalog import Catalog

    return Catalog(locale=LANG, project=PROJECT, header_comment=HEADER, version="1",
                   copyright_holder="the labmem authors", creation_date=STAMP,
                   revision_date=STAMP, language_team="labmem 中文版",
                   last_translator="labmem authors", fuzzy=False)


def _cells(source: str) -> list[dict]:
    text = (ROOT / source).read_text(encoding="utf-8")
    if source.endswith(".md"):
        return [{"cell_type": "markdown", "source": text}]
    return json.loads(text)["cells"]


def _text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def template(source: str):
    """The catalogue template of one source: every message, where it is (cell number)."""
    cat = _new_catalogue()
    for number, cell in enumerate(_cells(source), start=1):
        text = _text(cell)
        if cell["cell_type"] == "markdown":
            for msg in markdown_messages(text):
                cat.add(msg, locations=[(source, number)])
        elif cell["cell_type"] == "code":
            for c in comments(text):
                cat.add(c.text, locations=[(source, number)], auto_comments=[COMMENT])
            for msg in label_literals(text):
                cat.add(msg, locations=[(source, number)], auto_comments=[LABEL])
    return cat


def runtime_template():
    """The library's runtime messages: ``_("…")`` and ``N_("…")`` under ``labmem/``."""
    from babel.messages.extract import extract_from_dir

    cat = _new_catalogue()
    keywords = {k: None for k in RUNTIME_KEYWORDS}
    for filename, lineno, message, _comments, _ctx in extract_from_dir(
            str(ROOT / "labmem"), method_map=[("scratch/**.py", "ignore"), ("**.py", "python")],
            keywords=keywords, comment_tags=(), strip_comment_tags=True):
        if isinstance(message, str) and message:
            cat.add(message, locations=[(f"labmem/{filename}", lineno)])
    return cat


def _read(path: Path):
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        return read_po(f, locale=LANG)


def _po_bytes(cat, *, lines: bool = True) -> bytes:
    """``cat`` as .po text; ``lines=False`` names each message's file without a line number
    (the library's catalogue: an edit elsewhere in a module must not make it stale)."""
    from babel.messages.pofile import write_po

    cat.revision_date = STAMP
    buf = io.BytesIO()
    # no "#| msgid" lines: Babel wraps them mid-string and reads them back as comments
    write_po(buf, cat, width=100, ignore_obsolete=True, include_lineno=lines)
    return buf.getvalue()


NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _renumbered(old_id: str, new_id: str, old_str: str) -> str | None:
    """The translation of ``new_id`` when it differs from ``old_id`` in its numbers only (a
    measured time, a count) and the translation shows the same numbers in the same order;
    else None, and the message stays fuzzy for a translator."""
    if NUMBER.sub("#", old_id) != NUMBER.sub("#", new_id):
        return None
    if NUMBER.findall(old_str) != NUMBER.findall(old_id):
        return None
    new = iter(NUMBER.findall(new_id))
    return NUMBER.sub(lambda _: next(new), old_str)


def merged(path: Path, tmpl) -> bytes:
    """The catalogue at ``path`` updated to ``tmpl`` (changed English → fuzzy), as bytes."""
    if path.exists():
        cat = _read(path)
        cat.update(tmpl, update_creation_date=False)
        for m in cat:  # English whose numbers alone changed: the translation's numbers too
            if m.fuzzy and m.previous_id:
                renumbered = _renumbered(m.previous_id[0], m.id, m.string)
                if renumbered is not None:
                    m.string, m.previous_id = renumbered, []
                    m.flags.discard("fuzzy")
    else:
        cat = tmpl
    cat.creation_date = STAMP
    return _po_bytes(cat, lines=path != RUNTIME_PO)


def _runtime_messages():
    """(catalogue, message) for every translated runtime message: the library's catalogue
    first, then each chapter's labels."""
    for path in [RUNTIME_PO] + [catalogue_path(s) for s in sources()]:
        if path.exists():
            for m in _read(path):
                runtime = path == RUNTIME_PO or LABEL in m.auto_comments
                if m.id and runtime and m.string and not m.fuzzy:
                    yield path, m


def label_conflicts() -> list[str]:
    """Runtime messages translated two ways: the one runtime catalogue can hold only one, so
    a chapter would show another chapter's wording instead of its own."""
    first: dict[str, tuple[Path, str]] = {}
    found = []
    for path, m in _runtime_messages():
        if m.id in first and first[m.id][1] != m.string:
            where = first[m.id][0].relative_to(ROOT)
            found.append(f"{path.relative_to(ROOT)}: {m.id!r} is {m.string!r} here but "
                         f"{first[m.id][1]!r} in {where}; make them one")
        first.setdefault(m.id, (path, m.string))
    return found


def mo_bytes() -> bytes:
    """The runtime catalogue compiled: the library's messages and every chapter's labels."""
    from babel.messages.mofile import write_mo

    cat = _new_catalogue()
    for _path, m in _runtime_messages():
        if m.id not in cat:
            cat.add(m.id, m.string)
    buf = io.BytesIO()
    write_mo(buf, cat, use_fuzzy=False)
    return buf.getvalue()


def figure_characters() -> set[str]:
    """Every CJK character a figure can draw: the runtime catalogue's translations, and the
    Chinese in the chapters' code cells, the library and its data (example records)."""
    import gettext

    found: set[str] = set()
    table = gettext.GNUTranslations(io.BytesIO(mo_bytes()))._catalog  # noqa: SLF001
    for text in table.values():
        found |= set(FIGURE_CHARS.findall(text))
    for source in sources():
        for cell in _cells(source) if source.endswith(".ipynb") else ():
            if cell["cell_type"] == "code":
                found |= set(FIGURE_CHARS.findall(_text(cell)))
    for folder, pattern in (("labmem", "*.py"), ("data", "*")):
        for path in sorted((ROOT / folder).rglob(pattern)):
            if path.is_file() and path.suffix in {".py", ".json", ".jsonl", ".md", ".txt"}:
                found |= set(FIGURE_CHARS.findall(path.read_text(encoding="utf-8")))
    return found


def font_characters(path: Path | None = None) -> set[str]:
    """The characters the bundled figure font (or the font at ``path``) has a glyph for."""
    from fontTools.ttLib import TTFont

    path = LABEL_FONT if path is None else path
    if not path.exists():
        return set()
    return {chr(code) for code in TTFont(path).getBestCmap()}


def label_font() -> bytes:
    """The bundled font: the system's Noto Sans CJK SC face with only the figure characters."""
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    if not SYSTEM_CJK_FONT.exists():
        raise SystemExit(f"{SYSTEM_CJK_FONT} is missing: install Debian's fonts-noto-cjk to "
                         f"cut the figures' font (apt-get install fonts-noto-cjk)")
    face = next(f for f in TTCollection(str(SYSTEM_CJK_FONT)).fonts
                if f["name"].getDebugName(1) == FONT_FACE)
    options = subset.Options()
    options.name_IDs = ["*"]  # keep the family name and the licence notice
    options.layout_features = []
    options.hinting = False
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in figure_characters()))
    subsetter.subset(face)
    face.recalcTimestamp = False  # same characters, same bytes
    buf = io.BytesIO()
    face.save(buf)
    return buf.getvalue()


def _write_if_changed(path: Path, data: bytes) -> bool:
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def update(selected: list[str], *, runtime: bool) -> list[Path]:
    """Re-extract and merge the selected catalogues (and the library's, when ``runtime``),
    then compile the runtime catalogue; returns the files that changed."""
    changed = [catalogue_path(s) for s in selected
               if _write_if_changed(catalogue_path(s), merged(catalogue_path(s), template(s)))]
    if runtime and _write_if_changed(RUNTIME_PO, merged(RUNTIME_PO, runtime_template())):
        changed.append(RUNTIME_PO)
    if _write_if_changed(RUNTIME_MO, mo_bytes()):
        changed.append(RUNTIME_MO)
    if not figure_characters() <= font_characters() and _write_if_changed(LABEL_FONT,
                                                                          label_font()):
        changed.append(LABEL_FONT)
    return changed


@dataclass(frozen=True)
class Progress:
    path: str
    translated: int
    fuzzy: int
    missing: int


def progress(path: Path) -> Progress:
    cat = _read(path)
    messages = [m for m in cat if m.id]
    fuzzy = sum(1 for m in messages if m.fuzzy)
    missing = sum(1 for m in messages if not m.fuzzy and not m.string)
    rel = path.relative_to(ROOT).as_posix()
    return Progress(rel, len(messages) - fuzzy - missing, fuzzy, missing)


def table_of(path: Path) -> dict[str, str]:
    """The current translations in a catalogue (fuzzy and empty ones left out)."""
    if not path.exists():
        return {}
    return {m.id: m.string for m in _read(path) if m.id and m.string and not m.fuzzy}


# ---------------------------------------------------------------- building the edition

def relink(text: str, source: str) -> str:
    """Point the links of a block written for ``source`` at the right files from its edition:
    the Chinese page when there is one, else the English file (one folder further up)."""
    here = posixpath.dirname(source)
    there = posixpath.dirname(edition_path(source))
    known = set(sources())

    def one(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(here, path))
        if repo_path in known:
            goal = edition_path(repo_path)
        elif repo_path in ("notebooks", "solutions"):  # a folder of pages: the edition's
            goal = f"{repo_path}/{EDITION}"
        else:
            goal = repo_path
        new = posixpath.relpath(goal, there) + ("/" if path.endswith("/") else "")
        return f"{match.group(1)}{new}{hash_}{anchor}{match.group(3)}"

    return LINK.sub(one, text)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def fingerprint(source: str) -> str:
    """What a Chinese page is built from: its English source, its catalogue, the runtime one."""
    cat = catalogue_path(source)
    return _digest((ROOT / source).read_bytes(), cat.read_bytes() if cat.exists() else b"",
                   RUNTIME_MO.read_bytes() if RUNTIME_MO.exists() else b"")


def glossary_entry_english(block: str) -> str:
    """The English definition of a glossary entry block (its lines after the heading)."""
    lines = block.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("### "):
            return "\n".join(lines[i + 1:]).strip()
    return ""


# a line break between two Chinese characters inside a paragraph: a browser shows it as a
# space, which Chinese does not have, so the build joins such lines
SOFT_BREAK = re.compile(r"(?<=[\u3000-\u303f\u3400-\u9fff\uff00-\uffef])\n"
                        r"(?=[\u3000-\u303f\u3400-\u9fff\uff00-\uffef])")


def _joined(table: dict[str, str]) -> dict[str, str]:
    return {k: v if v.lstrip().startswith(("```", "~~~", "|", "<")) else SOFT_BREAK.sub("", v)
            for k, v in table.items()}


def build_text(source: str, text: str, table: dict[str, str]) -> str:
    """A markdown text translated and relinked; glossary entries keep their English too."""
    table = _joined(table)
    if source != GLOSSARY:
        return relink(translate_markdown(text, table), source)
    out = []
    for is_block, piece in split_blocks(text):
        key = _message(piece) if is_block else None
        if key is not None and table.get(key):
            english = glossary_entry_english(key)
            extra = ("\n\n> " + "\n> ".join(relink(english, source).splitlines())
                     if english and "\n### " in "\n" + key else "")
            out.append(relink(table[key], source) + extra + piece[len(key):])
        else:
            out.append(relink(piece, source) if is_block else piece)
    return "".join(out)


def built(source: str, existing: dict | None = None) -> dict | str:
    """The Chinese edition of ``source`` as its sources say it should be (outputs as English)."""
    table = table_of(catalogue_path(source))
    if source.endswith(".md"):
        return build_text(source, (ROOT / source).read_text(encoding="utf-8"), table)
    nb = json.loads((ROOT / source).read_text(encoding="utf-8"))
    zh = copy.deepcopy(nb)
    for cell in zh["cells"]:
        text = _text(cell)
        if cell["cell_type"] == "markdown":
            cell["source"] = _as_lines(build_text(source, text, table))
        elif cell["cell_type"] == "code":
            cell["source"] = _as_lines(translate_code(text, table))
    meta = zh["metadata"].setdefault("labmem", {})
    meta["edition"] = {"language": LANG, "source": source, "fingerprint": fingerprint(source)}
    return zh


def _as_lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def without_outputs(nb: dict) -> dict:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.get("metadata", {}).pop("execution", None)
    return nb


def is_current(source: str) -> bool:
    """True when the committed Chinese page is what its sources build (outputs aside)."""
    path = ROOT / edition_path(source)
    if not path.exists():
        return False
    want = built(source)
    if isinstance(want, str):
        return path.read_text(encoding="utf-8") == want
    have = json.loads(path.read_text(encoding="utf-8"))
    return without_outputs(have) == without_outputs(want)


def execute(nb: dict, folder: Path) -> dict:
    """Run ``nb`` top to bottom in ``folder`` (as `make notebooks` runs the English ones)."""
    import nbformat
    from nbclient import NotebookClient

    node = nbformat.reads(json.dumps(nb), as_version=4)
    NotebookClient(node, timeout=300, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(folder)}}).execute()
    return json.loads(nbformat.writes(node))


def write_notebook(path: Path, nb: dict) -> None:
    import nbformat

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nbformat.reads(json.dumps(nb), as_version=4)) + "\n",
                    encoding="utf-8")


def _executed(path: Path) -> bool:
    if path.suffix != ".ipynb":
        return True
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    return not code or any(c.get("execution_count") is not None for c in code)


def build(selected: list[str], *, run: bool = True, force: bool = False) -> list[str]:
    """Write (and run) every selected Chinese page that is not current; returns those written."""
    written = []
    for source in selected:
        target = ROOT / edition_path(source)
        if not force and is_current(source) and (not run or _executed(target)):
            continue
        page = built(source)
        if isinstance(page, str):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(page, encoding="utf-8")
        else:
            if run:
                print(f"running {edition_path(source)} ...", flush=True)
                target.parent.mkdir(parents=True, exist_ok=True)
                page = execute(page, target.parent)
            else:  # a draft to read: no outputs, so it cannot pass for a run notebook
                page = without_outputs(page)
            write_notebook(target, page)
        written.append(edition_path(source))
    return written


# ---------------------------------------------------------------- checks

# a code span may wrap onto a second line (CommonMark joins it with a space)
CODE_SPAN = re.compile(r"`[^`\n]+(?:\n[^`\n]+)?`")
ANCHOR = re.compile(r'<a id="[^"]+"></a>')
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?:[:!][^{}]*)?\}")
FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)


def _spans(text: str) -> list[str]:
    return [" ".join(span.split()) for span in CODE_SPAN.findall(text)]


def translation_problems(msgid: str, msgstr: str) -> list[str]:
    """What a translation must keep from its English: link targets, code spans, anchors,
    the heading level, fences, table rows and ``{placeholders}``."""
    if not msgstr:
        return []
    found = []
    targets = [sorted(t for _, t, _ in LINK.findall(text)) for text in (msgid, msgstr)]
    if targets[0] != targets[1]:
        found.append("its links differ from the English (keep every link target as written)")
    lost = sorted(set(_spans(msgid)) - set(_spans(msgstr)))
    if lost:
        found.append(f"code spans missing (keep them as written): {', '.join(lost[:4])}")
    if ANCHOR.findall(msgid) != ANCHOR.findall(msgstr):
        found.append("its <a id> anchors differ from the English")
    level = re.match(r"^#+ ", msgid)
    if level and not msgstr.startswith(level.group(0)):
        found.append(f"it must stay a heading starting with {level.group(0)!r}")
    if len(FENCE.findall(msgid)) != len(FENCE.findall(msgstr)):
        found.append("its code fences differ from the English")
    if msgid.lstrip().startswith("|") and msgid.count("\n") != msgstr.count("\n"):
        found.append("a table must keep its number of rows")
    if set(PLACEHOLDER.findall(msgid)) != set(PLACEHOLDER.findall(msgstr)):
        found.append("its {placeholders} differ from the English")
    if _stray_asterisks(msgstr) > _stray_asterisks(msgid):
        found.append("a ** or * shows as itself: emphasis next to Chinese punctuation needs a "
                     "space or the punctuation moved outside it (**事实**（fact）)")
    return found


def _stray_asterisks(markdown: str) -> int:
    """How many asterisks a reader sees as asterisks once the markdown is rendered (CommonMark
    does not open ``**`` between a Chinese character and punctuation such as ``[``)."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(markdown)
    return re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", html, flags=re.DOTALL).count("*")


@dataclass(frozen=True)
class Term:
    """One glossary entry: ``### english · 中文`` in notebooks/glossary.md."""

    english: str
    chinese: str

    def pairs(self) -> list[tuple[str, str]]:
        """(English form, Chinese form) to look for: ``HOT / WARM / COLD`` is three terms."""
        en = [f.strip() for f in re.sub(r"\s*\(.*?\)", "", self.english).split(" / ")]
        zh = [f.strip() for f in re.sub(r"（.*?）", "", self.chinese).split(" / ")]
        return list(zip(en, zh, strict=True)) if len(en) == len(zh) else [(en[0], zh[0])]


def glossary_terms() -> list[Term]:
    text = (ROOT / GLOSSARY).read_text(encoding="utf-8")
    return [Term(*(part.strip() for part in m.group(1).split(" · ", 1)))
            for m in re.finditer(r"^### (.+ · .+)$", text, re.MULTILINE)]


def prose(text: str) -> str:
    """Markdown without what is not prose: fenced blocks, code spans, link targets, HTML."""
    text = re.sub(r"^\s*(```|~~~).*?^\s*\1", " ", text, flags=re.MULTILINE | re.DOTALL)
    text = CODE_SPAN.sub(" ", text)
    text = LINK.sub("] ", text)
    return re.sub(r"<[^>]+>", " ", text)


#: everyday phrases that contain a glossary word without meaning the term ("in turn" is not a
#: conversation turn); they are taken out of the English before the term is looked for
NOT_THE_TERM = {
    "turn": r"\b(in turn|turns? (into|out|off|on|to)|turned|took turns)\b",
}


def uses(text: str, english: str) -> bool:
    if english in NOT_THE_TERM:
        text = re.sub(NOT_THE_TERM[english], " ", text, flags=re.IGNORECASE)
    flags = 0 if re.search(r"[A-Z]", english) else re.IGNORECASE
    return re.search(r"(?<![\w-])" + re.escape(english) + r"(?![\w-])", text, flags) is not None


def english_prose(source: str) -> str:
    return "\n".join(prose(_text(c)) for c in _cells(source) if c["cell_type"] == "markdown")


def chinese_prose(source: str) -> str:
    """The translated markdown of ``source`` (from its catalogue)."""
    path = catalogue_path(source)
    if not path.exists():
        return ""
    return "\n".join(m.string for m in _read(path)
                     if m.id and m.string and COMMENT not in m.auto_comments
                     and LABEL not in m.auto_comments)


def missing_terms(source: str) -> list[tuple[str, str]]:
    """(English, 中文) glossary terms the English page uses and its translation lacks."""
    english, chinese = english_prose(source), chinese_prose(source)
    return [(en, zh) for term in glossary_terms() for en, zh in term.pairs()
            if uses(english, en) and zh not in chinese]


def problems(selected: list[str] | None = None) -> list[str]:
    """Everything that keeps the edition from being complete and current."""
    found = []
    everything = selected is None
    for source in sources() if everything else selected:
        path = catalogue_path(source)
        rel = path.relative_to(ROOT).as_posix()
        if not path.exists():
            found.append(f"{source}: no catalogue (run `make zh`)")
            continue
        if path.read_bytes() != merged(path, template(source)):
            found.append(f"{rel}: not updated to {source} (run `make zh`)")
        p = progress(path)
        if p.fuzzy or p.missing:
            found.append(f"{rel}: {p.missing} untranslated, {p.fuzzy} fuzzy")
        for m in _read(path):
            for why in translation_problems(m.id, m.string) if m.id else ():
                first = m.id.splitlines()[0][:60]
                found.append(f"{rel}: {first!r}: {why}")
        for en, zh in missing_terms(source):
            found.append(f"{rel}: the English uses the glossary term {en!r}; "
                         f"the translation never says {zh!r}")
        if not is_current(source):
            found.append(f"{edition_path(source)}: stale against {source} and its catalogue")
    if everything:
        if not RUNTIME_PO.exists() or RUNTIME_PO.read_bytes() != merged(RUNTIME_PO,
                                                                         runtime_template()):
            found.append(f"{RUNTIME_PO.relative_to(ROOT)}: not updated (run `make zh`)")
        elif not RUNTIME_MO.exists() or RUNTIME_MO.read_bytes() != mo_bytes():
            found.append(f"{RUNTIME_MO.relative_to(ROOT)}: not compiled (run `make zh`)")
        found += label_conflicts()
        lacking = figure_characters() - font_characters()
        if lacking:
            found.append(f"{LABEL_FONT.relative_to(ROOT)}: lacks {len(lacking)} character(s) a "
                         f"figure may draw, e.g. {''.join(sorted(lacking)[:8])} (run `make zh`)")
        if RUNTIME_PO.exists():
            p = progress(RUNTIME_PO)
            if p.fuzzy or p.missing:
                found.append(f"{p.path}: {p.missing} untranslated, {p.fuzzy} fuzzy")
            for m in _read(RUNTIME_PO):
                for why in translation_problems(m.id, m.string) if m.id else ():
                    found.append(f"{p.path}: {m.id[:60]!r}: {why}")
    return found


def _select(names: list[str]) -> list[str]:
    if not names:
        return sources()
    chosen = []
    for name in names:
        rel = Path(name).resolve().relative_to(ROOT).as_posix()
        if rel not in sources():
            raise SystemExit(f"{name}: not an English source (a notebook under notebooks/ or "
                             f"solutions/, or {GLOSSARY})")
        chosen.append(rel)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("update", "build", "check", "status"))
    parser.add_argument("sources", nargs="*")
    parser.add_argument("--no-run", action="store_true", help="build without executing")
    parser.add_argument("--force", action="store_true", help="rebuild even if current")
    parser.add_argument("--runtime", action="store_true",
                        help="update: only the library's catalogue (labmem.po), no SOURCE")
    args = parser.parse_args(argv)
    if args.command == "update":
        if args.runtime and args.sources:
            parser.error("--runtime updates the library's catalogue only: give no SOURCE")
        selected = [] if args.runtime else _select(args.sources)
        for path in update(selected, runtime=args.runtime or not args.sources):
            print(f"updated {path.relative_to(ROOT)}")
    elif args.command == "build":
        for page in build(_select(args.sources), run=not args.no_run, force=args.force):
            print(f"built {page}")
    elif args.command == "status":
        for path in [catalogue_path(s) for s in _select(args.sources)] + [RUNTIME_PO]:
            if path.exists():
                p = progress(path)
                print(f"{p.path}: {p.translated} translated, {p.fuzzy} fuzzy, {p.missing} missing")
    else:
        found = problems(_select(args.sources) if args.sources else None)
        for line in found:
            print(line)
        print("the Chinese edition is complete and current" if not found
              else f"{len(found)} problem(s)")
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
