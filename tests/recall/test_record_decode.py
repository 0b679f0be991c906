"""A stored line's fast decode (``_canonical_record``) accepts only what the full decode
accepts, and builds the same record; every other object still gets the full decode's
verdict, error message included."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem.core.errors import InvalidInputError
from labmem.core.provenance import MAX_SOURCE_CHARS
from labmem.recall import store
from labmem.recall.store import StoredMemory, record_from_object

TEXT = st.one_of(
    st.text(max_size=8),  # blank, empty, any script (surrogates included)
    st.text(alphabet="ab \t", min_size=1, max_size=6),
    st.sampled_from(["x" * 200, "x" * 201, "x" * 500, "x" * 501, " ", "\x1f", "é", "\ud800"]),
    st.integers(), st.none(),
)
STAMP = st.one_of(
    st.sampled_from(["2026-08-01T12:00:00Z", "2026-08-01T12:00:00.123456Z",
                     "2026-08-01T14:00:00+02:00", "2026-08-01T12:00:00", "2026-13-01T00:00:00Z",
                     "Z", "", " 2026-08-01T12:00:00Z", "2026-08-01T12:00:00z"]),
    st.integers(), st.none(),
)
KIND = st.one_of(st.sampled_from(["conversation", "profile", "Conversation", "note"]),
                 st.integers())


GOOD_TEXT = st.text(alphabet="abz09 -_:", min_size=1, max_size=12).filter(str.strip)
GOOD_STAMP = st.sampled_from(["2026-08-01T12:00:00Z", "2026-08-01T12:00:00.123456Z"])
SOURCE_FIELDS = ("source_id", "source_type", "title", "captured_at")
RECORD_FIELDS = ("memory_id", "user_scope", "kind", "content", "summary", "stored_at")


@st.composite
def stored_objects(draw):
    """A valid stored object, then up to two changes: a field replaced by anything (often
    something just past a limit), removed, or an extra one added."""
    source = {"source_id": draw(GOOD_TEXT), "source_type": draw(GOOD_TEXT),
              "title": draw(GOOD_TEXT), "captured_at": draw(GOOD_STAMP)}
    obj = {"memory_id": draw(GOOD_TEXT), "user_scope": draw(GOOD_TEXT),
           "kind": draw(st.sampled_from(["conversation", "profile"])),
           "content": draw(TEXT), "summary": draw(TEXT), "source": source,
           "stored_at": draw(GOOD_STAMP)}
    for _ in range(draw(st.integers(0, 2))):
        where, name = draw(st.sampled_from(
            [(source, n) for n in SOURCE_FIELDS] + [(obj, n) for n in RECORD_FIELDS]
            + [(obj, "source")]))
        change = draw(st.sampled_from(["replace", "remove", "extra"]))
        if change == "remove":
            where.pop(name, None)
        elif change == "extra":
            where["extra"] = draw(TEXT)
        elif name == "kind":
            where[name] = draw(KIND)
        elif name in ("captured_at", "stored_at"):
            where[name] = draw(STAMP)
        elif name == "source":
            where[name] = draw(st.sampled_from([None, [], "s"]))
        elif name in MAX_SOURCE_CHARS:  # most often right at, or just past, a limit
            limit = MAX_SOURCE_CHARS[name]
            where[name] = draw(st.one_of(TEXT, st.sampled_from(
                ["x" * limit, "x" * (limit + 1), "é" * limit, " ", "\ud800", "a\ud800"])))
        else:
            where[name] = draw(TEXT)
    return obj


def full_decode(obj):
    """record_from_object without its fast path: the value, or the error's message."""
    try:
        return StoredMemory.from_dict(obj)
    except (KeyError, ValueError, TypeError, InvalidInputError) as exc:
        return type(exc), str(exc)


def verdict(obj):
    try:
        return record_from_object(obj)
    except ValueError as exc:
        return ValueError, str(exc)


@settings(max_examples=600)
@given(stored_objects())
def test_the_fast_decode_is_the_full_one(obj):
    fast = store._canonical_record(obj)
    full = full_decode(obj)
    if fast is not None:
        assert isinstance(full, StoredMemory) and fast == full
        assert fast.to_dict() == full.to_dict()
        assert fast.source.captured_at.tzinfo is full.source.captured_at.tzinfo
    if isinstance(full, StoredMemory):
        assert verdict(obj) == full
    else:  # the error the full decode gives, as record_from_object words it
        problem = f"missing field {full[1]}" if full[0] is KeyError else full[1]
        assert verdict(obj) == (ValueError, f"not a stored memory ({problem})")


def test_the_common_line_takes_the_fast_decode():
    obj = {"memory_id": "m-1", "user_scope": "s", "kind": "conversation", "content": "c",
           "summary": "", "stored_at": "2026-08-01T12:00:00Z",
           "source": {"source_id": "t-1", "source_type": "conversation_transcript",
                      "title": "kickoff", "captured_at": "2026-07-01T09:30:00.250000Z"}}
    fast = store._canonical_record(obj)
    assert fast is not None and fast == StoredMemory.from_dict(obj)
    assert store._canonical_record({**obj, "kind": "note"}) is None
    assert store._canonical_record({**obj, "source": {**obj["source"], "title": " "}}) is None


def common_line():
    return {"memory_id": "m-1", "user_scope": "s", "kind": "conversation", "content": "c",
            "summary": "", "stored_at": "2026-08-01T12:00:00Z",
            "source": {"source_id": "t-1", "source_type": "conversation_transcript",
                       "title": "kickoff", "captured_at": "2026-07-01T09:30:00Z"}}


@pytest.mark.parametrize("name", sorted(MAX_SOURCE_CHARS))
@pytest.mark.parametrize("shape", ["at the limit", "past the limit", "blank", "empty",
                                   "lone surrogate", "not ASCII", "not a string"])
def test_each_source_text_at_its_edges(name, shape):
    limit = MAX_SOURCE_CHARS[name]
    value = {"at the limit": "x" * limit, "past the limit": "x" * (limit + 1),
             "blank": " \t", "empty": "", "lone surrogate": "a\ud800",
             "not ASCII": "é" * limit, "not a string": 7}[shape]
    obj = common_line()
    obj["source"][name] = value
    fast, full = store._canonical_record(obj), full_decode(obj)
    assert fast is None or fast == full
    assert (fast is not None) == (shape == "at the limit")  # the rest: the full decode
