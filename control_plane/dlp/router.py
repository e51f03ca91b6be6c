from __future__ import annotations

from fastapi import APIRouter

from ..deps import AdminCaller, SessionDep
from . import policy as policies
from .schemas import DlpPolicyIn, DlpPolicyOut

router = APIRouter(tags=["dlp"])


def _out(policy: policies.Policy) -> DlpPolicyOut:
    return DlpPolicyOut(mode=policy.mode, kinds=list(policy.kinds),  # type: ignore[arg-type]
                        is_default=not policy.is_set, updated_at=policy.updated_at)


@router.get("/v1/dlp/policy", response_model=DlpPolicyOut)
def read_dlp_policy(caller: AdminCaller, session: SessionDep) -> DlpPolicyOut:
    """The tenant's DLP policy: what explicit writes do with a detected sensitive value.
    Never set: the defaults (`flag`, every kind; `is_default` true)."""
    return _out(policies.read_policy(session, caller.actor))


@router.put("/v1/dlp/policy", response_model=DlpPolicyOut)
def set_dlp_policy(body: DlpPolicyIn, caller: AdminCaller, session: SessionDep) -> DlpPolicyOut:
    """Set the tenant's DLP policy: `off`, `flag`, `redact` or `refuse`, for every kind or the
    `kinds` listed. This server's writes follow it at once; other replicas within seconds.
    Memories the remember extractor produces are refused whenever they hold a detected
    value, whatever the mode."""
    return _out(policies.write_policy(session, caller.actor, body.mode, body.kinds))
