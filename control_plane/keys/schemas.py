from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RotateIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{}, {"provider": "aws-kms", "key_ref": "alias/memplane-tenant-a"}]})

    provider: Literal["local", "aws-kms"] | None = Field(
        None, description="Provider of the new KEK version; default: the server's.")
    key_ref: str | None = Field(
        None, min_length=1, max_length=512,
        description="For a KMS: the key (id, ARN or alias) to move to; default: the server's.")


class RotationOut(BaseModel):
    tenant_id: uuid.UUID = Field(description="The tenant whose KEK was rotated.")
    from_versions: list[int] = Field(description="KEK versions the subject keys were wrapped "
                                     "under before.")
    to_version: int = Field(description="The new current KEK version.")
    provider: str = Field(description="Where the new KEK lives: local or aws-kms.")
    rewrapped: int = Field(description="Subject keys re-wrapped under the new version.")


class RetireOut(BaseModel):
    tenant_id: uuid.UUID = Field(description="The tenant.")
    retired: list[int] = Field(description="KEK versions retired by this call.")
    in_use: dict[int, int] = Field(description="Versions that could not be retired: version "
                                   "-> subject keys still wrapped under it.")
    current: int | None = Field(description="The current KEK version.")


class KekVersionOut(BaseModel):
    version: int = Field(description="KEK version number.")
    provider: str = Field(description="local or aws-kms.")
    current: bool = Field(description="New subject keys are wrapped under this version.")
    retired: bool = Field(description="Retired: no longer used to unwrap.")
    subject_keys: int = Field(description="Subject keys wrapped under this version.")


class KekList(BaseModel):
    items: list[KekVersionOut] = Field(description="Every KEK version of the tenant.")
