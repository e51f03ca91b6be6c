"""Commands that run the service or work on its database and buckets directly."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from control_plane.runtime import Runtime
    from control_plane.settings import Settings

console = Console(stderr=True)
out = Console()

# Files only memplane puts in a data dir: one of them present means memplane made it.
MARKER = ".memplane-data-dir"
_SIGNS = (MARKER, "memplane.db", "bucket", "keyring.json", "server.key")


@dataclass
class Where:
    """The global ``--data-dir``/``--init`` options, set by the app's callback on each run."""

    data_dir: Path | None = None
    init: bool = False


WHERE = Where()
_WARNED: set[str] = set()


def load_settings() -> Settings:
    """The ``MEMPLANE_*`` settings; a bad one is a sentence naming it (exit 2)."""
    from pydantic import ValidationError

    from control_plane.settings import Settings, unknown_setting_warnings

    for sentence in unknown_setting_warnings(dict(os.environ)):
        if sentence not in _WARNED:  # once per process, however many commands load settings
            _WARNED.add(sentence)
            typer.echo(f"memplane: warning: {sentence}", err=True)
    try:
        if WHERE.data_dir is not None:
            return Settings(data_dir=WHERE.data_dir)
        return Settings()
    except ValidationError as exc:
        for error in exc.errors(include_url=False, include_input=False):
            name = "_".join(str(part) for part in error["loc"]).upper()
            where = f"MEMPLANE_{name}: " if name else ""
            typer.echo(f"memplane: {where}{error['msg'].removeprefix('Value error, ')}",
                       err=True)
        raise typer.Exit(2) from None


def missing_extra(exc: Exception) -> NoReturn:
    typer.echo(f"memplane: {exc}", err=True)
    raise typer.Exit(1) from None


def check_backend(settings: Settings) -> None:
    """The default bucket's client library is installed, or a sentence names the extra."""
    from urllib.parse import urlsplit as split

    from sqlalchemy.engine import make_url

    from storage_adapters.registry import SCHEMES, MissingExtra, adapter_class

    if make_url(settings.resolved_database_url).get_backend_name() == "postgresql":
        from control_plane.db.engine import require_psycopg

        try:
            require_psycopg()
        except MissingExtra as exc:
            missing_extra(exc)
    if settings.kek_provider == "aws-kms":
        try:
            import boto3  # noqa: F401
        except ImportError:
            missing_extra(MissingExtra(
                "MEMPLANE_KEK_PROVIDER=aws-kms needs boto3, which is not installed; install "
                "it with: pip install 'memplane[s3]'"))
    storage_type = SCHEMES.get(split(settings.resolved_bucket_url).scheme)
    if storage_type is None:
        return  # the data plane explains an unknown scheme itself
    try:
        adapter_class(storage_type)
    except MissingExtra as exc:
        missing_extra(exc)


def uses_data_dir(settings: Settings, *, database_only: bool = False) -> bool:
    """Whether the command would keep its database (or bucket) in the data dir."""
    if settings.database_url is None:
        return True
    return not database_only and settings.default_bucket_url is None


def is_data_dir(path: Path) -> bool:
    return path.is_dir() and any((path / sign).exists() for sign in _SIGNS)


def claim_data_dir(path: Path) -> None:
    """Create the data dir (mode 0700) and mark it as memplane's."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    (path / MARKER).write_text("This directory holds a memplane control plane's data "
                               "(database, bucket, keys). Back it up; do not edit it.\n")


def check_data_dir(settings: Settings, *, create: bool = False,
                   database_only: bool = False) -> None:
    """Refuse to start on an empty database in a directory memplane did not create.

    ``create`` (``memplane serve``, or ``--init``) makes a new data dir instead."""
    if not uses_data_dir(settings, database_only=database_only):
        return
    path = settings.data_dir.resolve()
    if is_data_dir(path):
        return
    if create or WHERE.init:
        claim_data_dir(path)
        typer.echo(f"memplane: created a new data dir at {path}", err=True)
        return
    typer.echo(
        f"memplane: there is no memplane data dir at {path}, so this command would work on a "
        "new, empty database. Run it from the directory where `memplane serve` created "
        ".memplane, name the data dir with --data-dir PATH (before the command) or "
        "MEMPLANE_DATA_DIR, or pass --init to create a new one there.", err=True)
    raise typer.Exit(2)


def redact_url(url: str) -> str:
    """A URL fit for a log line: no password, no secret-looking query parameter."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name = user.split(":", 1)[0]
        netloc = f"{name}:***@{host}" if ":" in user else f"{name}@{host}"
    query = urlencode([(k, "***" if _SECRET.search(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*/:")
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


_SECRET = re.compile(r"pass|secret|token|key|sig|credential|auth", re.IGNORECASE)


def preflight(settings: Settings, *, must_be_migrated: bool, bucket: bool = False) -> None:
    """The database answers (and is migrated, if it must be) and, with ``bucket``, the
    default bucket takes a write; else one sentence and exit 2 (control_plane/preflight.py)."""
    from control_plane.preflight import Refused, check_database, check_default_bucket
    from storage_adapters.registry import MissingExtra

    try:
        check_database(settings, must_be_migrated=must_be_migrated)
        if bucket:
            check_default_bucket(settings)
    except MissingExtra as exc:
        missing_extra(exc)
    except Refused as exc:
        typer.echo(f"memplane: {exc}", err=True)
        raise typer.Exit(2) from None


def say_where(settings: Settings) -> None:
    """One line on stderr: which database and which default bucket this command uses."""
    line = (f"memplane: database {redact_url(settings.resolved_database_url)}; "
            f"bucket {redact_url(settings.resolved_bucket_url)}")
    typer.echo(line, err=True)


def open_runtime(settings: Settings) -> Runtime:
    """The runtime, or a sentence naming the extra to install when a driver is missing."""
    from control_plane.runtime import Runtime
    from storage_adapters.registry import MissingExtra

    check_backend(settings)
    try:
        return Runtime(settings)
    except MissingExtra as exc:
        missing_extra(exc)


@contextmanager
def _runtime(migrate: bool | None = None, *, database_only: bool = False,
             bucket: bool = False, upgrading: bool = False) -> Iterator[Runtime]:
    """``upgrading``: the caller migrates the database itself (``db upgrade``), so it need
    not be migrated yet and is not migrated on opening."""
    from storage_adapters.registry import MissingExtra

    settings = load_settings()
    check_data_dir(settings, database_only=database_only)
    preflight(settings, must_be_migrated=not upgrading and not (
        migrate if migrate is not None else settings.embedded), bucket=bucket)
    say_where(settings)
    runtime = open_runtime(settings)
    try:
        if migrate if migrate is not None else runtime.settings.embedded:
            runtime.migrate()
        yield runtime
    except MissingExtra as exc:  # a tenant's own bucket on a cloud whose extra is missing
        missing_extra(exc)
    finally:
        runtime.close()


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    workers: Annotated[int | None, typer.Option(
        min=1, envvar="MEMPLANE_WORKERS",
        help="Server processes sharing the port; default: the number of cores (one on "
             "SQLite). Migrations, the default tenant and the background work run once per "
             "host (docs/workers.md)."
    )] = None,
) -> None:
    """Run the HTTP API. With no configuration: SQLite and a local bucket in ./.memplane
    (created on the first start)."""
    import uvicorn

    from control_plane.app import create_app
    from control_plane.observability.json_logs import configure_logging
    from control_plane.workers import default_workers, limit_malloc_arenas
    from control_plane.workers import serve as serve_workers
    from storage_adapters.registry import MissingExtra

    limit_malloc_arenas()
    settings = load_settings()
    check_data_dir(settings, create=True)
    check_backend(settings)
    preflight(settings, must_be_migrated=not settings.embedded, bucket=True)
    say_where(settings)
    configure_logging(settings.log_level)
    count, why = (workers, None) if workers else default_workers(settings)
    if why:
        typer.echo(why, err=True)
    console.print(f"memplane serving on http://{host}:{port}  "
                  f"(database: {'embedded SQLite' if settings.embedded else 'external'}, "
                  f"data dir: {settings.data_dir.resolve()}, workers: {count})", soft_wrap=True)
    if count > 1:
        if WHERE.data_dir is not None:  # the worker processes read the environment
            os.environ["MEMPLANE_DATA_DIR"] = str(WHERE.data_dir)
        try:
            serve_workers(settings, host, port, count)
        except MissingExtra as exc:
            missing_extra(exc)
        return
    try:
        app = create_app(settings, background_process=True)
    except MissingExtra as exc:
        missing_extra(exc)
    uvicorn.run(app, host=host, port=port, access_log=False, log_config=None,
                timeout_keep_alive=settings.keep_alive_seconds)


def db_upgrade() -> None:
    """Apply every pending migration to the configured database."""
    from control_plane.db.migrate import applied_count

    with _runtime(migrate=False, database_only=True, upgrading=True) as runtime:
        before, total = applied_count(runtime.engine)
        runtime.migrate()
        after, _ = applied_count(runtime.engine)
        done = "up to date" if before == after else f"{after - before} applied"
        out.print(f"database migrations: {before} → {after} of {total} ({done})",
                  soft_wrap=True)


def keys_create(
    role: Annotated[str, typer.Option(help="admin, agent, compliance or user.")],
    name: Annotated[str, typer.Option(help="A label for the key.")] = "",
    tenant: Annotated[str | None, typer.Option(help="Tenant id; default: the first tenant.")]
    = None,
    scope: Annotated[list[str] | None, typer.Option(
        help="Agent keys: a scope/scope_ref the key may see (team/T123, user/*, tenant/-); "
             "repeat for several. Without it the key sees the whole tenant.")] = None,
    agent_id: Annotated[str | None, typer.Option(
        help="Agent keys: the agent id recorded on what the key writes and in the audit.")]
    = None,
    user_id: Annotated[str | None, typer.Option(
        help="User keys (required for them): the data subject whose memories alone the key "
             "reads, writes, searches and exports.")] = None,
) -> None:
    """Create an API key and print it once."""
    from sqlalchemy import select

    from control_plane.db.models import Tenant
    from control_plane.errors import DomainError
    from control_plane.identity import Caller
    from control_plane.tenants.service import create_api_key, ensure_bootstrap

    with _runtime() as runtime, runtime.sessions() as session:
        admin = runtime.settings.admin_key
        key_file = runtime.settings.bootstrap_key_file
        first_key = ensure_bootstrap(session, admin.get_secret_value() if admin else None,
                                     key_file=key_file)
        if first_key and key_file:
            console.print(f"created the default tenant; its admin key is in {key_file}")
        elif first_key:
            console.print("created the default tenant; its admin key, shown once:")
            typer.echo(first_key)
        query = select(Tenant).order_by(Tenant.created_at).limit(1)
        if tenant:
            query = select(Tenant).where(Tenant.id == _uuid(tenant, "tenant"))
        found = session.scalar(query)
        if found is None:
            raise typer.BadParameter("no such tenant", param_hint="--tenant")
        cli = Caller(found.id, uuid.UUID(int=0), "admin", False)
        grants = [_grant(g) for g in scope] if scope else None
        try:
            key, raw = create_api_key(session, cli, role, name or f"{role} key",
                                      scopes=grants, agent_id=agent_id, user_id=user_id)
        except DomainError as exc:
            raise typer.BadParameter(exc.detail, param_hint="--role") from None
        console.print(f"created {key.role} key {key.id} for tenant {found.id}; shown once:")
        typer.echo(raw)


def _grant(text: str) -> tuple[str, str]:
    """``scope/scope_ref`` (the ref may itself hold slashes) as a checked pair."""
    from control_plane.addresses import Scope

    name, slash, ref = text.partition("/")
    if not slash or not ref or name not in Scope.__members__:
        raise typer.BadParameter(f"{text!r} is not scope/scope_ref with scope one of "
                                 f"{', '.join(Scope.__members__)}", param_hint="--scope")
    return name, ref


def reconcile(
    grace_seconds: Annotated[float | None, typer.Option(
        help="Only settle rows and objects older than this; default from settings.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Limit to one tenant id.")] = None,
    gc: Annotated[bool, typer.Option(help="Also delete objects no pointer names.")] = True,
) -> None:
    """Settle pointers a crash left pending, report corrupt ones, collect orphan objects."""
    from control_plane.integrity.reconcile import collect_orphans
    from control_plane.integrity.reconcile import reconcile as run_reconcile

    tenant_id = _uuid(tenant, "tenant") if tenant else None
    with _runtime() as runtime, runtime.sessions() as session:
        grace = runtime.settings.reconcile_grace_seconds if grace_seconds is None else grace_seconds
        report = run_reconcile(session, runtime.plane, grace_seconds=grace, tenant_id=tenant_id,
                               settings=runtime.settings)
        table = Table(title="reconcile")
        table.add_column("what")
        table.add_column("count", justify="right")
        table.add_row("pending writes completed", str(report.writes_completed))
        table.add_row("pending writes rolled back", str(report.writes_rolled_back))
        table.add_row("pending deletes completed", str(report.deletes_completed))
        table.add_row("corrupt pointers", str(report.corrupt))
        if gc:
            orphans = collect_orphans(session, runtime.plane, grace_seconds=grace,
                                      tenant_id=tenant_id)
            table.add_row("objects scanned", str(orphans.scanned))
            table.add_row("orphan candidates marked", str(orphans.marked))
            table.add_row("orphan objects deleted", str(orphans.orphans_deleted))
            table.add_row("candidates named again (kept)", str(orphans.rescued))
            table.add_row("candidates in their grace period", str(orphans.waiting))
            table.add_row("young objects kept (grace)", str(orphans.young_kept))
            table.add_row("stale temporary files removed", str(orphans.temporaries_removed))
        console.print(table)
        for error in report.errors:
            console.print(f"[yellow]not settled:[/] {error}")
        if report.errors:
            raise typer.Exit(1)


def audit_verify(
    tenant: Annotated[str | None, typer.Option(help="Tenant id; default: every tenant.")]
    = None,
) -> None:
    """Seal pending audit rows, then recompute each tenant's chain and hold it to the signed
    checkpoints in its bucket; exit 1 if one is broken."""
    from sqlalchemy import select

    from control_plane.audit.service import seal, verify
    from control_plane.db.models import Tenant

    broken = False
    with _runtime() as runtime, runtime.sessions() as session:
        ids = ([_uuid(tenant, "tenant")] if tenant
               else list(session.scalars(select(Tenant.id).order_by(Tenant.created_at))))
        for tenant_id in ids:
            seal(session, tenant_id)
            result = verify(session, tenant_id, plane=runtime.plane,
                            settings=runtime.settings)
            broken |= not result.ok
            typer.echo(json.dumps({"tenant": str(tenant_id), **asdict(result)}))
    if broken:
        raise typer.Exit(1)


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a {what} id") from None
