from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path
from fastapi.responses import JSONResponse

from ..deps import ComplianceCaller, PlaneDep, SessionDep
from ..idempotency import Idempotency, Replay
from . import service as holds
from .schemas import HoldIn, HoldOut, HoldPage

router = APIRouter(tags=["legal holds"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
HoldId = Annotated[str, Path(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_]+$",
                             description="The hold's id (lh_…).")]


@router.post("/v1/legal-holds", response_model=HoldOut, status_code=201)
def place_hold(body: HoldIn, caller: ComplianceCaller, session: SessionDep,
               idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """Place a legal hold on a data subject, a scope ref or the whole tenant (admin or
    compliance): retention and cleanup pass over what it covers, deletes of it answer 409
    `legal_hold`, and an erasure of a held subject is refused until the hold is lifted."""
    idem = Idempotency.of(idempotency_key, "POST", "/v1/legal-holds", body.model_dump_json())
    result = holds.place(session, caller.actor, body, idem=idem)
    if isinstance(result, Replay):
        return JSONResponse(result.response, status_code=result.status_code,
                            headers={"Idempotent-Replayed": "true"})
    return JSONResponse(HoldOut.of(result).model_dump(mode="json"), status_code=201)


@router.get("/v1/legal-holds", response_model=HoldPage)
def list_holds(caller: ComplianceCaller, session: SessionDep) -> HoldPage:
    """The tenant's holds, active and lifted, oldest first."""
    return HoldPage(items=[HoldOut.of(h) for h in holds.list_holds(session, caller.actor)])


@router.delete("/v1/legal-holds/{hold_id}", response_model=HoldOut)
def lift_hold(hold_id: HoldId, caller: ComplianceCaller, session: SessionDep,
              plane: PlaneDep) -> HoldOut:
    """Lift a hold (admin or compliance; audited with the key and the time). The held
    subject's id is then kept only as a keyed hash."""
    return HoldOut.of(holds.lift(session, caller.actor, hold_id,
                                 credentials=plane.credentials))
