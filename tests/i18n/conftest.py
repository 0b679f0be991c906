"""The Chinese edition's tests load ``tools/i18n.py`` (tools/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_i18n():
    """``tools/i18n.py``, imported once (registered first: its dataclasses look it up)."""
    if "i18n_tool" not in sys.modules:
        spec = importlib.util.spec_from_file_location("i18n_tool", ROOT / "tools" / "i18n.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["i18n_tool"] = module
        spec.loader.exec_module(module)
    return sys.modules["i18n_tool"]


@pytest.fixture(scope="session")
def i18n():
    return load_i18n()
