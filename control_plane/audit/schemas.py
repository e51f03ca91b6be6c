from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


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
    checkpoints_checked: int = Field(
        0, description="Signed checkpoints read from the tenant's bucket and held against "
        "the database.")
    first_checkpoint_seq: int | None = None
    last_checkpoint_seq: int | None = None
    first_bad_checkpoint: int | None = Field(
        None, description="The seq (and file name) of the first checkpoint that is forged, "
        "missing, or disagrees with the database.")
    head_seq: int = Field(0, description="The last sealed row in the database.")
    anchored_seq: int = Field(0, description="The last row covered by a checkpoint written "
                              "into the bucket; rows after it are not yet anchored.")
    anchor_lag_seconds: float | None = Field(
        None, description="Seconds since the last checkpoint while rows wait for the next.")
    anchor_problem: str | None = Field(
        None, description="Why the last checkpoint write failed (unreachable, auth_failed, "
        "…); it is retried every interval.")
