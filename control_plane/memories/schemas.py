from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from ..kit import PLAIN_TEXT
from .addresses import nfc

Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=PLAIN_TEXT)]
MemoryType = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
Ref = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=PLAIN_TEXT),
              AfterValidator(nfc)]
Title = Annotated[str, StringConstraints(max_length=500, pattern=PLAIN_TEXT)]


class MemoryMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_type: MemoryType | None = None
    tags: list[Tag] | None = Field(None, max_length=50)
    importance: int | None = Field(None, ge=1, le=5)
    title: Title | None = None
    user_id: Ref | None = None
    agent_id: Ref | None = None
    ttl_days: int | None = Field(None, ge=1, le=36500)


class MemoryIn(MemoryMeta):
    value: Any = Field(..., description="Any JSON value; stored only in the tenant's bucket.")


class AppendIn(MemoryMeta):
    value: Any = Field(..., description="The item appended to the stored JSON list.")


class PointerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    scope: str
    scope_ref: str
    key: str | None
    memory_type: str
    title: str | None
    tags: list[str]
    importance: int
    source: str
    user_id: str | None
    agent_id: str | None
    storage_path: str
    content_sha256: str
    content_size: int
    sync_status: str
    version: int
    has_embeddings: bool
    embedding_model: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, pointer: Any) -> PointerOut:
        return cls(
            id=pointer.id, scope=pointer.scope_type, scope_ref=pointer.scope_ref,
            key=pointer.key, memory_type=pointer.memory_type, title=pointer.title,
            tags=list(pointer.tags or []), importance=pointer.importance, source=pointer.source,
            user_id=pointer.subject_user_id, agent_id=pointer.agent_id,
            storage_path=pointer.storage_path, content_sha256=pointer.content_sha256,
            content_size=pointer.content_size, sync_status=pointer.sync_status,
            version=pointer.version, has_embeddings=pointer.has_embeddings,
            embedding_model=pointer.embedding_model, created_at=pointer.created_at,
            updated_at=pointer.updated_at, expires_at=pointer.expires_at,
        )


class MemoryOut(BaseModel):
    value: Any
    pointer: PointerOut


class PointerPage(BaseModel):
    items: list[PointerOut]
    next_cursor: str | None


class Cleared(BaseModel):
    deleted: int
