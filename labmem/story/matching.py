"""When does a text mention a phrase? One rule for the outline filter and ``query_entity``.

A phrase (a subject, a field, a value, an entity name) is mentioned by a text when, after
:func:`~labmem.core.text.normalize_text`, the phrase occurs in the text, or every search
term of the phrase — articles aside — is a term of the text. So the outline "the young
swordsman draws" mentions the value "a young swordsman", and "Master Qiu's school" the
name "Master Qiu". A phrase made of articles alone mentions nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from labmem.core.text import extract_terms, normalize_text

#: Words that say nothing about *which* thing is meant: "a young swordsman" and "the young
#: swordsman" are the same phrase.
ARTICLES = frozenset({"a", "an", "the"})


@dataclass(frozen=True)
class MentionText:
    """A text prepared once for many :meth:`mentions` checks."""

    normalized: str
    terms: frozenset[str]

    @classmethod
    def of(cls, text: str) -> MentionText:
        return cls(normalize_text(text), frozenset(extract_terms(text)))

    def mentions(self, phrase: str) -> bool:
        content = set(extract_terms(phrase)) - ARTICLES
        if not content:
            return False
        return normalize_text(phrase) in self.normalized or content <= self.terms
