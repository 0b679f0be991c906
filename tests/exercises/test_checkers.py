"""Every exercise checker accepts the right answer and rejects wrong ones."""

from labmem.exercises import Feedback


def test_feedback_shows_a_mark():
    assert repr(Feedback("e", True, "fine")) == "✓ e: fine"
    assert not Feedback("e", False, "no")
