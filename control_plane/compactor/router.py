from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Request

from ..deps import AdminCaller, ReaderCaller, SessionDep, WriterCaller, get_runtime
from ..jobs.schemas import JobOut
from . import service as compactor
from .provenance import provenance
from .resummarize import resummarize
from .schemas import (
    CompactorConfigIn,
    CompactorConfigOut,
    CompactRunIn,
    ProvenanceOut,
    ResummarizeIn,
    ResummarizeOut,
)

router = APIRouter(tags=["compactor"])


@router.post("/v1/compactor/run", response_model=JobOut, status_code=202)
def run_compactor(caller: AdminCaller, session: SessionDep,
                  body: Annotated[CompactRunIn | None, Body()] = None) -> Any:
    """Compact the tenant's old events now (or only count with `dry_run`): a job (202) whose
    result counts buckets, events compressed and entries written; poll GET /v1/jobs/{id}.
    Safe beside the daily scheduled run: no event is ever summarised twice."""
    return compactor.start_run(session, caller.actor, body or CompactRunIn(),
                               access=caller.access)


@router.get("/v1/compactor/config", response_model=CompactorConfigOut)
def read_compactor_config(request: Request, caller: AdminCaller,
                          session: SessionDep) -> CompactorConfigOut:
    """The tenant's compactor thresholds (defaults: 3 events, older than 90 days) and the
    server's schedule."""
    return compactor.get_config(session, get_runtime(request).settings, caller.actor)


@router.put("/v1/compactor/config", response_model=CompactorConfigOut)
def set_compactor_config(request: Request, body: CompactorConfigIn, caller: AdminCaller,
                         session: SessionDep) -> CompactorConfigOut:
    """Set the tenant's compactor thresholds: how many uncompressed events a (scope, scope
    ref) needs, how old they must be, and whether the daily run includes the tenant."""
    return compactor.set_config(session, get_runtime(request).settings, caller.actor, body)


@router.get("/v1/compactor/provenance/{entry_id}", response_model=ProvenanceOut)
def read_provenance(entry_id: Annotated[uuid.UUID, Path(
                        description="The compactor entry's id (its pointer id).")],
                    caller: ReaderCaller,
                    session: SessionDep) -> ProvenanceOut:
    """Where a compactor entry comes from: the summariser (provider, model, prompt version)
    and the id and SHA-256 of every event it summarised, so it can be traced and re-run."""
    return provenance(session, caller.actor, entry_id, access=caller.access)


@router.post("/v1/compactor/resummarize", response_model=ResummarizeOut)
def resummarize_entry(request: Request, body: ResummarizeIn, caller: WriterCaller,
                      session: SessionDep) -> ResummarizeOut:
    """Write a new version of a compactor entry from the events it summarised, with the
    summariser the compactor would use now (e.g. after a model change). 404 for an unknown
    entry; 409 `provenance_gone` when some of its events were erased or deleted; 502
    `summarizer_failed` when the model cannot answer now. Admin and agent keys (a scoped
    agent key only within its scopes)."""
    runtime = get_runtime(request)
    return resummarize(session, runtime.plane, runtime.settings, caller.actor,
                       body.entry_id, access=caller.access)
