"""``memplane compact``: run the compactor now, in this process, on the configured database
and buckets (the same ``MEMPLANE_*`` settings as the server)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .local import _runtime, _uuid


def compact(
    tenant: Annotated[str | None, typer.Option(
        help="Tenant id; default: every tenant with uncompressed events.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only count what would be compacted; write nothing.")] = False,
) -> None:
    """Compact old raw events into curated entries now (what the daily job does): each
    (scope, scope ref) with enough uncompressed events older than the tenant's threshold
    becomes one entry (source compactor), its events marked compressed. Prints one JSON line
    of counts per tenant. Safe beside running workers and safe to rerun: no event is ever
    summarised twice."""
    from control_plane.compactor import service as compactor
    from control_plane.errors import DomainError
    from control_plane.identity import Actor

    wanted = _uuid(tenant, "tenant") if tenant else None
    with _runtime() as runtime, runtime.sessions() as session:
        tenants = compactor.tenant_ids(session, wanted)
        session.rollback()
        if wanted is not None and not tenants:
            typer.echo(f"memplane: no tenant {wanted}", err=True)
            raise typer.Exit(1)
        failed = 0
        for tenant_id in tenants:
            try:
                counts = compactor.compact_tenant(
                    session, runtime.plane, runtime.settings, tenant_id,
                    actor=Actor(tenant_id, "system", "cli:compact"), dry_run=dry_run)
            except DomainError as exc:
                typer.echo(f"memplane: tenant {tenant_id}: {exc.detail}", err=True)
                raise typer.Exit(1) from None
            failed += counts.failed_buckets
            typer.echo(json.dumps({"tenant": str(tenant_id), **counts.as_dict()}))
        if failed:
            typer.echo(f"memplane: {failed} bucket(s) could not be summarised; they are "
                       "retried on the next run", err=True)
