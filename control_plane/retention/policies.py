"""Retention policies: how long a scope's memories (of one memory type, or all of them) are
kept. Created or replaced, listed and deleted here, each with its audit row; the run that
applies them is ``retention.sweep``."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import RetentionPolicy, Tenant
from ..errors import NotFound
from ..identity import Actor
from ..memories import visibility
from ..memories.visibility import ALL_TYPES
from . import repository as repo
from .schemas import PolicyIn


def put_policy(session: Session, actor: Actor, body: PolicyIn) -> RetentionPolicy:
    """Create or replace the policy of (scope, memory type) (``PUT /v1/retention-policies``)."""
    scope, memory_type = body.scope.canonical, body.memory_type or ALL_TYPES
    with audited(session, actor, "retention_policy_write", detail=f"{scope}/{memory_type}"):
        session.rollback()
        begin_write(session)
        # Two writers of one (scope, type) queue on the tenant row, so the second updates
        # the row the first inserted instead of failing on the unique constraint.
        session.execute(select(Tenant.id).where(Tenant.id == actor.tenant_id)
                        .with_for_update(key_share=True))
        now = utcnow()
        policy = repo.find(session, actor.tenant_id, scope, memory_type)
        if policy is None:
            policy = RetentionPolicy(tenant_id=actor.tenant_id, scope_type=scope,
                                     memory_type=memory_type, created_at=now)
            session.add(policy)
        policy.retention_days, policy.auto_delete = body.retention_days, body.auto_delete
        policy.archive_after_days, policy.updated_at = body.archive_after_days, now
        policy.keep_importance_at_least = body.keep_importance_at_least
        session.flush()
        audit.record(session, actor, "retention_policy_write",
                     detail=f"policy {policy.id} {scope}/{memory_type}: retention_days="
                            f"{body.retention_days} archive_after_days="
                            f"{body.archive_after_days} auto_delete={body.auto_delete} "
                            f"keep_importance_at_least={body.keep_importance_at_least}")
        session.commit()
        return policy


def list_policies(session: Session, actor: Actor) -> list[RetentionPolicy]:
    with audited(session, actor, "retention_policy_read"):
        found = list(visibility.policies(session, actor.tenant_id))
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "retention_policy_read",
                     detail=f"{len(found)} policies listed")
        session.commit()
        return found


def delete_policy(session: Session, actor: Actor, policy_id: uuid.UUID) -> None:
    with audited(session, actor, "retention_policy_delete", detail=f"policy {policy_id}"):
        session.rollback()
        begin_write(session)
        policy = repo.get(session, actor.tenant_id, policy_id)
        if policy is None:
            raise NotFound(f"no retention policy {policy_id}")
        session.delete(policy)
        audit.record(session, actor, "retention_policy_delete",
                     detail=f"policy {policy_id} {policy.scope_type}/{policy.memory_type} "
                            "deleted")
        session.commit()
