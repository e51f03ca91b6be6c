from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends

from ..deps import AdminCaller, ComplianceCaller, SessionDep, get_runtime
from . import Running
from . import service as summarizers
from .schemas import SummarizerConfigIn, SummarizerConfigOut

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
