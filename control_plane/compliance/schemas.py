from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"format": "json"}]})

    format: Literal["json"] = Field("json", description="Archive format; JSON is the only one.")


class EraseIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"dry_run": True}]})

    dry_run: bool = Field(False, description="Count what would be deleted and delete nothing; "
                          "writes are not blocked.")


class SubjectLayers(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memories: int = Field(description="Memories by key in any scope that name the subject "
                          "or live in their user scope (knowledge chunks not counted).")
    entries: int = Field(description="Curated entries of the subject.")
    events: int = Field(description="Raw events of the subject.")
    conversations: int = Field(description="Conversations whose subject is this user.")
    knowledge: int = Field(description="Knowledge chunks that name the subject (documents "
                           "usually have none).")
    embeddings: int = Field(description="Of the memories and entries, how many have a stored "
                            "embedding vector.")


class SubjectHold(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The hold's id (lh_…).")
    target: str = Field(description="subject, scope (the user scope) or tenant.")
    reason: str = Field(description="The hold's category.")
    created_at: datetime = Field(description="When it was placed (UTC).")


class SubjectJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: uuid.UUID = Field(description="The job's id (GET /v1/jobs/{id}).")
    kind: str = Field(description="export or erase.")
    state: str = Field(description="queued, running, completed or failed.")
    dry_run: bool = Field(description="An erasure's dry run (those are not kept under the "
                          "subject once planned, so this is rarely true).")
    created_at: datetime = Field(description="When it was requested (UTC).")
    updated_at: datetime = Field(description="Its last change (UTC).")
    receipt_id: str | None = Field(description="A completed erasure's signed receipt "
                                   "(GET /v1/receipts/{id}).")
    archive_expires_at: str | None = Field(description="A completed export's archive is "
                                           "deleted after this (ISO-8601 UTC).")


class SubjectSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    layers: SubjectLayers = Field(description="What memplane holds about the subject, "
                                  "counted by layer; no content.")
    total: int = Field(description="Memories, entries, events, conversations and knowledge "
                       "chunks together (embeddings belong to memories and entries).")
    holds: list[SubjectHold] = Field(description="Active legal holds covering the subject "
                                     "(on the subject, their user scope or the tenant); an "
                                     "erasure is refused while any is active.")
    erasure_in_progress: str | None = Field(description="The job id of an erasure that has "
                                            "started and not finished.")
    erased: bool = Field(description="True when an erasure of this user id has completed "
                         "before (its job is listed by keyed hash).")
    jobs: list[SubjectJob] = Field(description="The subject's export and erasure jobs, "
                                   "newest first (at most 100).")
