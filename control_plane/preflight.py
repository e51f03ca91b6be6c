"""What start-up checks before the server says it is serving: the database answers (and is
migrated, where the server does not migrate it itself) and the default bucket takes a write.

Each failure is one sentence naming the fix (:class:`Refused`); the CLI prints it and exits 2
(``memplane serve``, ``memplane db upgrade``), ``memplane doctor`` reports it as a failed
check. No sentence holds a password: the database is named ``host:port/database`` or by its
URL with the password masked; a bucket URL is shown without credentials.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from .db.urls import shown, where
from .settings import Settings

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 10
_SECRET_PARAMS = ("pass", "secret", "token", "key", "sig", "credential", "auth")


class Refused(Exception):
    """Start-up cannot go on; the message is the one sentence to print."""


@dataclass(frozen=True)
class Database:
    """What the database answered: its clock, its connection limit (PostgreSQL)."""

    dialect: str
    now_offset_seconds: float | None  # the database's clock minus this host's
    max_connections: int | None
    migrated: bool
    reserved_connections: int | None = None  # for superusers only


def check_database(settings: Settings, *, must_be_migrated: bool,
                   clock: Callable[[], float] = time.time) -> Database:
    """Connect once and look at the migrations; :class:`Refused` with one sentence when the
    database cannot be reached, or is not migrated and ``must_be_migrated``."""
    url = settings.resolved_database_url
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and not _sqlite_file_exists(parsed.database):
        # Never create the file here: the engine makes it private (db/engine.py).
        if must_be_migrated:
            raise Refused(f"the database at {shown(url)} is not migrated: run `memplane db "
                          "upgrade`")
        return Database("sqlite", None, None, False)
    engine = probe_engine(url)
    try:
        with engine.connect() as connection:
            dialect = connection.dialect.name
            offset, limit, reserved = _clock_and_limit(connection, dialect, clock)
            migrated = is_migrated(connection)
    except DBAPIError as exc:
        raise Refused(f"cannot reach {where(url)}: {_reason(exc, settings)}") from None
    except SQLAlchemyError as exc:
        raise Refused(f"cannot reach {where(url)}: {type(exc).__name__}") from None
    finally:
        engine.dispose()
    if must_be_migrated and not migrated:
        raise Refused(f"the database at {shown(url)} is not migrated: run `memplane db "
                      "upgrade`")
    return Database(dialect, offset, limit, migrated, reserved)


def _sqlite_file_exists(database: str | None) -> bool:
    from pathlib import Path

    if not database or database == ":memory:" or database.startswith("file:"):
        return True  # nothing on disk to create by accident
    return Path(database).exists()


def probe_engine(url: str) -> Engine:
    """An engine of one short-lived connection that gives up after CONNECT_TIMEOUT_S."""
    parsed = make_url(url)
    options: dict[str, Any] = {"poolclass": NullPool}
    if parsed.get_backend_name() == "postgresql":
        from .db.engine import require_psycopg

        require_psycopg()  # MissingExtra names the extra to install
        parsed = parsed.set(drivername="postgresql+psycopg")
        options["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    return create_engine(parsed, **options)


def is_migrated(connection: Any) -> bool:
    """Every migration branch of this version is applied (and no unknown one)."""
    from alembic.runtime.migration import MigrationContext

    from .db.migrate import script_heads

    if not inspect(connection).has_table("alembic_version"):
        return False
    heads = set(MigrationContext.configure(connection).get_current_heads())
    return heads == set(script_heads())


def _clock_and_limit(connection: Any, dialect: str, clock: Callable[[], float],
                     ) -> tuple[float | None, int | None, int | None]:
    if dialect != "postgresql":
        return None, None, None  # SQLite's clock is this machine's
    before = clock()
    db_now = connection.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar()
    after = clock()
    limit = connection.execute(text("SHOW max_connections")).scalar()
    reserved = connection.execute(text("SHOW superuser_reserved_connections")).scalar()
    return float(db_now) - (before + after) / 2, int(limit), int(reserved)


def _reason(exc: DBAPIError, settings: Settings) -> str:
    """The driver's reason in a few words: 'password authentication failed for user "x"',
    'connection refused', 'database "x" does not exist'."""
    message = str(exc.orig or exc).strip()
    line = message.splitlines()[0] if message else type(exc.orig).__name__
    line = line.removeprefix("connection failed: ")
    if "failed: " in line:
        line = line.rsplit("failed: ", 1)[1]
    line = line.removeprefix("FATAL:").strip()
    if line.lower() == "connection refused":
        line = "connection refused (is PostgreSQL running there, on that port?)"
    password = make_url(settings.resolved_database_url).password
    if password:
        line = line.replace(str(password), "***")
    return line[:1].lower() + line[1:] if line[:2] != line[:2].upper() else line


@dataclass(frozen=True)
class Bucket:
    """What the default bucket's probe found."""

    url: str  # credentials masked
    latency_ms: float
    region: str | None
    versioning: bool | None


def shown_bucket(url: str) -> str:
    """A bucket URL without credentials: user info and secret-looking parameters masked."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = urlencode([(k, "***" if any(s in k.lower() for s in _SECRET_PARAMS) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*/:")
    base = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path
    return base + (f"?{query}" if query else "")


def check_default_bucket(settings: Settings) -> Bucket:
    """Write, read and delete a probe object in the default bucket, as a storage
    configuration is probed; :class:`Refused` with one sentence when it cannot."""
    from storage_adapters.base import StorageError, problem_code
    from storage_adapters.registry import SCHEMES, MissingExtra, UnknownBackend, from_url

    url = settings.resolved_bucket_url
    named = f"MEMPLANE_DEFAULT_BUCKET_URL {shown_bucket(url)}"
    scheme = urlsplit(url).scheme
    schemes = ", ".join(f"{s}://" for s in sorted(SCHEMES))
    if not scheme:
        raise Refused(f"{named} has no scheme: write file:///absolute/path for a directory, "
                      f"or name the bucket with one of {schemes}")
    try:
        adapter = from_url(url, allow_ambient_credentials=True,
                           call_deadline=settings.storage_call_deadline_seconds)
    except UnknownBackend:
        raise Refused(f"{named}: unknown scheme {scheme}://; use one of {schemes}") from None
    except MissingExtra as exc:
        raise Refused(str(exc)) from None
    except StorageError as exc:
        raise Refused(f"{named} is not usable: {problem_code(exc)}") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise Refused(f"{named} is not usable: {reason}; name a directory memplane may "
                      "write (file:///absolute/path) or a bucket") from None
    try:
        report = adapter.health_check()
    except OSError as exc:
        raise Refused(f"{named} does not take a write: {exc.strerror or type(exc).__name__}"
                      "; name a directory memplane may write or a bucket") from None
    finally:
        adapter.close()
    if not report.ok:
        log.debug("default bucket probe failed: %s", report.detail)
        raise Refused(f"{named} does not take a write, read and delete: "
                      f"{_PROBLEMS.get(report.problem or '', report.problem or 'unreachable')}")
    described = report.description
    return Bucket(shown_bucket(url), report.latency_ms,
                  described.region if described else None,
                  described.versioning if described else None)


_PROBLEMS = {
    "unreachable": "the endpoint could not be reached, or did not answer as a bucket",
    "auth_failed": "the bucket rejected the server's credentials",
    "permission_denied": "the server's credentials may not write, read and delete objects "
                         "there (for a directory: it is not writable by this user)",
    "bucket_not_found": "the bucket or container does not exist; create it first",
}
