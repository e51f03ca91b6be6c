"""``memplane conversations add/show/context``: one tenant's conversations, straight on the
database and bucket the server uses (same ``MEMPLANE_*`` settings).

Each command runs the same service function as ``/v1/conversations`` and is audited like
it, with the accessor ``system``/``cli:conversations-<command>``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .events import text_of
from .local import load_settings
from .memory import TenantOpt, _session, validated

ConvArg = Annotated[str, typer.Argument(help="The conversation's id.")]


def conversations_add(
    conversation: ConvArg,
    role: Annotated[str, typer.Argument(help="system, user, assistant or tool.")],
    content: Annotated[str, typer.Argument(help="The message; '-' reads stdin.")],
    user: Annotated[str | None, typer.Option(help="The conversation's data subject.")] = None,
    agent: Annotated[str | None, typer.Option(help="The agent taking part.")] = None,
    model: Annotated[str | None, typer.Option(help="The model whose tokenizer counts "
                                              "(first message only; default gpt-4o).")]
    = None,
    limit: Annotated[int | None, typer.Option(help="The context window limit in tokens.")]
    = None,
    tenant: TenantOpt = None,
) -> None:
    """Add a message; prints its seq, tokens and the conversation's state as one JSON line."""
    from pydantic import ValidationError

    from control_plane.conversations import service
    from control_plane.conversations.schemas import MessageIn

    fields = {"role": role, "content": text_of(content), "user_id": user, "agent_id": agent,
              "model": model, "context_window_limit": limit}
    # (not ``validated``: its first parameter is called ``model`` too)
    try:
        spec = MessageIn.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                           for e in exc.errors())) from None
    with _session(tenant, "add", "conversations") as (session, plane, actor):
        added = service.add_message(session, plane, load_settings(), actor,
                                    conversation, spec)
    typer.echo(added.model_dump_json())  # type: ignore[union-attr]


def conversations_show(
    conversation: ConvArg,
    messages: Annotated[bool, typer.Option("--messages", help="Also print every message "
                                           "(read from the bucket, verified).")] = False,
    tenant: TenantOpt = None,
) -> None:
    """Print the conversation's state as one JSON line (and its messages, one per line)."""
    from control_plane.conversations import service

    with _session(tenant, "show", "conversations") as (session, plane, actor):
        state = service.get_state(session, load_settings(), actor, conversation)
        typer.echo(state.model_dump_json())
        cursor = None
        while messages:
            page, cursor = service.list_messages(session, plane, actor, conversation,
                                                 cursor=cursor)
            for message in page:
                typer.echo(message.model_dump_json())
            messages = cursor is not None


def conversations_context(
    conversation: ConvArg,
    message: Annotated[str, typer.Option(help="The current message; '-' reads stdin.")],
    budget: Annotated[int, typer.Option(help="The token budget of the window.")],
    system: Annotated[str, typer.Option(help="The system prompt.")] = "",
    scope: Annotated[list[str] | None, typer.Option(
        help="A memory scope as scope:scope_ref (e.g. user:u-42); repeat for several.")]
    = None,
    tenant: TenantOpt = None,
) -> None:
    """Assemble the context window; prints it and its report as one JSON object."""
    from control_plane.conversations import context
    from control_plane.conversations.schemas import ContextIn

    scopes = []
    for item in scope or []:
        name, sep, ref = item.partition(":")
        if not sep:
            raise typer.BadParameter(f"{item!r} is not scope:scope_ref (e.g. user:u-42)",
                                     param_hint="--scope")
        scopes.append({"scope": name, "scope_ref": ref})
    spec = validated(ContextIn, system_prompt=system, message=text_of(message),
                     token_budget=budget, memory_scopes=scopes or None)
    with _session(tenant, "context", "conversations") as (session, plane, actor):
        window = context.assemble(session, plane, load_settings(), actor,
                                  conversation, spec)
    typer.echo(window.model_dump_json())
