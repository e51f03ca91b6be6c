"""``memplane doctor``: what a new deployment most often gets wrong, checked in one go.

Each check answers ``ok``, ``warn`` (works, but not as a production deployment should) or
``fail`` (the server will not start, or will lose or expose data), with one line saying
what was found and, unless ok, one line saying what to do. Nothing here writes to the
database; the default bucket gets the same write/read/delete probe ``memplane serve`` runs
at start; the KEK provider wraps and unwraps a random key once. No check's text holds a
secret (docs/doctor.md).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from .db.engine import peak_extra
from .db.urls import where
from .preflight import Database, Refused, check_database, check_default_bucket
from .secret_strength import random_bytes_in
from .settings import SERVER_KEY_MIN_BYTES, Settings

Status = Literal["ok", "warn", "fail"]
SKEW_WARN_S = 1.0
SKEW_FAIL_S = 5.0
BUDGET_WARN = 0.8  # of the connections PostgreSQL lets ordinary roles open
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    summary: str = ""
    fix: str | None = None


def worst(checks: list[Check]) -> Status:
    order: dict[Status, int] = {"ok": 0, "warn": 1, "fail": 2}
    return max((c.status for c in checks), key=order.__getitem__, default="ok")


EXIT_CODES: dict[Status, int] = {"ok": 0, "warn": 1, "fail": 2}


def as_json(checks: list[Check]) -> dict[str, object]:
    return {"status": worst(checks), "checks": [asdict(c) for c in checks]}


def run(settings: Settings, *, processes: int = 1,
        clock: Callable[[], float] = time.time) -> list[Check]:
    """Every check, in the order a new deployment should fix them."""
    checks: list[Check] = []
    database = _database(settings, checks, clock)
    checks.append(_server_key(settings))
    checks.append(_bucket(settings))
    checks.append(_kek(settings))
    checks.append(_clock(database))
    checks.append(_connections(settings, database, processes))
    checks.append(_metrics_token(settings))
    checks.append(_tls(settings))
    return checks


def _database(settings: Settings, checks: list[Check],
              clock: Callable[[], float]) -> Database | None:
    from storage_adapters.registry import MissingExtra

    url = settings.resolved_database_url
    try:
        found = check_database(settings, must_be_migrated=False, clock=clock)
    except MissingExtra as exc:
        checks.append(Check("database", "fail", str(exc), "pip install 'memplane[postgres]'"))
        return None
    except Refused as exc:
        checks.append(Check("database", "fail", str(exc),
                            "check MEMPLANE_DATABASE_URL's host, port, user, password and "
                            "database, and that PostgreSQL accepts this host (pg_hba.conf)"))
        return None
    if found.migrated:
        checks.append(Check("database", "ok", f"{found.dialect} {where(url)}, migrated"))
    elif settings.embedded:
        checks.append(Check("database", "ok", f"sqlite {where(url)}: `memplane serve` "
                            "creates and migrates it at start"))
    else:
        checks.append(Check("database", "fail", f"{found.dialect} {where(url)} answers but "
                            "is not migrated", "run `memplane db upgrade`"))
    return found


def _server_key(settings: Settings) -> Check:
    generate = "generate one with: python -c 'import secrets; print(secrets.token_hex(32))'"
    if settings.server_key is None or not settings.server_key.get_secret_value():
        if settings.embedded:
            return Check("server key", "ok", "generated in the data dir (embedded default)")
        return Check("server key", "fail", "MEMPLANE_SERVER_KEY is not set",
                     f"set MEMPLANE_SERVER_KEY (or MEMPLANE_SERVER_KEY_FILE); {generate}")
    strength = random_bytes_in(settings.server_key.get_secret_value())
    if strength >= 32:
        return Check("server key", "ok", f"{strength} random bytes")
    if strength >= SERVER_KEY_MIN_BYTES:
        return Check("server key", "warn", f"{strength} random bytes (32 recommended)",
                     f"rotate to a key of 32 random bytes; {generate}")
    return Check("server key", "fail", "MEMPLANE_SERVER_KEY is not a generated random key "
                 f"of at least {SERVER_KEY_MIN_BYTES} bytes", generate)


def _bucket(settings: Settings) -> Check:
    if settings.default_bucket_url is None and not settings.data_dir.exists():
        return Check("bucket", "ok", f"{settings.resolved_bucket_url}: `memplane serve` "
                     "creates it at start")
    try:
        found = check_default_bucket(settings)
    except Refused as exc:
        return Check("bucket", "fail", str(exc),
                     "install the extra it names" if "pip install" in str(exc)
                     else "fix MEMPLANE_DEFAULT_BUCKET_URL or the bucket's permissions")
    summary = (f"{found.url}: write, read and delete in {found.latency_ms:.0f} ms"
               + (f", region {found.region}" if found.region else ""))
    declared = dict(parse_qsl(urlsplit(settings.resolved_bucket_url).query)).get("region")
    if declared and found.region and declared != found.region:
        return Check("bucket", "fail", f"{summary}, but the URL declares region {declared}",
                     f"set region={found.region} in MEMPLANE_DEFAULT_BUCKET_URL, or use a "
                     f"bucket in {declared} if data must stay there")
    if urlsplit(settings.resolved_bucket_url).scheme == "memory":
        return Check("bucket", "fail", f"{summary}: memory:// loses everything at exit",
                     "name a directory (file:///path) or an object storage bucket")
    if not settings.embedded and urlsplit(settings.resolved_bucket_url).scheme == "file":
        return Check("bucket", "warn", f"{summary}: a directory on this host, with a shared "
                     "database", "use an object storage bucket (s3://, gs://, azure://) so "
                     "every server reaches the same content")
    return Check("bucket", "ok", summary)


def _kek(settings: Settings) -> Check:
    from storage_adapters.registry import MissingExtra

    from .plane.kek_providers import AwsKms, provider_from_settings

    if not settings.encryption:
        return Check("kek provider", "warn", "MEMPLANE_ENCRYPTION is off: new objects are "
                     "stored unencrypted", "unset MEMPLANE_ENCRYPTION (encryption is on by "
                     "default)")
    if settings.kek_provider == "local":
        path = settings.resolved_keyring_path
        if settings.embedded:
            return Check("kek provider", "ok", f"local keyring {path}")
        return Check("kek provider", "warn", f"local keyring {path}: the keys that open "
                     "every tenant's content sit in a file on this host",
                     "use MEMPLANE_KEK_PROVIDER=aws-kms with MEMPLANE_KEK_AWS_KEY_ID, or "
                     "share and back up this file with every server")
    try:
        provider = provider_from_settings(settings)
        assert isinstance(provider, AwsKms)
        key = secrets.token_bytes(32)
        context = b"memplane doctor"
        same = provider.unwrap(provider.key_id, provider.wrap(provider.key_id, key, context),
                               context) == key
    except MissingExtra as exc:
        return Check("kek provider", "fail", str(exc), "pip install 'memplane[s3]'")
    except Exception as exc:  # the KMS's own refusal, named by its code
        return Check("kek provider", "fail", f"aws-kms {settings.kek_aws_key_id}: {exc}",
                     "check MEMPLANE_KEK_AWS_KEY_ID, MEMPLANE_KEK_AWS_REGION and that the "
                     "server's credentials may kms:Encrypt and kms:Decrypt with the key")
    if not same:
        return Check("kek provider", "fail", "aws-kms answered a different key back",
                     "check MEMPLANE_KEK_AWS_ENDPOINT_URL names a real KMS")
    return Check("kek provider", "ok", f"aws-kms {settings.kek_aws_key_id}: wrap and unwrap "
                 "succeeded")


def _clock(database: Database | None) -> Check:
    if database is None:
        return Check("clock", "warn", "not checked: the database did not answer",
                     "fix the database first")
    if database.now_offset_seconds is None:
        return Check("clock", "ok", "SQLite: the database runs on this machine's clock")
    skew = database.now_offset_seconds
    summary = f"this host's clock is {abs(skew):.2f} s {'behind' if skew > 0 else 'ahead of'}"\
              " the database's"
    fix = "run NTP (chrony, systemd-timesyncd) on this host and the database's"
    if abs(skew) >= SKEW_FAIL_S:
        return Check("clock", "fail", summary + " (job leases and retention use both)", fix)
    if abs(skew) >= SKEW_WARN_S:
        return Check("clock", "warn", summary, fix)
    return Check("clock", "ok", summary)


def _connections(settings: Settings, database: Database | None, processes: int) -> Check:
    each = settings.db_pool_size + peak_extra(settings.db_pool_size)
    need = each * processes
    if database is None or database.max_connections is None:
        if database is None:
            return Check("connections", "warn", "not checked: the database did not answer",
                         "fix the database first")
        return Check("connections", "ok", "SQLite: no connection limit")
    room = database.max_connections - (database.reserved_connections or 0)
    summary = (f"{processes} process(es) x {each} connections (MEMPLANE_DB_POOL_SIZE "
               f"{settings.db_pool_size} + {peak_extra(settings.db_pool_size)} at a peak) = "
               f"{need} of the {room} PostgreSQL allows (max_connections "
               f"{database.max_connections})")
    fix = ("lower MEMPLANE_DB_POOL_SIZE, run fewer processes, raise max_connections, or put "
           "PgBouncer in front")
    if need > room:
        return Check("connections", "fail", summary, fix)
    if need > room * BUDGET_WARN:
        return Check("connections", "warn", summary + ": little room for peaks and other "
                     "clients", fix)
    return Check("connections", "ok", summary)


def _metrics_token(settings: Settings) -> Check:
    if settings.metrics_token is not None and settings.metrics_token.get_secret_value():
        return Check("metrics token", "ok", "/metrics needs the token")
    return Check("metrics token", "warn", "/metrics is open to anyone who reaches the server",
                 "set MEMPLANE_METRICS_TOKEN (or MEMPLANE_METRICS_TOKEN_FILE) and give it to "
                 "Prometheus as a bearer token")


def _tls(settings: Settings) -> Check:
    url = settings.public_url
    fix = ("serve the API through a TLS-terminating proxy or ingress and set "
           "MEMPLANE_PUBLIC_URL to its https:// URL")
    if not url:
        return Check("tls", "warn", "MEMPLANE_PUBLIC_URL is not set, so TLS in front of the "
                     "server is not known", fix)
    parts = urlsplit(url)
    if parts.scheme == "https":
        return Check("tls", "ok", f"clients reach {parts.scheme}://{parts.netloc}")
    if parts.scheme == "http" and (parts.hostname or "") in _LOOPBACK:
        return Check("tls", "warn", f"{url} is plain http on this host only", fix)
    return Check("tls", "fail", f"clients reach {parts.scheme}://{parts.netloc}: API keys and "
                 "memory cross the network unencrypted", fix)
