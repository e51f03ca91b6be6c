from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends

from ..deps import AdminCaller, PlaneDep, SessionDep
from ..plane.data_plane import DataPlane
from ..plane.keyring import Keyring
from .rotation import kek_status_as, retire_keks_as, rotate_kek_as
from .schemas import KekList, KekVersionOut, RetireOut, RotateIn, RotationOut

router = APIRouter(tags=["keys"])


def get_keyring(plane: PlaneDep) -> Keyring:
    return keyring_of(plane)


def keyring_of(plane: DataPlane) -> Keyring:
    if plane.keys is None:
        raise RuntimeError("the data plane has no keyring; build it through Runtime")
    return plane.keys


KeyringDep = Annotated[Keyring, Depends(get_keyring)]


@router.post("/v1/keys/rotate", response_model=RotationOut)
def rotate(caller: AdminCaller, session: SessionDep, ring: KeyringDep,
           body: RotateIn | None = None) -> RotationOut:
    """Rotate the tenant's key-encryption key: create a new KEK version (locally or in a KMS) and
    re-wrap every subject key under it. Admin keys only."""
    body = body or RotateIn()
    report = rotate_kek_as(session, ring, caller.actor, key_ref=body.key_ref,
                                provider=body.provider)
    return RotationOut(**asdict(report))


@router.post("/v1/keys/retire", response_model=RetireOut)
def retire(caller: AdminCaller, session: SessionDep, ring: KeyringDep) -> RetireOut:
    """Retire the KEK versions no subject key uses any more; versions still in use are listed and
    kept. Admin keys only."""
    return RetireOut(**asdict(retire_keks_as(session, ring, caller.actor)))


@router.get("/v1/keys/kek", response_model=KekList)
def kek_versions(caller: AdminCaller, session: SessionDep) -> KekList:
    """The tenant's KEK versions, which is current, and how many subject keys each wraps. Admin
    keys only."""
    rows = kek_status_as(session, caller.actor)
    return KekList(items=[KekVersionOut(**asdict(row)) for row in rows])
