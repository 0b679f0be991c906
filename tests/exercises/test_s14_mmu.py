"""The s14 Context MMU exercise checkers accept the right answer and reject wrong ones."""

import pytest

from labmem.exercises import s14_mmu


@pytest.mark.parametrize("check", [s14_mmu.check_factor_score, s14_mmu.check_recency,
                                   s14_mmu.check_budget_fits, s14_mmu.check_needs_l2,
                                   s14_mmu.check_current_claim])
def test_unanswered_is_not_correct(check):
    feedback = check(None)
    assert not feedback and "not answered" in feedback.message


def test_factor_score():
    right = (0.35 * 0.5 + 0.15 * 0.8 + 0.1 * (0.5 + 0.5 + 0.25 + 0.5 + 1.0)) / 1.0
    assert s14_mmu.check_factor_score(right)
    assert not s14_mmu.check_factor_score(0.5)
    assert not s14_mmu.check_factor_score("0.57")


def test_recency():
    assert s14_mmu.check_recency(1 / 16)
    assert s14_mmu.check_recency(2 ** -4)
    wrong_half_life = s14_mmu.check_recency(0.5)  # the default one-day half-life
    assert not wrong_half_life and "six hours" in wrong_half_life.message
    assert not s14_mmu.check_recency(0.25)
    assert not s14_mmu.check_recency(True)


def test_budget_fits():
    assert s14_mmu.check_budget_fits((True, False, True))
    assert not s14_mmu.check_budget_fits((False, False, True))  # equal fits
    assert not s14_mmu.check_budget_fits("yes")


def test_the_exercise_4_notes_are_the_hand_computed_ones():
    rows = {row["case_id"]: row for row in s14_mmu.exercise_4_table()}
    assert rows["backups"]["chars"] <= 160  # kept whole
    assert rows["paging"]["fact_starts_at"] < 160 < rows["paging"]["fact_ends_before"]
    assert rows["failover"]["fact_ends_before"] == 160  # its last word touches the cut
    assert rows["refunds"]["fact_ends_before"] < 120
    assert {r.case_id for r in s14_mmu.exercise_4_rows() if r.needs_l2} == {"paging",
                                                                             "failover"}


def test_needs_l2():
    assert s14_mmu.check_needs_l2({"paging", "failover"})
    assert s14_mmu.check_needs_l2(["failover", "paging"])
    missed_edge = s14_mmu.check_needs_l2({"paging"})  # "the first 160 characters are kept"
    assert not missed_edge and "last space" in missed_edge.message
    assert not s14_mmu.check_needs_l2({"paging", "failover", "backups"})
    assert "unknown" in s14_mmu.check_needs_l2({"negation"}).message
    assert not s14_mmu.check_needs_l2("paging")


def test_current_claim_follows_the_source_rank():
    right = {"a": "superseded", "b": "conflicted", "c": "provisional", "d": "conflicted"}
    assert s14_mmu.exercise_6_statuses() == right
    assert s14_mmu.check_current_claim(right)
    newest_wins = s14_mmu.check_current_claim(right | {"c": "superseded", "d": "provisional"})
    assert not newest_wins and "'c'" in newest_wins.message
    assert not s14_mmu.check_current_claim(right | {"b": "contradicted"})
    assert not s14_mmu.check_current_claim(right | {"b": "pending"})
    assert not s14_mmu.check_current_claim({"a": "superseded"})
    assert not s14_mmu.check_current_claim("c")
