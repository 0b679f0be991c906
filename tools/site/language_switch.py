"""A link at the top of every page to the same page in the other edition (English ↔ 中文).

The two editions stage their pages under the same names (tools/build_site.py), the Chinese
site in ``zh/`` below the English one, so a page's twin is its own path in the other site:
``solutions/s09_transcript.html`` ↔ ``zh/solutions/s09_transcript.html``.
"""

from __future__ import annotations

import html

# edition → (the other edition's link text, its language tag)
OTHER = {"en": ("中文", "zh-Hans"), "zh": ("English", "en")}


def twin(edition: str, pagename: str) -> str:
    """The relative URL of ``pagename``'s page in the other edition."""
    up = "../" * pagename.count("/")
    return f"{up}zh/{pagename}.html" if edition == "en" else f"../{up}{pagename}.html"


def _add_switch(app, pagename, templatename, context, doctree) -> None:
    if doctree is None or "body" not in context:  # search and index pages: no article
        return
    edition = app.config.labmem_edition
    text, lang = OTHER[edition]
    link = (f'<p class="labmem-language"><a class="labmem-language-switch" '
            f'href="{html.escape(twin(edition, pagename))}" hreflang="{lang}" lang="{lang}">'
            f"{text}</a></p>\n")
    context["body"] = link + context["body"]


def setup(app):
    app.add_config_value("labmem_edition", "en", "html")
    app.connect("html-page-context", _add_switch)
    return {"parallel_read_safe": True}
