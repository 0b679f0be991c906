"""Every test here runs against a real PostgreSQL server (tests/postgres/cluster.py)."""

from tests.postgres.cluster import new_database, pg_admin_url, pg_server, pg_url  # noqa: F401
