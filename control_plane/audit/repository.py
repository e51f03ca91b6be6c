from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import AccessLog


def list_rows(session: Session, tenant_id: uuid.UUID, *, pointer_id: uuid.UUID | None,
              accessor_id: str | None, operation: str | None, since: datetime | None,
              until: datetime | None, after_seq: int | None, limit: int) -> list[AccessLog]:
    """Sealed rows in chain order. Paging by ``seq``, not by id: ids are minted at INSERT,
    so a row that commits late can carry a lower id than rows already paged past; the
    sealer numbers rows as they commit, so a late row always lands after the cursor."""
    query = select(AccessLog).where(AccessLog.tenant_id == tenant_id,
                                    AccessLog.seq.is_not(None))
    if pointer_id is not None:
        query = query.where(AccessLog.pointer_id == pointer_id)
    if accessor_id is not None:
        query = query.where(AccessLog.accessor_id == accessor_id)
    if operation is not None:
        query = query.where(AccessLog.operation == operation)
    if since is not None:
        query = query.where(AccessLog.accessed_at >= since)
    if until is not None:
        query = query.where(AccessLog.accessed_at < until)
    if after_seq is not None:
        query = query.where(AccessLog.seq > after_seq)
    return list(session.scalars(query.order_by(AccessLog.seq).limit(limit)))
