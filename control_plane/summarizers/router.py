from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends

from ..deps import AdminCaller, ComplianceCaller, SessionDep, get_runtime
from . import Running, routing
from . import service as summarizers
from .schemas import RoutesIn, RoutesOut, SummarizerConfigIn, SummarizerConfigOut

router = APIRouter(tags=["summarizer"])

RuntimeDep = Annotated[Running, Depends(get_runtime)]


@router.put("/v1/summarizer/config", response_model=SummarizerConfigOut)
def configure_summarizer(body: Annotated[SummarizerConfigIn, Body()], caller: AdminCaller,
                         session: SessionDep, runtime: RuntimeDep) -> SummarizerConfigOut:
    """Route the compactor's summaries to an OpenAI-compatible chat endpoint. The endpoint is
    probed first (a one-token call); the API key is stored sealed and never shown again.
    Admin keys only."""
    return summarizers.configure(session, runtime, caller.actor, body)


@router.get("/v1/summarizer/config", response_model=SummarizerConfigOut)
def get_summarizer_config(caller: ComplianceCaller, session: SessionDep,
                          runtime: RuntimeDep) -> SummarizerConfigOut:
    """The tenant's summariser without its key, or the built-in offline one."""
    return summarizers.get_config(session, runtime, caller.actor)


@router.delete("/v1/summarizer/config", response_model=SummarizerConfigOut)
def delete_summarizer_config(caller: AdminCaller, session: SessionDep,
                             runtime: RuntimeDep) -> SummarizerConfigOut:
    """Back to the built-in offline summariser; the stored key is deleted. Admin keys only."""
    return summarizers.delete_config(session, runtime, caller.actor)


@router.put("/v1/model-routes", response_model=RoutesOut, tags=["model routing"])
def put_model_routes(body: Annotated[RoutesIn, Body()], caller: AdminCaller,
                     session: SessionDep, runtime: RuntimeDep) -> RoutesOut:
    """Replace the tenant's model routing rules: each maps a purpose (compaction,
    conversation_summary, extraction) and optionally a scope to an OpenAI-compatible
    endpoint and model with a token budget. Every endpoint is probed first; nothing is saved
    unless all answer. Keys are stored sealed, never shown. Admin keys only."""
    return routing.put_routes(session, runtime, caller.actor, body)


@router.get("/v1/model-routes", response_model=RoutesOut, tags=["model routing"])
def get_model_routes(caller: ComplianceCaller, session: SessionDep,
                     runtime: RuntimeDep) -> RoutesOut:
    """The tenant's model routing rules (without keys) and the fallback they leave to."""
    return routing.get_routes(session, runtime, caller.actor)
