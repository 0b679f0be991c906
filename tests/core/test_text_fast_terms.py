"""``extract_terms`` takes a shortcut for ASCII text; it must give what the full path gives."""

import string

from hypothesis import given
from hypothesis import strategies as st

from labmem.core.text import extract_terms, term_frequencies

ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=200)
WORDY = st.text(alphabet=string.ascii_letters + string.digits + " \t\n\r\x0b\x0c_-.,'",
                max_size=200)


@given(st.one_of(ASCII, WORDY))
def test_the_ascii_shortcut_gives_the_full_paths_terms(text):
    assert extract_terms(text) == tuple(sorted(term_frequencies(text)))


def test_the_shortcut_lowers_and_splits_like_the_full_path():
    assert extract_terms("Port 8080,\tWAL-mode  wal") == ("8080", "mode", "port", "wal")
    assert extract_terms("   ") == ()
