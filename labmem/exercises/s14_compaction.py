"""Checkers for the s14 compaction exercises."""

from __future__ import annotations

from labmem.context import LAYERS
from labmem.exercises import Feedback, not_answered


def check_first_layer(answer: str | None) -> Feedback:
    """Exercise 1: which layer runs first once the view reaches the threshold."""
    name = "exercise 1 (first layer)"
    if answer is None:
        return not_answered(name)
    if answer == LAYERS[0]:
        return Feedback(name, True, "cheapest, least lossy first: only oversized results are cut")
    if answer in LAYERS:
        return Feedback(name, False, f"{answer} runs later; which layer loses the least?")
    return Feedback(name, False, f"answer with one of {', '.join(LAYERS)}")


def check_status_after_cleanup(answer: str | None) -> Feedback:
    """Exercise 2: the status a pointer to a cleaned-up artifact renders with."""
    name = "exercise 2 (after cleanup)"
    if answer is None:
        return not_answered(name)
    if answer == "missing":
        return Feedback(name, True, "resolved afresh from the owner, which no longer has the body")
    if answer == "available":
        return Feedback(name, False, "resolutions are never reused between assemblies")
    return Feedback(name, False, "the owner still knows the record, but the body is gone")


def check_runs_at_threshold(answer: bool | None) -> Feedback:
    """Exercise 3: does compaction run when the view is exactly at ``token_threshold``?"""
    name = "exercise 3 (at the threshold)"
    if answer is None:
        return not_answered(name)
    if answer is True:
        return Feedback(name, True, "layers run at or above the threshold")
    return Feedback(name, False, "read compact_context: it stops only once tokens < threshold")
