from __future__ import annotations

import uuid

from pydantic import BaseModel


class ProblemOut(BaseModel):
    pointer_id: uuid.UUID
    scope: str
    scope_ref: str
    key: str | None
    kind: str
    reason: str


class IntegrityOut(BaseModel):
    tenant_id: uuid.UUID
    clean: bool
    checked: int
    ok: int
    missing: int
    corrupt: int
    restored: int
    objects: int
    orphaned: int
    problems: list[ProblemOut]
