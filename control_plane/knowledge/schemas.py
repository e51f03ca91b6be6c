"""Knowledge documents an agent retrieves through search (the seed's addKnowledge).

Limits, checked before anything is stored: at most :data:`MAX_DOCUMENTS` documents per
request; a title of 1-500 plain-text characters; content of 1 to :data:`MAX_CONTENT_CHARS`
characters that is not only white space; metadata a JSON object of at most
:data:`MAX_METADATA_BYTES` bytes once serialised; at most :data:`MAX_REQUEST_CHARS` content
characters in one request (the server's MEMPLANE_MAX_BODY_BYTES applies as well).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from ..addresses import Ref
from ..kit import PLAIN_TEXT

MAX_DOCUMENTS = 20
MAX_CONTENT_CHARS = 200_000
MAX_REQUEST_CHARS = 1_000_000
MAX_METADATA_BYTES = 8192
DOCUMENT_ID = r"^doc_[0-9a-f]{24}$"

DocTitle = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                            max_length=500, pattern=PLAIN_TEXT)]


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: DocTitle = Field(description="A plain-text title (1-500 characters), stored in "
                            "the control plane on every chunk's pointer.")
    content: str = Field(description=f"The text, 1 to {MAX_CONTENT_CHARS:,} characters; "
                         "stored encrypted in the tenant's bucket, chunked.")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Any JSON object (at most 8 KiB), stored with every "
        "chunk in the bucket (never in the control plane).")

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is empty; send the document's text")
        if len(value) > MAX_CONTENT_CHARS:
            raise ValueError(f"content is {len(value):,} characters, over the limit of "
                             f"{MAX_CONTENT_CHARS:,}; split the document into several")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
        except ValueError:
            raise ValueError("metadata must be plain JSON (no NaN or infinity)") from None
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"metadata is {size} bytes as JSON, over the limit of "
                             f"{MAX_METADATA_BYTES}; keep it to a few fields")
        return value


class KnowledgeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "agent_id": "support-bot",
        "documents": [{"title": "Refund policy",
                       "content": "Customers may return any item within 30 days...",
                       "metadata": {"source": "handbook", "version": 3}}]}]})

    agent_id: Ref = Field(description="The agent whose knowledge this is (scope agent).")
    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_DOCUMENTS,
                                        description=f"1 to {MAX_DOCUMENTS} documents.")

    @field_validator("documents")
    @classmethod
    def _total(cls, value: list[DocumentIn]) -> list[DocumentIn]:
        total = sum(len(d.content) for d in value)
        if total > MAX_REQUEST_CHARS:
            raise ValueError(f"the documents hold {total:,} characters together, over the "
                             f"limit of {MAX_REQUEST_CHARS:,} per request; send them in "
                             f"several requests")
        return value


class DocumentAdded(BaseModel):
    document_id: str = Field(description="The document's id (doc_…); its chunks are the "
                             "memories agent/<agent_id>/knowledge/<document_id>/<0000…>.")
    title: str = Field(description="The document's title.")
    chunk_count: int = Field(description="How many chunks it was cut into.")
    characters: int = Field(description="The content's length in characters.")


class KnowledgeAdded(BaseModel):
    agent_id: str = Field(description="The agent the documents belong to.")
    documents: list[DocumentAdded] = Field(description="In request order.")


class DocumentOut(BaseModel):
    document_id: str = Field(description="The document's id.")
    title: str | None = Field(description="The document's title.")
    chunk_count: int = Field(description="How many chunks it has.")
    size: int = Field(description="Bytes of its chunks' stored values (before encryption).")
    created_at: datetime = Field(description="When it was added (UTC).")


class DocumentPage(BaseModel):
    items: list[DocumentOut] = Field(description="Documents in id order.")
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on "
                                    "the last page.")


class DocumentDeleted(BaseModel):
    document_id: str = Field(description="The deleted document's id.")
    deleted_chunks: int = Field(description="How many chunks (memories) were deleted.")
