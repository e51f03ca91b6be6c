"""``memplane knowledge add/list/delete``: an agent's knowledge documents, straight on the
database and bucket the server uses (same ``MEMPLANE_*`` settings).

Each command runs the same service function as ``/v1/knowledge`` and is audited like it,
with the accessor ``system``/``cli:knowledge-<command>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .events import text_of
from .local import out
from .memory import TenantOpt, _session, validated

AgentArg = Annotated[str, typer.Argument(help="The agent whose knowledge it is.")]


def knowledge_add(
    agent: AgentArg,
    files: Annotated[list[str], typer.Argument(help="Text files, one document each; '-' "
                                                    "reads stdin.")],
    title: Annotated[str | None, typer.Option(help="The title (one file only); default: "
                                                   "the file's name without extension.")]
    = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object stored with every "
                                                      "chunk of every document.")] = None,
    idempotency_key: Annotated[str | None, typer.Option(
        "--idempotency-key", help="Makes a retry write only what is missing.")] = None,
    tenant: TenantOpt = None,
) -> None:
    """Chunk and store documents (800 characters, 100 of overlap); prints the document ids
    as one JSON line."""
    from control_plane.idempotency import Idempotency
    from control_plane.knowledge import service
    from control_plane.knowledge.schemas import KnowledgeIn

    if title is not None and len(files) != 1:
        raise typer.BadParameter("--title names one document; give one file or leave it "
                                 "out", param_hint="--title")
    extra: Any = {}
    if metadata is not None:
        try:
            extra = json.loads(metadata)
        except ValueError:
            raise typer.BadParameter("not JSON; give an object like '{\"source\": "
                                     "\"handbook\"}'", param_hint="--metadata") from None
    documents = []
    for name in files:
        try:
            content = text_of(name) if name == "-" else Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise typer.BadParameter(f"cannot read {name}: {exc.__class__.__name__}",
                                     param_hint="FILES") from None
        documents.append({"title": title or ("stdin" if name == "-" else Path(name).stem),
                          "content": content, "metadata": extra})
    spec = validated(KnowledgeIn, agent_id=agent, documents=documents)
    idem = Idempotency.of(idempotency_key, "POST", "/v1/knowledge", spec.model_dump_json())
    with _session(tenant, "add", "knowledge") as (session, plane, actor):
        added = service.add(session, plane, actor, spec, idem)
    typer.echo(added.model_dump_json())


def knowledge_list(
    agent: AgentArg,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
    = False,
    tenant: TenantOpt = None,
) -> None:
    """List the agent's documents."""
    from control_plane.knowledge import service

    rows: list[Any] = []
    with _session(tenant, "list", "knowledge") as (session, _plane, actor):
        cursor = None
        while True:
            page = service.list_documents(session, actor, agent, cursor=cursor, limit=1000)
            rows.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
    if as_json:
        for row in rows:
            typer.echo(row.model_dump_json())
        return
    table = Table(title=f"knowledge of {agent} ({len(rows)})")
    for column in ("title", "chunks", "bytes", "added"):
        table.add_column(column)
    table.add_column("id", no_wrap=True)
    for row in rows:
        table.add_row(row.title or "", str(row.chunk_count), str(row.size),
                      row.created_at.isoformat(timespec="seconds"), row.document_id)
    out.print(table)


def knowledge_delete(
    document_id: Annotated[str, typer.Argument(help="The document's id (doc_…).")],
    tenant: TenantOpt = None,
) -> None:
    """Delete a document and all its chunks."""
    from control_plane.knowledge import service

    with _session(tenant, "delete", "knowledge") as (session, plane, actor):
        gone = service.delete_document(session, plane, actor, document_id)
    typer.echo(f"deleted {gone.document_id} ({gone.deleted_chunks} chunks)")
