"""tools/i18n.py on a small repository of its own: extraction, fuzzy updates, the build and
the checks, each shown to catch the mistake it exists for."""

from __future__ import annotations

import json

import pytest

from tests.i18n.conftest import load_i18n
from tests.i18n.test_edition import _code_tokens

TOOL = load_i18n()

MARKDOWN = """# s01 · A chapter

The log is *append-only*: see [the glossary](glossary.md#transcript).

```python
x = 1

y = 2
```

| scorer | recall |
|---|---|
| bm25 | 0.8 |"""

CODE = """import math

# the first line of a comment
# and its second line
total = math.fsum([0.1] * 10)  # exact, unlike sum()
# scratch: s01
print(label("recall by scorer"), total)"""


def _notebook(markdown: str = MARKDOWN, code: str = CODE) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "markdown", "id": "m1", "metadata": {}, "source": markdown},
                      {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None,
                       "outputs": [], "source": code}]}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with one chapter and a glossary, and the tool pointed at it."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "notebooks" / "s01.ipynb").write_text(json.dumps(_notebook()), encoding="utf-8")
    (tmp_path / "notebooks" / "glossary.md").write_text(
        '# Glossary\n\n<a id="transcript"></a>\n### transcript · 会话记录\nThe log. [s01]\n',
        encoding="utf-8")
    locale = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES"
    monkeypatch.setattr(TOOL, "ROOT", tmp_path)
    monkeypatch.setattr(TOOL, "LOCALE", locale)
    monkeypatch.setattr(TOOL, "RUNTIME_PO", locale / "labmem.po")
    monkeypatch.setattr(TOOL, "RUNTIME_MO", tmp_path / "labmem.mo")
    monkeypatch.setattr(TOOL, "LABEL_FONT", tmp_path / "font.otf")
    return tmp_path


def _translate(path, table: dict[str, str]) -> None:
    cat = TOOL._read(path)
    for m in cat:
        if m.id in table:
            m.string = table[m.id]
    path.write_bytes(TOOL._po_bytes(cat))


def _everything(path) -> dict[str, str]:
    """A translation of every message: '译' before it (code, tables and labels kept as they
    are, so no figure character needs the font cut)."""
    out = {}
    for m in TOOL._read(path):
        if m.id:
            keep = m.id.startswith(("```", "|", "<a")) or TOOL.LABEL in m.auto_comments
            out[m.id] = m.id if keep else "译" + m.id
            if m.id.startswith("#"):
                hashes = m.id.split(" ", 1)[0]
                out[m.id] = f"{hashes} 译{m.id[len(hashes) + 1:]}"
    return out


def test_blocks_split_at_blank_lines_but_keep_a_fence_whole():
    pieces = TOOL.split_blocks(MARKDOWN)
    assert "".join(p for _, p in pieces) == MARKDOWN
    blocks = [p for is_block, p in pieces if is_block]
    assert len(blocks) == 4 and blocks[2].startswith("```python") and "y = 2" in blocks[2]


def test_comments_are_messages_and_directives_are_not():
    found = [c.text for c in TOOL.comments(CODE)]
    assert found == ["the first line of a comment\nand its second line", "exact, unlike sum()"]
    assert TOOL.label_literals(CODE) == ["recall by scorer"]


def test_translating_comments_leaves_the_code_alone():
    table = {"the first line of a comment\nand its second line": "注释的第一行\n第二行\n第三行",
             "exact, unlike sum()": "精确，不像 sum()"}
    zh = TOOL.translate_code(CODE, table)
    assert "# 注释的第一行\n# 第二行\n# 第三行\n" in zh and "  # 精确，不像 sum()" in zh
    assert "# scratch: s01" in zh
    assert _code_tokens(zh) == _code_tokens(CODE)


def test_the_code_comparison_sees_a_changed_token():
    assert _code_tokens("x = 1  # one\n") == _code_tokens("x = 1  # 一\n")
    assert _code_tokens("x = 1\n") != _code_tokens("x = 2\n")
    assert _code_tokens("f('a')\n") != _code_tokens("f('甲')\n")


@pytest.mark.parametrize(("msgstr", "why"), [
    ("日志仅追加：见[术语表](glossary.md)。", "links"),
    ("运行 python 即可", "code spans"),
    ("学习目标", "heading"),
    ("{k} 处的召回率", "placeholders"),
])
def test_a_translation_that_loses_structure_is_reported(msgstr, why):
    msgid = {"links": "The log: see [the glossary](glossary.md#transcript).",
             "code spans": "Run `python -m labmem` to start.",
             "heading": "## Learning goals",
             "placeholders": "recall at {k} for {scorer}"}[why]
    assert any(why.split()[0] in p for p in TOOL.translation_problems(msgid, msgstr))
    assert TOOL.translation_problems(msgid, "") == []


def test_a_changed_english_message_turns_fuzzy_and_the_page_stale(repo):
    source = "notebooks/s01.ipynb"
    TOOL.update([source, TOOL.GLOSSARY], runtime=True)
    path = TOOL.catalogue_path(source)
    assert TOOL.progress(path).missing == 7
    _translate(path, _everything(path))
    assert TOOL.progress(path).missing == 0 and TOOL.problems([source]) == [
        f"{TOOL.edition_path(source)}: stale against {source} and its catalogue"]
    assert TOOL.build([source], run=False) == ["notebooks/zh/s01.ipynb"]
    assert TOOL.problems([source]) == [] and TOOL.is_current(source)
    zh = json.loads((repo / "notebooks/zh/s01.ipynb").read_text(encoding="utf-8"))
    markdown = zh["cells"][0]["source"]
    assert "".join(markdown).startswith("# 译s01") and "(glossary.md#transcript)" in "".join(
        markdown)  # notebooks/zh/glossary.md is the Chinese glossary: same name, same anchor

    english = _notebook(MARKDOWN.replace("*append-only*", "*append-only* and fsynced"))
    (repo / "notebooks" / "s01.ipynb").write_text(json.dumps(english), encoding="utf-8")
    assert not TOOL.is_current(source)
    assert any("not updated" in p for p in TOOL.problems([source]))
    TOOL.update([source], runtime=False)
    cat = TOOL._read(path)
    fuzzy = [m for m in cat if m.fuzzy]
    assert len(fuzzy) == 1 and "fsynced" in fuzzy[0].id and fuzzy[0].string.startswith("译")
    assert TOOL.merged(path, TOOL.template(source)) == path.read_bytes()  # a second run: same
    assert any("1 fuzzy" in p for p in TOOL.problems([source]))


def test_links_from_a_chinese_page_point_at_chinese_pages_or_back_to_english_files(repo):
    TOOL.update(["notebooks/s01.ipynb", TOOL.GLOSSARY], runtime=False)
    text = "[s01](s01.ipynb) · [solution](../solutions/s01.ipynb) · [readme](../README.md#run)"
    assert TOOL.relink(text, "notebooks/s01.ipynb") == (
        "[s01](s01.ipynb) · [solution](../../solutions/s01.ipynb) · "
        "[readme](../../README.md#run)")


def test_a_glossary_entry_in_chinese_keeps_its_english_definition(repo):
    source = TOOL.GLOSSARY
    TOOL.update([source], runtime=False)
    path = TOOL.catalogue_path(source)
    entry = '<a id="transcript"></a>\n### transcript · 会话记录\nThe log. [s01]'
    _translate(path, {"# Glossary": "# 术语表",
                      entry: '<a id="transcript"></a>\n### 会话记录 · transcript\n日志。[s01]'})
    TOOL.build([source])
    page = (repo / "notebooks/zh/glossary.md").read_text(encoding="utf-8")
    assert "### 会话记录 · transcript\n日志。[s01]\n\n> The log. [s01]\n" in page


def test_the_glossary_terms_are_required_where_the_english_uses_them(repo):
    source = "notebooks/s01.ipynb"
    TOOL.update([source], runtime=False)
    assert TOOL.glossary_terms() == [TOOL.Term("transcript", "会话记录")]
    assert TOOL.missing_terms(source) == []  # 'transcript' only appears in a link target
    english = _notebook(MARKDOWN + "\n\nThe transcript is the evidence.")
    (repo / "notebooks" / "s01.ipynb").write_text(json.dumps(english), encoding="utf-8")
    TOOL.update([source], runtime=False)
    path = TOOL.catalogue_path(source)
    _translate(path, {"The transcript is the evidence.": "日志就是证据。"})
    assert TOOL.missing_terms(source) == [("transcript", "会话记录")]
    _translate(path, {"The transcript is the evidence.": "会话记录就是证据。"})
    assert TOOL.missing_terms(source) == []


def test_a_label_translated_two_ways_is_reported(repo):
    code = 'plt.title(label("recall by scorer"))'
    for name in ("s01", "s02"):
        (repo / "notebooks" / f"{name}.ipynb").write_text(json.dumps(_notebook(code=code)),
                                                          encoding="utf-8")
    TOOL.update(["notebooks/s01.ipynb", "notebooks/s02.ipynb"], runtime=False)
    _translate(TOOL.catalogue_path("notebooks/s01.ipynb"), {"recall by scorer": "recall"})
    _translate(TOOL.catalogue_path("notebooks/s02.ipynb"), {"recall by scorer": "recall!"})
    assert len(TOOL.label_conflicts()) == 1 and "s02.po" in TOOL.label_conflicts()[0]
    _translate(TOOL.catalogue_path("notebooks/s02.ipynb"), {"recall by scorer": "recall"})
    assert TOOL.label_conflicts() == []


@pytest.mark.parametrize(("old_id", "new_id", "old_str", "want"), [
    ("about 69 min, 27 for exercises", "about 70 min, 27 for exercises",
     "约 69 分钟，练习 27 分钟", "约 70 分钟，练习 27 分钟"),
    ("| s09 | 3,344 | 475 |", "| s09 | 3,344 | 480 |", "| s09 | 3,344 | 475 |",
     "| s09 | 3,344 | 480 |"),
    ("about 69 min", "about 69 minutes", "约 69 分钟", None),   # words changed: a translator
    ("69 min, 27 more", "70 min, 28 more", "另需 27 分钟，共 69 分钟", None),  # order differs
])
def test_english_whose_numbers_alone_changed_is_renumbered(old_id, new_id, old_str, want):
    assert TOOL._renumbered(old_id, new_id, old_str) == want


def test_emphasis_that_would_show_its_asterisks_is_reported():
    msgid = "First **[seal](glossary.md#seal)**, then abort."
    broken = "先**[封存](glossary.md#seal)**，再中止。"  # ** between 先 and [ opens nothing
    assert any("shows as itself" in p for p in TOOL.translation_problems(msgid, broken))
    assert TOOL.translation_problems(msgid, "先 **[封存](glossary.md#seal)**，再中止。") == []
