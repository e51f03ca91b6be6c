"""Memory hygiene in the SDK: the answers and the request builders of retention policies,
retention runs, cleanup and legal holds (``client.retention``, ``client.legal_holds``,
``client.memory.cleanup``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from ._base import Call, _idempotency, _without_none, parse_model, parse_nothing, path_segment
from ._compliance import Job
from ._models import Page

__all__ = ["CleanupItem", "CleanupResult", "LegalHold", "RetentionPolicy", "parse_days"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class RetentionPolicy(_Model):
    """How long a scope's memories of one type (None: every type; ``event``: the raw
    events) are kept, and whether the daily run deletes what is due."""

    id: str
    scope: str
    memory_type: str | None = None
    retention_days: int
    archive_after_days: int | None = None
    auto_delete: bool
    keep_importance_at_least: int | None = None
    created_at: datetime
    updated_at: datetime


class LegalHold(_Model):
    """A legal hold on a subject, a scope ref or the tenant; ``active`` until lifted."""

    id: str
    target: str
    user_id: str | None = None
    scope: str | None = None
    scope_ref: str | None = None
    reason: str
    active: bool
    created_by: str
    created_at: datetime
    lifted_by: str | None = None
    lifted_at: datetime | None = None


class CleanupItem(_Model):
    pointer_id: str
    scope: str
    scope_ref: str
    key: str | None = None
    updated_at: datetime


class CleanupResult(_Model):
    """What a cleanup deleted (or, on a dry run, would delete: ``items``)."""

    dry_run: bool
    matched: int
    deleted: int
    held: int
    excluded: int
    important: int = 0
    items: list[CleanupItem] | None = None
    truncated: bool = False


_DAYS = re.compile(r"^\s*(\d+)\s*([dwy]?)\s*$")
_UNIT_DAYS = {"": 1, "d": 1, "w": 7, "y": 365}


def parse_days(value: str | int, name: str = "older_than") -> int:
    """``180``, ``'180'``, ``'180d'``, ``'26w'`` or ``'1y'`` as a number of days."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    found = _DAYS.match(str(value))
    if found is None:
        raise ValueError(f"{name} must be a number of days such as 180 or '180d' (also "
                         f"'26w', '1y'), not {value!r}")
    return int(found.group(1)) * _UNIT_DAYS[found.group(2)]


def retention_put(*, scope: str, retention_days: int, auto_delete: bool,
                  memory_type: str | None = None, archive_after_days: int | None = None,
                  keep_importance_at_least: int | None = None) -> Call[RetentionPolicy]:
    fields = {"scope": scope, "memory_type": memory_type, "retention_days": retention_days,
              "archive_after_days": archive_after_days, "auto_delete": auto_delete,
              "keep_importance_at_least": keep_importance_at_least}
    return Call("PUT", "/v1/retention-policies", parse_model(RetentionPolicy),
                json=_without_none(fields))


def retention_list() -> Call[Page[RetentionPolicy]]:
    return Call("GET", "/v1/retention-policies", parse_model(Page[RetentionPolicy]))


def retention_delete(policy_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/retention-policies/{path_segment(str(policy_id), name='id')}",
                parse_nothing)


def retention_run(*, dry_run: bool) -> Call[Job]:
    return Call("POST", "/v1/retention/run", parse_model(Job), json={"dry_run": dry_run})


def _cleanup_answer(response: httpx.Response) -> CleanupResult | Job:
    if response.status_code == 202:
        return parse_model(Job)(response)
    return parse_model(CleanupResult)(response)


def cleanup(*, scope: str | None, scope_ref: str | None, agent_id: str | None,
            older_than_days: int, exclude_keys: Sequence[str] | None,
            dry_run: bool, keep_importance_at_least: int | None = None
            ) -> Call[CleanupResult | Job]:
    return Call("POST", "/v1/cleanup", _cleanup_answer, json=_without_none({
        "scope": scope, "scope_ref": scope_ref, "agent_id": agent_id,
        "older_than_days": older_than_days,
        "exclude_keys": list(exclude_keys) if exclude_keys else None, "dry_run": dry_run,
        "keep_importance_at_least": keep_importance_at_least}))


def hold_place(fields: dict[str, Any], idempotency_key: str | None) -> Call[LegalHold]:
    return Call("POST", "/v1/legal-holds", parse_model(LegalHold),
                json=_without_none(fields), headers=_idempotency(idempotency_key))


def hold_list() -> Call[Page[LegalHold]]:
    return Call("GET", "/v1/legal-holds", parse_model(Page[LegalHold]))


def hold_lift(hold_id: str) -> Call[LegalHold]:
    return Call("DELETE", f"/v1/legal-holds/{path_segment(str(hold_id), name='hold_id')}",
                parse_model(LegalHold))
