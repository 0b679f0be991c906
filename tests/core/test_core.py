"""Shared core: clocks, timestamps, provenance, scope digests, text and token estimate."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labmem.core.clock import (
    FixedClock,
    SteppingClock,
    SystemClock,
    format_timestamp,
    parse_timestamp,
    resolve_clock,
)
from labmem.core.errors import InvalidInputError, LabmemError
from labmem.core.provenance import MemorySource, scope_digest
from labmem.core.text import (
    estimate_message_tokens,
    estimate_tokens,
    extract_terms,
    normalize_text,
    term_frequencies,
)

UTC = timezone.utc


# -- clock and timestamps --------------------------------------------------------------

def test_fixed_clock_is_fixed_and_advances_on_request():
    clock = FixedClock("2026-08-01T12:00:00Z")
    assert clock.now() == clock.now() == datetime(2026, 8, 1, 12, tzinfo=UTC)
    clock.advance(timedelta(days=2))
    assert clock.now() == datetime(2026, 8, 3, 12, tzinfo=UTC)
    with pytest.raises(InvalidInputError):
        clock.advance(timedelta(days=-1))


def test_stepping_clock_steps():
    clock = SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(minutes=5))
    assert [clock.now().minute for _ in range(3)] == [0, 5, 10]


def test_system_clock_is_aware_utc():
    assert SystemClock().now().tzinfo is not None


def test_resolve_clock_rejects_non_clocks():
    assert isinstance(resolve_clock(None), SystemClock)
    with pytest.raises(InvalidInputError, match="clock"):
        resolve_clock("2026-01-01")


def test_timestamps_accept_offsets_and_reject_naive_naming_the_field():
    assert parse_timestamp("2026-08-01T14:00:00+02:00", field="x") == datetime(
        2026, 8, 1, 12, tzinfo=UTC)
    with pytest.raises(InvalidInputError) as err:
        parse_timestamp(datetime(2026, 8, 1), field="captured_at")
    assert err.value.field == "captured_at" and "naive" in str(err.value)
    with pytest.raises(InvalidInputError, match="naive"):
        parse_timestamp("2026-08-01T12:00:00", field="captured_at")
    with pytest.raises(InvalidInputError, match="ISO-8601"):
        parse_timestamp("yesterday", field="captured_at")


def test_format_timestamp_uses_z():
    assert format_timestamp(datetime(2026, 8, 1, 12, tzinfo=UTC)) == "2026-08-01T12:00:00Z"
    assert format_timestamp("2026-08-01T12:00:00.250000+00:00") == "2026-08-01T12:00:00.250000Z"


@given(st.datetimes(timezones=st.just(UTC)))
def test_timestamp_round_trip(moment):
    assert parse_timestamp(format_timestamp(moment), field="t") == moment


# -- provenance ----------------------------------------------------------------------

def test_memory_source_validates_and_round_trips():
    source = MemorySource("t-1", "conversation_transcript", "title", "2026-08-01T12:00:00Z")
    assert source.captured_at == datetime(2026, 8, 1, 12, tzinfo=UTC)
    assert MemorySource.from_dict(source.to_dict()) == source
    with pytest.raises(InvalidInputError) as err:
        MemorySource(" ", "t", "title", "2026-08-01T12:00:00Z")
    assert err.value.field == "source.source_id"
    with pytest.raises(InvalidInputError, match="source.captured_at"):
        MemorySource("t-1", "t", "title", datetime(2026, 8, 1))
    with pytest.raises(InvalidInputError, match="missing title"):
        MemorySource.from_dict({"source_id": "a", "source_type": "b", "captured_at": "x"})


def test_scope_digest_is_stable_distinct_and_hides_the_id():
    assert scope_digest("alice") == scope_digest("alice")
    assert scope_digest("alice") != scope_digest("bob")
    assert "alice" not in scope_digest("alice") and len(scope_digest("alice")) == 16
    with pytest.raises(InvalidInputError):
        scope_digest("  ")


def test_errors_share_one_base():
    assert issubclass(InvalidInputError, LabmemError) and issubclass(InvalidInputError, ValueError)


# -- text ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, normalized, terms", [
    ("  LAYERED   Memory  ", "layered memory", ("layered", "memory")),
    ("分层记忆", "分层记忆", ("分层", "层记", "记忆")),
    ("Ｌａｙｅｒｅｄ", "layered", ("layered",)),
    ("用 SQLite", "用 sqlite", ("sqlite", "用")),
    ("?!…", "?!...", ()),
])
def test_normalize_and_terms(text, normalized, terms):
    assert normalize_text(text) == normalized
    assert extract_terms(text) == terms


def test_term_frequencies_count_repeats():
    assert term_frequencies("memory Memory 记忆记忆") == {"memory": 2, "记忆": 2, "忆记": 1}


@given(st.text())
def test_normalization_is_idempotent_and_terms_sorted_unique(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    terms = extract_terms(text)
    assert list(terms) == sorted(set(terms))
    assert extract_terms(once) == terms


@pytest.mark.parametrize("text, tokens", [
    ("", 0), ("abcd", 1), ("abcde", 2), ("记忆", 2), ("hello world 你好", 5),
    ("a记b", 3),
])
def test_estimate_tokens(text, tokens):
    assert estimate_tokens(text) == tokens


def test_message_adds_envelope():
    assert estimate_message_tokens("abcd") == 5


@given(st.text(), st.text())
def test_token_estimate_is_subadditive_at_most_plus_one(a, b):
    # joining two texts can merge one run from each side, never more
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)
    assert estimate_tokens(a + b) >= estimate_tokens(a) + estimate_tokens(b) - 1


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_fast_path_matches_the_run_rule(text):
    runs = [text] if text else []
    assert estimate_tokens(text) == sum(-(-len(run) // 4) for run in runs)
    assert estimate_tokens(text + "记") == estimate_tokens(text) + 1


def test_require_int_names_the_field_and_the_bounds():
    from labmem.core.validation import require_int

    assert require_int(3, "n", minimum=1, maximum=5) == 3
    for bad, message in ((0, "from 1 to 5"), (6, "from 1 to 5"), (True, "from 1 to 5"),
                         (2.0, "from 1 to 5"), ("3", "from 1 to 5")):
        with pytest.raises(InvalidInputError, match=message) as err:
            require_int(bad, "n", minimum=1, maximum=5)
        assert err.value.field == "n"
    with pytest.raises(InvalidInputError, match=">= 1"):
        require_int(0, "k", minimum=1)
    with pytest.raises(InvalidInputError, match="<= 9"):
        require_int(10, "k", maximum=9)


def test_scratch_dirs_of_dead_processes_are_swept(tmp_path, monkeypatch):
    import subprocess
    import sys
    import tempfile

    from labmem import notebook

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    leftover = tmp_path / f"{notebook.SCRATCH_PREFIX}{dead}-s09-abc"
    leftover.mkdir()
    mine = notebook.scratch_dir("s12")
    assert mine.exists() and mine.parent == tmp_path
    assert not leftover.exists()
    assert notebook.scratch_dir("s13").exists() and mine.exists()  # live dirs stay
