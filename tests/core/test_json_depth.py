"""How deeply stored JSON nests, read from its text (core.validation.json_text_depth): exact
for any value, and the reason a large, flat snapshot is parsed without a Python walk."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import labmem.core.validation as validation
from labmem.core.validation import json_text_depth, may_nest_deeper_than


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_TRICKY = st.text(alphabet=st.sampled_from('[]{}"\\/,:ab \n\u2028é'), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=30)


@given(_JSON, st.booleans())
def test_json_text_depth_is_the_nesting_of_the_value(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert json_text_depth(text) == _depth(value)
    for limit in (0, 1, 2, 5):
        assert may_nest_deeper_than(text, limit) == (_depth(value) > limit)


def test_a_large_flat_snapshot_is_not_walked(monkeypatch):
    """Many brackets, little depth: parse_json does not walk the decoded value."""
    text = json.dumps({"records": [{"id": i, "tags": ["a", "b"]} for i in range(5000)]})
    monkeypatch.setattr(validation, "json_problem",
                        lambda *a, **k: pytest.fail("walked a flat document"))
    assert len(validation.parse_json(text)["records"]) == 5000


def test_a_deep_document_is_still_refused_with_its_reason():
    with pytest.raises(ValueError, match="deep"):
        validation.parse_json("[" * 101 + "]" * 101)
    assert validation.parse_json("[" * 100 + "]" * 100) is not None


@given(_JSON, st.text(alphabet=st.sampled_from(" \t\n\r\u00a0\u2028x,"), max_size=3))
def test_parse_json_takes_what_json_loads_takes_after_a_value(value, after):
    """A stored line read with its newline is parsed by the fast path; anything after the
    value that json.loads refuses (a non-JSON space, more text) is refused the same way."""
    text = json.dumps(value) + after
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            validation.parse_json(text)
    else:
        assert validation.parse_json(text) == expected
        assert validation.parse_json(text.encode()) == expected


def test_a_line_with_its_newline_takes_the_fast_path(monkeypatch):
    def no_full_decode(text):
        raise AssertionError("the full decoder was used")

    monkeypatch.setattr(validation._DECODER, "decode", no_full_decode)
    assert validation.parse_json(b'{"memory_id": "m-1", "n": [1, 2]}\n') == {
        "memory_id": "m-1", "n": [1, 2]}
