"""labmem.core.render: the one renderer every prompt block uses (its API, field by field)."""

import math

import pytest

from labmem.core.errors import InvalidInputError
from labmem.core.render import (
    XML,
    BlockFormat,
    count,
    escape_text,
    fixed,
    join_lines,
    require_choice,
    require_sha256,
    unescape_text,
    xml_attributes,
)


@pytest.mark.parametrize("text, out", [
    ("plain text, 中文", "plain text, 中文"),
    ("a\nb", "a\\u000ab"),
    ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),
    ("rtl \u202eevil", "rtl \\u202eevil"),
    ("tag \U000e0041", "tag \\U000e0041"),
    ("back\\slash", "back\\\\slash"),
    ("lone \ud800", "lone \\ud800"),
    ("nonchar \ufffe", "nonchar \\ufffe"),
    ("ideographic\u3000space", "ideographic\u3000space"),
])
def test_escape_text(text, out):
    assert escape_text(text) == out
    assert unescape_text(out) == text


def test_reserved_and_markup():
    lines = BlockFormat("lines", reserved="[]=")
    assert lines.text("[x]=y", "f") == "\\u005bx\\u005d\\u003dy"
    assert lines.text("a;b", "f", reserved=";") == "a\\u003bb"
    assert XML.text("<a href=\"x\">&'", "f") == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert XML.parse(XML.text("<x>\n\\u000a", "f")) == "<x>\n\\u000a"


@pytest.mark.parametrize("reserved, markup", [("\\", False), ("a", False), (" ", False),
                                              (";", True), ("&", True)])
def test_a_format_cannot_reserve_what_escapes_are_made_of(reserved, markup):
    with pytest.raises(InvalidInputError, match="reserved"):
        BlockFormat("bad", reserved=reserved, markup=markup)


def test_validators_name_the_field():
    assert require_choice("a", "f", ("a", "b")) == "a"
    assert require_sha256("0" * 64, "f") == "0" * 64
    assert fixed(0.5, "f", 2) == "0.50" and count(3, "f", 1) == "3"
    for call in (lambda: require_choice("c", "f.status", ("a",)),
                 lambda: require_sha256("0" * 63 + "\n", "f.status"),
                 lambda: require_sha256(None, "f.status"),
                 lambda: fixed(math.nan, "f.status"), lambda: fixed(True, "f.status"),
                 lambda: count(0, "f.status", 1), lambda: escape_text(7, "f.status")):
        with pytest.raises(InvalidInputError, match=r"^f\.status: "):
            call()


def test_join_lines_and_xml_attributes():
    assert join_lines(["a", "b"]) == "a\nb"
    with pytest.raises(InvalidInputError, match="block line 1"):
        join_lines(["a\x85b"])
    assert xml_attributes([("id", 'a"b'), ("n", "3")]) == ' id="a&quot;b" n="3"'
    with pytest.raises(InvalidInputError, match="attribute"):
        xml_attributes([("bad name", "x")])
