"""`make html`: every chapter renders to a standalone page that loads nothing remote."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def load_renderer():
    spec = importlib.util.spec_from_file_location("render_html", ROOT / "tools" / "render_html.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_renders_offline(notebook, tmp_path):
    page = load_renderer().render(notebook, tmp_path).read_text(encoding="utf-8")
    assert "cdnjs" not in page and '<script src="http' not in page
    assert f"<title>{notebook.stem}</title>" in page
    assert page.count("data:image/png;base64,") >= 1  # figures are embedded, not linked


def test_every_figure_has_its_alt_text_in_the_page(tmp_path):
    import json

    chapter = ROOT / "notebooks" / "00_start_here.ipynb"
    nb = json.loads(chapter.read_text(encoding="utf-8"))
    alts = [o["metadata"]["image/png"]["alt"] for c in nb["cells"] if c["cell_type"] == "code"
            for o in c["outputs"] if "image/png" in o.get("data", {})]
    page = load_renderer().render(chapter, tmp_path).read_text(encoding="utf-8")
    assert alts and all(f'alt="{alt}"' in page for alt in alts)
