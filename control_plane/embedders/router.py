from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends

from ..deps import AdminCaller, ComplianceCaller, SessionDep, get_runtime
from . import Running
from . import service as embedders
from .schemas import EmbedderConfigIn, EmbedderConfigOut

router = APIRouter(tags=["embedder"])

RuntimeDep = Annotated[Running, Depends(get_runtime)]


@router.put("/v1/embedder/config", response_model=EmbedderConfigOut)
def configure_embedder(body: Annotated[EmbedderConfigIn, Body()], caller: AdminCaller,
                       session: SessionDep, runtime: RuntimeDep) -> EmbedderConfigOut:
    """Embed the tenant's memories and search queries with an OpenAI-compatible embeddings
    endpoint. The endpoint is probed first (one short text, which also tells the vector
    length); the API key is stored sealed and never shown again. Admin keys only."""
    return embedders.configure(session, runtime, caller.actor, body)


@router.get("/v1/embedder/config", response_model=EmbedderConfigOut)
def get_embedder_config(caller: ComplianceCaller, session: SessionDep,
                        runtime: RuntimeDep) -> EmbedderConfigOut:
    """The tenant's embedder without its key, or the server's default."""
    return embedders.get_config(session, runtime, caller.actor)


@router.delete("/v1/embedder/config", response_model=EmbedderConfigOut)
def delete_embedder_config(caller: AdminCaller, session: SessionDep,
                           runtime: RuntimeDep) -> EmbedderConfigOut:
    """Back to the server's default embedder; the stored key is deleted. Admin keys only."""
    return embedders.delete_config(session, runtime, caller.actor)
