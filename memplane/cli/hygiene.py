"""``memplane retention run|policies``, ``memplane cleanup`` and ``memplane holds
list|place|lift``: memory hygiene of one tenant, straight on the database and buckets the
server uses (same ``MEMPLANE_*`` settings), through the same service functions as the API
and audited like them (accessor ``system``/``cli:<group>-<command>``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from .memory import TenantOpt, _session, validated

JsonOpt = Annotated[bool, typer.Option("--json", help="JSON instead of text.")]


def _days(value: str, option: str) -> int:
    from memplane._hygiene import parse_days

    try:
        return parse_days(value, option)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"--{option}") from None


def retention_run(
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only count what is due; delete and archive nothing.")] = False,
    tenant: TenantOpt = None,
) -> None:
    """Apply the tenant's retention policies and purge its expired ttl_days memories now
    (what the daily job does): what is due and not held is deleted on both planes with every
    object version, one audit row each. Prints the counts per policy as one JSON line. Safe
    to rerun: what is gone is not counted again."""
    from control_plane.retention import sweep

    with _session(tenant, "run", group="retention") as (session, plane, actor):
        result = sweep.run_tenant(session, plane, actor.tenant_id, actor=actor,
                                  dry_run=dry_run)
    typer.echo(json.dumps({"tenant": str(actor.tenant_id), **result}))


def retention_policies(tenant: TenantOpt = None) -> None:
    """List the tenant's retention policies, one JSON line each."""
    from control_plane.retention import policies
    from control_plane.retention.schemas import PolicyOut

    with _session(tenant, "policies", group="retention") as (session, _plane, actor):
        for policy in policies.list_policies(session, actor):
            typer.echo(PolicyOut.of(policy).model_dump_json())


def cleanup(
    older_than: Annotated[str, typer.Option(
        "--older-than", help="Delete memories last written this long ago or more: 180d, "
        "26w, 1y or a number of days.")],
    agent: Annotated[str | None, typer.Option(help="Only memories this agent wrote.")] = None,
    scope: Annotated[str | None, typer.Option(help="Only this scope.")] = None,
    ref: Annotated[str | None, typer.Option(help="Only this scope ref (with --scope).")]
    = None,
    exclude_key: Annotated[list[str] | None, typer.Option(
        "--exclude-key", help="A key to keep whatever its age (repeat the option).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only list what would go; delete nothing.")] = False,
    tenant: TenantOpt = None,
) -> None:
    """Delete old memories by key (except excluded keys and held ones); prints the counts as
    one JSON line (a dry run adds what would go). A cleanup of more than 1,000 memories is
    queued as a job, which a worker runs; its id is printed."""
    from control_plane.retention import cleanup as cleanup_service
    from control_plane.retention.schemas import CleanupIn, CleanupOut

    body = validated(CleanupIn, scope=scope, scope_ref=ref, agent_id=agent,
                     older_than_days=_days(older_than, "older-than"),
                     exclude_keys=exclude_key or None, dry_run=dry_run)
    with _session(tenant, "run", group="cleanup") as (session, plane, actor):
        result = cleanup_service.cleanup(session, plane, actor, body)
        answer: dict[str, Any] = (result.as_dict() if isinstance(result, CleanupOut)
                                  else {"job_id": str(result.id), "state": result.state})
    typer.echo(json.dumps(answer, default=str))


def holds_list(tenant: TenantOpt = None) -> None:
    """List the tenant's legal holds (active and lifted), one JSON line each."""
    from control_plane.holds import service
    from control_plane.holds.schemas import HoldOut

    with _session(tenant, "list", group="holds") as (session, _plane, actor):
        for hold in service.list_holds(session, actor):
            typer.echo(HoldOut.of(hold).model_dump_json())


def holds_place(
    reason: Annotated[str, typer.Option(
        help="litigation, regulatory, investigation, audit or other.")],
    user: Annotated[str | None, typer.Option(help="Hold this data subject.")] = None,
    scope: Annotated[str | None, typer.Option(help="Hold a scope ref (with --ref).")] = None,
    ref: Annotated[str | None, typer.Option(help="The scope ref to hold.")] = None,
    whole_tenant: Annotated[bool, typer.Option(
        "--whole-tenant", help="Hold the whole tenant.")] = False,
    tenant: TenantOpt = None,
) -> None:
    """Place a legal hold; prints it as one JSON line."""
    from control_plane.holds import service
    from control_plane.holds.schemas import HoldIn, HoldOut

    body = validated(HoldIn, reason=reason, user_id=user, scope=scope, scope_ref=ref,
                     tenant=whole_tenant or None)
    with _session(tenant, "place", group="holds") as (session, _plane, actor):
        hold = service.place(session, actor, body)
        assert not isinstance(hold, service.Replay)
        typer.echo(HoldOut.of(hold).model_dump_json())


def holds_lift(
    hold_id: Annotated[str, typer.Argument(help="The hold's id (lh_…).")],
    tenant: TenantOpt = None,
) -> None:
    """Lift a legal hold (audited); prints it as one JSON line."""
    from control_plane.holds import service
    from control_plane.holds.schemas import HoldOut

    with _session(tenant, "lift", group="holds") as (session, plane, actor):
        lifted = service.lift(session, actor, hold_id, credentials=plane.credentials)
        typer.echo(HoldOut.of(lifted).model_dump_json())
