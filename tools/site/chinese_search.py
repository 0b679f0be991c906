"""Sphinx's Chinese search, with the JavaScript stemmer it names actually defined.

Sphinx cuts Chinese text into words with jieba (``sphinx.search.zh``) and stems the Latin
words among them with the English Snowball stemmer. Its page script, though, is told to use
``ChineseStemmer`` (the stemmer class is named after the language), which no script defines:
every search page of a Chinese site then fails with "ChineseStemmer is not defined". This
registers the same language with the English stemmer under its own name.
"""

from __future__ import annotations

from sphinx.search import languages
from sphinx.search.zh import SearchChinese


class SearchChineseWithStemmer(SearchChinese):
    language_name = "English"  # the JavaScript stemmer it loads: EnglishStemmer


def setup(app):
    languages["zh"] = SearchChineseWithStemmer
    return {"parallel_read_safe": True}
