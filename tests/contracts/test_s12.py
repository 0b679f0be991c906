"""The s12 layer's contract suite on every implementation, and on plausible wrong pieces.

One suite, two implementations (the chapter's from-scratch module and the library's layer),
the way one test suite runs on a pure-Python and an accelerated version of a module. Then
the learner's build: for each piece, wrong versions the checker must reject (naming the
contract that catches them) and a correct one written differently that it must accept.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from labmem.exercises import s12 as exercises
from labmem.exercises.suites import s12 as suite
from labmem.scratch import s12 as scratch

IMPLEMENTATIONS = {"scratch": suite.SCRATCH, "production": suite.PRODUCTION}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize("contract", suite.SUITE.contracts, ids=lambda c: c.name[:60])
def test_every_contract_holds(contract, impl):
    contract.check(impl)


def test_the_suite_is_a_dozen_contracts_in_teaching_order():
    names = suite.SUITE.names()
    assert 8 <= len(names) <= 15 and len(set(names)) == len(names)
    assert names[0].startswith("a record is read back")
    assert names[-1].startswith("stored text cannot break out")


def test_the_reference_pieces_pass():
    report = exercises.check_layer(**{name: getattr(scratch, name)
                                      for name in exercises.PIECES})
    assert report.ok and repr(report) == "✓ your recall layer passes all 14 contracts"


def test_stubs_are_reported_as_not_written():
    def stub(*args, **kwargs):
        raise NotImplementedError

    report = exercises.check_layer(**dict.fromkeys(exercises.PIECES, stub))
    assert not report.ok and report.passed == 6
    assert "not written yet" in repr(report)


def test_an_unknown_piece_is_refused():
    with pytest.raises(ValueError, match="no piece named"):
        exercises.check_layer(rank_kye=scratch.rank_key)


def failing(**pieces) -> set[str]:
    return {r.contract for r in exercises.check_layer(**pieces).failing}


CANDIDATES = "a candidate is a conversation record sharing a whole term"
SCOPE = "recall refuses a record of another user's scope"
SCORE = "the score is 0.85 × coverage + 0.15 × recency"
RANK = "the rank key orders"
LIMIT = "recall keeps at most limit hits"


def fails(pieces: dict, contract: str) -> bool:
    return any(name.startswith(contract) for name in failing(**pieces))


# -- stage 2: build_recall_candidates ----------------------------------------------------

def _candidate(query, record, counts):
    matched = tuple(t for t in query.terms if t in counts)
    return scratch.RecallCandidate(query.query_id, record, tuple(sorted(counts)), matched,
                                   record.source.captured_at,
                                   {t: counts[t] for t in matched}, sum(counts.values()))


def candidates_with_profiles(query, records):
    """Wrong: forgets that profiles are never searched."""
    out = []
    for record in records:
        if record.user_scope != query.user_scope:
            raise scratch.ScopeError("other scope")
        c = _candidate(query, record, scratch.record_terms(record))
        if c.matched_terms:
            out.append(c)
    return out


def candidates_by_substring(query, records):
    """Wrong: 'alpha' found inside 'alphabet' (substring, not a whole term)."""
    out = []
    for record in records:
        if record.user_scope != query.user_scope:
            raise scratch.ScopeError("other scope")
        if record.kind != scratch.CONVERSATION:
            continue
        text = scratch.normalize_text(f"{record.source.title} {record.summary} {record.content}")
        counts = scratch.record_terms(record)
        matched = tuple(t for t in query.terms if t in text)
        if matched:
            out.append(scratch.RecallCandidate(query.query_id, record, tuple(sorted(counts)),
                                               matched, record.source.captured_at,
                                               {t: counts.get(t, 0) for t in matched},
                                               sum(counts.values())))
    return out


def candidates_content_only(query, records):
    """Wrong: searches the content, not the title and summary."""
    out = []
    for record in records:
        if record.user_scope != query.user_scope:
            raise scratch.ScopeError("other scope")
        if record.kind == scratch.CONVERSATION:
            c = _candidate(query, record, scratch.search_terms(record.content))
            if c.matched_terms:
                out.append(c)
    return out


def candidates_without_scope_check(query, records):
    """Wrong: skips the scope re-check."""
    out = []
    for record in records:
        if record.kind == scratch.CONVERSATION:
            c = _candidate(query, record, scratch.record_terms(record))
            if c.matched_terms:
                out.append(c)
    return out


def candidates_by_sets(query, records):
    """Right, written differently: scope first for all, then a set intersection."""
    records = list(records)
    foreign = [r.memory_id for r in records if r.user_scope != query.user_scope]
    if foreign:
        raise scratch.ScopeError(f"record {foreign[0]!r} belongs to another user")
    conversations = (r for r in records if r.kind == "conversation")
    found = []
    for record in conversations:
        counts = scratch.record_terms(record)
        if set(query.terms) & counts.keys():
            found.append(_candidate(query, record, counts))
    return found


@pytest.mark.parametrize("wrong, contract", [
    (candidates_with_profiles, CANDIDATES),
    (candidates_by_substring, CANDIDATES),
    (candidates_content_only, CANDIDATES),
    (candidates_without_scope_check, SCOPE),
])
def test_wrong_candidates_are_rejected(wrong, contract):
    assert fails({"build_recall_candidates": wrong}, contract)


def test_a_different_correct_candidate_stage_is_accepted():
    assert exercises.check_layer(build_recall_candidates=candidates_by_sets).ok


# -- stage 3: score_recall_candidate -----------------------------------------------------

def _breakdown(query, candidate, age, *, round_parts=True):
    r = (lambda x: round(x, 6)) if round_parts else (lambda x: x)
    coverage = r(len(candidate.matched_terms) / len(query.terms))
    recency = r(1 / (1 + age / 30))
    lexical, recent = r(0.85 * coverage), r(0.15 * recency)
    return scratch.RecallScoreBreakdown(
        candidate.matched_terms, len(query.terms), coverage, recency, lexical, recent,
        round(lexical + recent, 6), round(age, 6),
        dict.fromkeys(candidate.matched_terms, round(0.85 / len(query.terms), 6)))


def score_whole_days(query, candidate, *, as_of):
    """Wrong (off by part of a day): counts whole days only."""
    return _breakdown(query, candidate, max(0, (as_of - candidate.captured_at).days))


def score_from_stored_at(query, candidate, *, as_of):
    """Wrong: recency from when the record was stored, not when its source happened."""
    return _breakdown(query, candidate,
                      max(0.0, (as_of - candidate.record.stored_at).total_seconds() / 86400))


def score_future_unclamped(query, candidate, *, as_of):
    """Wrong: a capture after as_of gets a negative age (recency above 1)."""
    return _breakdown(query, candidate, (as_of - candidate.captured_at).total_seconds() / 86400)


def score_by_record_terms(query, candidate, *, as_of):
    """Wrong: coverage divided by the record's terms instead of the query's."""
    age = max(0.0, (as_of - candidate.captured_at).total_seconds() / 86400)
    b = _breakdown(query, candidate, age)
    coverage = round(len(candidate.matched_terms) / len(candidate.searchable_terms), 6)
    lexical = round(0.85 * coverage, 6)
    return scratch.RecallScoreBreakdown(b.matched_terms, b.query_term_count, coverage,
                                        b.recency, lexical, b.recency_contribution,
                                        round(lexical + b.recency_contribution, 6),
                                        b.age_days, b.term_contributions)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def score_in_seconds(query, candidate, *, as_of):
    """Right, written differently: ages in seconds, the recency as a fraction."""
    seconds = max(0.0, (as_of - EPOCH).total_seconds() - (candidate.captured_at - EPOCH)
                  .total_seconds())
    days = seconds / 86_400
    return _breakdown(query, candidate, days)


@pytest.mark.parametrize("wrong", [score_whole_days, score_from_stored_at,
                                   score_future_unclamped, score_by_record_terms])
def test_wrong_scores_are_rejected(wrong):
    assert fails({"score_recall_candidate": wrong}, SCORE)


def test_a_different_correct_score_is_accepted():
    assert exercises.check_layer(score_recall_candidate=score_in_seconds).ok


# -- stage 4: rank_key -------------------------------------------------------------------

def key_id_descending(candidate, breakdown):
    """Wrong tie-break: the greater memory_id first."""
    return (-breakdown.total, -breakdown.lexical_coverage, -candidate.captured_at.timestamp(),
            [-ord(c) for c in candidate.record.memory_id])


def key_older_first(candidate, breakdown):
    """Wrong: the older capture first."""
    return (-breakdown.total, -breakdown.lexical_coverage, candidate.captured_at.timestamp(),
            candidate.record.memory_id)


def key_without_coverage(candidate, breakdown):
    """Wrong: skips the coverage tie-break."""
    return (-breakdown.total, -candidate.captured_at.timestamp(), candidate.record.memory_id)


def key_total_ascending(candidate, breakdown):
    """Wrong: the lowest total first."""
    return (breakdown.total, -breakdown.lexical_coverage, -candidate.captured_at.timestamp(),
            candidate.record.memory_id)


class _Ranked:
    """Right, written differently: an object that compares like the rule says."""

    def __init__(self, candidate, breakdown):
        self.c, self.b = candidate, breakdown

    def __lt__(self, other):
        mine = (self.b.total, self.b.lexical_coverage, self.c.captured_at)
        theirs = (other.b.total, other.b.lexical_coverage, other.c.captured_at)
        if mine != theirs:
            return mine > theirs
        return self.c.record.memory_id < other.c.record.memory_id


@pytest.mark.parametrize("wrong", [key_id_descending, key_older_first, key_without_coverage,
                                   key_total_ascending])
def test_wrong_rank_keys_are_rejected(wrong):
    assert fails({"rank_key": wrong}, RANK)


def test_a_different_correct_rank_key_is_accepted():
    assert exercises.check_layer(rank_key=_Ranked).ok


def test_the_id_tie_break_also_shows_in_the_ranking():
    assert fails({"rank_key": key_id_descending}, LIMIT)
