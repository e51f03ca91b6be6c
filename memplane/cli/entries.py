"""``memplane entries create/get/update/delete/list``: one tenant's curated entries,
straight on the database and bucket the server uses (same ``MEMPLANE_*`` settings).

Each command runs the same service function as ``/v1/entries`` and is audited like it, with
the accessor ``system``/``cli:entries-<command>``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from .events import id_of, text_of
from .local import out
from .memory import TenantOpt, _session, validated

ScopeArg = Annotated[str, typer.Argument(
    help="institutional, entity, project, team (or any memory scope).")]
RefArg = Annotated[str, typer.Argument(help="Which entity, project, team … ('-' for "
                                            "institutional).")]
IdArg = Annotated[str, typer.Argument(help="The entry's id.")]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="A tag; repeat for several.")]
ImportanceOpt = Annotated[int | None, typer.Option(help="1 (trivial) to 5 (critical).")]
SourceOpt = Annotated[str | None, typer.Option(
    help="chat, call, email, manual or api (compactor is the compactor's alone).")]


def _echo_entry(pointer: Any, summary: str | None) -> None:
    from control_plane.entries.schemas import EntryOut

    entry = EntryOut.with_summary(pointer, summary)
    typer.echo(entry.model_dump_json(exclude=None if summary is not None else {"summary"}))


def entries_create(
    scope: ScopeArg, ref: RefArg,
    title: Annotated[str, typer.Argument(help="A short plain-text title.")],
    summary: Annotated[str, typer.Argument(help="The entry in Markdown; '-' reads stdin.")],
    tag: TagOpt = None, importance: ImportanceOpt = None, source: SourceOpt = None,
    user: Annotated[str | None, typer.Option(help="The data subject it is about.")] = None,
    agent: Annotated[str | None, typer.Option(help="The agent that wrote it.")] = None,
    tenant: TenantOpt = None,
) -> None:
    """Create an entry; prints its metadata as one JSON line."""
    from control_plane.entries import service
    from control_plane.entries.schemas import EntryIn

    spec = validated(EntryIn, scope=scope, scope_ref=ref, title=title,
                     summary=text_of(summary), tags=tag, importance=importance,
                     source=source, user_id=user, agent_id=agent)
    with _session(tenant, "create", "entries") as (session, plane, actor):
        pointer = service.create_entry(session, plane, actor, spec)
        _echo_entry(pointer, None)


def entries_get(entry_id: IdArg,
                as_json: Annotated[bool, typer.Option("--json", help="The entry and its "
                                                      "summary as one JSON object.")] = False,
                tenant: TenantOpt = None) -> None:
    """Print the entry's summary (verified against its SHA-256)."""
    from control_plane.entries import service

    entry_uuid = id_of(entry_id, "entry")
    with _session(tenant, "get", "entries") as (session, plane, actor):
        found = service.get_entry(session, plane, actor, entry_uuid)
    if as_json:
        _echo_entry(found.pointer, found.summary)
    else:
        typer.echo(found.summary)


def entries_update(
    entry_id: IdArg,
    title: Annotated[str | None, typer.Option(help="A new title.")] = None,
    summary: Annotated[str | None, typer.Option(help="A new summary; '-' reads stdin.")]
    = None,
    tag: TagOpt = None, importance: ImportanceOpt = None, source: SourceOpt = None,
    tenant: TenantOpt = None,
) -> None:
    """Change the options given; the others keep their value (the entry is read first)."""
    from control_plane.entries import service
    from control_plane.entries.schemas import EntryUpdate

    entry_uuid = id_of(entry_id, "entry")
    with _session(tenant, "update", "entries") as (session, plane, actor):
        current = service.get_entry(session, plane, actor, entry_uuid)
        pointer = current.pointer
        spec = validated(
            EntryUpdate, title=title if title is not None else pointer.title,
            summary=text_of(summary) if summary is not None else current.summary,
            tags=tag if tag is not None else list(pointer.tags or []),
            importance=importance if importance is not None else pointer.importance,
            source=source if source is not None else pointer.source)
        updated = service.update_entry(session, plane, actor, entry_uuid, spec)
        _echo_entry(updated, None)


def entries_delete(entry_id: IdArg, tenant: TenantOpt = None) -> None:
    """Delete the entry and its object."""
    from control_plane.entries import service

    entry_uuid = id_of(entry_id, "entry")
    with _session(tenant, "delete", "entries") as (session, plane, actor):
        service.delete_entry(session, plane, actor, entry_uuid)
    typer.echo(f"deleted entry {entry_uuid}")


def entries_list(
    scope: Annotated[str | None, typer.Option(help="Only this scope.")] = None,
    ref: Annotated[str | None, typer.Option(help="Only this scope ref (with --scope).")]
    = None,
    tag: Annotated[str | None, typer.Option(help="Only entries with this tag.")] = None,
    search: Annotated[str | None, typer.Option(
        help="Only entries whose title or summary hold all these words.")] = None,
    min_importance: Annotated[int | None, typer.Option(help="Only this important or more "
                                                            "(1 to 5).")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line, with "
                                          "the summary.")] = False,
    tenant: TenantOpt = None,
) -> None:
    """List entries; --json reads and includes each summary (verified, audited)."""
    from control_plane.addresses import Scope
    from control_plane.entries import service

    if scope is not None and scope not in Scope.__members__:
        raise typer.BadParameter(f"{scope!r} is not a scope; use one of "
                                 f"{', '.join(Scope.__members__)}", param_hint="--scope")
    rows: list[Any] = []
    with _session(tenant, "list", "entries") as (session, plane, actor):
        cursor = None
        while len(rows) < limit:
            page, cursor = service.list_entries(
                session, plane, actor, scope=scope, scope_ref=ref, tag=tag, search=search,
                min_importance=min_importance, cursor=cursor,
                limit=min(limit - len(rows), 100), include_summary=as_json)
            rows.extend(page)
            if cursor is None:
                break
    if as_json:
        for row in rows:
            _echo_entry(row.pointer, row.summary)
        return
    table = Table(title=f"entries ({len(rows)})")
    for column in ("scope", "ref", "title", "importance", "tags", "source", "updated"):
        table.add_column(column)
    table.add_column("id", no_wrap=True)  # whole, to be copied into get/update/delete
    for row in rows:
        p = row.pointer
        table.add_row(p.scope_type, p.scope_ref, p.title or "", str(p.importance or ""),
                      ", ".join(p.tags or []), p.source or "",
                      p.updated_at.isoformat(timespec="seconds"), str(p.id))
    out.print(table)
