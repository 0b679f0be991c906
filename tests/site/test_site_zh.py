"""The Chinese edition (中文版) of the site and the decks: built beside the English one from
``notebooks/zh`` and ``solutions/zh``, every page one click from its English twin and back,
searchable by Chinese words, its text and figures drawn with a CJK font — checked in the
built files and in Chromium."""

from __future__ import annotations

import re

import pytest

from labmem.notebook import reading_order
from tests.site.conftest import ROOT, load_tool
from tests.site.pages import html_name, search_index, site_order

build_site = load_tool("build_site")
NAMES = build_site.staged_names(edition="zh")
ORDER = site_order(NAMES)
CJK = re.compile(r"[\u4e00-\u9fff]")
CHAPTERS = list(reading_order())[1:]


def page_id(page: str) -> str:
    return page.removesuffix(".html")


def test_both_editions_have_the_same_pages():
    assert ORDER == site_order(build_site.staged_names())


@pytest.mark.parametrize("page", ORDER, ids=page_id)
def test_every_page_is_built_in_chinese_with_a_switch_to_its_twin(site, page):
    text = (site / "zh" / page).read_text(encoding="utf-8")
    assert '<html lang="zh-CN"' in text
    up = "../" * page.count("/")
    assert f'class="labmem-language-switch" href="../{up}{page}" hreflang="en"' in text
    english = (site / page).read_text(encoding="utf-8")
    assert f'class="labmem-language-switch" href="{up}zh/{page}" hreflang="zh-Hans"' in english


# every page over HTTP; from files, the home page and one chapter with figures
VISITS = [("http", p) for p in ORDER] + [("file", "index.html"),
                                         ("file", "s12b_choosing_a_ranker.html")]
# the pages whose language switch is clicked there and back (every page's link is checked in
# the built files above): the home page, a chapter, the glossary, the solutions, one solution
ROUND_TRIPS = {"index.html", "s12b_choosing_a_ranker.html", "glossary.html",
               "solutions/index.html", "solutions/s09_transcript.html"}


@pytest.mark.parametrize(("mode", "page"), VISITS, ids=lambda v: page_id(v) if "." in v else v)
def test_every_chinese_page_opens_cleanly_and_switches_to_the_same_page(
        visit, site, server, page, mode):
    """No console error, every image decoded, a Chinese title, previous/next within the
    Chinese edition, and the language switch lands on the same page in English and back."""
    base = server if mode == "http" else site.as_uri()
    tab = visit.open(f"{base}/zh/{page}")
    assert CJK.search(tab.title()), f"{page}: its title is not Chinese: {tab.title()!r}"
    assert visit.broken_images() == []
    i = ORDER.index(page)
    neighbours = [ORDER[i - 1] if i else None, ORDER[i + 1] if i + 1 < len(ORDER) else None]
    links = tab.evaluate("""() => ["a.left-prev", "a.right-next"].map(s => {
        const a = document.querySelector(s); return a ? a.href : null; })""")
    assert links == [f"{base}/zh/{n}" if n else None for n in neighbours]
    switch = tab.evaluate("() => document.querySelector('a.labmem-language-switch').href")
    assert switch == f"{base}/{page}"
    if page in ROUND_TRIPS:
        visit.page.click("a.labmem-language-switch")
        visit.page.wait_for_url(f"{base}/{page}")
        visit.page.click("a.labmem-language-switch")
        visit.page.wait_for_url(f"{base}/zh/{page}")
    visit.assert_clean()


def unique_chinese_term(index: dict, page: str) -> str | None:
    """A Chinese word of ``page`` that the search finds there and nowhere else: in no title,
    and (for a word of three or more characters, which the search also matches inside longer
    words) inside no other page's term."""
    doc = index["docnames"].index(page.removesuffix(".html"))
    titles = " ".join(index["alltitles"])
    mine = [t for t, d in index["terms"].items() if d == doc and CJK.search(t) and len(t) >= 2
            and not re.search(r"[A-Za-z0-9]", t)]
    for word in sorted(mine, key=lambda w: (-len(w), w)):
        if word in index["titleterms"] or word in titles:
            continue
        if len(word) > 2 and any(word in t and d != doc for t, d in index["terms"].items()):
            continue
        return word
    return None


@pytest.mark.parametrize("name", CHAPTERS)
def test_a_chinese_word_finds_its_chapter(visit, site, server, name):
    """Sphinx's Chinese search (the text cut into words by jieba): a word only one chapter
    uses, typed into the search page, lists that chapter and nothing else."""
    page = html_name(NAMES[f"notebooks/zh/{name}"])
    word = unique_chinese_term(search_index(site / "zh"), page)
    assert word, f"{name}: no Chinese word of it is unique to it in the search index"
    assert visit.search(f"{server}/zh/search.html?q={word}") == [page], f"searching {word!r}"
    visit.assert_clean()


def test_a_glossary_term_finds_the_chapters_that_use_it(visit, site, server):
    """Each Chinese glossary term is one word in the index (jieba's dictionary gets them)."""
    index = search_index(site / "zh")
    assert {"召回", "租约", "分层记忆", "规范记录", "驻留"} <= set(index["terms"])
    assert "s13_artifacts.html" in visit.search(f"{server}/zh/search.html?q=租约")
    visit.assert_clean()


GLYPH_CHECK = """(text) => {
    // a character drawn with a real glyph differs from the box drawn for one no font has
    const pixels = (s) => { const c = document.createElement("canvas"); c.width = 64;
        c.height = 64; const g = c.getContext("2d"); g.font = "40px sans-serif";
        g.fillText(s, 8, 48); return Array.from(g.getImageData(0, 0, 64, 64).data).join(); };
    const box = pixels("\\u{10FFFD}");
    return Array.from(text).filter(ch => /[\\u4e00-\\u9fff]/.test(ch) && pixels(ch) === box);
}"""


def test_chinese_text_and_figures_are_drawn_with_a_cjk_font(visit, site, server):
    """No character of the page's Chinese falls back to a missing-glyph box, and the figure
    is the Chinese one (its alt text is Chinese). The screenshot is kept for review."""
    tab = visit.open(f"{server}/zh/s12b_choosing_a_ranker.html")
    text = tab.evaluate("() => document.querySelector('article').innerText")
    assert len(CJK.findall(text)) > 500
    assert tab.evaluate(GLYPH_CHECK, "".join(sorted(set(CJK.findall(text))))[:400]) == []
    figure = tab.locator("article img").first
    assert figure.evaluate("i => i.naturalWidth") > 0
    figure.scroll_into_view_if_needed()
    visit.screenshot("zh-site-s12b-figure")
    visit.assert_clean()


ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))


@pytest.mark.parametrize("notebook", ZH_NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chinese_deck_presents_offline(visit, decks, notebook):
    tab = visit.open(f"{decks.as_uri()}/zh/{notebook.stem}.slides.html")
    tab.wait_for_function("() => window.Reveal && Reveal.isReady()")
    assert tab.evaluate("() => document.documentElement.lang") == "zh"
    assert CJK.search(tab.evaluate("() => document.querySelector('.reveal').innerText"))
    assert visit.broken_images() == []
    visit.assert_clean()


def test_a_chinese_slide_with_a_figure(visit, decks, server):
    image = visit.first_figure_slide(f"{server}/slides/zh/s12b_choosing_a_ranker.slides.html")
    assert CJK.search(image.get_attribute("alt") or "")
    tab = visit.page
    text = tab.evaluate("() => document.querySelector('.reveal section.present').innerText")
    assert tab.evaluate(GLYPH_CHECK, "".join(sorted(set(CJK.findall(text))))) == []
    visit.screenshot("zh-deck-s12b-figure-slide")
    visit.assert_clean()
