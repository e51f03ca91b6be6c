"""``memplane storage configs …`` and ``memplane agents …``: a tenant's named storage
configurations and its agents' memory settings, straight on the database the server uses
(same ``MEMPLANE_*`` settings).

Each command runs the same service function as ``/v1/storage/configs`` or ``/v1/agents``
and is audited like it, with the accessor ``system``/``cli:<group>-<command>``. Output is
one JSON object per line; secrets are never printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .local import load_settings
from .memory import TenantOpt, _session, validated

if TYPE_CHECKING:
    from control_plane.identity import Actor

ConfigArg = Annotated[str, typer.Argument(help="The configuration's id, 'sc_…'.")]
AgentArg = Annotated[str, typer.Argument(help="The agent's id.")]


@contextmanager
def _configs(tenant: str | None, command: str) -> Iterator[tuple[Any, Any, Actor]]:
    with _session(tenant, command, "storage-configs") as found:
        yield found


def _echo(model: Any) -> None:
    typer.echo(model.model_dump_json())


def configs_list(tenant: TenantOpt = None) -> None:
    """Print the tenant's storage configurations (the default first), one JSON line each."""
    from control_plane.storage_config import named

    with _configs(tenant, "list") as (session, plane, actor):
        for config in named.list_configs(session, plane, actor).items:
            _echo(config)


def configs_show(config_id: ConfigArg, tenant: TenantOpt = None) -> None:
    """Print one configuration as JSON, without secrets."""
    from control_plane.storage_config import named

    with _configs(tenant, "show") as (session, plane, actor):
        _echo(named.get_config(session, plane, actor, config_id))


def configs_create(
    name: Annotated[str, typer.Argument(help="A name, unique among the tenant's.")],
    storage_type: Annotated[str, typer.Option("--type", help="s3, gcs, azure or local.")],
    connection: Annotated[str, typer.Option(
        "--config", help="The connection_config as JSON (bucket, region, credentials…); "
                         "'-' reads it from stdin so secrets stay out of the shell history.")],
    make_default: Annotated[bool, typer.Option(
        "--default", help="Make it the tenant's default at once.")] = False,
    tenant: TenantOpt = None,
) -> None:
    """Probe a bucket, check its region, and save it as a named configuration."""
    from pydantic import TypeAdapter, ValidationError

    from control_plane.storage_config import named
    from control_plane.storage_config.schemas import NamedStorageConfigIn

    text = typer.get_text_stream("stdin").read() if connection == "-" else connection
    try:
        config = json.loads(text)
    except ValueError:
        raise typer.BadParameter("--config must be a JSON object", param_hint="--config") \
            from None
    try:
        body = TypeAdapter(NamedStorageConfigIn).validate_python(
            {"name": name, "storage_type": storage_type, "connection_config": config,
             "make_default": make_default})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors())
        raise typer.BadParameter(problems) from None
    settings = load_settings()
    with _configs(tenant, "create") as (session, plane, actor):
        _echo(named.create(session, plane, actor, body,
                           allow_local=settings.local_storage_allowed,
                           local_roots=settings.allowed_local_roots))


def configs_rename(config_id: ConfigArg,
                   name: Annotated[str, typer.Argument(help="The new name.")],
                   tenant: TenantOpt = None) -> None:
    """Rename a configuration."""
    from control_plane.storage_config import named
    from control_plane.storage_config.schemas import StorageConfigRename

    body = validated(StorageConfigRename, name=name)
    with _configs(tenant, "rename") as (session, plane, actor):
        _echo(named.rename(session, plane, actor, config_id, body))


def configs_default(config_id: ConfigArg, tenant: TenantOpt = None) -> None:
    """Make a configuration the tenant's default (where new memories go)."""
    from control_plane.storage_config import named

    with _configs(tenant, "default") as (session, plane, actor):
        _echo(named.make_default(session, plane, actor, config_id))


def configs_delete(config_id: ConfigArg, tenant: TenantOpt = None) -> None:
    """Delete a configuration nothing lives in (refused, with the count, otherwise)."""
    from control_plane.storage_config import named

    with _configs(tenant, "delete") as (session, plane, actor):
        named.delete(session, plane, actor, config_id)
        typer.echo(f"deleted {config_id}")


def agents_set(
    agent_id: AgentArg,
    name: Annotated[str | None, typer.Option(help="A display name.")] = None,
    user_memory: Annotated[bool, typer.Option(
        "--user-memory/--no-user-memory", help="Whether the agent may write user "
        "memories.")] = True,
    retention: Annotated[str | None, typer.Option(
        help="How long its user memories are kept, e.g. 90d.")] = None,
    storage_config: Annotated[str | None, typer.Option(
        help="The configuration ('sc_…') its user memories go to; default: the tenant's "
             "default.")] = None,
    tenant: TenantOpt = None,
) -> None:
    """Create or replace an agent's settings (what is left out takes its default)."""
    from control_plane.agents import service
    from control_plane.agents.schemas import AgentIn

    body = validated(AgentIn, name=name, memory={"user_memory": {
        k: v for k, v in {"enabled": user_memory, "retention": retention,
                          "storage_config_id": storage_config}.items() if v is not None}})
    with _session(tenant, "set", "agents") as (session, plane, actor):
        _echo(service.put_agent(session, plane, actor, agent_id, body))


def agents_get(agent_id: AgentArg, tenant: TenantOpt = None) -> None:
    """Print an agent's settings as JSON."""
    from control_plane.agents import service

    with _session(tenant, "get", "agents") as (session, _plane, actor):
        _echo(service.get_agent(session, actor, agent_id))


def agents_list(tenant: TenantOpt = None) -> None:
    """Print every agent's settings, one JSON line each."""
    from control_plane.agents import service

    with _session(tenant, "list", "agents") as (session, _plane, actor):
        cursor = None
        while True:
            page = service.list_agents(session, actor, limit=1000, cursor=cursor)
            for agent in page.items:
                _echo(agent)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor


def agents_delete(agent_id: AgentArg, tenant: TenantOpt = None) -> None:
    """Forget an agent's settings; its memories stay where they are."""
    from control_plane.agents import service

    with _session(tenant, "delete", "agents") as (session, plane, actor):
        service.delete_agent(session, plane, actor, agent_id)
        typer.echo(f"deleted agent {agent_id}")
