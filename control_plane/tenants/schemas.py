from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..kit import PLAIN_TEXT


class TenantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, pattern=PLAIN_TEXT)


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: uuid.UUID
    name: str


class CreatedTenant(BaseModel):
    tenant: TenantOut
    api_key: str


class ApiKeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["admin", "agent", "compliance"]
    name: str = Field("", max_length=200, pattern=PLAIN_TEXT)


class CreatedApiKey(BaseModel):
    id: uuid.UUID
    role: str
    name: str
    api_key: str
