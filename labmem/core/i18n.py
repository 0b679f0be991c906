"""The language a learner reads: labels, figure text and checker feedback, in English or Chinese.

The course has two editions built from one source (``tools/i18n.py``): the English notebooks
under ``notebooks/`` and their Chinese builds under ``notebooks/zh/``. Both run the same code
cells, byte for byte, so the code cannot say which edition it is in. It asks this module,
which decides once per call:

1. ``$LABMEM_LANG`` when set (``en`` or ``zh_CN``), else
2. ``zh_CN`` when the working directory is a Chinese edition's folder (a kernel runs in its
   notebook's folder: ``notebooks/zh/``, ``solutions/zh/``), else
3. ``en``.

:func:`label` then looks the English text up in the runtime catalogue, which
``tools/i18n.py`` compiles from ``locale/zh_CN/LC_MESSAGES/labmem.po`` into
``labmem/locale`` (a standard gettext ``.mo`` file, read with :mod:`gettext`). English, and
any text without a translation, comes back unchanged: a missing translation shows English,
never an error. Library code marks its strings with ``_`` (translate now) or ``N_`` (a
constant translated where it is shown); notebooks call :func:`label`.
"""

from __future__ import annotations

import contextlib
import functools
import gettext
import os
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from labmem.core.errors import LabmemError

LANGUAGES = ("en", "zh_CN")
#: the folder name of each non-English edition (``notebooks/zh/``)
EDITION_FOLDERS = {"zh": "zh_CN"}
DOMAIN = "labmem"
LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"

_chosen: ContextVar[str | None] = ContextVar("labmem_language", default=None)


class LanguageError(LabmemError, ValueError):
    """A language code labmem has no edition for."""


def _checked(code: str, field: str) -> str:
    if code not in LANGUAGES:
        raise LanguageError(f"{field}: {code!r} is not a language of this course; "
                            f"use one of {', '.join(LANGUAGES)}")
    return code


def language() -> str:
    """The language this process shows labels in (see the module docstring for the rule)."""
    chosen = _chosen.get()
    if chosen is not None:
        return chosen
    env = os.environ.get("LABMEM_LANG", "").strip()
    if env:
        return _checked(env, "LABMEM_LANG")
    return EDITION_FOLDERS.get(Path.cwd().name, "en")


@contextlib.contextmanager
def use_language(code: str) -> Iterator[str]:
    """Show labels in ``code`` inside the block (tests, and the site's figure checks)."""
    token = _chosen.set(_checked(code, "language"))
    try:
        yield code
    finally:
        _chosen.reset(token)


@functools.cache
def _catalogue(code: str) -> gettext.NullTranslations:
    return gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[code], fallback=True)


def label(text: str) -> str:
    """``text`` in the reader's language: a figure title, an axis label, a table heading."""
    if not isinstance(text, str):
        raise TypeError(f"label: expected the English text as a str, got {type(text).__name__}")
    code = language()
    if code == "en" or not text:
        return text
    return _catalogue(code).gettext(text)


#: library code's spelling of :func:`label` (the name gettext's tools look for)
_ = label


def N_(text: str) -> str:  # noqa: N802 (gettext's name for "mark, do not translate yet")
    """Mark a constant for the catalogue without translating it here; ``label()`` it when shown."""
    return text
