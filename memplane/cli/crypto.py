"""Key rotation, KEK retirement and the integrity sweep, run directly on the database and
buckets the server uses (same ``MEMPLANE_*`` settings), with no server needed."""

from __future__ import annotations

import json
import uuid
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from .local import _runtime, _uuid, console


def _tenants(session, tenant: str | None) -> list[uuid.UUID]:  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    from control_plane.db.models import Tenant

    if tenant:
        found = session.get(Tenant, _uuid(tenant, "tenant"))
        if found is None:
            raise typer.BadParameter(f"no tenant {tenant}", param_hint="--tenant")
        return [found.id]
    ids = list(session.scalars(select(Tenant.id).order_by(Tenant.created_at)))
    session.commit()
    return ids


def _cli_actor(tenant_id: uuid.UUID, what: str):  # type: ignore[no-untyped-def]
    from control_plane.identity import Actor

    return Actor(tenant_id, "system", f"cli:{what}")


def keys_rotate(
    tenant: Annotated[str | None, typer.Option(help="Tenant id; default: every tenant.")]
    = None,
    key_ref: Annotated[str | None, typer.Option(
        help="For a KMS: the key to move to (id, ARN or alias).")] = None,
) -> None:
    """Move tenants to a new KEK version by re-wrapping their subject keys (no content moves).

    Reads and writes keep working while it runs; rerun it to finish an interrupted rotation.
    """
    from control_plane.errors import DomainError
    from control_plane.keys.rotation import rotate_kek

    with _runtime() as runtime, runtime.sessions() as session:
        ring = runtime.plane.keys
        assert ring is not None
        for tenant_id in _tenants(session, tenant):
            try:
                report = rotate_kek(session, ring, _cli_actor(tenant_id, "keys-rotate"),
                                    key_ref=key_ref)
            except DomainError as exc:
                raise typer.BadParameter(exc.detail) from None
            typer.echo(json.dumps({"tenant": str(tenant_id), "from": report.from_versions,
                                   "to": report.to_version, "provider": report.provider,
                                   "rewrapped": report.rewrapped}))


def keys_retire(
    tenant: Annotated[str | None, typer.Option(help="Tenant id; default: every tenant.")]
    = None,
) -> None:
    """Retire old KEK versions that no subject key is wrapped by any more."""
    from control_plane.keys.rotation import retire_keks

    with _runtime() as runtime, runtime.sessions() as session:
        ring = runtime.plane.keys
        assert ring is not None
        for tenant_id in _tenants(session, tenant):
            report = retire_keks(session, ring, _cli_actor(tenant_id, "keys-retire"))
            typer.echo(json.dumps({"tenant": str(tenant_id), "retired": report.retired,
                                   "in_use": report.in_use, "current": report.current}))


def verify(
    tenant: Annotated[str | None, typer.Option(help="Tenant id; default: every tenant.")]
    = None,
) -> None:
    """Re-read, decrypt and hash every object; report missing, corrupt and orphaned ones.

    Corrupt and missing pointers are marked corrupt and audited. Exit 1 if any was found.
    """
    from control_plane.integrity.service import verify_tenant

    dirty = False
    with _runtime() as runtime, runtime.sessions() as session:
        for tenant_id in _tenants(session, tenant):
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console, transient=True) as bar:
                task = bar.add_task(f"verifying {tenant_id}", total=None)

                def advance(done: int, total: int, bar: Progress = bar,
                            task: TaskID = task) -> None:
                    bar.update(task, completed=done, total=total)

                report = verify_tenant(session, runtime.plane,
                                       _cli_actor(tenant_id, "verify"), progress=advance)
            dirty |= not report.clean
            table = Table(title=f"integrity of tenant {tenant_id}")
            table.add_column("what")
            table.add_column("count", justify="right")
            for label, value in (("objects checked", report.checked), ("intact", report.ok),
                                 ("missing", report.missing), ("corrupt", report.corrupt),
                                 ("restored", report.restored),
                                 ("objects in bucket", report.objects),
                                 ("orphaned objects", report.orphaned)):
                table.add_row(label, str(value))
            console.print(table)
            for problem in report.problems:
                console.print(f"[red]{problem.kind}[/] {problem.pointer_id} "
                              f"{problem.scope}/{problem.scope_ref} key={problem.key}: "
                              f"{problem.reason}")
            typer.echo(json.dumps({"tenant": str(tenant_id), "clean": report.clean,
                                   "checked": report.checked, "ok": report.ok,
                                   "missing": report.missing, "corrupt": report.corrupt,
                                   "restored": report.restored, "orphaned": report.orphaned}))
    if dirty:
        raise typer.Exit(1)
