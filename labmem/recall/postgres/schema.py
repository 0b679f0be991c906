"""The PostgreSQL store's schema: versioned, created and upgraded only when an admin asks.

A store never creates or alters a table. :func:`init_database` (``labmem db init``) builds
the newest schema on an empty database; :func:`upgrade_database` (``labmem db upgrade``)
runs the steps from the version found to :data:`SCHEMA_VERSION`; a store that meets a
missing or older schema refuses to start and names the command to run
(:func:`require_schema`). Both admin functions take a superuser's URL (they create the
application role and the row-level-security policies, read every user's rows to upgrade
them, and own the one function that reads around the policies) and run in one
transaction under an advisory lock, so two hosts running them at once cannot interleave
and a failed step leaves the previous version intact.

**Version 1** is the store alone: ``memories`` (one row per record, the JSON the other
backends write plus the columns queries need; ``UNIQUE (user_scope, memory_id)`` is what
refuses a duplicate) and ``scope_stats`` (per scope, how many records: the next
ordinal). **Version 2** adds recall on the server's data: each conversation row's
analyzed terms and their counts (``terms``, ``term_counts``: what labmem's own analyzer
gives, so candidates match the other backends' exactly), its length, a GIN index whose
keys are ``<scope>:<term>`` (:data:`SCOPED_TERMS_FUNCTION`), the scope's vocabulary and
the totals BM25 weighs by, and a table for dense recall's vectors (computed from the
records by the first process that needs them, then shared by every host). Version 1 is
kept so that the upgrade path is tested, not only described.

**Scope is the server's job.** Every table has row-level security, enabled and forced:
a row is visible and writable only when its ``user_scope`` equals the connection's
``labmem.user_scope`` setting, which the store sets once at connect. The application
role :data:`APP_ROLE` owns nothing, is no superuser, and may only ``SELECT`` and
``INSERT`` records (no ``UPDATE`` or ``DELETE``: records are immutable), so even a
hand-written ``SELECT * FROM memories`` on a store's connection returns only its scope.
One read goes around the policies, on purpose: a term's postings are read through the
function ``labmem_postings``, which applies the same scope itself (see
:data:`POSTINGS_FUNCTION` for why: the GIN index is unusable under the policies).
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from labmem.recall.postgres.connection import admin_connection, pg_errors
from labmem.recall.store import RemoteMemoryError

__all__ = ["SCHEMA_VERSION", "APP_ROLE", "SCOPE_SETTING", "RemoteMemorySchemaError",
           "init_database", "upgrade_database", "schema_version", "require_schema",
           "MIGRATIONS"]

SCHEMA_VERSION = 2
#: The role every store, CLI and MCP server connects as: not a superuser, not an owner.
APP_ROLE = "labmem_app"
#: The session setting that carries a connection's user scope (read by every policy).
SCOPE_SETTING = "labmem.user_scope"
#: Taken by init and upgrade for their whole transaction (any number: labmem's own).
_ADMIN_LOCK = 0x6C61626D656D  # "labmem"

_OWN_SCOPE = f"user_scope = current_setting('{SCOPE_SETTING}', true)"


class RemoteMemorySchemaError(RemoteMemoryError):
    """The database has no labmem schema, an older one, or a newer one than this labmem."""


def _create_role(cur: psycopg.Cursor) -> None:
    """The application role, unless it exists: roles belong to the whole cluster, so
    another database may have made it already (or be making it now: the advisory lock
    covers one database only, hence the exception handler)."""
    cur.execute(f"""DO $$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS;
            END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
        END $$""")


def _version_1(cur: psycopg.Cursor) -> None:
    """The store alone: records, the per-scope counter, the policies and grants."""
    _create_role(cur)
    for statement in (
        """CREATE TABLE labmem_schema (
               one     boolean PRIMARY KEY DEFAULT true CHECK (one),
               version integer NOT NULL)""",
        # ordinal: the record's 0-based position among its scope's records (dense);
        # record: StoredMemory.to_dict() as JSON text, the source of truth.
        """CREATE TABLE memories (
               user_scope  text             NOT NULL,
               ordinal     bigint           NOT NULL,
               memory_id   text             NOT NULL,
               kind        text             NOT NULL,
               captured_at double precision NOT NULL,
               record      text             NOT NULL,
               PRIMARY KEY (user_scope, ordinal),
               CONSTRAINT memories_one_id_per_scope UNIQUE (user_scope, memory_id))""",
        """CREATE INDEX memories_profiles ON memories (user_scope, captured_at, memory_id)
               WHERE kind = 'profile'""",
        """CREATE TABLE scope_stats (
               user_scope text   PRIMARY KEY,
               records    bigint NOT NULL CHECK (records >= 0))""",
        "ALTER TABLE memories ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE memories FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY read_own_scope ON memories FOR SELECT USING ({_OWN_SCOPE})",
        f"CREATE POLICY write_own_scope ON memories FOR INSERT WITH CHECK ({_OWN_SCOPE})",
        "ALTER TABLE scope_stats ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE scope_stats FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY own_scope ON scope_stats USING ({_OWN_SCOPE}) "
        f"WITH CHECK ({_OWN_SCOPE})",
        f"GRANT USAGE ON SCHEMA public TO {APP_ROLE}",
        f"GRANT SELECT ON labmem_schema TO {APP_ROLE}",
        f"GRANT SELECT, INSERT ON memories TO {APP_ROLE}",
        f"GRANT SELECT, INSERT, UPDATE ON scope_stats TO {APP_ROLE}",
    ):
        cur.execute(statement)
    cur.execute("INSERT INTO labmem_schema (version) VALUES (1)")


# The GIN index's keys: each term of a row prefixed with the row's scope ("<scope>:<term>";
# a scope is 16 hex digits, so the prefix is unambiguous). A key's posting list then holds
# exactly one user's rows with one term: a query term costs what that user's postings of
# it cost, however many users and records the table holds. (An index over (user_scope,
# terms) would intersect the term's list with the whole scope's, every query.)
SCOPED_TERMS_FUNCTION = """
    CREATE FUNCTION labmem_scoped_terms(scope text, terms text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT array_agg(scope || ':' || t) FROM unnest(terms) AS t
    $$"""

# A term's postings at ordinals since … bound − 1 (what an index that has the older ones
# still lacks), for the connection's own scope, as two arrays in one row (the ordinals
# ascending, and the term's count in each: one value to decode, not a row per record).
#
# Why a function: under row-level security the planner may apply an operator before the
# policy only if the operator is LEAKPROOF (it cannot reveal a hidden row through an
# error), and array containment (@>) is not; so a plain SELECT on the app role's
# connection scans every row of the table, the GIN index unused. This function runs as
# the schema's owner (SECURITY DEFINER: the policies do not apply to it) and applies the
# very same scope itself, from the same setting: it asks for the key "<the setting>:
# <term>", which only rows of that scope hold.
#
# How it is planned: the term's rows come from the GIN index alone; the range of
# ordinals is applied after (offered the primary key too, the planner of a table not yet
# analyzed takes it and tests every row of the scope against the term), and sequential
# scans are off inside it (for a term most rows hold, the planner would read every row
# and compute each row's keys, which the index holds already). Its search_path is fixed:
# no one can slip another "memories" in front of it.
POSTINGS_FUNCTION = f"""
    CREATE FUNCTION labmem_postings(wanted text, since bigint, bound bigint)
    RETURNS TABLE (ordinals bigint[], term_counts integer[])
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
        WITH holding AS MATERIALIZED (  -- the term's rows, found through the GIN index
            SELECT m.ordinal, m.term_counts[array_position(m.terms, wanted)] AS term_count
            FROM public.memories AS m
            WHERE public.labmem_scoped_terms(m.user_scope, m.terms)
                  @> ARRAY[current_setting('{SCOPE_SETTING}', true) || ':' || wanted])
        SELECT coalesce(array_agg(h.ordinal ORDER BY h.ordinal), '{{}}'),
               coalesce(array_agg(coalesce(h.term_count, 0) ORDER BY h.ordinal), '{{}}')
        FROM holding AS h
        WHERE h.ordinal >= since AND h.ordinal < bound
    $$"""


def _version_2(cur: psycopg.Cursor) -> None:
    """Recall on the server: each row's analyzed terms, a GIN index over them, the
    vocabulary and the BM25 totals; rows already stored are analyzed here, by labmem."""
    from labmem.recall.postgres.terms import analyzed_row, vocabulary_rows

    for statement in (
        "ALTER TABLE memories ADD COLUMN terms text[], ADD COLUMN term_counts integer[], "
        "ADD COLUMN length integer NOT NULL DEFAULT 0",
        "ALTER TABLE scope_stats ADD COLUMN conversation_records bigint NOT NULL DEFAULT 0, "
        "ADD COLUMN total_length bigint NOT NULL DEFAULT 0",
        # the surface terms of a scope, each once, with the first record that used it
        """CREATE TABLE vocabulary (
               user_scope    text   NOT NULL,
               term          text   NOT NULL,
               first_ordinal bigint NOT NULL,
               PRIMARY KEY (user_scope, term))""",
        "CREATE INDEX vocabulary_by_first_use ON vocabulary (user_scope, first_ordinal)",
        "ALTER TABLE vocabulary ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE vocabulary FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY own_scope ON vocabulary USING ({_OWN_SCOPE}) "
        f"WITH CHECK ({_OWN_SCOPE})",
        f"GRANT SELECT, INSERT ON vocabulary TO {APP_ROLE}",
        # dense recall's vectors (labmem.recall.vectors): a cache computed from the
        # records, so the role may replace a damaged set (DELETE), unlike records
        """CREATE TABLE record_vectors (
               user_scope   text             NOT NULL,
               model        text             NOT NULL,
               ordinal      bigint           NOT NULL,
               memory_id    text             NOT NULL,
               conversation smallint         NOT NULL,
               inv_norm     double precision NOT NULL,
               codes        bytea            NOT NULL,
               crc32        bigint           NOT NULL,
               PRIMARY KEY (user_scope, model, ordinal))""",
        "ALTER TABLE record_vectors ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE record_vectors FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY own_scope ON record_vectors USING ({_OWN_SCOPE}) "
        f"WITH CHECK ({_OWN_SCOPE})",
        f"GRANT SELECT, INSERT, DELETE ON record_vectors TO {APP_ROLE}",
    ):
        cur.execute(statement)
    # the admin is a superuser: row-level security does not hide rows from it
    cur.execute("SELECT user_scope, ordinal, kind, record FROM memories "
                "ORDER BY user_scope, ordinal")
    rows = cur.fetchall()
    totals: dict[str, list[int]] = {}
    analyzed = []
    for scope, ordinal, kind, payload in rows:
        terms, counts, length = analyzed_row(kind, payload)
        analyzed.append((terms, counts, length, scope, ordinal))
        if terms is not None:
            total = totals.setdefault(scope, [0, 0])
            total[0] += 1
            total[1] += length
    cur.executemany("UPDATE memories SET terms = %s, term_counts = %s, length = %s "
                    "WHERE user_scope = %s AND ordinal = %s", analyzed)
    cur.executemany("UPDATE scope_stats SET conversation_records = %s, total_length = %s "
                    "WHERE user_scope = %s",
                    [(c, n, scope) for scope, (c, n) in totals.items()])
    cur.executemany("INSERT INTO vocabulary (user_scope, term, first_ordinal) "
                    "VALUES (%s, %s, %s)",
                    vocabulary_rows((s, o, t) for t, _, _, s, o in analyzed))
    cur.execute(SCOPED_TERMS_FUNCTION)
    cur.execute("CREATE INDEX memories_terms ON memories "
                "USING gin (labmem_scoped_terms(user_scope, terms))")
    cur.execute(POSTINGS_FUNCTION)
    cur.execute("REVOKE ALL ON FUNCTION labmem_postings(text, bigint, bigint) FROM PUBLIC")
    cur.execute(f"GRANT EXECUTE ON FUNCTION labmem_postings(text, bigint, bigint) TO {APP_ROLE}")
    cur.execute("UPDATE labmem_schema SET version = 2")


#: Step ``i`` builds version ``i + 1`` from version ``i`` (0: an empty database).
MIGRATIONS: tuple[Callable[[psycopg.Cursor], None], ...] = (_version_1, _version_2)
assert len(MIGRATIONS) == SCHEMA_VERSION


def _found_version(cur: psycopg.Cursor) -> int:
    cur.execute("SELECT to_regclass('labmem_schema') IS NOT NULL")
    if not cur.fetchone()[0]:
        return 0
    cur.execute("SELECT version FROM labmem_schema")
    row = cur.fetchone()
    return 0 if row is None else int(row[0])


def schema_version(url: str) -> int:
    """The labmem schema version of the database at ``url`` (0: none). Reads only."""
    with admin_connection(url) as conn, pg_errors(conn), conn.cursor() as cur:
        return _found_version(cur)


def _migrate(url: str, *, target: int, refuse_older: bool) -> tuple[int, int]:
    with admin_connection(url) as conn, pg_errors(conn):
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_ADMIN_LOCK,))
            found = _found_version(cur)
            if found > target:
                raise RemoteMemorySchemaError(
                    f"the database has labmem schema version {found}, newer than this "
                    f"labmem's {target}; upgrade labmem on this host")
            if refuse_older and 0 < found < target:
                raise RemoteMemorySchemaError(
                    f"the database already has labmem schema version {found}; `labmem db "
                    f"init` only creates a schema — run `labmem db upgrade` to reach "
                    f"version {target}")
            for step in MIGRATIONS[found:target]:
                step(cur)
    return found, target


def init_database(url: str, *, version: int = SCHEMA_VERSION) -> int:
    """Create the labmem schema (tables, indexes, policies, the role :data:`APP_ROLE`) on
    the database at ``url`` (a superuser's URL); return the schema version.

    On a database already at the newest version it changes nothing (so a deployment may
    run it on every start); on an older one it refuses and names ``labmem db upgrade``:
    creating is never a silent migration. ``version`` builds an older schema (tests).
    """
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise RemoteMemorySchemaError(
            f"version: {version!r} is not a labmem schema version; use 1–{SCHEMA_VERSION}")
    return _migrate(url, target=version, refuse_older=True)[1]


def upgrade_database(url: str) -> tuple[int, int]:
    """Run the steps from the database's schema version to :data:`SCHEMA_VERSION` in
    one transaction; return ``(from_version, to_version)`` (equal: nothing to do).
    A database without a labmem schema is refused: ``labmem db init`` creates one."""
    with admin_connection(url) as conn, pg_errors(conn), conn.cursor() as cur:
        if _found_version(cur) == 0:
            raise RemoteMemorySchemaError(
                "the database has no labmem schema to upgrade; run `labmem db init` first")
    return _migrate(url, target=SCHEMA_VERSION, refuse_older=False)


def require_schema(cur: psycopg.Cursor) -> None:
    """What a store checks at connect: the schema is there and is this labmem's version.
    It only reads; the message names the admin command that fixes it."""
    try:
        found = _found_version(cur)
    except psycopg.errors.InsufficientPrivilege:
        found = 0
    if found == 0:
        raise RemoteMemorySchemaError(
            "the database has no labmem schema; an administrator runs `labmem db init "
            "--database-url <admin URL>` once (a store never creates tables itself)")
    if found < SCHEMA_VERSION:
        raise RemoteMemorySchemaError(
            f"the database has labmem schema version {found}, this labmem needs "
            f"{SCHEMA_VERSION}; an administrator runs `labmem db upgrade --database-url "
            "<admin URL>`")
    if found > SCHEMA_VERSION:
        raise RemoteMemorySchemaError(
            f"the database has labmem schema version {found}, newer than this labmem's "
            f"{SCHEMA_VERSION}; upgrade labmem on this host")
