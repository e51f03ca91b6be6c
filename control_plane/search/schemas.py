from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..addresses import Ref, Scope
from ..kit import PLAIN_TEXT
from ..memories.schemas import MemoryType, Tag

Query = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=PLAIN_TEXT,
                                         strip_whitespace=True)]
Kind = Literal["memory", "entry", "knowledge"]


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"query": "what language does the user prefer", "scope": "user", "scope_ref": "u-42",
         "limit": 5}]})

    query: Query = Field(description="What to look for, in plain words (never stored or "
                         "logged).", examples=["what language does the user prefer"])
    scope: Scope | None = Field(None, description="Only this scope; default: every scope "
                                "the key may see (one snapshot read per scope when cold).")
    scope_ref: Ref | None = Field(None, description="Only this scope ref (needs scope; "
                                  "'-' for tenant).")
    user_id: Ref | None = Field(None, description="Only memories about this data subject.")
    memory_type: MemoryType | None = Field(None, description="Only this memory type "
                                           "('knowledge' for knowledge chunks, 'entry' for "
                                           "entries).")
    tags: list[Tag] = Field(default_factory=list, max_length=20,
                            description="Only memories carrying every one of these tags.")
    limit: int = Field(10, ge=1, le=100, description="How many results, at most (1-100).")
    include_values: bool = Field(True, description="Return each result's value, read from "
                                 "the bucket (or the verified-value cache) and verified.")


class SearchResultOut(BaseModel):
    kind: Kind = Field(description="memory (by key), entry or knowledge (a chunk).")
    pointer_id: uuid.UUID = Field(description="The pointer's id.")
    scope: str = Field(description="The memory's scope.")
    scope_ref: str = Field(description="The memory's scope ref.")
    key: str | None = Field(description="The memory's key; null for an entry.")
    title: str | None = Field(description="The memory's title, if any.")
    memory_type: str = Field(description="The memory's type (knowledge, entry, fact, ...).")
    tags: list[str] = Field(description="The memory's tags.")
    score: float = Field(description="Fused rank score (reciprocal rank fusion of the vector "
                         "and keyword ranks); higher is better.")
    value: Any = Field(None, description="The verified value (null when include_values is "
                       "false).")


class SearchOut(BaseModel):
    results: list[SearchResultOut] = Field(description="The hits, best first.")
    embedder: str = Field(description="The embedder that made the query's vector.")
    took_ms: float = Field(description="Time the search took on the server, in ms.")
