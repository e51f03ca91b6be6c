from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Protocol

from fastapi import APIRouter, Body, Depends, Header, Path, Response
from fastapi.responses import JSONResponse

from ..deps import AdminCaller, ComplianceCaller, PlaneDep, SessionDep, get_runtime
from ..idempotency import Idempotency, Replay
from . import named
from . import service as storage_config
from .schemas import (
    NamedStorageConfigIn,
    StorageConfigIn,
    StorageConfigOut,
    StorageConfigPage,
    StorageConfigRename,
    StorageHealthOut,
)

if TYPE_CHECKING:
    from ..plane.data_plane import DataPlane
    from ..settings import Settings

router = APIRouter(tags=["storage"])


class Running(Protocol):
    """What these routes use of the running server: its settings and its data plane."""

    @property
    def settings(self) -> Settings: ...

    @property
    def plane(self) -> DataPlane: ...


RuntimeDep = Annotated[Running, Depends(get_runtime)]


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


IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
ConfigId = Annotated[str, Path(min_length=1, max_length=64,
                               description="The configuration's public id, 'sc_…'.")]


@router.post("/v1/storage/configs", response_model=StorageConfigOut, status_code=201)
def create_storage_config(body: Annotated[NamedStorageConfigIn, Body()], caller: AdminCaller,
                          session: SessionDep, runtime: RuntimeDep,
                          idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """Add a named bucket configuration (`sc_…`), probed and region-checked first like
    `PUT /v1/storage/config`; `make_default: true` also makes it the default. Agents may send
    their user memories to it. Admin keys only; send an `Idempotency-Key` to make retries
    safe."""
    idem = Idempotency.of(idempotency_key, "POST", "/v1/storage/configs",
                          json.dumps(body.model_dump(mode="json"), sort_keys=True))
    result = named.create(session, runtime.plane, caller.actor, body,
                          allow_local=runtime.settings.local_storage_allowed,
                          local_roots=runtime.settings.allowed_local_roots, idem=idem)
    if isinstance(result, Replay):
        return JSONResponse(result.response, status_code=result.status_code,
                            headers={"Idempotent-Replayed": "true"})
    return JSONResponse(result.model_dump(mode="json"), status_code=201)


@router.get("/v1/storage/configs", response_model=StorageConfigPage)
def list_storage_configs(caller: ComplianceCaller, session: SessionDep,
                         plane: PlaneDep) -> StorageConfigPage:
    """The tenant's storage configurations without secrets: the default first."""
    return named.list_configs(session, plane, caller.actor)


@router.get("/v1/storage/configs/{storage_config_id}", response_model=StorageConfigOut)
def get_named_storage_config(storage_config_id: ConfigId, caller: ComplianceCaller,
                             session: SessionDep, plane: PlaneDep) -> StorageConfigOut:
    """One configuration without secrets."""
    return named.get_config(session, plane, caller.actor, storage_config_id)


@router.put("/v1/storage/configs/{storage_config_id}", response_model=StorageConfigOut)
def rename_storage_config(storage_config_id: ConfigId, body: StorageConfigRename,
                          caller: AdminCaller, session: SessionDep,
                          plane: PlaneDep) -> StorageConfigOut:
    """Rename a configuration. Its bucket, prefix and credentials never change in place
    (memories name it): create a new configuration instead. Admin keys only."""
    return named.rename(session, plane, caller.actor, storage_config_id, body)


@router.post("/v1/storage/configs/{storage_config_id}/default",
             response_model=StorageConfigOut)
def make_storage_config_default(storage_config_id: ConfigId, caller: AdminCaller,
                                session: SessionDep, plane: PlaneDep) -> StorageConfigOut:
    """Make this configuration the default: new memories go there; older ones stay readable
    where they are. Admin keys only."""
    return named.make_default(session, plane, caller.actor, storage_config_id)


@router.delete("/v1/storage/configs/{storage_config_id}", status_code=204)
def delete_storage_config(storage_config_id: ConfigId, caller: AdminCaller,
                          session: SessionDep, plane: PlaneDep) -> Response:
    """Delete a configuration: refused (409) while it is the default, while memories or
    events live in it (the answer counts them) or while an agent routes to it. Admin keys
    only."""
    named.delete(session, plane, caller.actor, storage_config_id)
    return Response(status_code=204)


@router.get("/v1/storage/configs/{storage_config_id}/health", response_model=StorageHealthOut)
def named_storage_health(storage_config_id: ConfigId, caller: AdminCaller, session: SessionDep,
                         plane: PlaneDep) -> StorageHealthOut:
    """Probe one configuration's bucket like `GET /v1/storage/health`, with its declared and
    reported region."""
    return storage_config.check_health(session, plane, caller.actor, storage_config_id)
