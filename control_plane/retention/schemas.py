from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..addresses import Ref, Scope
from ..db.models import RetentionPolicy
from ..memories.schemas import MemoryType
from ..memories.visibility import ALL_TYPES

MAX_DAYS = 36500
MAX_EXCLUDE_KEYS = 1000
# Importance as memories and entries have it: 1 (trivial) to 5 (critical).
Importance = Annotated[int, Field(ge=1, le=5)]


class PolicyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"scope": "user", "memory_type": "conversation_history", "retention_days": 90,
         "archive_after_days": 30, "auto_delete": True},
        {"scope": "entity", "memory_type": "event", "retention_days": 365,
         "auto_delete": False}]})

    scope: Scope = Field(description="The scope the policy governs.")
    memory_type: MemoryType | None = Field(
        None, description="Only memories of this type; `event` governs the scope's raw "
        "events and `entry` its curated entries. Omitted: every memory, entry and event of "
        "the scope that no policy of its own type governs.", examples=["conversation_history"])
    retention_days: int = Field(ge=1, le=MAX_DAYS, description="Delete (or, without "
                                "auto_delete, report) what was last written this many days "
                                "ago or more (events: occurred).")
    archive_after_days: int | None = Field(
        None, ge=1, le=MAX_DAYS, description="Move objects to the bucket's colder storage "
        "class this many days after their last write; must be less than retention_days.")
    auto_delete: bool = Field(description="true: the daily run deletes what is due, on both "
                              "planes with every object version. false: it only reports "
                              "what is due.")
    keep_importance_at_least: Importance | None = Field(
        None, description="Keep memories and entries of this importance (1-5) or more "
        "whatever their age: the run neither deletes nor archives them, lists keep showing "
        "them. Raw events have no importance and are not affected.", examples=[4])

    @model_validator(mode="after")
    def _archive_first(self) -> PolicyIn:
        if self.archive_after_days is not None and self.archive_after_days >= self.retention_days:
            raise ValueError("archive_after_days must be less than retention_days (objects "
                             "are archived before they are deleted)")
        return self


class PolicyOut(BaseModel):
    id: uuid.UUID = Field(description="The policy's id.")
    scope: str = Field(description="The scope it governs.")
    memory_type: str | None = Field(description="The memory type; null: every type.")
    retention_days: int = Field(description="Days after the last write that an item is due.")
    archive_after_days: int | None = Field(description="Days after the last write that its "
                                           "object moves to the colder class; null: never.")
    auto_delete: bool = Field(description="Whether the run deletes what is due (else it "
                              "only reports it).")
    keep_importance_at_least: int | None = Field(
        None, description="Memories and entries of this importance or more are kept "
        "whatever their age; null: none are.")
    created_at: datetime = Field(description="When the policy was first set (UTC).")
    updated_at: datetime = Field(description="When it was last replaced (UTC).")

    @classmethod
    def of(cls, policy: RetentionPolicy) -> PolicyOut:
        return cls(id=policy.id, scope=policy.scope_type,
                   memory_type=None if policy.memory_type == ALL_TYPES else policy.memory_type,
                   retention_days=policy.retention_days,
                   archive_after_days=policy.archive_after_days,
                   auto_delete=policy.auto_delete,
                   keep_importance_at_least=policy.keep_importance_at_least,
                   created_at=policy.created_at,
                   updated_at=policy.updated_at)


class PolicyPage(BaseModel):
    items: list[PolicyOut] = Field(description="The tenant's policies by scope and type.")
    next_cursor: str | None = Field(None, description="Always null: a tenant's policies fit "
                                    "in one page.")


class RetentionRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"dry_run": True}]})

    dry_run: bool = Field(False, description="Only count what is due; delete and archive "
                          "nothing.")


class CleanupIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"agent_id": "support-bot", "older_than_days": 180, "exclude_keys": ["preferences"],
         "dry_run": True}]})

    scope: Scope | None = Field(None, description="Only this scope.")
    scope_ref: Ref | None = Field(None, description="Only this scope ref (needs scope).")
    agent_id: Ref | None = Field(None, description="Only memories this agent wrote.")
    older_than_days: int = Field(ge=1, le=MAX_DAYS, description="Delete memories last "
                                 "written at least this many days ago.")
    exclude_keys: list[Ref] = Field(default_factory=list, max_length=MAX_EXCLUDE_KEYS,
                                    description="Keys to keep whatever their age.")
    keep_importance_at_least: Importance | None = Field(
        None, description="Keep memories of this importance (1-5) or more whatever their "
        "age.", examples=[4])
    dry_run: bool = Field(False, description="Only list what would go; delete nothing.")

    @model_validator(mode="after")
    def _ref_needs_scope(self) -> CleanupIn:
        if self.scope_ref is not None and self.scope is None:
            raise ValueError("scope_ref needs scope: give both, or only scope, or neither")
        return self


class CleanupItem(BaseModel):
    pointer_id: uuid.UUID = Field(description="The memory's pointer id.")
    scope: str = Field(description="Its scope.")
    scope_ref: str = Field(description="Its scope ref.")
    key: str | None = Field(description="Its key.")
    updated_at: datetime = Field(description="Its last write (UTC).")


class CleanupOut(BaseModel):
    dry_run: bool = Field(description="True: nothing was deleted.")
    matched: int = Field(description="Memories older than the cutoff in the selection, "
                         "excluded keys and held ones not counted.")
    deleted: int = Field(description="Memories deleted (0 on a dry run).")
    held: int = Field(description="Memories a legal hold kept.")
    excluded: int = Field(description="Memories kept because their key is in exclude_keys.")
    important: int = Field(0, description="Memories kept because their importance is at "
                           "least keep_importance_at_least (and their key not excluded).")
    items: list[CleanupItem] | None = Field(None, description="Dry run: what would go, "
                                            "oldest id order, at most 1,000.")
    truncated: bool = Field(False, description="More would go than `items` lists.")

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
