"""Sphinx configuration of the course website (`make html`; built by tools/build_site.py).

The site is read from the committed, executed notebooks: nothing is re-executed, so the
pages show exactly the outputs that strict nbval checks. Everything a page needs is copied
into the build, so it opens offline, from files or from `python -m http.server`.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

project = "labmem — how AI agents remember"
author = "the labmem authors"
copyright = "the labmem authors"  # noqa: A001 (Sphinx's name for it)
language = "en"

extensions = ["myst_nb", "figure_alt", "language_switch"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# the notebooks are committed executed; the site shows those outputs as they are
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True
myst_heading_anchors = 3
myst_heading_slug_func = "slugs.slug"
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
html_title = "labmem — how AI agents remember"
html_static_path = ["_static"]
html_css_files = ["labmem.css"]
html_favicon = "_static/favicon.svg"  # else a browser asks the server for /favicon.ico
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
# Sphinx's search runs from searchindex.js, which a page loads with a <script> tag, so it
# works from file:// too. Its result summaries would fetch() each page, which a browser
# refuses for file:// URLs: keep them off.
html_show_search_summary = False
# the theme reads the reader's light/dark choice from here (an empty one is logged as an error)
html_context = {"default_mode": "light"}
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "show_prev_next": True,
    "navigation_with_keys": False,
    "extra_footer": "Built from the committed notebooks; every page works offline.",
}

# the edition tools/build_site.py is building: "en" here, "zh" in <out>/zh
labmem_edition = os.environ.get("LABMEM_SITE_EDITION", "en")
if labmem_edition == "zh":
    language = "zh_CN"  # the theme's own words (搜索, 上一页) and <html lang>
    project = html_title = "labmem — AI 智能体如何记忆"
    html_theme_options["extra_footer"] = "由提交的 notebook 构建；每一页都可离线阅读。"
    # Sphinx's Chinese search: jieba cuts the text into words for the index; the glossary's
    # Chinese terms are added to its dictionary so that each is indexed as one word
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # its notes on loading the dictionary are not warnings
    extensions.append("chinese_search")
    html_search_language = "zh"
    html_search_options = {"dict": os.environ["LABMEM_SITE_SEARCH_DICT"]}
