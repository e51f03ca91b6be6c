from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from ..deps import PlaneDep, SessionDep, WriterCaller, get_runtime
from ..summarizers import Running
from . import service
from .schemas import RememberIn, RememberOut

router = APIRouter(tags=["remember"])
RuntimeDep = Annotated[Running, Depends(get_runtime)]


@router.post("/v1/remember", response_model=RememberOut)
def remember(body: RememberIn, caller: WriterCaller, session: SessionDep, plane: PlaneDep,
             runtime: RuntimeDep) -> RememberOut:
    """Extract durable facts from the user's messages (preferences, systems they use, role,
    department, projects, past issues) and reconcile them with what is stored about
    `user_id` in the scope: ADD a new fact, UPDATE a changed one (the old value kept in the
    memory's `previous`), DELETE a retracted one, NONE for a repeat. Each write is an
    ordinary memory write (encrypted in the bucket, audited, in the subject's export and
    erasure), `source` `remember`. A statement holding a sensitive value (card number,
    password …) is never stored. `dry_run` answers the decisions and writes nothing. The
    tenant's summariser endpoint, when configured, extracts instead of the built-in rules."""
    return service.remember(session, plane, runtime, caller.actor, body, access=caller.access)
