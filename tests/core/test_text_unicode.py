"""Search terms in every script: words of letters, digits and marks; CJK and kana bigrams.

The seed's ASCII and Chinese examples keep their exact terms; other scripts, which the
old ``[a-z0-9]+`` rule cut to pieces or dropped, now give whole words.
"""

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labmem.core import text
from labmem.core.text import extract_terms, normalize_text, term_frequencies


@pytest.mark.parametrize("source, terms", [
    # the seed's examples: unchanged
    ("  LAYERED   Memory  ", ("layered", "memory")),
    ("分层记忆", ("分层", "层记", "记忆")),
    ("用 SQLite", ("sqlite", "用")),
    # words of other scripts are whole words now
    ("café résumé", ("café", "résumé")),
    ("naïve", ("naïve",)),
    ("Größe", ("grösse",)),  # casefold maps ß to ss
    ("Русский язык", ("русский", "язык")),
    ("한국어 공부", ("공부", "한국어")),
    ("Ελληνικά", ("ελληνικά",)),
    ("हिन्दी", ("हिन्दी",)),  # the vowel signs are combining marks inside the word
    ("e\u0301clair", ("éclair",)),  # NFKC composes the accent
    ("snake_case", ("case", "snake")),  # the underscore separates, as before
    # kana runs get bigrams like CJK; kanji and kana runs are separate runs
    ("ひらがな", ("がな", "ひら", "らが")),
    ("に", ("に",)),
    ("東京に行きました", ("きま", "した", "に", "まし", "東京", "行")),
    ("ジョン・スミス", ("ジョ", "スミ", "ミス", "ョン")),  # the middle dot separates
    ("ｶﾀｶﾅ", ("カタ", "カナ", "タカ")),  # halfwidth katakana: NFKC makes it fullwidth
    ("?!… ・ ゠", ()),
])
def test_terms_of_every_script(source, terms):
    assert extract_terms(source) == terms


def test_counts_in_mixed_text():
    assert term_frequencies("Café café 記憶 きおく") == {
        "café": 2, "記憶": 1, "きお": 1, "おく": 1}


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_the_ascii_fast_path_agrees_with_the_general_rule(source):
    # a non-ASCII word appended sends the text through the general regex
    general = term_frequencies(source + " é")
    general["é"] -= 1
    assert +general == term_frequencies(source)


INTERESTING = st.sampled_from(
    "aZ9_-' \u00e9\u00df\u0130\u01f0\u0301\u0308\u0915\u093f\u094d\u0928"  # Latin, marks
    "\u0436\u03b1\u03c2\uac00\u1100\u1161\u4e00\u5206\u5c42\u8bb0\uff21\uff71\u30fc\u30fb"
    "\u3042\u3099\u30ab\u309b\u00b5\u2160\u00bd\ufb01\u3005\u3007\u0e01\u0e34\U00020000"
)
texts = st.one_of(st.text(), st.text(INTERESTING))


@given(texts)
def test_every_term_is_non_empty_and_normalized(source):
    for term in extract_terms(source):
        assert term and normalize_text(term) == term and " " not in term


@given(texts)
def test_extraction_is_idempotent_on_its_own_output(source):
    terms = extract_terms(source)
    assert extract_terms(" ".join(terms)) == terms


def mark_ranges_from_unicodedata() -> list[tuple[int, int]]:
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)).startswith("M"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return [(a, b) for a, b in ranges]


def embedded_mark_ranges() -> list[tuple[int, int]]:
    out = []
    for item in text._MARK_RANGES.split():
        first, _, last = item.partition("-")
        out.append((int(first, 16), int(last or first, 16)))
    return out


def test_the_embedded_mark_table_is_this_unicode_version():
    embedded = embedded_mark_ranges()
    if unicodedata.unidata_version == "14.0.0":
        assert embedded == mark_ranges_from_unicodedata()
    else:  # a newer Python: every mark we list is still a mark (new ones may be missing)
        for a, b in embedded:
            assert all(unicodedata.category(chr(c)).startswith("M") for c in range(a, b + 1))
