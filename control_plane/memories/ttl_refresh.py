"""Refresh-on-read: a read with ``refresh_ttl=true`` restarts the ttl of the memories it
answered, as LangGraph's stores do with ``TTLConfig.refresh_on_read``.

The ttl a memory was written with is not stored on its own: a write sets ``expires_at`` and
``updated_at`` from one clock reading, so the ttl is ``expires_at`` minus the later of
``updated_at`` and ``ttl_restarted_at`` (the last restart). A restart therefore touches the
control plane only — no new version, no object in the bucket, nothing in the write path — in
one locked select and one update per distinct ttl of the rows read (one for a store whose
items share a default ttl). Memories without a ttl, and memories whose ttl already ran out
(they read as missing), are left alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer as P
from ..identity import Caller
from ..tenants.service import require_role

__all__ = ["may_restart", "restart", "restart_answers"]


def may_restart(session: Session, caller: Caller) -> None:
    """Only a writer may restart a ttl: a compliance key's reads never prolong retention
    (403, audited, before anything is read)."""
    require_role(session, caller, ("admin", "agent"), "restart a memory's ttl (refresh_ttl)")


def restart(session: Session, tenant_id: uuid.UUID, pointer_ids: Iterable[uuid.UUID],
            ) -> dict[uuid.UUID, datetime]:
    """Restart the ttl of the tenant's pointers ``pointer_ids``: each new ``expires_at`` by
    id (only those with a ttl still running)."""
    ids = sorted(set(pointer_ids))
    if not ids:
        return {}
    begin_write(session)
    now = utcnow()
    rows = session.execute(
        select(P.id, P.expires_at, P.updated_at, P.ttl_restarted_at)
        .where(P.tenant_id == tenant_id, P.id.in_(ids), P.expires_at.is_not(None),
               P.expires_at > now)
        .order_by(P.id).with_for_update()).all()
    by_ttl: dict[timedelta, list[uuid.UUID]] = {}
    for pointer_id, expires_at, updated_at, restarted_at in rows:
        assert expires_at is not None  # (selected so)
        started = max(updated_at, restarted_at) if restarted_at is not None else updated_at
        by_ttl.setdefault(expires_at - started, []).append(pointer_id)
    for ttl, group in by_ttl.items():
        session.execute(update(P).where(P.tenant_id == tenant_id, P.id.in_(group))
                        .values(expires_at=now + ttl, ttl_restarted_at=now))
    session.commit()
    return {pointer_id: now + ttl for ttl, group in by_ttl.items() for pointer_id in group}


def restart_answers(session: Session, tenant_id: uuid.UUID,
                    answers: Iterable[dict[str, Any]]) -> None:
    """Restart the ttl of the memories in the successful get ``answers`` (a single GET's
    answer or a batch's results) and show the new ``expires_at`` in their pointers."""
    read = [a["pointer"] for a in answers
            if a.get("status", 200) == 200 and a.get("pointer") and a["pointer"]["expires_at"]]
    moved = restart(session, tenant_id, (uuid.UUID(p["id"]) for p in read))
    for pointer in read:
        expires_at = moved.get(uuid.UUID(pointer["id"]))
        if expires_at is not None:
            pointer["expires_at"] = to_jsonable_python(expires_at)
