"""``memplane keys list`` and ``memplane keys revoke``: a tenant's API keys, on the database
directly (as ``keys create``), through the same service functions as ``GET /v1/api-keys``
and ``DELETE /v1/api-keys/{id}``, audited like them. A key's secret is never shown: only its
SHA-256 is stored."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from .local import _runtime, _uuid, console, out

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from control_plane.identity import Caller

TenantOption = Annotated[str | None, typer.Option(
    help="Tenant id; default: the first tenant.")]


def _admin_of(session: Session, tenant: str | None) -> Caller:
    from sqlalchemy import select

    from control_plane.db.models import Tenant
    from control_plane.identity import Caller

    query = select(Tenant).order_by(Tenant.created_at).limit(1)
    if tenant:
        query = select(Tenant).where(Tenant.id == _uuid(tenant, "tenant"))
    found = session.scalar(query)
    if found is None:
        if tenant:
            raise typer.BadParameter("no such tenant", param_hint="--tenant")
        console.print("memplane: this database has no tenant yet; start `memplane serve` "
                      "once to create the default one")
        raise typer.Exit(2)
    return Caller(found.id, uuid.UUID(int=0), "admin", False)


def keys_list(
    tenant: TenantOption = None,
    include_revoked: Annotated[bool, typer.Option(
        "--include-revoked", help="Also list revoked keys.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
    = False,
) -> None:
    """List a tenant's API keys: id, prefix, role, name, scopes, created, last used."""
    from control_plane.tenants.service import list_api_keys

    with _runtime() as runtime, runtime.sessions() as session:
        keys = list_api_keys(session, _admin_of(session, tenant),
                             include_revoked=include_revoked)
        rows: list[dict[str, Any]] = [{
            "id": str(k.id), "prefix": k.prefix, "role": k.role, "name": k.name,
            "scopes": None if k.scopes is None
            else [f"{g['scope']}/{g['scope_ref']}" for g in k.scopes],
            "agent_id": k.agent_id, "created_at": k.created_at.isoformat(),
            "last_used_at": k.last_used_at.isoformat() if k.last_used_at else None,
            "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
        } for k in keys]
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    table = Table()
    table.add_column("id", no_wrap=True)  # whole: it is what `keys revoke` takes
    for column in ("prefix", "role", "name", "scopes", "created", "last used"):
        table.add_column(column)
    for row in rows:
        table.add_row(str(row["id"]), f"{row['prefix']}…", str(row["role"]), str(row["name"]),
                      "whole tenant" if row["scopes"] is None else ", ".join(row["scopes"]),
                      str(row["created_at"])[:16], str(row["last_used_at"] or "never")[:16])
    out.print(table)


def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `memplane keys list`).")],
    tenant: TenantOption = None,
) -> None:
    """Revoke an API key: it stops working at once (within MEMPLANE_AUTH_CACHE_SECONDS on
    running servers)."""
    from control_plane.errors import DomainError
    from control_plane.tenants.service import revoke_api_key

    with _runtime() as runtime, runtime.sessions() as session:
        try:
            revoke_api_key(session, _admin_of(session, tenant), _uuid(key_id, "key"))
        except DomainError as exc:
            console.print(f"memplane: {exc.detail}")
            raise typer.Exit(1) from None
    console.print(f"revoked key {key_id}")
