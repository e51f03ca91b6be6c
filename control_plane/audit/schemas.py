from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict


class AuditEntryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    seq: int | None
    pointer_id: uuid.UUID | None
    event_id: uuid.UUID | None
    accessor_type: str
    accessor_id: str
    agent_id: str | None = None
    operation: str
    success: bool
    detail: str
    request_id: str | None
    accessed_at: datetime


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_cursor: str | None


class AuditVerificationOut(BaseModel):
    ok: bool
    checked: int
    unsealed: int
    first_bad_seq: int | None
    problem: str | None = None
