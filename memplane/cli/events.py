"""``memplane events append/get/list``: the raw event log of one tenant, straight on the
database and bucket the server uses (same ``MEMPLANE_*`` settings).

Each command runs the same service function as ``/v1/events`` and is audited like it, with
the accessor ``system``/``cli:events-<command>``. There is no update or delete: only
erasure and retention remove events.
"""

from __future__ import annotations

import sys
import uuid
from typing import Annotated, Any

import typer
from rich.table import Table

from .local import out
from .memory import TenantOpt, _session, validated

ScopeArg = Annotated[str, typer.Argument(
    help="institutional, entity, project, team (or any memory scope).")]
RefArg = Annotated[str, typer.Argument(help="Which entity, project, team … ('-' for "
                                            "institutional).")]
IdArg = Annotated[str, typer.Argument(help="The event's id.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON instead of text.")]


def id_of(value: str, what: str) -> uuid.UUID:
    """The id as a UUID; anything else is a usage error."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an {what} id") from None


def text_of(value: str) -> str:
    """The argument, or standard input for ``-``."""
    return sys.stdin.read() if value == "-" else value


def events_append(
    scope: ScopeArg, ref: RefArg,
    kind: Annotated[str, typer.Argument(help="call_summary, decision, campaign_change, …")],
    body: Annotated[str, typer.Argument(help="The event in Markdown; '-' reads stdin.")],
    source: Annotated[str | None, typer.Option(help="Where it came from (default api).")]
    = None,
    source_ref: Annotated[str | None, typer.Option(help="The source's own id for it.")]
    = None,
    occurred_at: Annotated[str | None, typer.Option(
        help="When it happened, ISO 8601 with a timezone (default now).")] = None,
    user: Annotated[str | None, typer.Option(help="The data subject it is about.")] = None,
    agent: Annotated[str | None, typer.Option(help="The agent that wrote it.")] = None,
    tenant: TenantOpt = None,
) -> None:
    """Append an event to the log; prints its metadata as one JSON line."""
    from control_plane.events import service
    from control_plane.events.schemas import EventIn, EventOut

    spec = validated(EventIn, scope=scope, scope_ref=ref, kind=kind, body=text_of(body),
                     source=source, source_ref=source_ref, occurred_at=occurred_at,
                     user_id=user, agent_id=agent)
    with _session(tenant, "append", "events") as (session, plane, actor):
        event = service.append_event(session, plane, actor, spec)
        typer.echo(EventOut.of(event).model_dump_json())


def events_get(event_id: IdArg, as_json: JsonOpt = False, tenant: TenantOpt = None) -> None:
    """Print the event's body (verified against its SHA-256); with --json, the event and its
    body as one JSON object."""
    from control_plane.events import service
    from control_plane.events.schemas import EventOut, EventWithBodyOut

    event_uuid = id_of(event_id, "event")
    with _session(tenant, "get", "events") as (session, plane, actor):
        found = service.get_event(session, plane, actor, event_uuid)
    if as_json:
        typer.echo(EventWithBodyOut(**EventOut.of(found.event).model_dump(),
                                    body=found.body).model_dump_json())
    else:
        typer.echo(found.body)


def events_list(
    scope: Annotated[str | None, typer.Option(help="Only this scope.")] = None,
    ref: Annotated[str | None, typer.Option(help="Only this scope ref (with --scope).")]
    = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind.")] = None,
    since: Annotated[str | None, typer.Option(help="Occurred at or after (ISO 8601, with a "
                                                   "timezone).")] = None,
    until: Annotated[str | None, typer.Option(help="Occurred before (ISO 8601, with a "
                                                   "timezone).")] = None,
    include_compressed: Annotated[bool, typer.Option(
        "--include-compressed", help="Also events the compactor has summarised.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
    = False,
    tenant: TenantOpt = None,
) -> None:
    """List events, oldest first (metadata only: no bodies are read)."""
    from control_plane.events import service
    from control_plane.events.schemas import EventOut

    filters = _filters(scope=scope, since=since, until=until)
    rows: list[Any] = []
    with _session(tenant, "list", "events") as (session, _plane, actor):
        cursor = None
        while len(rows) < limit:
            page, cursor = service.list_events(
                session, actor, scope=filters["scope"], scope_ref=ref, kind=kind,
                since=filters["since"], until=filters["until"],
                include_compressed=include_compressed, cursor=cursor,
                limit=min(limit - len(rows), 100))
            rows.extend(page)
            if cursor is None:
                break
    if as_json:
        for row in rows:
            typer.echo(EventOut.of(row).model_dump_json())
        return
    table = Table(title=f"events ({len(rows)})")
    for column in ("occurred", "scope", "ref", "kind", "source", "compressed"):
        table.add_column(column)
    table.add_column("id", no_wrap=True)  # whole, to be copied into `events get`
    for row in rows:
        table.add_row(row.occurred_at.isoformat(timespec="seconds"), row.scope_type,
                      row.scope_ref, row.kind, row.source,
                      row.compressed_at.isoformat(timespec="seconds")
                      if row.compressed_at else "", str(row.id))
    out.print(table)


def _filters(**given: str | None) -> dict[str, Any]:
    """The list filters parsed as the API parses them: a scope name, aware datetimes."""
    from pydantic import AwareDatetime, BaseModel

    from control_plane.addresses import Scope

    class Filters(BaseModel):
        scope: Scope | None = None
        since: AwareDatetime | None = None
        until: AwareDatetime | None = None

    return dict(validated(Filters, **given))
