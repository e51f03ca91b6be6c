from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from ..addresses import Ref, Scope
from ..kit import PLAIN_TEXT

KIND_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
Kind = Annotated[str, StringConstraints(pattern=KIND_PATTERN)]
Source = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=PLAIN_TEXT)]


class EventIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"scope": "entity", "scope_ref": "ent_acme", "kind": "call_summary",
         "body": "## Call with Acme\n- Agreed to raise the ROAS target to 4.", "source": "call",
         "source_ref": "call-2291", "occurred_at": "2026-03-02T14:05:00Z"}]})

    scope: Scope = Field(description="institutional (= tenant, scope_ref '-'), entity, "
                         "project, team, or any memories scope.", examples=["entity"])
    scope_ref: Ref = Field(description="Which entity, project, team …", examples=["ent_acme"])
    kind: Kind = Field(description="A lower-case label: call_summary, decision, "
                       "campaign_change, …", examples=["call_summary"])
    body: str = Field(min_length=1, description="The event, in Markdown; stored only in "
                      "the tenant's bucket, encrypted.")
    source: Source = Field("api", description="Where it came from (a free label); "
                           "default 'api'.", examples=["call"])
    source_ref: Ref | None = Field(None, description="The source's own id for it.",
                                   examples=["call-2291"])
    occurred_at: AwareDatetime | None = Field(None, description="When it happened, with a "
                                              "timezone; default now.")
    user_id: Ref | None = Field(None, description="The data subject it is about: exports "
                                "and erasures of this user include it.", examples=["u-42"])
    agent_id: Ref | None = Field(None, description="The agent that wrote it.")


class EventOut(BaseModel):
    id: uuid.UUID = Field(description="The event's id.")
    scope: str = Field(description="The scope (institutional is stored as tenant).")
    scope_ref: str = Field(description="Which entity, project, team …")
    kind: str = Field(description="The event's label.")
    source: str = Field(description="Where it came from.")
    source_ref: str | None = Field(description="The source's own id for it.")
    user_id: str | None = Field(description="The data subject it is about, if any.")
    agent_id: str | None = Field(description="The agent that wrote it, if any.")
    occurred_at: datetime = Field(description="When it happened (UTC).")
    compressed_at: datetime | None = Field(description="When the compactor summarised it "
                                           "into an entry (UTC); null: not yet.")
    storage_path: str = Field(description="Where the (encrypted) body lives in the "
                              "tenant's bucket.")
    content_sha256: str = Field(description="SHA-256 of the body's canonical JSON (a JSON "
                                "string); reads verify it.")
    content_size: int = Field(description="Size of the body's canonical JSON, in bytes.")
    sync_status: str = Field(description="synced, or corrupt if the body failed "
                             "verification.")
    created_at: datetime = Field(description="When it was appended (UTC).")
    storage_class: str | None = Field(
        None, description="The storage class its body's object was moved to by the archive "
        "tier, in the backend's own name; null: the bucket's default class.",
        examples=[None, "NEARLINE"])

    @classmethod
    def of(cls, event: Any) -> EventOut:
        return cls(
            id=event.id, scope=event.scope_type, scope_ref=event.scope_ref, kind=event.kind,
            source=event.source, source_ref=event.source_ref, user_id=event.subject_user_id,
            agent_id=event.agent_id, occurred_at=event.occurred_at,
            compressed_at=event.compressed_at, storage_path=event.storage_path,
            content_sha256=event.content_sha256, content_size=event.content_size,
            sync_status=event.sync_status, created_at=event.created_at,
            storage_class=getattr(event, "storage_class", None),
        )


class EventWithBodyOut(EventOut):
    body: str = Field(description="The Markdown body, read from the bucket and verified "
                      "against content_sha256.")


class EventPage(BaseModel):
    items: list[EventOut] = Field(description="Events in (occurred_at, id) order.")
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on "
                                    "the last page.")
