"""``memplane memory set/get/list/delete``: an operator's look at one tenant's memories,
straight on the database and bucket the server uses (same ``MEMPLANE_*`` settings).

Each call runs the same service function as the API and is audited like it, with the
accessor ``system``/``cli:memory-<command>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.table import Table

from control_plane.addresses import MEMORY_TYPES

from .local import _runtime, _uuid, out

if TYPE_CHECKING:
    from pydantic import BaseModel

    from control_plane.addresses import MemoryAddress
    from control_plane.identity import Actor

M = TypeVar("M", bound="BaseModel")
TYPE_HELP = (f"The memory type: {', '.join(MEMORY_TYPES)}, or a lower-case label of your own; "
             f"default by scope (preference for user, fact for most).")

ScopeArg = Annotated[str, typer.Argument(
    help="tenant, app, team, agent, user, conversation or entity.")]
RefArg = Annotated[str, typer.Argument(help="The scope ref, e.g. the user id ('-' for tenant).")]
KeyArg = Annotated[str, typer.Argument(help="The memory's key.")]
TenantOpt = Annotated[str | None, typer.Option(
    help="Tenant id; default: the first tenant (the embedded default's only one).")]


@contextmanager
def _session(tenant: str | None, command: str,
             group: str = "memory") -> Iterator[tuple[Any, Any, Actor]]:
    """Session, data plane and the operator's actor (``cli:<group>-<command>``) for the
    tenant; domain errors become a sentence and exit 1."""
    from sqlalchemy import select

    from control_plane.db.models import Tenant
    from control_plane.errors import DomainError
    from control_plane.identity import Actor

    with _runtime() as runtime, runtime.sessions() as session:
        query = select(Tenant.id).order_by(Tenant.created_at).limit(1)
        if tenant:
            query = select(Tenant.id).where(Tenant.id == _uuid(tenant, "tenant"))
        tenant_id = session.scalar(query)
        session.commit()
        if tenant_id is None:
            typer.echo("memplane: no such tenant" if tenant else
                       "memplane: this database has no tenant yet; start `memplane serve` "
                       "once to create the default one", err=True)
            raise typer.Exit(1)
        try:
            yield session, runtime.plane, Actor(tenant_id, "system", f"cli:{group}-{command}")
        except DomainError as exc:
            typer.echo(f"memplane: {exc.detail}", err=True)
            raise typer.Exit(1) from None


def validated(model: type[M], **fields: Any) -> M:
    """``model`` built from the options given (None left out, so the model's defaults apply);
    a refused value becomes a usage error naming the field, like a bad option."""
    from pydantic import ValidationError

    try:
        return model.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors())
        raise typer.BadParameter(problems) from None


def _address(scope: str, ref: str, key: str | None) -> MemoryAddress:
    from control_plane.addresses import MemoryAddress, Scope
    from control_plane.errors import DomainError

    if scope not in Scope.__members__:
        raise typer.BadParameter(f"{scope!r} is not a scope; use one of "
                                 f"{', '.join(Scope.__members__)}", param_hint="SCOPE")
    try:
        return MemoryAddress.parse(Scope(scope), ref, key)
    except DomainError as exc:
        raise typer.BadParameter(exc.detail) from None


def memory_set(
    scope: ScopeArg, ref: RefArg, key: KeyArg,
    value: Annotated[str, typer.Argument(help="A JSON value, e.g. '\"fr\"' or '{\"a\": 1}'.")],
    text: Annotated[bool, typer.Option("--text", help="Store VALUE as a string as given.")]
    = False,
    memory_type: Annotated[str | None, typer.Option("--type", help=TYPE_HELP)] = None,
    tag: Annotated[list[str] | None, typer.Option(help="A tag; repeat for several.")] = None,
    importance: Annotated[int | None, typer.Option(help="1 to 5.")] = None,
    ttl_days: Annotated[int | None, typer.Option(help="Expire after this many days.")] = None,
    tenant: TenantOpt = None,
) -> None:
    """Store a value at scope/ref/key, replacing what was there."""
    from pydantic import ValidationError

    from control_plane.memories import service
    from control_plane.memories.schemas import MemoryMeta

    address = _address(scope, ref, key)
    if text:
        parsed: Any = value
    else:
        try:
            parsed = json.loads(value)
        except ValueError:
            raise typer.BadParameter(
                f"{value!r} is not JSON; quote a string ('\"{value}\"') or pass --text",
                param_hint="VALUE") from None
    try:
        meta = MemoryMeta(memory_type=memory_type, tags=tag or None, importance=importance,
                          ttl_days=ttl_days)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors())
        raise typer.BadParameter(problems) from None
    with _session(tenant, "set") as (session, plane, actor):
        pointer = service.set_value(session, plane, actor, address, parsed, meta)
        typer.echo(json.dumps({"id": str(getattr(pointer, "id", "")),
                               "scope": address.scope, "scope_ref": address.scope_ref,
                               "key": address.key}))


def memory_get(scope: ScopeArg, ref: RefArg, key: KeyArg, tenant: TenantOpt = None) -> None:
    """Print the value at scope/ref/key as JSON (read from the bucket and verified)."""
    from control_plane.memories import service

    address = _address(scope, ref, key)
    with _session(tenant, "get") as (session, plane, actor):
        found = service.get_value(session, plane, actor, address)
        typer.echo(json.dumps(found.value, ensure_ascii=False))


def memory_list(
    scope: Annotated[str | None, typer.Option(help="Only this scope.")] = None,
    ref: Annotated[str | None, typer.Option(help="Only this scope ref (with --scope).")]
    = None,
    user: Annotated[str | None, typer.Option(help="Only memories about this user id.")]
    = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    tenant: TenantOpt = None,
) -> None:
    """List memories (pointers only: no values are read)."""
    from control_plane.addresses import Scope
    from control_plane.memories import service

    if scope is not None and scope not in Scope.__members__:
        raise typer.BadParameter(f"{scope!r} is not a scope; use one of "
                                 f"{', '.join(Scope.__members__)}", param_hint="--scope")
    canonical = Scope(scope).canonical if scope else None
    rows: list[Any] = []
    with _session(tenant, "list") as (session, _plane, actor):
        cursor = None
        while len(rows) < limit:
            page, cursor = service.list_pointers(
                session, actor, scope=canonical, scope_ref=ref, user_id=user, memory_type=None,
                sync_status=None, cursor=cursor, limit=min(limit - len(rows), 100))
            rows.extend(page)
            if cursor is None:
                break
    if as_json:
        for row in rows:
            typer.echo(json.dumps({"id": str(row.id), "scope": row.scope_type,
                                   "scope_ref": row.scope_ref, "key": row.key,
                                   "status": row.sync_status,
                                   "updated_at": row.updated_at.isoformat()}))
        return
    table = Table(title=f"memories ({len(rows)})")
    for column in ("scope", "ref", "key", "status", "updated"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.scope_type, row.scope_ref, row.key or "", row.sync_status,
                      row.updated_at.isoformat(timespec="seconds"))
    out.print(table)


def memory_delete(scope: ScopeArg, ref: RefArg, key: KeyArg, tenant: TenantOpt = None) -> None:
    """Delete the memory at scope/ref/key and its object."""
    from control_plane.memories import service

    address = _address(scope, ref, key)
    with _session(tenant, "delete") as (session, plane, actor):
        service.delete_value(session, plane, actor, address)
        typer.echo(f"deleted {address.describe()}")

