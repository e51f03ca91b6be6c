"""What a database URL may be, said in one sentence when it is not: memplane runs on
PostgreSQL through psycopg 3 (``postgresql+psycopg://``, or plain ``postgresql://``) and on
SQLite (``sqlite:///path``). Sentences never quote the URL (it may hold a password)."""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

EXAMPLE = "postgresql+psycopg://user:password@host:5432/dbname"
_DRIVERS = {"postgresql", "postgresql+psycopg", "sqlite", "sqlite+pysqlite"}


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be memplane's database URL (a sentence naming the fix), or None."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return f"not a database URL: use {EXAMPLE} (or sqlite:///path/to/memplane.db)"
    if parsed.drivername in _DRIVERS:
        return None
    backend = parsed.get_backend_name()
    if backend in ("postgres", "postgresql"):
        return (f"{parsed.drivername}:// is not a driver memplane loads: use "
                f"postgresql+psycopg://… ({EXAMPLE})")
    if backend == "sqlite":
        return (f"{parsed.drivername}:// is not a driver memplane loads: use "
                "sqlite:///path/to/memplane.db")
    return (f"{backend} is not supported: memplane runs on PostgreSQL ({EXAMPLE}) or SQLite "
            "(sqlite:///path/to/memplane.db)")


def where(url: str | URL) -> str:
    """``host:port/database`` of a server URL (the file of a SQLite one): no user, no
    password."""
    parsed = make_url(url) if isinstance(url, str) else url
    if parsed.get_backend_name() == "sqlite":
        return parsed.database or ":memory:"
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"


def shown(url: str) -> str:
    """The URL with its password masked, fit for a message."""
    return make_url(url).render_as_string(hide_password=True)
