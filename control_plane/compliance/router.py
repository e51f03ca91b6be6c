from __future__ import annotations

import uuid
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Body, Request
from fastapi.responses import PlainTextResponse, StreamingResponse

from ..deps import AnyCaller, PlaneDep, Role, SessionDep, get_runtime, needs_role
from ..identity import Caller
from ..jobs.schemas import JobOut
from ..jobs.service import get_job
from . import export_download, receipts, subject_summary
from . import service as compliance
from .schemas import EraseIn, ExportIn, SubjectSummary

router = APIRouter(tags=["compliance"])

OfficerCaller = Annotated[Caller, needs_role(Role(("admin", "compliance"),
                                                  "run exports, erasures and read receipts"))]
# A data subject's own key (role user) exports, follows and downloads its own subject's
# exports; every other subject's answers 404. It never erases: that is a compliance act.
ExporterCaller = Annotated[Caller, needs_role(Role(("admin", "compliance", "user"),
                                                   "run exports"))]
EraserCaller = Annotated[Caller, needs_role(Role(
    ("admin", "compliance"), "erase a data subject: erasure is a compliance act, asked of "
    "the tenant's compliance officer"))]


@router.get("/v1/subjects/{user_id}", response_model=SubjectSummary)
def subject_summary_route(user_id: str, caller: OfficerCaller, session: SessionDep,
                          plane: PlaneDep) -> Any:
    """What memplane holds about a data subject, counted by layer (memories, entries, events,
    conversations, knowledge, embeddings) with no content, the legal holds covering them and
    their export and erasure jobs. Admin or compliance keys; audited as `subject_read`."""
    return subject_summary.summary(session, caller.actor, unquote(user_id), plane.credentials)


@router.post("/v1/subjects/{user_id}/export", response_model=JobOut, status_code=202)
def export_subject(user_id: str, caller: ExporterCaller, session: SessionDep,
                   body: Annotated[ExportIn | None, Body()] = None) -> Any:
    """Start an export (GDPR Art. 15/20) of everything stored about a data subject: a job (202)
    that writes a sealed archive into the tenant's own bucket; poll GET /v1/jobs/{id}, then
    download it. A data subject's own key (role user) exports its own subject only."""
    compliance.ensure_own_subject(session, caller, unquote(user_id))
    return compliance.start_export(session, caller.actor, unquote(user_id),
                                   (body or ExportIn()).format)


@router.post("/v1/subjects/{user_id}/erase", response_model=JobOut, status_code=202)
def erase_subject(user_id: str, caller: EraserCaller, session: SessionDep,
                  body: Annotated[EraseIn | None, Body()] = None) -> Any:
    """Start the erasure (GDPR Art. 17) of a data subject: a resumable job (202) that deletes their
    memories, objects and key and ends with a signed receipt; `dry_run` only counts. Writes of
    the subject answer 409 until it finishes."""
    return compliance.start_erasure(session, caller.actor, unquote(user_id),
                                    (body or EraseIn()).dry_run)


@router.get("/v1/jobs/{job_id}", response_model=JobOut)
def read_job(job_id: uuid.UUID, caller: ExporterCaller, session: SessionDep) -> Any:
    """The state, progress and result of an export or erasure job of the caller's tenant (a
    user key: of its own subject's exports only)."""
    compliance.ensure_own_export(session, caller, job_id)
    return get_job(session, caller.actor, job_id)


@router.get("/v1/exports/{job_id}/download", response_class=StreamingResponse)
def download_export(job_id: uuid.UUID, caller: ExporterCaller, session: SessionDep,
                    plane: PlaneDep) -> StreamingResponse:
    """Stream a completed export's archive from the tenant's bucket; 410 once it has expired
    (MEMPLANE_EXPORT_TTL_HOURS). A user key downloads its own subject's exports only."""
    compliance.ensure_own_export(session, caller, job_id)
    chunks, size = export_download.download(session, plane, caller.actor, job_id)
    return StreamingResponse(chunks, media_type="application/zip", headers={
        "Content-Length": str(size),
        "Content-Disposition": f'attachment; filename="export-{job_id}.zip"'})


@router.get("/v1/receipts/public-key", response_class=PlainTextResponse)
def receipt_public_key(request: Request, caller: AnyCaller,
                       session: SessionDep) -> PlainTextResponse:
    """The Ed25519 public key (PEM) that verifies erasure receipts and audit checkpoints; any valid
    key may read it."""
    pem = receipts.public_key(session, get_runtime(request).settings, caller.actor)
    return PlainTextResponse(pem, media_type="application/x-pem-file")


@router.get("/v1/receipts/{receipt_id}")
def read_receipt(receipt_id: uuid.UUID, caller: OfficerCaller,
                 session: SessionDep, plane: PlaneDep) -> dict[str, Any]:
    """A signed erasure receipt: what was deleted, how it was verified, and the signature to check
    with the public key."""
    return receipts.get_receipt(session, caller.actor, receipt_id, plane.credentials)
