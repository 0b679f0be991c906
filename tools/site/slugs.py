"""Heading anchors for the site, spelled the way the glossary spells its own.

The glossary writes ``<a id="evidence-id">`` above ``### evidence id`` and links its letter
groups as ``#a-c`` (heading ``A–C``): lower case, every run of other characters one hyphen.
"""

import re


def slug(heading: str) -> str:
    return re.sub(r"[^0-9a-z]+", "-", heading.lower()).strip("-")
