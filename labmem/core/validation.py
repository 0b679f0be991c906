"""Argument checks shared by every layer: each refusal names the field and the fix.

Layers call these and re-raise the refusal as their own validation error with
:func:`labmem.core.errors.validated_as`, so a caller catches one layer-specific class.

Two things can never be stored, whatever the layer, and are refused here before a byte
is written (DESIGN §1):

* a *lone surrogate* (``"bad\\ud800x"``): a Python string may hold one, UTF-8 cannot, so
  it would only fail later, as a ``UnicodeEncodeError`` halfway through a write —
  :func:`require_text` and :func:`require_json` refuse it, naming the field;
* *unbounded nesting*: arrays and objects nested deeper than :data:`MAX_JSON_DEPTH` are
  refused by :func:`require_json` on the way in, and :func:`parse_json` refuses them on
  the way out (a stored line nested 100,000 levels deep would otherwise escape as a
  ``RecursionError``), so one bound holds for every file of every layer.
"""

from __future__ import annotations

import json
import math
from itertools import accumulate
from typing import Any, TypeVar

from labmem.core.errors import InvalidInputError

#: The deepest nesting of JSON arrays and objects any layer writes or reads back.
MAX_JSON_DEPTH = 100

_Record = TypeVar("_Record")
_FIELD_NAMES: dict[type, frozenset[str]] = {}


def prechecked(cls: type[_Record], /, **fields: Any) -> _Record:
    """An instance of the frozen dataclass ``cls`` from values that were already checked,
    set without the generated ``__init__``: a frozen dataclass sets each field through
    ``object.__setattr__`` (about a microsecond for a dozen fields), and a recall builds
    one breakdown and one hit per shortlisted record. Every field must be given (counted
    here: a misspelt name then fails on first read, as ``to_dict`` reads them all); a class
    with ``__post_init__`` checks would be skipped, so it is refused."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        if "__post_init__" in dir(cls) or "__slots__" in cls.__dict__:
            raise TypeError(f"{cls.__name__} checks or slots its fields: call it instead")
        names = _FIELD_NAMES[cls] = frozenset(cls.__dataclass_fields__)
    if len(fields) != len(names):  # (comparing the names costs more than the fields' set)
        raise TypeError(f"{cls.__name__} needs exactly the fields {sorted(names)}, got "
                        f"{sorted(fields)}")
    made = object.__new__(cls)
    made.__dict__.update(fields)
    return made


_SURROGATE_FIX = ("pass real text: decode bytes with errors='replace', or drop the "
                  "unpaired character")


def surrogate_at(text: str) -> int | None:
    """The index of the first surrogate code point in ``text``, or ``None``.

    A surrogate (U+D800–U+DFFF) on its own is not a character and has no UTF-8 form; it
    reaches a Python string from ``surrogateescape`` decoding, ``"\\ud800"`` escapes in
    JSON, or a string cut between the halves of a UTF-16 pair.
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _surrogate_problem(text: str) -> str | None:
    at = surrogate_at(text)
    if at is None:
        return None
    return (f"holds a lone surrogate U+{ord(text[at]):04X} at character {at}, which "
            "cannot be stored as UTF-8")


def require_text(value: Any, field: str, *, max_chars: int | None = None,
                 allow_blank: bool = False) -> str:
    """Validate a string argument and return it unchanged."""
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}")
    problem = _surrogate_problem(value)
    if problem is not None:
        raise InvalidInputError(field, problem, _SURROGATE_FIX)
    if not allow_blank and not value.strip():
        raise InvalidInputError(field, "must not be blank")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInputError(
            field, f"has {len(value):,} characters, more than the limit of {max_chars:,}",
            "shorten it or store the long body elsewhere and keep a pointer",
        )
    return value


def too_deep(max_depth: int = MAX_JSON_DEPTH) -> str:
    """The one wording of "nested past the bound", for every layer that reports it."""
    return f"nests arrays and objects more than {max_depth} levels deep"


def _child(path: str, key: Any) -> str:
    return f"{path}.{key}" if isinstance(key, str) else f"{path}[{key!r}]"


def json_problem(value: Any, field: str = "value", *,
                 max_depth: int = MAX_JSON_DEPTH) -> tuple[str, str] | None:
    """``(field path, problem)`` for the first part of ``value`` that cannot be stored as
    JSON, or ``None`` when all of it can.

    Walks ``value`` without recursion (so any depth is safe to inspect) and finds: arrays
    or objects nested more than ``max_depth`` levels (the path is then ``field`` itself), a
    string or key holding a lone surrogate, a non-finite float, an object key that is not
    a string, or a value that is not JSON at all. Paths read ``field.key[2].name``.
    """
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = _surrogate_problem(item)
            if problem is not None:
                return path, problem
        elif item is None or isinstance(item, (bool, int)):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                return path, f"must be a finite number, got {item!r}"
        elif isinstance(item, (dict, list, tuple)):
            if depth >= max_depth:
                return field, f"{too_deep(max_depth)} (the most any stored document may)"
            if isinstance(item, dict):
                for key, member in item.items():
                    if isinstance(key, str):
                        problem = _surrogate_problem(key)
                        if problem is not None:
                            return path, f"has a key that {problem}"
                    elif key is not None and not isinstance(key, (int, float)):
                        return path, f"has a key that is not a string: {key!r}"
                    stack.append((member, _child(path, key), depth + 1))
            else:
                stack.extend((member, f"{path}[{i}]", depth + 1)
                             for i, member in enumerate(item))
        else:
            return path, f"is of type {type(item).__name__}, not a JSON value"
    return None


def require_json(value: Any, field: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Validate a JSON value (an argument dict, a payload) and return it unchanged.

    Refuses what :func:`json_problem` finds — too deep, a lone surrogate anywhere, a
    non-finite number, a non-JSON object — naming the path inside ``field``.
    """
    found = json_problem(value, field, max_depth=max_depth)
    if found is not None:
        path, problem = found
        fix = (_SURROGATE_FIX if "surrogate" in problem else
               "flatten the structure" if "levels deep" in problem else
               "pass only dicts, lists, strings, finite numbers, booleans and None")
        raise InvalidInputError(path, problem, fix)
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"holds {name}, which is not a JSON number")


#: ``json.loads`` with one change: ``NaN`` and ``Infinity`` are refused while scanning.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_SCAN_ONCE = _DECODER.scan_once
_JSON_SPACE = " \t\n\r"  # the whitespace JSON allows around a value


_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# what may stand outside a string in JSON text, besides brackets (removed before counting)
_NOT_BRACKETS = str.maketrans("", "", "0123456789+-.eE:, \t\n\rtruefalsn")


def json_text_depth(text: str) -> int:
    """How deeply the arrays and objects of valid JSON ``text`` nest (0 for a scalar),
    read from the text, not by walking the decoded value: so a large, flat document (a
    snapshot of 100k records has far more than 100 brackets) is checked in milliseconds.
    Escaped backslashes and quotes are dropped first, so every remaining ``"`` opens or
    closes a string; a bracket counts when an even number of quotes precede it.
    """
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    if len(text) < _VECTOR_FROM:
        outside = "".join(text.split('"')[::2]).translate(_NOT_BRACKETS)
        return max(accumulate(map(_DEPTH_STEP.__getitem__, outside)), default=0)
    import numpy as np  # only for large documents: most processes never need it here

    chars = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    inside = np.cumsum(chars == ord('"'), dtype=np.int64) & 1
    step = ((chars == ord("[")) | (chars == ord("{"))).astype(np.int8)
    step -= (chars == ord("]")) | (chars == ord("}"))
    step[inside == 1] = 0
    return max(int(np.cumsum(step, dtype=np.int64).max()), 0)


_VECTOR_FROM = 1 << 16


def may_nest_deeper_than(text: str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Could valid JSON ``text`` nest past ``max_depth``? Exact, and free for short text
    (each level takes two characters and at least one bracket)."""
    if len(text) <= 2 * max_depth or text.count("[") + text.count("{") <= max_depth:
        return False
    return json_text_depth(text) > max_depth


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode stored JSON text (bytes are UTF-8), refusing what could never be written.

    Raises ``ValueError`` (callers turn it into their corruption error, naming the line)
    for bytes that are not UTF-8, text that is not JSON, ``NaN`` or ``Infinity``, nesting
    deeper than ``max_depth`` (``json.loads`` alone would raise ``RecursionError`` for a
    deep enough line) and a lone surrogate in the decoded value.

    Cheap on what labmem writes: the decoded value is walked only when the text nests too
    deep (:func:`may_nest_deeper_than`) or has a ``\\u`` escape (the only way a surrogate
    gets in).
    """
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")  # UnicodeDecodeError is a ValueError
    try:
        try:  # the C scanner json.loads calls, without its wrapper: ~2x faster per line
            value, end = _SCAN_ONCE(text, 0)
            if end != len(text) and text[end:].strip(_JSON_SPACE):  # what json.loads allows
                raise ValueError("not the whole text")
        except (StopIteration, ValueError):  # the full decoder gives the answer or the error
            value = _DECODER.decode(text)  # json.JSONDecodeError is a ValueError
    except RecursionError:
        raise ValueError(too_deep(max_depth)) from None
    # a surrogate can only come from a "\\u"; nesting deeper than max_depth needs more
    # than 2 * max_depth characters and max_depth brackets (tested inline: a hot path)
    if ("\\" in text and "\\u" in text) or (
            len(text) > 2 * max_depth and text.count("[") + text.count("{") > max_depth
            and json_text_depth(text) > max_depth):
        found = json_problem(value, "document", max_depth=max_depth)
        if found is not None:
            raise UnstorableJson(*found)
    return value


class UnstorableJson(ValueError):
    """:func:`parse_json`'s refusal of valid JSON that labmem could never have written
    (nested too deep, a lone surrogate), with where it is: ``path`` starts at
    ``"document"`` (``document.query``), so a caller reading an argument can name its own
    field instead (:meth:`at`)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(problem if path == "document" else f"{path}: {problem}")

    def at(self, field: str) -> str:
        """``path`` with ``document`` replaced by ``field``."""
        return field + self.path[len("document"):]


def require_int(value: Any, field: str, *, minimum: int | None = None,
                maximum: int | None = None) -> int:
    """Validate an integer argument (``bool`` is not an integer here) within bounds."""
    low_ok = minimum is None or (isinstance(value, int) and value >= minimum)
    high_ok = maximum is None or (isinstance(value, int) and value <= maximum)
    if isinstance(value, bool) or not isinstance(value, int) or not (low_ok and high_ok):
        if minimum is not None and maximum is not None:
            wanted = f"an integer from {minimum} to {maximum}"
        elif minimum is not None:
            wanted = f"an integer >= {minimum}"
        elif maximum is not None:
            wanted = f"an integer <= {maximum}"
        else:
            wanted = "an integer"
        raise InvalidInputError(field, f"must be {wanted}, got {value!r}")
    return value
