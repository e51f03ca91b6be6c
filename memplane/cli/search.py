"""``memplane search "query"``: the most relevant memories, entries and knowledge chunks,
from a server through the SDK (``--url``/``--api-key`` or ``MEMPLANE_URL`` and
``MEMPLANE_API_KEY``; a key with role agent, admin or compliance)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from .compliance import Url, _client, out

SearchKey = Annotated[
    str | None, typer.Option("--api-key", envvar="MEMPLANE_API_KEY",
                             help="An API key with role agent, admin or compliance.")]


def search(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    url: Url = None, api_key: SearchKey = None,
    scope: Annotated[str | None, typer.Option(help="Only this scope (user, agent, team, "
                                                   "…); default: every scope.")] = None,
    scope_ref: Annotated[str | None, typer.Option(help="Only this scope ref (needs "
                                                       "--scope).")] = None,
    user_id: Annotated[str | None, typer.Option(help="Only memories about this data "
                                                     "subject.")] = None,
    memory_type: Annotated[str | None, typer.Option(help="Only this memory type, e.g. "
                                                         "knowledge or entry.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Only memories with this tag "
                                                       "(repeat for several).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=100, help="How many results.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per result, "
                                                         "with its value.")] = False,
) -> None:
    """Search a tenant's memories on a server: vector and keyword rankings fused, each
    value verified against its SHA-256."""
    with _client(url, api_key) as client:
        found = client.memory.search(query, scope=scope, scope_ref=scope_ref,
                                     user_id=user_id, memory_type=memory_type, tags=tag,
                                     limit=limit)
    if as_json:
        for hit in found.results:
            typer.echo(hit.model_dump_json())
        return
    table = Table(title=f"{len(found.results)} results ({found.embedder}, "
                        f"{found.took_ms:.1f} ms)")
    for column in ("score", "kind", "scope", "key / title", "value"):
        table.add_column(column)
    for hit in found.results:
        value = hit.value if isinstance(hit.value, str) else json.dumps(hit.value,
                                                                       ensure_ascii=False)
        table.add_row(f"{hit.score:.4f}", hit.kind, f"{hit.scope}/{hit.scope_ref}",
                      hit.key or hit.title or hit.pointer_id,
                      value if len(value) <= 120 else value[:117] + "...")
    out.print(table)
