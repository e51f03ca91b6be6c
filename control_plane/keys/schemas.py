from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RotateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: Literal["local", "aws-kms"] | None = Field(
        None, description="Provider of the new KEK version; default: the server's.")
    key_ref: str | None = Field(
        None, min_length=1, max_length=512,
        description="For a KMS: the key (id, ARN or alias) to move to; default: the server's.")


class RotationOut(BaseModel):
    tenant_id: uuid.UUID
    from_versions: list[int]
    to_version: int
    provider: str
    rewrapped: int


class RetireOut(BaseModel):
    tenant_id: uuid.UUID
    retired: list[int]
    in_use: dict[int, int]
    current: int | None


class KekVersionOut(BaseModel):
    version: int
    provider: str
    current: bool
    retired: bool
    subject_keys: int


class KekList(BaseModel):
    items: list[KekVersionOut]
