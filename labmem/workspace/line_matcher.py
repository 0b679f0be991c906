"""s10, a performance trick: the fast line matcher of a distill's daily-log reads.

A first distill reads every line of every daily log (100k facts). Line by line — parse
the JSON, then test each member — costs more than the parse itself. But nearly every
line is one that ``Fact.to_record`` wrote, and that form can be recognized in the raw
text: members in ``to_record``'s order, strings without an escape, no source. One
regular expression, run over a whole file, recognizes such lines *and* checks every
member as strictly as the checkers do (its parts are the checkers' own patterns and
bounds); whatever it does not recognize takes the line-by-line reader
(:func:`~labmem.workspace.facts.read_daily_lines`), which decides (and names the first
bad line). A property test holds the two readers to the same facts and the same errors.

The seam: :func:`read_daily_since` is a :class:`~labmem.workspace.facts.DailyReader`;
``WorkspaceMemory.read_daily`` names the reader a distill uses, and setting it to
``read_daily_lines`` turns the trick off (same results, slower).
"""

import functools
import json
import os
import re
from collections.abc import Collection
from datetime import date, datetime
from pathlib import Path

from labmem.workspace.facts import (
    FACT_ID_PATTERN,
    KEY_PATTERN,
    KINDS,
    MAX_CONTENT_CHARS,
    MAX_EVIDENCE_IDS,
    MAX_ID_CHARS,
    SCHEMA_VERSION,
    Fact,
    day_of_file,
    read_daily_lines,
)

__all__ = ["decode_daily_lines", "read_daily_since"]

_new_object = object.__new__
_from_iso = datetime.fromisoformat

_CHAR = r'[^"\\\x00-\x1f]'  # a character a JSON string holds as itself (no escape needed)
_BLANK = r'[^\S\x00-\x1f]'  # one of those that is whitespace (\s is str.isspace's table)
_SOLID = r'[^"\\\s\x00-\x1f]'  # one that is not: the text is not blank
_DIGITS = {str(n): n for n in range(1, 6)}  # importance 1-5 (check_importance)


def _text(max_chars: int) -> str:
    """The body of a JSON string without escapes that :func:`require_text` accepts with
    ``max_chars``: 1 to ``max_chars`` characters, not all whitespace, no surrogate (a
    surrogate in a JSON text needs a ``\\u`` escape, and UTF-8 cannot hold one)."""
    return rf'(?={_CHAR}{{1,{max_chars}}}"){_BLANK}*{_SOLID}{_CHAR}*'


@functools.lru_cache(maxsize=16)
def _line_pattern(workspace_scope: str) -> re.Pattern[str] | None:
    """The lines ``to_record`` writes for ``workspace_scope`` (no source, no escape),
    each preceded by its ``\\n``; groups: fact id, time, kind, content, importance, key,
    evidence ids (joined by ``","``). ``None`` for a scope that JSON would escape."""
    scope = json.dumps(workspace_scope, ensure_ascii=False)
    if "\\" in scope:
        return None
    item = _text(MAX_ID_CHARS)
    return re.compile(
        r'\n\{"schema_version":' + str(SCHEMA_VERSION)
        + r',"workspace_scope":' + re.escape(scope)
        + rf',"fact_id":"({FACT_ID_PATTERN.pattern})"'
        # format_timestamp's form; the date is the file's (checked by the caller), so
        # datetime.fromisoformat takes every time this accepts
        + r',"recorded_at":"([0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]'
          r':[0-5][0-9](?:\.[0-9]{6})?Z)"'
        + rf',"kind":"({"|".join(KINDS)})"'
        + rf',"content":"({_text(MAX_CONTENT_CHARS)})"'
        + rf',"importance":([{min(_DIGITS)}-{max(_DIGITS)}])'
        + rf',"memory_key":(?:null|"({KEY_PATTERN.pattern})")'
        + r',"source":null'
        + rf',"evidence":\[(?:"({item}(?:","{item}){{0,{MAX_EVIDENCE_IDS - 1}}})")?\]'
        + r'\}(?=\n)')


def decode_daily_lines(complete: bytes, day: date, workspace_scope: str, first_line: int,
                       kinds: Collection[str]) -> tuple[list[Fact], int] | None:
    """The facts of ``kinds`` in ``complete`` (whole lines of the daily file of ``day``,
    the first of them line ``first_line``) and the number of lines, when every line is
    of the form :func:`_line_pattern` recognizes; else ``None`` (nothing is decided).

    Every line is checked, kept or not. Why a match is a valid fact: the pattern admits
    only valid JSON whose members are what the checkers accept (the date aside), and
    ``findall`` over ``"\\n" + text`` can match at most once per line (no part of the
    pattern matches a ``\\n``), so as many matches as lines means every line matched;
    each line holds ``"recorded_at":"`` once (no string in it holds a quote), so as many
    ``"recorded_at":"<day>T`` as lines means every fact is on the file's day.
    """
    pattern = _line_pattern(workspace_scope)
    if pattern is None:
        return None
    try:
        text = complete.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.count("\n")
    if text.count(f'"recorded_at":"{day.isoformat()}T') != lines:
        return None
    rows = pattern.findall("\n" + text)
    if len(rows) != lines:
        return None
    facts: list[Fact] = []
    keep = facts.append
    line = first_line - 1
    for fact_id, at, kind, content, importance, key, evidence in rows:
        line += 1
        if kind not in kinds:
            continue
        fact = _new_object(Fact)
        fields = fact.__dict__  # filled in place, as in _canonical_fact
        fields["fact_id"] = fact_id
        fields["recorded_at"] = _from_iso(at)  # (…Z: tzinfo is UTC)
        fields["kind"] = kind
        fields["content"] = content
        fields["importance"] = _DIGITS[importance]
        fields["memory_key"] = key or None  # (a key is never empty: "" is null)
        fields["source"] = None
        fields["evidence"] = () if not evidence else (evidence,) if '","' not in evidence \
            else tuple(sorted(set(evidence.split('","'))))  # = check_evidence
        fields["line"] = line
        keep(fact)
    return facts, lines


def read_daily_since(path: Path, workspace_scope: str, start: tuple[int, int],
                     kinds: Collection[str]) -> tuple[list[Fact], int, int]:
    """The facts of ``kinds`` on the complete lines of one daily file after the cursor
    ``start`` (``(offset, lines)``), and the cursor after them: the
    :class:`~labmem.workspace.facts.DailyReader` that returns what
    :func:`~labmem.workspace.facts.read_daily_lines` returns, decoded by
    :func:`decode_daily_lines` when it can. Anything else — a line of another form, a bad
    line, a missing or shrunk file — goes to that reader, which decides, reading the file
    again: same facts, same errors."""
    offset, lines = start
    day = day_of_file(path)
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        stat = None
    if stat is not None and stat.st_size == offset:
        return [], offset, lines  # nothing new: not even opened (as the reader does)
    if stat is not None and stat.st_size > offset and day is not None:
        complete = _complete_lines(path, offset, (stat.st_dev, stat.st_ino))
        decoded = None if complete is None else decode_daily_lines(
            complete, day, workspace_scope, lines + 1, kinds)
        if decoded is not None:
            return decoded[0], offset + len(complete), lines + decoded[1]
    return read_daily_lines(path, workspace_scope, start, kinds)


def _complete_lines(path: Path, offset: int, identity: tuple[int, int]) -> bytes | None:
    """The bytes of ``path`` from ``offset`` to the end of its last complete line (a torn
    tail is left unread), or ``None`` when the file is gone, shorter than ``offset`` or
    no longer the file of ``identity`` (device, inode)."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return None
    with handle:
        opened = os.fstat(handle.fileno())
        size = opened.st_size
        if size < offset or (opened.st_dev, opened.st_ino) != identity:
            return None
        handle.seek(offset)
        chunk = handle.read(size - offset)
    return chunk[: chunk.rfind(b"\n") + 1]
