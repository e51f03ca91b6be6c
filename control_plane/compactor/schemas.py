from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..addresses import Ref, Scope

DEFAULT_MIN_EVENTS = 3
DEFAULT_OLDER_THAN_DAYS = 90
MAX_MIN_EVENTS = 100


class CompactorConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"min_events": 3, "older_than_days": 90, "enabled": True}]})

    min_events: int = Field(
        DEFAULT_MIN_EVENTS, ge=2, le=MAX_MIN_EVENTS, description="Compact a (scope, scope "
        "ref) once it holds at least this many uncompressed events old enough.")
    older_than_days: int = Field(
        DEFAULT_OLDER_THAN_DAYS, ge=0, le=36500, description="Only events that occurred more "
        "than this many days before the run are compacted.")
    enabled: bool = Field(True, description="Whether the daily scheduled run includes this "
                          "tenant (a run started by hand always runs).")


class CompactorConfigOut(CompactorConfigIn):
    model_config = ConfigDict(extra="forbid")

    schedule: str = Field(description="The server's schedule (MEMPLANE_COMPACTOR_SCHEDULE, "
                          "cron in UTC, or 'off').", examples=["17 6 * * *"])
    next_run_at: datetime | None = Field(description="When the next scheduled run is "
                                         "queued (UTC); null when the schedule is off or this "
                                         "tenant's compactor is disabled.")
    updated_at: datetime | None = Field(description="When the thresholds were last set; "
                                        "null while the defaults apply.")


class CompactRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"dry_run": True}, {"scope": "entity", "scope_ref": "ent_acme"}]})

    dry_run: bool = Field(False, description="Only count what a run would compact; write "
                          "nothing.")
    scope: Scope | None = Field(None, description="Only this scope.")
    scope_ref: Ref | None = Field(None, description="Only this scope ref (needs scope).")

    @model_validator(mode="after")
    def _ref_needs_scope(self) -> CompactRunIn:
        if self.scope_ref is not None and self.scope is None:
            raise ValueError("scope_ref needs scope: give both, or only scope, or neither")
        return self


class ProvenanceEvent(BaseModel):
    event_id: uuid.UUID = Field(description="The raw event's id.")
    event_sha256: str = Field(description="SHA-256 of the event's body as it was summarised.")


class ProvenanceOut(BaseModel):
    entry_id: uuid.UUID = Field(description="The compactor entry (GET /v1/entries/{id}).")
    scope: str = Field(description="The scope of the events and the entry.",
                       examples=["entity"])
    scope_ref: str = Field(description="Their scope ref.", examples=["ent_acme"])
    provider: str = Field(description="The summariser: offline, openai-compatible, …")
    model: str = Field(description="The model the summariser used.")
    prompt_version: str = Field(description="The version of the compression prompt (or of "
                                "the offline summariser's rules).")
    event_count: int = Field(description="How many events the entry summarises.")
    job_id: uuid.UUID | None = Field(description="The compaction job that wrote the entry "
                                     "(null for `memplane compact`).")
    created_at: datetime = Field(description="When the entry was written (UTC).")
    events: list[ProvenanceEvent] = Field(description="The events summarised, in the order "
                                          "the summariser read them (occurred_at, id); "
                                          "events erased since come last.")


class ResummarizeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"entry_id": "0190c0de-0000-7000-8000-000000000001"}]})

    entry_id: uuid.UUID = Field(description="The compactor entry to write again from the "
                                "events it summarised (its provenance).")


class ResummarizeOut(BaseModel):
    entry_id: uuid.UUID = Field(description="The entry (GET /v1/entries/{id}).")
    version: int = Field(description="Its new version.")
    event_count: int = Field(description="How many events were summarised again.")
    provider: str = Field(description="The summariser that wrote the new version.")
    model: str = Field(description="Its model.")
    prompt_version: str = Field(description="Its prompt (or rules) version.")
    previous_provider: str = Field(description="The summariser of the replaced version.")
    previous_model: str = Field(description="The model of the replaced version.")
    previous_prompt_version: str = Field(description="The prompt version of the replaced "
                                         "version.")
    decisions_kept: int = Field(description="Decision lines of the replaced version kept "
                                "verbatim in a marked list (only when its importance is 5).")
