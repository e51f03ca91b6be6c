from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from ..deps import AdminCaller, PlaneDep, SessionDep
from . import service as integrity
from .schemas import IntegrityOut, ProblemOut

router = APIRouter(tags=["integrity"])


@router.post("/v1/integrity/verify", response_model=IntegrityOut)
def verify(caller: AdminCaller, session: SessionDep, plane: PlaneDep) -> IntegrityOut:
    """Re-read, decrypt and hash every object of the caller's tenant (synchronous for now)."""
    report = integrity.verify_as(session, plane, caller.actor)
    return IntegrityOut(tenant_id=report.tenant_id, clean=report.clean, checked=report.checked,
                        ok=report.ok, missing=report.missing, corrupt=report.corrupt,
                        restored=report.restored, objects=report.objects,
                        orphaned=report.orphaned,
                        problems=[ProblemOut(**asdict(p)) for p in report.problems])
