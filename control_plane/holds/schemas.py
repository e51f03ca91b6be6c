from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..addresses import Ref, Scope
from ..db.models import LegalHold

Reason = Literal["litigation", "regulatory", "investigation", "audit", "other"]


class HoldIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"user_id": "u-42", "reason": "litigation"},
        {"scope": "entity", "scope_ref": "ent_acme", "reason": "investigation"},
        {"tenant": True, "reason": "regulatory"}]})

    user_id: Ref | None = Field(None, description="Hold everything of this data subject "
                                "(as export and erasure find it).")
    scope: Scope | None = Field(None, description="Hold one scope ref (with scope_ref).")
    scope_ref: Ref | None = Field(None, description="The scope ref to hold.")
    tenant: bool = Field(False, description="Hold the whole tenant.")
    reason: Reason = Field(description="The category of the hold, shown in refusals: "
                           "litigation, regulatory, investigation, audit or other. Keep "
                           "case details out of memplane.")

    @model_validator(mode="after")
    def _one_target(self) -> HoldIn:
        chosen = [self.user_id is not None, self.scope is not None or self.scope_ref is not None,
                  self.tenant]
        if sum(chosen) != 1:
            raise ValueError("name exactly one target: user_id, or scope with scope_ref, or "
                             "tenant: true")
        if (self.scope is None) != (self.scope_ref is None):
            raise ValueError("a scope hold needs both scope and scope_ref")
        return self


class HoldOut(BaseModel):
    id: str = Field(description="The hold's id.", examples=["lh_3f2a9c0d1e4b5a6c"])
    target: str = Field(description="subject, scope or tenant.")
    user_id: str | None = Field(description="The held subject while the hold is active; "
                                "null once lifted (only a keyed hash is kept).")
    scope: str | None = Field(description="The held scope (scope holds).")
    scope_ref: str | None = Field(description="The held scope ref while active; null once "
                                  "lifted when it names a user.")
    reason: str = Field(description="The hold's category.")
    active: bool = Field(description="False once lifted.")
    created_by: str = Field(description="The key that placed it (key:<id>).")
    created_at: datetime = Field(description="When it was placed (UTC).")
    lifted_by: str | None = Field(description="The key that lifted it.")
    lifted_at: datetime | None = Field(description="When it was lifted (UTC).")

    @classmethod
    def of(cls, hold: LegalHold) -> HoldOut:
        return cls(id=hold.id, target=hold.target, user_id=hold.user_id,
                   scope=hold.scope_type, scope_ref=hold.scope_ref, reason=hold.reason,
                   active=hold.lifted_at is None, created_by=hold.created_by,
                   created_at=hold.created_at, lifted_by=hold.lifted_by,
                   lifted_at=hold.lifted_at)


class HoldPage(BaseModel):
    items: list[HoldOut] = Field(description="The tenant's holds, oldest first.")
    next_cursor: str | None = Field(None, description="Always null: a tenant's holds fit in "
                                    "one page.")
