"""Cleanup (``POST /v1/cleanup``): deletes the memories by key of a selection (scope, scope
ref, agent) last written ``older_than_days`` ago or more, except ``exclude_keys`` and held
ones, with the memories' delete protocol as the retention run does (``retention.sweep``); a
dry run lists what would go. Above ``CLEANUP_INLINE_LIMIT`` memories it runs as a
``cleanup`` job.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, false, func, not_, or_, select, update
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import Job, LegalHold, MemoryPointer
from ..holds import repository as holds_repo
from ..identity import EVERYTHING, Access, Actor
from ..jobs.service import JobContext, enqueue
from ..memories import visibility
from ..memories.api import finish_deletes
from ..plane.data_plane import DataPlane
from ..tenants.access import ensure_visible
from . import repository as repo
from .schemas import CleanupIn, CleanupItem, CleanupOut

CLEANUP_KIND = "cleanup"
BATCH = 500  # memories marked and deleted per transaction
CLEANUP_INLINE_LIMIT = 1000
DRY_RUN_ITEMS = 1000


def _selection(tenant_id: uuid.UUID, body: CleanupIn, before: datetime,
               access: Access) -> list[ColumnElement[bool]]:
    terms: list[ColumnElement[bool]] = [
        MemoryPointer.tenant_id == tenant_id, MemoryPointer.key.is_not(None),
        MemoryPointer.updated_at < before, MemoryPointer.sync_status.in_(repo.LIVE)]
    if body.scope is not None:
        terms.append(MemoryPointer.scope_type == body.scope.canonical)
    if body.scope_ref is not None:
        terms.append(MemoryPointer.scope_ref == body.scope_ref)
    if body.agent_id is not None:
        terms.append(MemoryPointer.agent_id == body.agent_id)
    visible = access.where(MemoryPointer.scope_type, MemoryPointer.scope_ref,
                           MemoryPointer.subject_user_id)
    if visible is not None:
        terms.append(visible)
    return terms


def _kept(body: CleanupIn) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """(kept by key, kept by importance): what the selection leaves whatever its age."""
    by_key = (MemoryPointer.key.in_(body.exclude_keys) if body.exclude_keys
              else MemoryPointer.key.is_(None))
    important = (MemoryPointer.importance >= body.keep_importance_at_least
                 if body.keep_importance_at_least is not None else false())
    return by_key, important


def _count(session: Session, *terms: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(MemoryPointer)
                              .where(*terms)) or 0)


def cleanup(session: Session, plane: DataPlane, actor: Actor, body: CleanupIn, *,
            access: Access = EVERYTHING, now: datetime | None = None) -> CleanupOut | Job:
    """``POST /v1/cleanup``: delete (or, on a dry run, list) the selection's old memories;
    a Job when more than ``CLEANUP_INLINE_LIMIT`` would go."""
    with audited(session, actor, "cleanup", detail="cleanup requested"):
        if body.scope is not None and body.scope_ref is not None:
            ensure_visible(session, actor, access, body.scope.canonical, body.scope_ref,
                           operation="cleanup", what=f"{body.scope.canonical} memories",
                           missing="no memories in that scope")
        now = now or utcnow()
        before = visibility.cutoff(body.older_than_days, now)
        holds = list(holds_repo.active(session, actor.tenant_id))
        held = holds_repo.pointers_held(holds)
        terms = _selection(actor.tenant_id, body, before, access)
        by_key, important = _kept(body)
        excluded = _count(session, *terms, by_key)
        important_count = _count(session, *terms, not_(by_key), important)
        kept = or_(by_key, important)
        held_count = _count(session, *terms, not_(kept), held)
        matched = _count(session, *terms, not_(kept), not_(held))
        if body.dry_run:
            rows = list(session.scalars(select(MemoryPointer).where(
                *terms, not_(kept), not_(held)).order_by(MemoryPointer.id)
                .limit(DRY_RUN_ITEMS)))
            session.rollback()
            begin_write(session)
            audit.record(session, actor, "cleanup",
                         detail=f"dry run: {matched} would be deleted, {held_count} held, "
                                f"{excluded} excluded, {important_count} important")
            session.commit()
            return CleanupOut(dry_run=True, matched=matched, deleted=0, held=held_count,
                              excluded=excluded, important=important_count,
                              truncated=matched > len(rows),
                              items=[CleanupItem(pointer_id=p.id, scope=p.scope_type,
                                                 scope_ref=p.scope_ref, key=p.key,
                                                 updated_at=p.updated_at) for p in rows])
        session.rollback()
        if matched > CLEANUP_INLINE_LIMIT:
            begin_write(session)
            params = body.model_dump(mode="json")
            params.update(before=before.isoformat(), grants=_grants(access))
            if access.teams:  # the job asks the agent's teams again when it runs
                params["grants_agent"] = access.agent_id
            job = enqueue(session, actor.tenant_id, CLEANUP_KIND,
                          subject=body.scope_ref if body.scope is not None
                          and body.scope.canonical == "user" else None, params=params)
            audit.record(session, actor, "cleanup",
                         detail=f"cleanup of {matched} memories queued as job {job.id}")
            session.commit()
            return job
        deleted = _cleanup_delete(session, plane, actor, terms, kept, holds, None)
        begin_write(session)
        audit.record(session, actor, "cleanup",
                     detail=f"{deleted} deleted, {held_count} held, {excluded} excluded, "
                            f"{important_count} important")
        session.commit()
        return CleanupOut(dry_run=False, matched=matched, deleted=deleted, held=held_count,
                          excluded=excluded, important=important_count)


def _grants(access: Access) -> list[dict[str, str]] | None:
    if access.grants is None:
        return None
    return [{"scope": g.scope, "scope_ref": g.scope_ref} for g in access.grants]


def _cleanup_delete(session: Session, plane: DataPlane, actor: Actor,
                    terms: Sequence[ColumnElement[bool]], kept: ColumnElement[bool],
                    holds: Sequence[LegalHold], job: JobContext | None) -> int:
    deleted = int(job.progress.get("deleted", 0)) if job is not None else 0
    held = holds_repo.pointers_held(holds)

    def save(removed: int) -> None:
        nonlocal deleted
        deleted += removed
        if job is not None:
            job.save(deleted=deleted)

    while True:
        if job is not None:
            job.check()
        batch = list(session.scalars(select(MemoryPointer).where(
            *terms, not_(kept), not_(held)).order_by(MemoryPointer.id).limit(BATCH)))
        session.commit()
        if not batch:
            return deleted
        begin_write(session)
        for pointer in batch:
            pointer.sync_status = "pending_delete"  # updated_at stays: still selected on a rerun
        session.commit()
        plane.checkpoint("cleanup:after_mark")
        finish_deletes(session, plane, actor, batch, "delete", detail="cleanup",
                       before_commit=save)


def run_cleanup_job(ctx: JobContext) -> dict[str, Any]:
    """The ``cleanup`` job handler: the request's selection, as of the request's cutoff."""
    params = dict(ctx.params)
    if "before" not in params:  # finished and scrubbed; a crash came before its record
        return {"dry_run": False, "deleted": int(ctx.progress.get("deleted", 0)),
                "held": int(ctx.progress.get("held", 0))}
    before = datetime.fromisoformat(params.pop("before"))
    access = Access.of(params.pop("grants", None), params.pop("grants_agent", None),
                       ctx.tenant_id)
    body = CleanupIn.model_validate(params)
    terms = _selection(ctx.tenant_id, body, before, access)
    kept = or_(*_kept(body))
    holds = list(holds_repo.active(ctx.session, ctx.tenant_id))
    held_count = _count(ctx.session, *terms, not_(kept), holds_repo.pointers_held(holds))
    ctx.session.commit()
    deleted = _cleanup_delete(ctx.session, ctx.plane, ctx.actor, terms, kept, holds, ctx)
    begin_write(ctx.session)
    audit.record(ctx.session, ctx.actor, "cleanup",
                 detail=f"job {ctx.job_id}: {deleted} deleted, {held_count} held")
    # The selection may name a data subject (a user scope ref) or keys: the finished job
    # keeps neither, so nothing personal outlives it in the control plane.
    ctx.save(held=held_count)
    ctx.session.execute(update(Job).where(Job.id == ctx.job_id).values(
        subject=None, params={"older_than_days": body.older_than_days,
                              "dry_run": False, "scope": params.get("scope")}))
    ctx.session.commit()
    return {"dry_run": False, "deleted": deleted, "held": held_count}
