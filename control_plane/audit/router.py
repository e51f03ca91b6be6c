from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request

from ..deps import AdminCaller, ComplianceCaller, PlaneDep, SessionDep, get_runtime
from ..kit import PLAIN_TEXT
from . import service as audit
from . import witnesses
from .schemas import AuditEntryOut, AuditPage, AuditVerificationOut
from .service import query_page

router = APIRouter(tags=["audit"])

FilterText = Annotated[str | None, Query(max_length=256, pattern=PLAIN_TEXT)]


@router.get("/v1/audit", response_model=AuditPage)
def list_audit(caller: ComplianceCaller, session: SessionDep, plane: PlaneDep,
               pointer_id: uuid.UUID | None = None, accessor_id: FilterText = None,
               operation: FilterText = None, since: datetime | None = None,
               until: datetime | None = None,
               limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
               cursor: str | None = None) -> AuditPage:
    """One page of the tenant's access audit log, oldest first, filtered by pointer, accessor,
    operation or time. Needs an admin or compliance key; the query is itself audited."""
    rows, next_cursor = query_page(
        session, caller.actor, pointer_id=pointer_id, accessor_id=accessor_id,
        operation=operation, since=since, until=until, cursor=cursor, limit=limit,
        keys=plane.subject_keys,
    )
    return AuditPage(items=[AuditEntryOut.model_validate(r) for r in rows],
                     next_cursor=next_cursor)


@router.get("/v1/audit/verify", response_model=AuditVerificationOut)
def verify_audit(request: Request, caller: ComplianceCaller,
                 session: SessionDep) -> AuditVerificationOut:
    """Recompute the tenant's audit hash chain and hold it to the signed checkpoints in the
    tenant's bucket; `ok` false names the first bad row or checkpoint. Needs an admin or
    compliance key."""
    runtime = get_runtime(request)
    result = audit.verify_as(session, caller.actor, plane=runtime.plane,
                             settings=runtime.settings)
    return AuditVerificationOut.model_validate(asdict(result))


@router.put("/v1/audit/witnesses", response_model=witnesses.WitnessesOut)
def put_witnesses(request: Request, caller: AdminCaller, session: SessionDep,
                  body: Annotated[list[witnesses.WitnessIn],
                                   Body(examples=[witnesses.EXAMPLE])]) -> witnesses.WitnessesOut:
    """Replace the tenant's audit-log witnesses (C2SP tlog-witness; at most 8): each checkpoint
    is sent to each of them and their cosignatures kept beside it in the bucket. Each URL is
    held to the endpoint guard. Admin keys only."""
    return witnesses.register(session, get_runtime(request).settings, caller.actor, body)


@router.get("/v1/audit/witnesses", response_model=witnesses.WitnessesOut)
def get_witnesses(caller: ComplianceCaller, session: SessionDep) -> witnesses.WitnessesOut:
    """The tenant's audit-log witnesses and what each last answered. Needs an admin or
    compliance key."""
    return witnesses.listing(session, caller.actor)
