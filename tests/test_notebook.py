"""labmem.notebook's drawings are data first: the data is checked, then the figure."""

from __future__ import annotations

import pytest
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from labmem.notebook import (
    DIAGRAMS,
    Arrow,
    Box,
    Diagram,
    draw_diagram,
    draw_grid,
    draw_message_views,
)


@pytest.mark.parametrize("name", sorted(DIAGRAMS))
def test_every_chapter_diagram_is_drawable(name):
    diagram = DIAGRAMS[name]
    assert diagram.problems() == []
    fig = draw_diagram(diagram)
    (ax,) = fig.axes
    kinds = {box.kind for box in diagram.boxes}
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == len(diagram.boxes) + len(kinds)  # the boxes, then one legend swatch
    assert sum(isinstance(p, FancyArrowPatch) for p in ax.patches) == len(diagram.arrows)
    shown = {t.get_text() for t in ax.texts}
    assert {box.label for box in diagram.boxes} <= shown
    assert fig._labmem_alt == diagram.alt and len(diagram.alt) > 80


def test_the_chapters_have_their_pictures():
    assert {"s09", "s10", "s11", "s12", "s12b", "s13", "s13_leases", "s14_compaction",
            "s14_mmu", "walkthrough", "case_study"} <= set(DIAGRAMS)


def _boxes(*boxes, arrows=()):
    return Diagram("t", tuple(boxes), tuple(arrows), "a picture of two boxes")


def test_a_box_is_sized_from_its_text():
    assert Box("a", "abc\nlonger line", 10, 5).size == (14.0, 2.9)


@pytest.mark.parametrize("diagram, expected", [
    (_boxes(Box("a", "one", 5, 1), Box("b", "two", 6, 1)), "overlap"),
    (_boxes(Box("a", "one", 5, 1), arrows=[Arrow("a", "z")]), "missing box"),
    (_boxes(Box("a", "one", 5, 1), Box("a", "two", 50, 1)), "duplicate box"),
    (_boxes(Box("a", "one", 5, 1, kind="cloud")), "unknown kind"),
    (_boxes(Box("a", "one", 0, 1), Box("m", "middle", 20, 1), Box("b", "two", 40, 1),
            arrows=[Arrow("a", "b")]), "crosses box 'm'"),
    (Diagram("t", (Box("a", "one", 5, 1),), (), " "), "no alt text"),
])
def test_problems_are_found(diagram, expected):
    assert any(expected in problem for problem in diagram.problems())
    with pytest.raises(ValueError, match=expected):
        draw_diagram(diagram)


def test_a_grid_shades_exactly_its_cells():
    fig = draw_grid(["HOT", "COLD"], ["L0", "L2"], {("HOT", "L2"): "loaded"}, title="g",
                    alt="one loaded cell")
    (ax,) = fig.axes
    cells = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(cells) == 4
    assert sum(p.get_facecolor()[:3] != (1.0, 1.0, 1.0) for p in cells) == 1
    with pytest.raises(ValueError, match="not a"):
        draw_grid(["HOT"], ["L0"], {("WARM", "L0"): "x"}, title="g", alt="bad")


def test_message_views_put_one_bar_per_message():
    views = {"before": [("user", 10, "ask"), ("tool", 400, "output")],
             "after": [("user", 10, "ask"), ("tool", 40, "truncated")]}
    fig = draw_message_views(views, title="v", alt="two steps")
    left, right = fig.axes
    assert [len(ax.patches) for ax in (left, right)] == [2, 2]
    assert right.get_title() == "after\n2 messages, 50 tokens"


def test_full_text_shows_every_character_and_real_line_breaks():
    from labmem.notebook import TABLE_COLUMN_CHARS, full_text

    long = "word " * 60 + "END"
    shown = full_text([{"name": "a", "text": f"first line\n{long}"}], width=60)
    plain = repr(shown)
    assert "\\n" not in plain and "first line\n" in plain
    assert plain.replace("\n", " ").split().count("word") == 60 and "END" in plain
    assert max(len(line) for line in plain.split("\n")) <= 60
    html = shown._repr_html_()
    assert "white-space: pre-wrap" in html and "END" in html and "&lt;" not in html
    assert "&lt;b&gt;" in full_text([{"t": "<b>"}])._repr_html_()  # text, never markup
    assert TABLE_COLUMN_CHARS >= 200


def test_message_views_name_the_roles_under_the_panels_and_stay_readable():
    from labmem.notebook import MESSAGE_NOTE_PT

    views = {"before": [("user", 10, "ask"), ("tool", 400, "output")],
             "after": [("user", 10, "ask"), ("assistant", 40, "a long note " * 3)]}
    fig = draw_message_views(views, title="v", alt="two steps")
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["user", "tool", "assistant"]
    notes = [t for ax in fig.axes for t in ax.texts]
    assert {t.get_text() for t in notes} == {"ask", "output", "a long note " * 3}
    assert MESSAGE_NOTE_PT >= 8 and all(t.get_fontsize() == MESSAGE_NOTE_PT for t in notes)
    assert fig.get_size_inches()[0] / 2 >= len("a long note " * 3) * MESSAGE_NOTE_PT * 0.6 / 72


# -- a directory as a picture -----------------------------------------------------------

FILES = [{"path": "a/b.txt", "bytes": 3, "owner": "x"},
         {"path": "a/c/d.txt", "bytes": 4, "owner": "x"},
         {"path": "e.txt", "bytes": 5, "owner": "y"}]


def test_tree_rows_are_a_tree_listing():
    from labmem.notebook import tree_rows

    rows = tree_rows(reversed(FILES), root="home")
    assert [r.prefix + r.name for r in rows] == [
        "home/", "├── a/", "│   ├── b.txt", "│   └── c/", "│       └── d.txt", "└── e.txt"]
    assert [r.size for r in rows] == [12, 7, 3, 4, 4, 5]
    assert [r.group for r in rows] == [None, "x", "x", "x", "x", "y"]
    assert [r.path for r in rows] == ["", "a/", "a/b.txt", "a/c/", "a/c/d.txt", "e.txt"]
    with pytest.raises(ValueError, match="not a relative file path"):
        tree_rows([{"path": "/etc/passwd", "bytes": 1}])


def test_a_tree_draws_every_row_and_describes_itself():
    from labmem.notebook import TREE_FONT_PT, draw_tree

    fig = draw_tree(FILES, root="home", title="a home")
    (ax,) = fig.axes
    shown = [t.get_text() for t in ax.texts]
    assert {"home/", "a/", "b.txt", "c/", "d.txt", "e.txt", "12 B"} <= set(shown)
    assert "x: 2 files, 7 B" in shown and "y: 1 file, 5 B" in shown
    assert TREE_FONT_PT >= 9 and all(t.get_fontsize() >= TREE_FONT_PT for t in ax.texts)
    assert fig._labmem_alt == ("a home: a tree of 3 files in 2 folders under home/, 12 bytes "
                               "in all. By owner: x, 2 files of 7 bytes; y, 1 file of 5 bytes.")
    assert draw_tree(FILES, title="t", alt="my words")._labmem_alt == "my words"


@pytest.mark.parametrize("name", sorted(DIAGRAMS))
def test_the_legend_fits_in_the_picture(name):
    """draw_diagram lays its legend out left to right under the boxes; the picture must be
    wide enough for it, or the last entry is cut off."""
    from labmem.notebook import KIND_MEANINGS

    diagram = DIAGRAMS[name]
    left = min(b.bounds()[0] for b in diagram.boxes) - 1
    right = max(b.bounds()[2] for b in diagram.boxes) + 1
    kinds = list(dict.fromkeys(b.kind for b in diagram.boxes))
    needed = 0.5 + sum(len(KIND_MEANINGS[k]) + 6 for k in kinds[:-1]) + 2.6 + len(
        KIND_MEANINGS[kinds[-1]])
    assert needed <= right - left, f"widen {name}: the legend needs {needed:.0f} characters"
