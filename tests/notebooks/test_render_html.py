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
