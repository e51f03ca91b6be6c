from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class JobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID = Field(description="The job's id; poll GET /v1/jobs/{id}.")
    kind: str = Field(description="export, erase or compact.", examples=["erase"])
    state: str = Field(description="queued, running, completed or failed.",
                       examples=["completed"])
    progress: dict[str, Any] = Field(description="Steps finished so far; a worker that takes "
                                     "the job over continues from here.")
    result: dict[str, Any] | None = Field(description="When completed: an export's archive "
                                          "(path, size, sha256, expiry) or an erasure's "
                                          "counts and receipt_id.")
    error: str | None = Field(description="Why the last attempt failed, if it did.")
    attempts: int = Field(description="How many times a worker claimed the job.")
    created_at: datetime = Field(description="When it was requested (UTC).")
    updated_at: datetime = Field(description="Its last change (UTC).")
