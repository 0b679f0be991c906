"""The s12 layer's contract suite on the PostgreSQL store (a real server, started by the
tests; skipped without its binaries).

The production adapter of :mod:`labmem.exercises.suites.s12` with one change: a store
"path" names a database of its own on the server (created and initialized on first use),
so every case starts from an empty store, as a new file does. The contracts that write
or compare a records file's bytes (a torn last line, a line that does not parse, another
user's line appended, the file unchanged after a refused duplicate or a recall) describe
a file; their server counterparts are tested in ``tests/postgres``: the duplicate refused
by the constraint (``test_faults``, and the shared store contract in
``tests/recall/test_store.py``), a row that does not decode (``test_corruption``), another
user's rows (``test_row_level_security``), a writer killed mid-transaction instead of a
torn line (``test_faults``), and recall leaving every row as it was
(``test_recall_equality``).
"""

from __future__ import annotations

import pytest

from labmem.exercises.suites import s12 as suite
from tests.postgres.cluster import create_database, pg_server  # noqa: F401

ABOUT_FILES = {suite.duplicate_refused, suite.torn_tail, suite.corrupt_line,
               suite.foreign_line, suite.recall_never_writes}
ON_POSTGRES = [c for c in suite.SUITE.contracts if c.check not in ABOUT_FILES]


class PostgresLayer(suite.ProductionLayer):
    """The production layer with each store path mapped to a fresh database."""

    name = "production on PostgreSQL"

    def __init__(self, server) -> None:
        super().__init__()
        self.server = server
        self.databases: dict[str, str] = {}

    def _store(self, path, user_id):
        from labmem.core.clock import FixedClock
        from labmem.recall.postgres import APP_ROLE, PostgresMemoryStore, init_database

        url = self.databases.get(str(path))
        if url is None:
            admin = create_database(self.server)
            init_database(admin)
            url = self.databases[str(path)] = admin.replace(
                "postgresql://postgres@", f"postgresql://{APP_ROLE}@", 1)
        return PostgresMemoryStore(url, user_id=user_id, clock=FixedClock(suite.AS_OF))


@pytest.fixture(scope="module")
def on_postgres(pg_server):  # noqa: F811
    return PostgresLayer(pg_server)


def test_most_contracts_apply_to_a_database():
    assert len(ON_POSTGRES) == len(suite.SUITE.contracts) - len(ABOUT_FILES) >= 9


@pytest.mark.parametrize("contract", ON_POSTGRES, ids=lambda c: c.name[:60])
def test_every_contract_holds_on_postgres(contract, on_postgres):
    contract.check(on_postgres)

