"""The Chinese edition is complete and in step with the English source.

Each English page (chapter, solution, glossary) has a catalogue in which every message has a
current translation (none missing, none fuzzy) that keeps the English's links, code spans,
anchors and headings; its Chinese page is exactly what the English page and the catalogue
build; the Chinese code cells are the English code with only their comments translated; the
stored outputs equal the English ones except where Chinese text is shown; and every glossary
term a chapter uses in English appears in its Chinese form in the translation.
"""

from __future__ import annotations

import configparser
import io
import json
import posixpath
import re
import tokenize

import pytest

from tests.i18n.conftest import ROOT, load_i18n

TOOL = load_i18n()
SOURCES = TOOL.sources()
NOTEBOOKS = [s for s in SOURCES if s.endswith(".ipynb")]


def _load(path):
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def _text(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


@pytest.mark.parametrize("source", SOURCES)
def test_every_message_has_a_current_translation(source):
    path = TOOL.catalogue_path(source)
    assert path.exists(), f"{source}: no catalogue; run `make zh`"
    assert path.read_bytes() == TOOL.merged(path, TOOL.template(source)), \
        f"{path.relative_to(ROOT)} is not updated to the English; run `make zh`"
    p = TOOL.progress(path)
    assert (p.missing, p.fuzzy) == (0, 0), \
        f"{p.path}: {p.missing} untranslated and {p.fuzzy} fuzzy messages"


@pytest.mark.parametrize("source", SOURCES)
def test_translations_keep_links_code_and_structure(source):
    bad = [f"{m.id.splitlines()[0][:50]!r}: {why}" for m in TOOL._read(TOOL.catalogue_path(source))
           if m.id for why in TOOL.translation_problems(m.id, m.string)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source", SOURCES)
def test_the_chinese_page_uses_the_glossary_terms(source):
    missing = TOOL.missing_terms(source)
    assert not missing, f"{source} uses these terms, its translation never says the Chinese: " \
        + ", ".join(f"{en} → {zh}" for en, zh in missing)


def test_the_runtime_catalogue_is_complete_and_compiled():
    po = TOOL.RUNTIME_PO
    assert po.read_bytes() == TOOL.merged(po, TOOL.runtime_template()), "run `make zh`"
    p = TOOL.progress(po)
    assert (p.missing, p.fuzzy) == (0, 0), f"labmem.po: {p.missing} missing, {p.fuzzy} fuzzy"
    assert TOOL.RUNTIME_MO.read_bytes() == TOOL.mo_bytes(), "labmem.mo is stale: run `make zh`"


def test_a_label_shown_in_two_chapters_is_translated_one_way():
    assert TOOL.label_conflicts() == []


def test_the_bundled_font_draws_every_character_a_figure_may_show():
    lacking = TOOL.figure_characters() - TOOL.font_characters()
    assert not lacking, f"{len(lacking)} characters lack a glyph: {''.join(sorted(lacking)[:20])}"


@pytest.mark.parametrize("source", SOURCES)
def test_the_chinese_page_is_built_from_the_current_sources(source):
    assert (ROOT / TOOL.edition_path(source)).exists(), f"{source}: run `make zh`"
    assert TOOL.is_current(source), \
        f"{TOOL.edition_path(source)} is stale against {source} or its catalogue: run `make zh`"


def _code_tokens(code: str) -> list[tuple[int, str]]:
    """The tokens of ``code`` that are code: comments and comment-only lines left out."""
    skip = {tokenize.COMMENT, tokenize.NL}
    return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type not in skip]


@pytest.mark.parametrize("source", NOTEBOOKS)
def test_code_cells_are_the_english_code(source):
    en, zh = _load(source), _load(TOOL.edition_path(source))
    assert [c["cell_type"] for c in en["cells"]] == [c["cell_type"] for c in zh["cells"]]
    for number, (a, b) in enumerate(zip(en["cells"], zh["cells"], strict=True), start=1):
        assert a.get("id") == b.get("id") and a.get("metadata") == b.get("metadata"), \
            f"{source} cell {number}: its id or metadata differ"
        if a["cell_type"] != "code":
            continue
        assert _code_tokens(_text(a)) == _code_tokens(_text(b)), \
            f"{source} cell {number}: the Chinese code differs from the English beyond comments"


def _sanitizers():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "sanitize.cfg", encoding="utf-8")
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]


SANITIZE = _sanitizers()
CJK = re.compile(r"[\u3400-\u9fff]")


def _shown(output) -> dict[str, str]:
    """An output's text parts (images aside), as nbval compares them after sanitizing."""
    parts = {}
    if "text" in output:
        parts["text"] = _text(output)
    for mime, value in output.get("data", {}).items():
        if not mime.startswith("image/"):
            parts[mime] = "".join(value) if isinstance(value, list) else json.dumps(value)
    if output.get("output_type") == "error":
        parts["error"] = f"{output['ename']}: {output['evalue']}"
    for key, value in parts.items():
        for pattern, replace in SANITIZE:
            value = pattern.sub(replace, value)
        parts[key] = value
    return parts


def _outputs(cell) -> list[dict]:
    """A cell's outputs, with a stream printed in several pieces joined into one (a kernel
    may flush a print in two chunks; what a reader sees is the same)."""
    merged = []
    for output in cell["outputs"]:
        previous = merged[-1] if merged else None
        if (output["output_type"] == "stream" and previous is not None
                and previous["output_type"] == "stream" and previous["name"] == output["name"]):
            merged[-1] = {**previous, "text": _text(previous) + _text(output)}
        else:
            merged.append(output)
    return merged


@pytest.mark.parametrize("source", NOTEBOOKS)
def test_outputs_equal_the_english_except_where_chinese_is_shown(source):
    """The Chinese notebooks are executed (figures and checker feedback are drawn again in
    Chinese); everything that shows no Chinese must come out exactly as in English."""
    en, zh = _load(source), _load(TOOL.edition_path(source))
    for number, (a, b) in enumerate(zip(en["cells"], zh["cells"], strict=True), start=1):
        if a["cell_type"] != "code":
            continue
        ours, theirs = _outputs(a), _outputs(b)
        kinds = [(o["output_type"], sorted(o.get("data", {}))) for o in ours]
        assert kinds == [(o["output_type"], sorted(o.get("data", {}))) for o in theirs], \
            f"{source} cell {number}: the Chinese outputs are not the English ones"
        for x, y in zip(ours, theirs, strict=True):
            ex, zy = _shown(x), _shown(y)
            if "image/png" in x.get("data", {}):  # a figure: its size follows its labels
                continue
            for key in ex:
                assert ex[key] == zy[key] or CJK.search(zy[key]), \
                    f"{source} cell {number}: its {key} output differs and shows no Chinese"


@pytest.mark.parametrize("source", SOURCES)
def test_links_in_the_chinese_page_lead_to_files(source):
    page = TOOL.edition_path(source)
    here = posixpath.dirname(page)
    if page.endswith(".md"):
        texts = [(ROOT / page).read_text(encoding="utf-8")]
    else:
        texts = [_text(c) for c in _load(page)["cells"] if c["cell_type"] == "markdown"]
    broken = []
    for text in texts:
        for _, target, _ in TOOL.LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue
            path = posixpath.normpath(posixpath.join(here, target.partition("#")[0]))
            if not (ROOT / path).exists():
                broken.append(target)
    assert not broken, f"{page}: links to missing files: {broken}"
