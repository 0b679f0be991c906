"""Checkers for the s12 exercises (remote memory and recall).

Three predict exercises (a query's terms, a score by hand, a ranking with ties) and the
layer build: the learner rewrites three pieces of the from-scratch module
(:mod:`labmem.scratch.s12`: stage 2's ``build_recall_candidates``, stage 3's
``score_recall_candidate`` and stage 4's ``rank_key``); :func:`check_layer` puts them in a
fresh copy of the module and runs the layer's contract suite
(:mod:`labmem.exercises.suites.s12`) on it. ``BUILD`` keeps the single-function rank-key
checker (300 tie-heavy generated lists against :func:`labmem.recall.rank_key`).

Exercise 5 moves to the database server: the learner writes the row-level-security policy
of a ``memories`` table, and :func:`check_policy` applies it to a fresh database on the
chapter's throwaway PostgreSQL server and probes it with raw SQL, one contract per promise
(:data:`POLICY_SUITE`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hypothesis import strategies as st

from labmem.core.clock import format_timestamp, parse_timestamp
from labmem.core.i18n import N_, _
from labmem.core.text import extract_terms
from labmem.exercises import Feedback, not_answered
from labmem.exercises.build import BuildExercise
from labmem.exercises.contracts import (
    Contract,
    ContractBroken,
    ContractReport,
    ContractSuite,
    assemble,
    expect,
)
from labmem.recall import (
    LEXICAL_WEIGHT,
    RECENCY_WEIGHT,
    SCORE_DECIMALS,
    MemoryKind,
    MemorySource,
    RecallCandidate,
    RecallScoreBreakdown,
    StoredMemory,
    rank_key,
    recency_weight,
)

EXERCISE_1_QUERY = "Agent  MEMORY：分层记忆!"


def check_terms(answer: Sequence[str] | None) -> Feedback:
    """Exercise 1: the terms of :data:`EXERCISE_1_QUERY`, in the order recall keeps them."""
    name = _("exercise 1 (terms)")
    if answer is None:
        return not_answered(name)
    expected = extract_terms(EXERCISE_1_QUERY)
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, _("{count} terms, sorted and unique")
                                    .format(count=len(expected)))
    if sorted(set(got)) == list(expected):
        return Feedback(name, False, _("right terms, but recall keeps them sorted and unique"))
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    return Feedback(name, False, _("missing {missing}, unexpected {extra} — remember NFKC, "
                                   "casefold, and CJK bigrams")
                                 .format(missing=missing, extra=extra))


def expected_total(matched: int, query_terms: int, age_days: float) -> float:
    """The teaching scorer's total, computed the way the breakdown shows it."""
    coverage = round(matched / query_terms, SCORE_DECIMALS)
    lexical = round(LEXICAL_WEIGHT * coverage, SCORE_DECIMALS)
    recency = round(RECENCY_WEIGHT * round(recency_weight(age_days), SCORE_DECIMALS),
                    SCORE_DECIMALS)
    return round(lexical + recency, SCORE_DECIMALS)


def check_score_by_hand(answer: float | None) -> Feedback:
    """Exercise 2: total for 2 of 3 query terms matched, captured 10 days before ``as_of``."""
    name = _("exercise 2 (score by hand)")
    if answer is None:
        return not_answered(name)
    expected = expected_total(2, 3, 10.0)
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return Feedback(name, False, _("expected a number, got {kind}")
                                     .format(kind=type(answer).__name__))
    if abs(answer - expected) <= 1e-6:
        return Feedback(name, True, _("{expected:.6f} = 0.85·coverage + 0.15·recency")
                                    .format(expected=expected))
    if abs(answer - round(LEXICAL_WEIGHT * 2 / 3, SCORE_DECIMALS)) <= 1e-6:
        return Feedback(name, False, _("that is only the lexical contribution; add recency"))
    return Feedback(name, False, _("coverage = 2/3, recency = 1/(1 + 10/30); "
                                   "weights 0.85 and 0.15"))


# -- scored rows: what the rank key reads, as real pipeline objects --------------------


@dataclass(frozen=True)
class ScoredRow:
    """One row of a ranking table: the four values stage 4 orders by, and nothing else."""

    memory_id: str
    total: float
    lexical_coverage: float
    captured_at: datetime

    def __str__(self) -> str:
        return (f"{self.memory_id} (total {self.total}, coverage {self.lexical_coverage}, "
                f"captured {format_timestamp(self.captured_at)})")


_SCOPE = "exercise-scope"


def scored_pair(row: ScoredRow) -> tuple[RecallCandidate, RecallScoreBreakdown]:
    """The (candidate, breakdown) pair that stage 4 would see for ``row``.

    Only the ranked fields carry meaning; the rest are filled so that the objects are the
    library's own, and the rank key is the library's own too.
    """
    source = MemorySource(f"t-{row.memory_id}", "conversation_transcript", row.memory_id,
                          row.captured_at)
    record = StoredMemory(row.memory_id, _SCOPE, MemoryKind.CONVERSATION, "exercise record",
                          "", source, row.captured_at)
    candidate = RecallCandidate("exercise-query", record, ("exercise",), ("exercise",),
                                row.captured_at)
    breakdown = RecallScoreBreakdown(
        matched_terms=("exercise",), query_term_count=4,
        lexical_coverage=row.lexical_coverage, recency=0.0,
        lexical_contribution=row.total, recency_contribution=0.0, total=row.total,
    )
    return candidate, breakdown


def ranking_by(key: Callable[[RecallCandidate, RecallScoreBreakdown], object]
               ) -> Callable[[Sequence[tuple[RecallCandidate, RecallScoreBreakdown]]],
                             tuple[str, ...]]:
    """The order ``key`` induces on (candidate, breakdown) pairs, as memory ids, best first."""
    def ranking(scored):
        ordered = sorted(scored, key=lambda pair: key(*pair))
        return tuple(candidate.record.memory_id for candidate, _ in ordered)

    return ranking


def _row_of(pair: tuple[RecallCandidate, RecallScoreBreakdown]) -> ScoredRow:
    candidate, breakdown = pair
    return ScoredRow(candidate.record.memory_id, breakdown.total,
                     breakdown.lexical_coverage, candidate.captured_at)


# -- exercise 3: predict a ranking with ties -------------------------------------------


def _at(stamp: str) -> datetime:
    return parse_timestamp(stamp, field="captured_at")


EXERCISE_3_ROWS: tuple[ScoredRow, ...] = (  # in the order a store happened to return them
    ScoredRow("memory-c05", 0.64, 0.5, _at("2026-07-20T09:00:00Z")),
    ScoredRow("memory-t33", 0.64, 0.5, _at("2026-07-28T09:00:00Z")),
    ScoredRow("memory-k40", 0.71, 0.25, _at("2026-06-01T09:00:00Z")),
    ScoredRow("memory-a02", 0.64, 0.5, _at("2026-07-28T09:00:00Z")),
    ScoredRow("memory-m11", 0.64, 0.75, _at("2026-07-01T09:00:00Z")),
)


def exercise_3_frame():
    """The rows of exercise 3 as a table, in the order the store returned them (pandas)."""
    import pandas as pd  # imported lazily: importing labmem stays light

    return pd.DataFrame([{"memory_id": r.memory_id, "total": r.total,
                          "lexical_coverage": r.lexical_coverage,
                          "captured_at": format_timestamp(r.captured_at)}
                         for r in EXERCISE_3_ROWS])


def ranked_ids(rows: Sequence[ScoredRow] = EXERCISE_3_ROWS) -> tuple[str, ...]:
    """The memory ids of ``rows`` in the order stage 4 ranks them (computed, not stored)."""
    return ranking_by(rank_key)([scored_pair(row) for row in rows])


def _why_first(better: ScoredRow, worse: ScoredRow) -> str:
    """Which key puts ``better`` above ``worse``, in words."""
    if better.total != worse.total:
        return _("its total is higher, and total comes first")
    if better.lexical_coverage != worse.lexical_coverage:
        return _("the totals tie, and higher coverage comes next")
    if better.captured_at != worse.captured_at:
        return _("total and coverage tie, and the newer capture comes next")
    return _("total, coverage and capture time all tie, so the smaller memory_id decides")


def check_rank_order(answer: Sequence[str] | None) -> Feedback:
    """Exercise 3: the memory ids of :data:`EXERCISE_3_ROWS` in rank order, best first."""
    name = _("exercise 3 (rank with ties)")
    if answer is None:
        return not_answered(name)
    ids = sorted(row.memory_id for row in EXERCISE_3_ROWS)
    if isinstance(answer, str) or not isinstance(answer, Sequence):
        return Feedback(name, False, _("answer with a list of the memory ids, best first"))
    if sorted(answer) != ids:
        return Feedback(name, False, _("list each of {ids} exactly once, best first")
                                     .format(ids=ids))
    expected = ranked_ids()
    got = tuple(answer)
    if got == expected:
        return Feedback(name, True, _("total ↓, then coverage ↓, then captured_at ↓, and "
                                      "memory_id ↑ only when all three tie"))
    rows = {row.memory_id: row for row in EXERCISE_3_ROWS}
    place = next(i for i, (mine, ours) in enumerate(zip(got, expected, strict=True))
                 if mine != ours)
    better, worse = rows[expected[place]], rows[got[place]]
    return Feedback(name, False, _("rank {place} is not {worse}: {better} ranks above it "
                                   "because {why}")
                                 .format(place=place + 1, worse=worse.memory_id,
                                         better=better.memory_id, why=_why_first(better, worse)))


# -- build exercise: the stable rank key -----------------------------------------------


@dataclass(frozen=True)
class SortKeyExercise(BuildExercise):
    """A build exercise whose function is a sort key.

    Two keys agree when they put the same list in the same order, whatever values they
    return, so ``inputs`` generates one list of (candidate, breakdown) pairs per example;
    the learner's key and ``reference`` each sort it, and the two orders are compared.
    """

    def check(self, fn: Callable[..., object]) -> Feedback:
        if not callable(fn):
            return super().check(fn)
        orders = BuildExercise(self.chapter, self.name, ranking_by(self.reference),
                               self.inputs, self.hint, describe=self.describe)
        return orders.check(ranking_by(fn))


_TIED_IDS = ("memory-a", "memory-b", "memory-c", "memory-d", "memory-e")
_TIED_CAPTURES = tuple(_at(s) for s in ("2026-07-01T09:00:00Z", "2026-07-10T09:00:00Z",
                                        "2026-07-20T09:00:00Z"))
_tied_row = st.tuples(st.sampled_from((0.5, 0.75)),   # two totals, two coverages, three
                      st.sampled_from((0.5, 1.0)),    # capture times: ties everywhere
                      st.sampled_from(_TIED_CAPTURES))


def _scored_list(ids_and_rows) -> tuple:
    """One argument tuple: the rows, each named by the next id of a permutation (ids unique)."""
    ids, rows = ids_and_rows
    pairs = (scored_pair(ScoredRow(memory_id, *row))
             for memory_id, row in zip(ids, rows, strict=False))  # fewer rows than ids
    return (tuple(pairs),)


TIED_SCORED_LISTS = st.tuples(st.permutations(_TIED_IDS),
                              st.lists(_tied_row, min_size=2, max_size=len(_TIED_IDS))
                              ).map(_scored_list)


def _describe_scored(args) -> str:
    (scored,) = args
    return "sorting [" + "; ".join(str(_row_of(pair)) for pair in scored) + "]"


BUILD = (
    SortKeyExercise(
        chapter="s12",
        name=N_("the stable rank key"),
        reference=rank_key,
        inputs=TIED_SCORED_LISTS,
        hint=N_("stage 4 orders by four keys; check each one's direction, and that the last "
                "one leaves no two records tied"),
        describe=_describe_scored,
    ),
)


#: The pieces of the from-scratch module the learner writes, in the order the chapter does.
PIECES = ("build_recall_candidates", "score_recall_candidate", "rank_key")


def check_layer(**pieces: Callable) -> ContractReport:
    """Exercise 4: the learner's pieces in a fresh copy of :mod:`labmem.scratch.s12`,
    judged by every contract of the layer (``check_layer(rank_key=my_rank_key, ...)``)."""
    from labmem.exercises.suites import s12 as suite
    from labmem.scratch import s12 as scratch

    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        raise ValueError(f"no piece named {unknown}; the pieces are {list(PIECES)}")
    return suite.SUITE.run(suite.layer_of(assemble(scratch, pieces)), who="your")


# -- exercise 5: write the row-level-security policy --------------------------------------

#: The session setting a connection carries its scope in (the library's store uses it too).
SCOPE_SETTING = "labmem.user_scope"
POLICY_ROLE = "labmem_policy_exercise"   # like the store's role: no superuser, no owner
_POLICY_ROWS = (("scope-alice", "a-1"), ("scope-alice", "a-2"), ("scope-bob", "b-1"))


class PolicyLab:
    """A fresh database on the chapter's server, holding a ``memories`` table with
    row-level security enabled and forced, three rows (two of Alice's, one of Bob's) and
    the learner's policy. Every probe runs as :data:`POLICY_ROLE` in a transaction that
    is rolled back, so probes never change what the next one sees."""

    def __init__(self, admin_url: str, database: str) -> None:
        from psycopg.conninfo import make_conninfo

        self.admin_url, self.database = admin_url, database
        self.url = make_conninfo(admin_url, dbname=database, user=POLICY_ROLE)

    def probe(self, scope: str | None, statement: str, params: tuple = ()):
        """Run ``statement`` on a connection whose scope setting is ``scope`` (None: never
        set); the rows it returns, or ``"refused: <the server's message>"``."""
        import psycopg

        with psycopg.connect(self.url) as conn:
            try:
                if scope is not None:
                    conn.execute("SELECT set_config(%s, %s, false)", (SCOPE_SETTING, scope))
                cursor = conn.execute(statement, params)
                return tuple(cursor.fetchall()) if cursor.description else ()
            except psycopg.Error as exc:
                return f"refused: {str(exc).splitlines()[0]}"
            finally:
                conn.rollback()

    def seen(self, scope: str | None):
        answer = self.probe(scope, "SELECT memory_id FROM memories ORDER BY memory_id")
        return answer if isinstance(answer, str) else tuple(row[0] for row in answer)

    def insert(self, scope: str, row_scope: str, memory_id: str) -> str:
        answer = self.probe(scope, "INSERT INTO memories VALUES (%s, %s, 'new note')",
                            (row_scope, memory_id))
        return answer if isinstance(answer, str) else "stored"


def _sees_only_own_rows(lab: PolicyLab) -> None:
    for scope, want in (("scope-alice", ("a-1", "a-2")), ("scope-bob", ("b-1",))):
        expect(f"SELECT memory_id FROM memories on a connection with {SCOPE_SETTING} = "
               f"'{scope}' (the table holds a-1, a-2 of scope-alice and b-1 of scope-bob)",
               lab.seen(scope), want)


def _unset_sees_nothing(lab: PolicyLab) -> None:
    got = lab.seen(None)
    if got and not isinstance(got, str):  # no rows, or an error: both fail closed
        expect(f"SELECT memory_id FROM memories on a connection that never set "
               f"{SCOPE_SETTING}", got, ())


def _inserts_own_rows(lab: PolicyLab) -> None:
    expect("INSERT of a scope-alice row on a connection with "
           f"{SCOPE_SETTING} = 'scope-alice'",
           lab.insert("scope-alice", "scope-alice", "a-9"), "stored")


def _refuses_other_rows(lab: PolicyLab) -> None:
    got = lab.insert("scope-alice", "scope-bob", "b-9")
    if not got.startswith("refused"):
        raise ContractBroken("smallest case: INSERT of a scope-bob row on a connection with "
                             f"{SCOPE_SETTING} = 'scope-alice' — expected the server to "
                             f"refuse it, got {got!r}")


POLICY_SUITE = ContractSuite(N_("row-level-security policy"), (
    Contract(N_("a connection sees exactly the rows of its own scope"), _sees_only_own_rows),
    Contract(N_("a connection that never set its scope sees no row"), _unset_sees_nothing),
    Contract(N_("a connection may insert a row of its own scope"), _inserts_own_rows),
    Contract(N_("a connection cannot insert a row of another scope"), _refuses_other_rows),
))

_POLICY_DATABASES = itertools.count(1)


def _build_policy_lab(admin_url: str, policy: str) -> tuple[PolicyLab, str | None]:
    """Create the exercise database and apply ``policy``; (lab, the server's refusal)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    database = f"policy_exercise_{os.getpid()}_{next(_POLICY_DATABASES)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {database}")
        admin.execute(f"CREATE DATABASE {database}")
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                         (POLICY_ROLE,)).fetchone() is None:
            admin.execute(f"CREATE ROLE {POLICY_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")
    lab = PolicyLab(admin_url, database)
    with psycopg.connect(make_conninfo(admin_url, dbname=database)) as conn:
        conn.execute("CREATE TABLE memories (user_scope text NOT NULL, memory_id text NOT "
                     "NULL, content text NOT NULL, UNIQUE (user_scope, memory_id))")
        conn.execute("ALTER TABLE memories ENABLE ROW LEVEL SECURITY")
        conn.execute("ALTER TABLE memories FORCE ROW LEVEL SECURITY")
        conn.execute(f"GRANT SELECT, INSERT ON memories TO {POLICY_ROLE}")
        with conn.cursor() as cursor:
            cursor.executemany("INSERT INTO memories VALUES (%s, %s, 'a note')", _POLICY_ROWS)
        conn.commit()
        try:
            conn.execute(policy)
            conn.commit()
        except psycopg.Error as exc:
            conn.rollback()
            return lab, str(exc).splitlines()[0]
    return lab, None


def _drop_policy_lab(lab: PolicyLab) -> None:
    import psycopg

    with psycopg.connect(lab.admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {lab.database} WITH (FORCE)")


def check_policy(admin_url: str, policy: str | None) -> Feedback | ContractReport:
    """Exercise 5: ``policy`` is SQL (one or more ``CREATE POLICY … ON memories``
    statements); it is applied to a fresh database on the server ``admin_url`` reaches
    (a superuser's URL) and judged by :data:`POLICY_SUITE` with raw SQL."""
    name = _("exercise 5 (row-level security)")
    if policy is None:
        return not_answered(name)
    if not isinstance(policy, str) or not policy.strip():
        return Feedback(name, False, _("answer with the SQL text of your CREATE POLICY "
                                       "statement(s), as a string"))
    import psycopg

    try:
        lab, refusal = _build_policy_lab(admin_url, policy)
    except psycopg.OperationalError as exc:
        return Feedback(name, False, _("cannot reach the server ({error}); run the cell that "
                                       "starts it, then pass its admin URL")
                                     .format(error=str(exc).splitlines()[0]))
    try:
        if refusal is not None:
            return Feedback(name, False, _("the server refused your SQL: {refusal}")
                                         .format(refusal=refusal))
        return POLICY_SUITE.run(lab, who="your")
    finally:
        _drop_policy_lab(lab)
