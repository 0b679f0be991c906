"""A database URL: checked, named and printed without its password.

One place for what every user of a URL needs: the store's connection (which shows only the
database's name), and ``--database-url`` / ``$LABMEM_DATABASE_URL`` on the command line
(which must name the flag or variable that was wrong). libpq's parser is psycopg's, imported
when a URL is first checked, so this module imports without psycopg.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from labmem.recall.store import RemoteMemoryValidationError

__all__ = ["URL_FORM", "check_database_url", "database_name", "masked_url", "scrubbed"]

URL_FORM = ("write it as postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE "
            "(postgresql://USER@/DATABASE?host=/socket/dir for a Unix socket)")


def _url_secrets(url: str) -> list[str]:
    """The password a URL spells (``user:PASSWORD@`` or ``password=``), as written and
    decoded: what :func:`masked_url` and :func:`scrubbed` hide."""
    found = re.findall(r"(?i)[?&]password=([^&#]*)", url)
    _, sep, rest = url.partition("://")
    if sep and "@" in rest:  # the last @ ends the user info: a password may hold one
        _, colon, password = rest.rpartition("@")[0].partition(":")
        if colon:
            found.append(password)
    return sorted({s for p in found if p for s in (p, unquote(p))}, key=len, reverse=True)


def scrubbed(text: str, url: str) -> str:
    """``text`` (a message that may quote ``url``) with the URL's password as ``***``."""
    for secret in _url_secrets(url):
        text = text.replace(secret, "***")
    return text


def masked_url(url: str) -> str:
    """``url`` with its password, if it has one, shown as ``***`` (safe to print)."""
    return scrubbed(url, url)


def _parsed(url: Any, field: str, *, scheme: bool) -> dict[str, Any]:
    """libpq's parameters of ``url``; ``scheme``: only a ``postgresql://`` URL, not a
    ``key=value`` connection string."""
    shown = masked_url(url) if isinstance(url, str) else url
    if not isinstance(url, str) or not url.strip():
        raise RemoteMemoryValidationError(field, f"must be a PostgreSQL URL, got {shown!r}",
                                          URL_FORM)
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise RemoteMemoryValidationError(
            field, "a database URL needs psycopg, which is not installed",
            "install the postgres extra with pip install -e '.[postgres]'") from None
    if scheme and not url.lower().startswith(("postgresql://", "postgres://")):
        raise RemoteMemoryValidationError(field, f"{shown!r} is not a PostgreSQL URL",
                                          URL_FORM)
    try:
        return conninfo_to_dict(url)
    except PsycopgError as exc:  # its message quotes the URL, password and all
        reason = scrubbed(" ".join(str(exc).split()), url)
        raise RemoteMemoryValidationError(
            field, f"{shown!r} is not a PostgreSQL URL ({reason})", URL_FORM) from None


def check_database_url(url: Any, field: str = "database_url") -> str:
    """``url`` if it is a PostgreSQL URL libpq can parse; else a refusal naming ``field``
    (the flag or variable the caller wrote) that never prints the password."""
    _parsed(url, field, scheme=True)
    return url


def database_name(url: str, field: str = "url") -> str:
    """The database a URL names (what messages and ``repr`` show: never a host or a
    password)."""
    params = _parsed(url, field, scheme=False)
    return str(params.get("dbname") or params.get("user") or "postgres")
