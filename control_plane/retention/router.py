from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response
from fastapi.responses import JSONResponse

from ..deps import AdminCaller, ComplianceCaller, PlaneDep, SessionDep, WriterCaller
from ..jobs.schemas import JobOut
from . import cleanup as cleanup_service
from . import policies, schedule
from .schemas import CleanupIn, CleanupOut, PolicyIn, PolicyOut, PolicyPage, RetentionRunIn

router = APIRouter(tags=["retention"])


@router.put("/v1/retention-policies", response_model=PolicyOut)
def put_policy(body: PolicyIn, caller: AdminCaller, session: SessionDep) -> PolicyOut:
    """Create or replace the retention policy of a scope and memory type (admin). The daily
    run (and POST /v1/retention/run) deletes what is due with every object version, or only
    reports it without `auto_delete`; lists stop showing due items at once."""
    return PolicyOut.of(policies.put_policy(session, caller.actor, body))


@router.get("/v1/retention-policies", response_model=PolicyPage)
def list_policies(caller: ComplianceCaller, session: SessionDep) -> PolicyPage:
    """The tenant's retention policies (admin or compliance)."""
    return PolicyPage(items=[PolicyOut.of(p)
                             for p in policies.list_policies(session, caller.actor)])


@router.delete("/v1/retention-policies/{policy_id}", status_code=204)
def delete_policy(policy_id: Annotated[uuid.UUID, Path(description="The policy's id.")],
                  caller: AdminCaller, session: SessionDep) -> Response:
    """Delete a retention policy (admin); what it governed is kept from now on."""
    policies.delete_policy(session, caller.actor, policy_id)
    return Response(status_code=204)


@router.post("/v1/retention/run", response_model=JobOut, status_code=202)
def run_retention(caller: AdminCaller, session: SessionDep,
                  body: Annotated[RetentionRunIn | None, Body()] = None) -> Any:
    """Apply the retention policies and purge expired `ttl_days` memories now (admin): a job
    (202) whose result counts, per policy, what was due, deleted, held and archived; with
    `dry_run` it only counts. Poll GET /v1/jobs/{id}."""
    return schedule.start_run(session, caller.actor, body or RetentionRunIn())


@router.post("/v1/cleanup", response_model=CleanupOut,
             responses={202: {"model": JobOut, "description": "More than 1,000 memories "
                              "would go: the cleanup runs as a job."}})
def cleanup(body: CleanupIn, caller: WriterCaller, session: SessionDep,
            plane: PlaneDep) -> JSONResponse:
    """Delete the memories by key of a selection (scope, scope ref, agent) last written
    `older_than_days` ago or more, except `exclude_keys` and held ones (200 with counts); a
    dry run lists what would go. Above 1,000 memories it runs as a job (202)."""
    result = cleanup_service.cleanup(session, plane, caller.actor, body, access=caller.access)
    if isinstance(result, CleanupOut):
        return JSONResponse(result.as_dict())
    return JSONResponse(JobOut.model_validate(result).model_dump(mode="json"),
                        status_code=202)
