"""s12 remote memory on a PostgreSQL server (the ``postgres`` extra: psycopg 3).

* :mod:`~labmem.recall.postgres.schema` — the versioned schema, row-level security and
  the admin functions ``labmem db init`` / ``upgrade`` call;
* :mod:`~labmem.recall.postgres.urls` — a database URL checked, named, and printed
  without its password;
* :mod:`~labmem.recall.postgres.connection` — a store's connection: its scope setting,
  reconnecting once, psycopg's errors turned into labmem's;
* :mod:`~labmem.recall.postgres.store` — :class:`PostgresMemoryStore`, the store contract;
* :mod:`~labmem.recall.postgres.terms` and :mod:`~labmem.recall.postgres.index` — the
  analyzed terms each row carries and the recall index that reads them;
* :mod:`~labmem.recall.postgres.server` — :class:`LocalPostgres`, a throwaway server
  from the operating system's binaries (tests, benchmarks, the chapter).
"""

from labmem.recall.postgres.server import (
    INSTALL_HINT,
    LocalPostgres,
    PostgresUnavailableError,
    find_server_binaries,
)

# name -> the module that defines it; imported on first use, so that this package (and
# LocalPostgres) imports without psycopg, which only the store and the admin need
_NEEDS_PSYCOPG = {
    "PostgresMemoryStore": "store", "PostgresTermIndex": "index",
    "init_database": "schema", "upgrade_database": "schema", "schema_version": "schema",
    "SCHEMA_VERSION": "schema", "APP_ROLE": "schema", "SCOPE_SETTING": "schema",
    "RemoteMemorySchemaError": "schema", "RemoteMemoryConnectionError": "connection",
}

__all__ = ["PostgresMemoryStore", "PostgresTermIndex", "LocalPostgres", "init_database",
           "upgrade_database", "schema_version", "SCHEMA_VERSION", "APP_ROLE",
           "SCOPE_SETTING", "RemoteMemoryConnectionError", "RemoteMemorySchemaError",
           "INSTALL_HINT", "PostgresUnavailableError", "find_server_binaries"]


def __getattr__(name: str):
    module = _NEEDS_PSYCOPG.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    try:
        value = getattr(import_module(f"{__name__}.{module}"), name)
    except ModuleNotFoundError as exc:
        if exc.name != "psycopg":
            raise
        raise PostgresUnavailableError(
            "the PostgreSQL store needs psycopg: pip install 'labmem[postgres]'") from None
    globals()[name] = value
    return value
