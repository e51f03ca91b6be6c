from __future__ import annotations

import uuid

from pydantic import BaseModel, Field


class ProblemOut(BaseModel):
    pointer_id: uuid.UUID = Field(description="The pointer whose object has the problem.")
    scope: str = Field(description="Its scope.", examples=["user"])
    scope_ref: str = Field(description="Its scope ref.", examples=["u-42"])
    key: str | None = Field(description="Its key; null for a scope-wide pointer.")
    kind: str = Field(description="missing, corrupt or restored.", examples=["missing"])
    reason: str = Field(description="What was found, in a sentence.")


class IntegrityOut(BaseModel):
    tenant_id: uuid.UUID = Field(description="The tenant checked (the caller's).")
    clean: bool = Field(description="True when every object matched its pointer's hash.")
    checked: int = Field(description="Pointers whose objects were read and hashed.")
    ok: int = Field(description="Objects that matched.")
    missing: int = Field(description="Pointers whose object is gone from the bucket.")
    corrupt: int = Field(description="Objects whose content no longer matches the hash.")
    restored: int = Field(description="Objects put back from an earlier bucket version.")
    objects: int = Field(description="Objects listed in the bucket.")
    orphaned: int = Field(description="Objects no pointer names (left for garbage "
                          "collection).")
    problems: list[ProblemOut] = Field(description="One entry per pointer with a problem.")
