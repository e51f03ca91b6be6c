"""Which rows the tenant's retention policies hide: a memory, entry or event past an
auto-deleting policy's retention is left out of lists and searches while it waits for the
retention run to delete it.

A policy governs a scope's memories of one type, or (``memory_type`` ``*``) every type of
the scope that no policy of its own type governs; ``event`` governs the scope's raw events
and ``*`` covers them too unless an ``event`` policy exists. Age is the last write
(``updated_at``) of a memory or entry and ``occurred_at`` of an event. The retention run
(``retention.sweep``) deletes by the same rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, false, not_, or_, select, true
from sqlalchemy.orm import Session

from ..db.models import MemoryEvent, MemoryPointer, RetentionPolicy

# A policy's memory type for "every type of its scope", and for the scope's raw events.
ALL_TYPES = "*"
EVENT = "event"


def policies(session: Session, tenant_id: uuid.UUID) -> Sequence[RetentionPolicy]:
    return session.scalars(select(RetentionPolicy).where(RetentionPolicy.tenant_id == tenant_id)
                           .order_by(RetentionPolicy.scope_type,
                                     RetentionPolicy.memory_type)).all()


def pointer_scope(policy: RetentionPolicy,
                  all_policies: Sequence[RetentionPolicy]) -> ColumnElement[bool]:
    """The pointers (memories and entries) ``policy`` governs, whatever their age; those of
    its ``keep_importance_at_least`` or more it keeps, so it does not govern them."""
    if policy.memory_type == EVENT:
        return false()
    keep = getattr(policy, "keep_importance_at_least", None)
    important = MemoryPointer.importance < keep if keep is not None else true()
    if policy.memory_type != ALL_TYPES:
        return and_(MemoryPointer.scope_type == policy.scope_type,
                    MemoryPointer.memory_type == policy.memory_type, important)
    others = [p.memory_type for p in all_policies if p.scope_type == policy.scope_type
              and p.memory_type not in (ALL_TYPES, EVENT)]
    return and_(MemoryPointer.scope_type == policy.scope_type,
                MemoryPointer.memory_type.not_in(others) if others else true(), important)


def event_scope(policy: RetentionPolicy,
                all_policies: Sequence[RetentionPolicy]) -> ColumnElement[bool]:
    """The raw events ``policy`` governs, whatever their age."""
    if policy.memory_type == EVENT:
        return MemoryEvent.scope_type == policy.scope_type
    if policy.memory_type == ALL_TYPES and not any(
            p.scope_type == policy.scope_type and p.memory_type == EVENT for p in all_policies):
        return MemoryEvent.scope_type == policy.scope_type
    return false()


def cutoff(days: int, now: datetime) -> datetime:
    return now - timedelta(days=days)


def expired_pointers(session: Session, tenant_id: uuid.UUID,
                     now: datetime) -> ColumnElement[bool] | None:
    """Pointers of the tenant past an auto-deleting policy's retention at ``now`` or past
    their own ``ttl_days``: lists leave them out while they wait for the next run. None when
    nothing is."""
    return expired_under(policy_rows(session, tenant_id), now)


def policy_rows(session: Session, tenant_id: uuid.UUID) -> Sequence[Any]:
    """The tenant's retention policies as plain rows of what ``expired_under`` reads: a list
    or search asks on every call, and ORM objects would cost it more than the statement."""
    R = RetentionPolicy
    return session.execute(
        select(R.scope_type, R.memory_type, R.retention_days, R.auto_delete,
               R.keep_importance_at_least)
        .where(R.tenant_id == tenant_id).order_by(R.scope_type, R.memory_type)).all()


def expired_under(found: Sequence[RetentionPolicy],
                  now: datetime) -> ColumnElement[bool] | None:
    """``expired_pointers`` for policies already read (anything with the attributes of a
    RetentionPolicy: ``scope_type``, ``memory_type``, ``retention_days``, ``auto_delete``)."""
    terms = [and_(governed, MemoryPointer.updated_at < cutoff(days, now))
             for governed, days in deleting(found)]
    return or_(*terms) if terms else None


def deleting(found: Sequence[RetentionPolicy]) -> list[tuple[ColumnElement[bool], int]]:
    """(the pointers it governs, its retention days) of each auto-deleting policy: a pointer
    governed by one and last written before ``cutoff(days, now)`` is hidden at ``now``."""
    return [(pointer_scope(p, found), p.retention_days) for p in found if p.auto_delete]


def visible_pointers(session: Session, tenant_id: uuid.UUID,
                     now: datetime) -> ColumnElement[bool] | None:
    """The condition a pointer list adds (None: no policy hides anything)."""
    expired = expired_pointers(session, tenant_id, now)
    return None if expired is None else not_(expired)


def visible_events(session: Session, tenant_id: uuid.UUID,
                   now: datetime) -> ColumnElement[bool] | None:
    """The condition an event list adds (None: no policy hides anything)."""
    found = list(policies(session, tenant_id))
    terms = [and_(event_scope(p, found), MemoryEvent.occurred_at < cutoff(
        p.retention_days, now)) for p in found if p.auto_delete]
    return not_(or_(*terms)) if terms else None
