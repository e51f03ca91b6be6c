from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import to_jsonable_python

from ..addresses import MEMORY_TYPES, Ref
from ..kit import PLAIN_TEXT

Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=PLAIN_TEXT)]
MemoryType = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
Title = Annotated[str, StringConstraints(max_length=500, pattern=PLAIN_TEXT)]


def _not_compactor(value: Any) -> Any:
    if value == "compactor":
        raise ValueError("source 'compactor' is reserved for the compactor's own entries; "
                         "send chat, call, email, manual or api")
    return value


Source = Annotated[Literal["chat", "call", "email", "manual", "api"],
                   BeforeValidator(_not_compactor)]
SOURCE_DESCRIPTION = ("Where it came from: chat, call, email, manual or api (default api); "
                      "'compactor' marks the compactor's entries and cannot be sent.")


class MemoryMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_type: MemoryType | None = Field(
        None, description=f"A lower-case label to filter by: {', '.join(MEMORY_TYPES)}, or "
        "one of your own; default by scope (conversation_history, agent_memory, "
        "team_context, preference for user, else fact).", examples=["preference"])
    tags: list[Tag] | None = Field(None, max_length=50, description="Up to 50 plain-text "
                                   "tags, stored in the control plane.", examples=[["lang"]])
    importance: int | None = Field(None, ge=1, le=5, description="1 (trivial) to 5 "
                                   "(critical); default 3.", examples=[4])
    title: Title | None = Field(None, description="A short plain-text title, stored in the "
                                "control plane (keep personal data in the value).")
    user_id: Ref | None = Field(None, description="The data subject the memory is about: "
                                "exports and erasures of this user include it.",
                                examples=["u-42"])
    agent_id: Ref | None = Field(None, description="The agent that wrote it.",
                                 examples=["support-bot"])
    ttl_days: int | None = Field(None, ge=1, le=36500, description="Delete the memory this "
                                 "many days after the write; default: keep.", examples=[30])
    ttl_seconds: int | None = Field(
        None, ge=1, le=36500 * 86400, description="Instead of ttl_days: delete the memory "
        "this many seconds after the write (a read with refresh_ttl=true restarts it).",
        examples=[3600])
    source: Source | None = Field(None, description=SOURCE_DESCRIPTION, examples=["chat"])
    searchable: bool | None = Field(
        None, description="false: never embedded and never found by search (machine state "
        "such as an agent framework's checkpoints); default true. A later write that does "
        "not say keeps it.", examples=[False])

    @model_validator(mode="after")
    def _one_ttl(self) -> MemoryMeta:
        if self.ttl_days is not None and self.ttl_seconds is not None:
            raise ValueError("give ttl_days or ttl_seconds, not both")
        return self

    def ttl(self) -> timedelta | None:
        """How long after the write the memory lives (ttl_days or ttl_seconds); None: keep."""
        if self.ttl_seconds is not None:
            return timedelta(seconds=self.ttl_seconds)
        return timedelta(days=self.ttl_days) if self.ttl_days is not None else None


META_FIELDS = frozenset(MemoryMeta.model_fields)


def meta_of(model: MemoryMeta) -> MemoryMeta:
    """The metadata of a body or operation that is a ``MemoryMeta`` and more (a value, an
    op): its fields, validated as the same fields when it was, copied as they are."""
    return MemoryMeta.model_construct(_fields_set=model.model_fields_set & META_FIELDS,
                                      **{name: getattr(model, name) for name in META_FIELDS})


class MemoryIn(MemoryMeta):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"value": {"language": "fr"}, "memory_type": "preference", "tags": ["lang"],
         "importance": 4, "user_id": "u-42", "ttl_days": 365}]})

    value: Any = Field(..., description="Any JSON value; stored only in the tenant's bucket.")


class AppendIn(MemoryMeta):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"value": {"role": "user", "text": "hello"}, "user_id": "u-42"}]})

    value: Any = Field(..., description="The item appended to the stored JSON list.")


class PointerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID = Field(description="The pointer's id.")
    tenant_id: uuid.UUID | None = Field(description="The tenant it belongs to (the "
                                        "caller's; always set on a saved pointer).")
    scope: str = Field(description="user, conversation, agent, tenant, …", examples=["user"])
    scope_ref: str = Field(description="Which user, conversation, agent …",
                           examples=["u-42"])
    key: str | None = Field(description="The memory's key within the scope.",
                            examples=["preferred_language"])
    memory_type: str = Field(description="The memory type given at write time.")
    title: str | None = Field(description="The title given at write time.")
    tags: list[str] = Field(description="The tags given at write time.")
    importance: int = Field(description="1 to 5.")
    source: str = Field(description="Where it came from: chat, call, email, manual, api, or "
                        "compactor (the compactor's entries).")
    user_id: str | None = Field(description="The data subject it is about, if any.")
    agent_id: str | None = Field(description="The agent that wrote it, if any.")
    team_id: str | None = Field(description="The team whose memory it is: the scope_ref of "
                                "team scope; null in every other scope.")
    storage_path: str = Field(description="Where the (encrypted) value lives in the "
                              "tenant's bucket.")
    content_sha256: str = Field(description="SHA-256 of the value's canonical JSON; reads "
                                "verify it.")
    content_size: int = Field(description="Size of the value's canonical JSON, in bytes.")
    sync_status: str = Field(description="synced; pending_write / pending_delete while a "
                             "write or delete is in flight; corrupt if the object failed "
                             "verification.")
    version: int = Field(description="Incremented by every write and append.")
    has_embeddings: bool = Field(description="Whether the search vector of its current "
                                 "value is stored (made after the write, in the background).")
    embedding_model: str | None = Field(description="The embedder that made its vector, if "
                                        "any.")
    embedding_storage_path: str | None = Field(None, description="Where its (encrypted) "
                                               "vector lives in the tenant's bucket, if any.")
    created_at: datetime = Field(description="First write (UTC).")
    updated_at: datetime = Field(description="Last write (UTC).")
    expires_at: datetime | None = Field(description="When ttl_days deletes it (UTC); null: "
                                        "kept.")
    storage_class: str | None = Field(
        None, description="The storage class its object was moved to by the archive tier, "
        "in the backend's own name (S3 STANDARD_IA or GLACIER_IR, GCS NEARLINE or COLDLINE, "
        "Azure Cool or Cold, local archive or cold); null: the bucket's default class. Reads "
        "verify it like any other.", examples=[None, "STANDARD_IA"])
    searchable: bool = Field(True, description="false: never embedded, never found by "
                             "search (written with searchable false).")

    @classmethod
    def of(cls, pointer: Any) -> PointerOut:
        return cls.model_validate(pointer_json(pointer))


def pointer_json(pointer: Any) -> dict[str, Any]:
    """A saved pointer's answer, the fields of ``PointerOut`` as JSON values, built
    directly (``PointerOut.of`` validates it into the model): a batch answers up to a
    thousand pointers, and building the model and dumping it again cost ~13 µs a pointer
    against ~3 µs this way. The values are read from the instance's loaded state (reading
    each through the ORM's descriptors costs as much again); a pointer with an attribute not
    loaded (expired by a commit) is read through them. pydantic's own encoder writes the ids
    and times, so the text is what the model writes, to the byte (property-tested)."""
    try:
        return _pointer_json(pointer.__dict__)
    except KeyError:
        return _pointer_json({name: getattr(pointer, name, None) for name in _READ})


_READ = ("id", "tenant_id", "scope_type", "scope_ref", "key", "memory_type", "title", "tags",
         "importance", "source", "subject_user_id", "agent_id", "storage_path", "content_sha256",
         "content_size", "sync_status", "version", "has_embeddings", "embedding_model",
         "embedding_storage_path", "created_at", "updated_at", "expires_at", "storage_class",
         "searchable")


def _pointer_json(v: dict[str, Any]) -> dict[str, Any]:
    ready = _vector_ready(v["has_embeddings"], v["embedding_storage_path"], v["storage_path"])
    expires_at = v["expires_at"]
    return {
        "id": str(v["id"]), "tenant_id": _uuid_text(v["tenant_id"]),
        "scope": v["scope_type"], "scope_ref": v["scope_ref"], "key": v["key"],
        "memory_type": v["memory_type"], "title": v["title"],
        "tags": list(v["tags"] or []), "importance": v["importance"], "source": v["source"],
        "user_id": v["subject_user_id"], "agent_id": v["agent_id"],
        "team_id": v["scope_ref"] if v["scope_type"] == "team" else None,
        "storage_path": v["storage_path"], "content_sha256": v["content_sha256"],
        "content_size": v["content_size"], "sync_status": v["sync_status"],
        "version": v["version"], "has_embeddings": ready,
        "embedding_model": v["embedding_model"] if ready else None,
        "embedding_storage_path": v["embedding_storage_path"] if ready else None,
        "created_at": to_jsonable_python(v["created_at"]),
        "updated_at": to_jsonable_python(v["updated_at"]),
        "expires_at": None if expires_at is None else to_jsonable_python(expires_at),
        "storage_class": v["storage_class"],
        "searchable": v["searchable"] is not False,
    }


def _uuid_text(value: Any) -> str | None:
    """A UUID as pydantic writes it, whether the row gave a UUID or its text."""
    if value is None or isinstance(value, uuid.UUID):
        return None if value is None else str(value)
    return str(uuid.UUID(str(value)))


def _vector_ready(has_embeddings: Any, vector_path: str | None, path: str) -> bool:
    """The vector is the one of the current value (an overwrite makes it stale until the
    search indexer replaces it; ``memories.search_objects.vector_path``)."""
    return bool(has_embeddings and vector_path and vector_path == f"{path}.vec")


class MemoryOut(BaseModel):
    value: Any = Field(description="The stored JSON value, read from the bucket and "
                       "verified against content_sha256.")
    pointer: PointerOut = Field(description="The memory's pointer (metadata).")


class PointerOrder(StrEnum):
    """How a listing is ordered: by creation (the pointer's id, the default), by key, byte
    by byte, up or down (memories by key only: entries have no key), or by last write,
    newest first."""

    created = "created"
    key = "key"
    key_desc = "key_desc"
    updated_desc = "updated_desc"


class PointerPage(BaseModel):
    items: list[PointerOut] = Field(description="Pointers, in a stable order.")
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on "
                                    "the last page.")


class MemoryPage(BaseModel):
    items: list[MemoryOut] = Field(description="Memories by key with their verified values, "
                                   "in a stable order.")
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on "
                                    "the last page.")


class Cleared(BaseModel):
    deleted: int = Field(description="How many memories were deleted.")
