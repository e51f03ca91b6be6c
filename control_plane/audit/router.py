from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import PlainTextResponse

from ..deps import AdminCaller, ComplianceCaller, PlaneDep, SessionDep, get_runtime
from ..kit import PLAIN_TEXT
from . import service as audit
from . import transparency, witness_registry
from .schemas import (
    AuditEntryOut,
    AuditPage,
    AuditVerificationOut,
    ConsistencyProofOut,
    InclusionProofOut,
)
from .service import query_page

router = APIRouter(tags=["audit"])

FilterText = Annotated[str | None, Query(max_length=256, pattern=PLAIN_TEXT)]
_BIG = 2**63 - 1
Seq = Annotated[int, Query(ge=1, le=_BIG, description="The row's seq (its leaf is seq − 1).")]
TreeSize = Annotated[int, Query(ge=1, le=_BIG, description="The size of the tree to prove "
                                "against: a checkpoint's size, at most the log's.")]
First = Annotated[int, Query(ge=1, le=_BIG, description="The older tree's size (an earlier "
                             "checkpoint's).")]
Second = Annotated[int, Query(ge=1, le=_BIG, description="The newer tree's size, at least "
                              "first and at most the log's.")]


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


@router.put("/v1/audit/witnesses", response_model=witness_registry.WitnessesOut)
def put_witnesses(request: Request, caller: AdminCaller, session: SessionDep,
                  body: Annotated[list[witness_registry.WitnessIn],
                                  Body(examples=[witness_registry.EXAMPLE])]
                  ) -> witness_registry.WitnessesOut:
    """Replace the tenant's audit-log witnesses (C2SP tlog-witness; at most 8): each checkpoint
    is sent to each of them and their cosignatures kept beside it in the bucket. Each URL is
    held to the endpoint guard. Admin keys only."""
    return witness_registry.register(session, get_runtime(request).settings, caller.actor, body)


@router.get("/v1/audit/witnesses", response_model=witness_registry.WitnessesOut)
def get_witnesses(caller: ComplianceCaller, session: SessionDep) -> witness_registry.WitnessesOut:
    """The tenant's audit-log witnesses and what each last answered. Needs an admin or
    compliance key."""
    return witness_registry.listing(session, caller.actor)


@router.get("/v1/audit/checkpoint", response_class=PlainTextResponse)
def audit_checkpoint(request: Request, caller: ComplianceCaller, session: SessionDep,
                     plane: PlaneDep) -> PlainTextResponse:
    """The signed checkpoint (a C2SP signed note: origin, tree size, base64 root hash, then
    the signature line) of the tenant's audit Merkle tree, with every row committed before
    the call sealed into it. Needs an admin or compliance key."""
    text = transparency.checkpoint_as(session, plane, get_runtime(request).settings,
                                      caller.actor)
    return PlainTextResponse(text)


@router.get("/v1/audit/verifier-key", response_class=PlainTextResponse)
def audit_verifier_key(request: Request, caller: ComplianceCaller, session: SessionDep,
                       plane: PlaneDep) -> PlainTextResponse:
    """The verifier key of the audit log's checkpoints, `<name>+<hex key id>+<base64(0x01 ‖
    Ed25519 public key)>`. Needs an admin or compliance key."""
    key = transparency.verifier_key_as(session, plane, get_runtime(request).settings,
                                       caller.actor)
    return PlainTextResponse(key)


@router.get("/v1/audit/proof/inclusion", response_model=InclusionProofOut)
def audit_inclusion_proof(caller: ComplianceCaller, session: SessionDep, plane: PlaneDep,
                          seq: Seq, tree_size: TreeSize) -> InclusionProofOut:
    """The RFC 9162 inclusion proof of row `seq` (leaf seq − 1) in the tree of `tree_size`
    rows; 422 when the row is not in that tree or the tree is larger than the log. Needs an
    admin or compliance key."""
    return InclusionProofOut.model_validate(
        transparency.inclusion_as(session, plane, caller.actor, seq, tree_size))


@router.get("/v1/audit/proof/consistency", response_model=ConsistencyProofOut)
def audit_consistency_proof(caller: ComplianceCaller, session: SessionDep, plane: PlaneDep,
                            first: First, second: Second) -> ConsistencyProofOut:
    """The RFC 9162 consistency proof from the tree of `first` rows to the tree of `second`
    rows; 422 when first exceeds second or second exceeds the log. Needs an admin or
    compliance key."""
    return ConsistencyProofOut.model_validate(
        transparency.consistency_as(session, plane, caller.actor, first, second))
