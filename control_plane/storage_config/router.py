from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends

from ..deps import AdminCaller, ComplianceCaller, PlaneDep, SessionDep, get_runtime
from ..runtime import Runtime
from . import service as storage_config
from .schemas import StorageConfigIn, StorageConfigOut, StorageHealthOut

router = APIRouter(tags=["storage"])

RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


@router.put("/v1/storage/config", response_model=StorageConfigOut)
def configure_storage(body: Annotated[StorageConfigIn, Body()], caller: AdminCaller,
                      session: SessionDep, runtime: RuntimeDep) -> StorageConfigOut:
    """Point the tenant at its own bucket (S3, GCS, Azure, or a local directory where allowed). The
    bucket is probed first; secrets are stored encrypted and never shown again. Admin keys only."""
    return storage_config.configure(session, runtime.plane, caller.actor, body,
                                    allow_local=runtime.settings.local_storage_allowed,
                                    local_roots=runtime.settings.allowed_local_roots)


@router.get("/v1/storage/config", response_model=StorageConfigOut)
def get_storage_config(caller: ComplianceCaller, session: SessionDep,
                       plane: PlaneDep) -> StorageConfigOut:
    """The tenant's active bucket configuration, without secrets."""
    return storage_config.get_active(session, plane, caller.actor)


@router.get("/v1/storage/health", response_model=StorageHealthOut)
def storage_health(caller: AdminCaller, session: SessionDep,
                   plane: PlaneDep) -> StorageHealthOut:
    """Probe the tenant's bucket (write, read, delete a small object) and report reachability,
    latency and its versioning/retention settings."""
    return storage_config.check_health(session, plane, caller.actor)
