"""One renderer for every prompt block the library emits.

A prompt block — recall's ``<recalled_context>`` and ``<remote_profile>``, the user-memory
context, the durable context, the Context MMU's loaded pages, the story memory pack — puts
stored text (written by users, tools and models) next to syntax of its own: element tags
and attributes, ``[section]`` headers, ``key=value`` attributes, status markers, one item
per line. If stored text could produce any of that syntax it could forge an item, a section
or a status ("``source_status=available``" next to a missing source). So every block prints
every field through this module:

* stored text through :meth:`BlockFormat.text` (:func:`escape_text`), which makes it unable
  to produce the block's syntax:

  - every line break and every other control, format or separator character (Unicode
    categories ``Cc``, ``Cf``, ``Zl``, ``Zp``), every lone surrogate and every noncharacter
    (U+FDD0–U+FDEF, U+xxFFFE/U+xxFFFF: never text, and not even legal XML) becomes
    ``\\uXXXX`` (``\\UXXXXXXXX`` above U+FFFF). That covers ``\\n``, ``\\r``, NEL,
    U+2028 / U+2029 and the bidirectional overrides (U+202A–U+202E, U+2066–U+2069), so
    stored text can never start a line, and never reorder what a reader sees;
  - the block's *reserved* characters (its delimiters, e.g. ``[``, ``]`` and ``=``), plus
    any a field adds, also become ``\\uXXXX``;
  - the backslash becomes ``\\\\``, so every escape in the output came from the renderer;
  - in a markup (XML) block, ``& < > " '`` become character references first.

* everything else through a validator that refuses what it cannot print faithfully
  (:func:`require_choice`, :func:`require_sha256`, :func:`fixed`, :func:`count`), naming the
  field, with :class:`~labmem.core.errors.InvalidInputError`;

* the lines through :func:`join_lines`, which refuses a line with a line break in it: a
  block is one item per line, and a block that forgot to escape a field fails loudly.

Ordinary text — letters of every script, digits, spaces, and the punctuation a block does
not reserve — passes through unchanged, so English or Chinese text renders exactly as it
would without the renderer. :func:`unescape_text` (:meth:`BlockFormat.parse`) is the exact
inverse: a rendered field always parses back into the text that was given.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from labmem.core.errors import InvalidInputError
from labmem.core.validation import require_int

__all__ = [
    "ESCAPED_CATEGORIES", "LINE_BREAKS", "BlockFormat", "XML", "escape_text", "unescape_text",
    "join_lines", "require_choice", "require_sha256", "fixed", "count", "xml_attributes",
]

#: Unicode categories that never reach a prompt raw: controls (``\\n``, ``\\r``, NEL …),
#: format characters (bidirectional overrides, zero-width joiners, BOM …), line and
#: paragraph separators, and lone surrogates (which cannot even be encoded).
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: What ``str.splitlines`` splits on: none of these may appear inside a rendered line.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: Characters that character references are made of: a markup block cannot reserve them.
_REFERENCE_CHARACTERS = frozenset("&#;")
_ESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4}|U[0-9a-f]{8})")
_LINE_BREAK = re.compile(f"[{re.escape(LINE_BREAKS)}]")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def _noncharacter(char: str) -> bool:
    code = ord(char)
    return 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE


def _escape_char(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_text(value: Any, field: str = "text", *, reserved: str = "",
                markup: bool = False) -> str:
    """``value`` made unable to produce a block's syntax (see the module docstring).

    ``reserved`` are the block's delimiters for this field; ``markup`` escapes ``& < > " '``
    as character references (XML blocks). Refuses a non-string, naming ``field``.
    """
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}")
    text = html.escape(value, quote=True) if markup else value
    if text.isprintable() and "\\" not in text and not any(c in text for c in reserved):
        return text  # the common case: nothing to escape (C speed, no per-character loop)
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif (char in reserved or unicodedata.category(char) in ESCAPED_CATEGORIES
              or _noncharacter(char)):
            out.append(_escape_char(char))
        else:
            out.append(char)
    return "".join(out)


def _unescape_match(match: re.Match[str]) -> str:
    body = match.group(1)
    return "\\" if body == "\\" else chr(int(body[1:], 16))


def unescape_text(text: str, *, markup: bool = False) -> str:
    """The exact inverse of :func:`escape_text` (with the same ``markup``)."""
    if markup:
        text = html.unescape(text)
    return _ESCAPE.sub(_unescape_match, text)


@dataclass(frozen=True)
class BlockFormat:
    """The syntax of one prompt block, as far as escaping is concerned.

    ``reserved`` holds the characters the block uses as delimiters on a line (``[``, ``]``
    and ``=`` for ``- [fact id] text (source=…)``); stored text never prints them raw.
    ``markup`` is for XML blocks. Line breaks, controls and backslashes are always escaped.
    """

    name: str
    reserved: str = ""
    markup: bool = False

    def __post_init__(self) -> None:
        for char in self.reserved:
            if char == "\\" or char.isalnum() or char.isspace():
                raise InvalidInputError(f"{self.name}.reserved",
                                        f"cannot reserve {char!r} (letters, digits, spaces "
                                        "and the backslash are not delimiters)")
            if self.markup and char in _REFERENCE_CHARACTERS:
                raise InvalidInputError(f"{self.name}.reserved",
                                        f"a markup block cannot reserve {char!r}: character "
                                        "references are made of it")

    def text(self, value: Any, field: str, *, reserved: str = "") -> str:
        """Stored text for one field; ``reserved`` adds delimiters that follow this field."""
        return escape_text(value, field, reserved=self.reserved + reserved, markup=self.markup)

    def parse(self, text: str) -> str:
        """A rendered field back to the stored text (the inverse of :meth:`text`)."""
        return unescape_text(text, markup=self.markup)


#: XML blocks (``<recalled_context>``, ``<remote_profile>``, ``<user_memory>``).
XML = BlockFormat("xml", markup=True)


def xml_attributes(pairs: Iterable[tuple[str, Any]], *, block: str = "xml") -> str:
    """`` name="value"`` for each pair, every value escaped (names are the block's own)."""
    out = []
    for name, value in pairs:
        if not isinstance(name, str) or not _XML_NAME.fullmatch(name):
            raise InvalidInputError(f"{block}.attribute", f"{name!r} is not an attribute name")
        out.append(f' {name}="{XML.text(value, f"{block}.{name}")}"')
    return "".join(out)


def require_choice(value: Any, field: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices`` (a status, a kind, a category)."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidInputError(field, f"must be one of {list(choices)}, got {value!r}")
    return value


def require_sha256(value: Any, field: str) -> str:
    """``value`` if it is a full SHA-256: 64 lowercase hex digits, nothing else."""
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        shown = value if not isinstance(value, str) else value[:80]
        raise InvalidInputError(field, f"must be a full SHA-256 (64 lowercase hex digits), "
                                       f"got {shown!r}")
    return value


def fixed(value: Any, field: str, decimals: int = 6) -> str:
    """A finite number with ``decimals`` decimals (``nan`` and ``inf`` are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise InvalidInputError(field, f"must be a finite number, got {value!r}")
    return f"{value:.{decimals}f}"


def count(value: Any, field: str, minimum: int = 0) -> str:
    """An integer ≥ ``minimum`` (a rank, a revision, a chapter), as text."""
    return str(require_int(value, field, minimum=minimum))


def join_lines(lines: Iterable[str], field: str = "block") -> str:
    """The block's lines joined by ``\\n``; a line holding a line break is refused."""
    checked = []
    for number, line in enumerate(lines, start=1):
        if not isinstance(line, str):
            raise InvalidInputError(f"{field} line {number}",
                                    f"must be a string, got {type(line).__name__}")
        if _LINE_BREAK.search(line):
            raise InvalidInputError(f"{field} line {number}",
                                    "holds a line break: a field was printed without escaping",
                                    "render stored text with BlockFormat.text")
        checked.append(line)
    return "\n".join(checked)
