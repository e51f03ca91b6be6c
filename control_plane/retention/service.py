"""Retention policies, the retention run (policies + the ``ttl_days`` purge) and cleanup.

**The run** (a ``retention`` job: daily from ``MEMPLANE_RETENTION_SCHEDULE``, or
``POST /v1/retention/run``) goes through the tenant's policies, then the memories whose
``ttl_days`` ran out. What is due and not under a legal hold is deleted in batches with the
memories' delete protocol (``memories.delete._finish_deletes``): the batch is marked
``pending_delete`` and committed (lists and reads stop showing it), its objects are deleted —
every version and delete marker on a versioned bucket (``Target.delete``) —, then the rows
go with one ``delete`` audit row each naming the policy (or ``ttl``), the job's counts saved
in that same transaction. A worker killed anywhere in between leaves rows still marked
``pending_delete``; the rerun selects them again (they are still due), deletes their objects
again (deleting a missing object succeeds) and removes the rows once, so each item is
deleted and audited exactly once. Raw events go the same way (their compaction provenance
rows with them, so a later erasure does not take a compactor entry for an orphan).

A policy with ``auto_delete: false`` and a dry run only count what is due (``due``) per
policy; held items are counted as ``held``. ``archive_after_days`` hands the policy's objects
older than that and still in the default class to the archive tier
(``control_plane.archive.service.archive``: colder class, recorded on the row); objects the
bucket refused to move are counted as ``archive_failed`` and tried again on the next run.

Until the run, lists leave out what an auto-deleting policy has made due
(``repository.visible_pointers`` / ``visible_events``), as they leave out expired ``ttl_days``.

**Cleanup** (``POST /v1/cleanup``) deletes the memories by key of a selection (scope, scope
ref, agent) last written ``older_than_days`` ago or more, except ``exclude_keys`` and held
ones, with the same protocol; a dry run lists what would go. Above ``CLEANUP_INLINE_LIMIT``
memories it runs as a ``cleanup`` job.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, not_, or_, select, true, update
from sqlalchemy.orm import Session, sessionmaker

from ..archive import service as archive_tier
from ..audit import service as audit
from ..audit.service import Actor, audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import (
    AgentSettings,
    CompactionEvent,
    Job,
    LegalHold,
    MemoryEvent,
    MemoryPointer,
    RetentionPolicy,
    Tenant,
)
from ..errors import NotFound
from ..holds import repository as holds_repo
from ..jobs.service import JobContext, enqueue, enqueue_once
from ..memories.delete import _finish_deletes as finish_deletes
from ..plane.data_plane import DataPlane, storage_errors
from ..tenants.access import EVERYTHING, Access, ensure_visible
from . import repository as repo
from .schemas import (
    ALL_TYPES,
    CleanupIn,
    CleanupItem,
    CleanupOut,
    PolicyIn,
    RetentionRunIn,
)

log = logging.getLogger(__name__)

KIND = "retention"
CLEANUP_KIND = "cleanup"
BATCH = 500
CLEANUP_INLINE_LIMIT = 1000
DRY_RUN_ITEMS = 1000


# --- policies --------------------------------------------------------------------------------

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
        session.flush()
        audit.record(session, actor, "retention_policy_write",
                     detail=f"policy {policy.id} {scope}/{memory_type}: retention_days="
                            f"{body.retention_days} archive_after_days="
                            f"{body.archive_after_days} auto_delete={body.auto_delete}")
        session.commit()
        return policy


def list_policies(session: Session, actor: Actor) -> list[RetentionPolicy]:
    with audited(session, actor, "retention_policy_read"):
        found = list(repo.policies(session, actor.tenant_id))
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


# --- starting runs ---------------------------------------------------------------------------

def start_run(session: Session, actor: Actor, body: RetentionRunIn) -> Job:
    """Queue a retention run of the caller's tenant now (``POST /v1/retention/run``)."""
    with audited(session, actor, "retention_run", detail="retention run requested"):
        session.rollback()
        begin_write(session)
        job = enqueue(session, actor.tenant_id, KIND, subject=None,
                      params={"dry_run": body.dry_run})
        audit.record(session, actor, "retention_run",
                     detail=f"{'dry run' if body.dry_run else 'retention'} job {job.id} queued")
        session.commit()
        return job


def run_key(day: date) -> str:
    """The unique job key of a tenant's scheduled retention run on ``day`` (UTC)."""
    return f"retention:{day.isoformat()}"


def queue_daily_runs(sessions: sessionmaker[Session], day: date, owner: str) -> int:
    """Queue ``day``'s run for every tenant with a policy or a memory with ``ttl_days``;
    the unique job key makes it one run per tenant and day however many workers tick."""
    queued = 0
    with sessions() as session:
        tenants = sorted(set(session.scalars(select(RetentionPolicy.tenant_id).distinct()))
                         | set(session.scalars(select(MemoryPointer.tenant_id).distinct()
                                               .where(MemoryPointer.expires_at.is_not(None))))
                         | set(session.scalars(
                             select(AgentSettings.tenant_id).distinct().where(
                                 AgentSettings.user_memory_retention_days.is_not(None)))))
        session.rollback()
        for tenant_id in tenants:
            begin_write(session)
            job_id = enqueue_once(session, tenant_id, KIND, run_key(day),
                                  params={"dry_run": False, "scheduled_for": day.isoformat()})
            if job_id is None:
                session.rollback()
                continue
            audit.record(session, Actor(tenant_id, "system", f"scheduler:{owner}"),
                         "retention_run", detail=f"scheduled retention job {job_id} queued "
                                                 f"for {day.isoformat()}")
            session.commit()
            queued += 1
    return queued


# --- the run ---------------------------------------------------------------------------------

def run_job(ctx: JobContext) -> dict[str, Any]:
    """The ``retention`` job handler."""
    return run_tenant(ctx.session, ctx.plane, ctx.tenant_id, actor=ctx.actor,
                      dry_run=bool(ctx.params.get("dry_run")), job=ctx)


def run_tenant(session: Session, plane: DataPlane, tenant_id: uuid.UUID, *, actor: Actor,
               dry_run: bool = False, job: JobContext | None = None,
               now: datetime | None = None) -> dict[str, Any]:
    """Apply every policy of the tenant and purge its expired ``ttl_days`` memories; the
    counts (see the module docstring). ``now`` defaults to the clock (tests move it)."""
    now = now or utcnow()
    run = _Run(session, plane, tenant_id, actor, dry_run, job, now)
    return run.go()


class _Run:
    def __init__(self, session: Session, plane: DataPlane, tenant_id: uuid.UUID, actor: Actor,
                 dry_run: bool, job: JobContext | None, now: datetime) -> None:
        self.session, self.plane, self.tenant_id = session, plane, tenant_id
        self.actor, self.dry_run, self.job, self.now = actor, dry_run, job, now

    def _saved(self, name: str) -> dict[str, int]:
        if self.job is None:
            return {}
        return dict(self.job.progress.get(name, {}))

    def go(self) -> dict[str, Any]:
        policies = list(repo.policies(self.session, self.tenant_id))
        holds = list(holds_repo.active(self.session, self.tenant_id))
        self.session.commit()
        held_pointers = holds_repo.pointers_held(holds)
        held_events = holds_repo.events_held(holds)
        results: list[dict[str, Any]] = []
        for policy in policies:
            name = f"policy:{policy.id}"
            counts = defaultdict(int, self._saved(name))
            deleting = policy.auto_delete and not self.dry_run
            before = repo.cutoff(policy.retention_days, self.now)
            pointers = repo.pointer_scope(policy, policies)
            events = repo.event_scope(policy, policies)
            counts["held"] = (self._count_pointers(pointers, before, held_pointers)
                              + self._count_events(events, before, held_events))
            if not deleting:
                counts["due"] = (self._count_pointers(pointers, before, not_(held_pointers))
                                 + self._count_events(events, before, not_(held_events)))
            else:
                detail = f"retention policy {policy.id} ({policy.scope_type}/" \
                         f"{policy.memory_type}, {policy.retention_days} days)"
                self._delete_pointers(name, counts, pointers, before, held_pointers, detail)
                self._delete_events(name, counts, events, before, held_events, detail)
            if policy.archive_after_days is not None and not self.dry_run:
                self._archive(policy, pointers, events, counts)
            results.append({"policy_id": str(policy.id), "scope": policy.scope_type,
                            "memory_type": None if policy.memory_type == ALL_TYPES
                            else policy.memory_type, "auto_delete": policy.auto_delete,
                            "due": counts["due"], "deleted": counts["deleted"],
                            "held": counts["held"], "archived": counts["archived"],
                            "archive_failed": counts["archive_failed"]})
        agents = self._agents(held_pointers)
        ttl = defaultdict(int, self._saved("ttl"))
        everything = true()
        ttl["held"] = self._count_pointers(everything, self.now, held_pointers, ttl=True)
        if self.dry_run:
            ttl["due"] = self._count_pointers(everything, self.now, not_(held_pointers),
                                              ttl=True)
        else:
            self._delete_pointers("ttl", ttl, everything, self.now, held_pointers,
                                  "ttl_days expired", ttl_purge=True)
        result = {"dry_run": self.dry_run, "policies": results, "agents": agents,
                  "ttl": {"due": ttl["due"], "deleted": ttl["deleted"], "held": ttl["held"]},
                  "deleted": (sum(r["deleted"] for r in results) + ttl["deleted"]
                              + sum(a["deleted"] for a in agents)),
                  "held": (sum(r["held"] for r in results) + ttl["held"]
                           + sum(a["held"] for a in agents))}
        begin_write(self.session)
        audit.record(self.session, self.actor, "retention_run",
                     detail=f"{'dry run' if self.dry_run else 'run'}: {result['deleted']} "
                            f"deleted, {result['held']} held")
        self.session.commit()
        return result

    def _agents(self, held: ColumnElement[bool]) -> list[dict[str, Any]]:
        """The seed's per-agent ``userMemory.retention``: an agent's user memories (scope
        ``user``, or written with a data subject) last written longer ago are deleted like
        a policy's, with one audit row each naming the agent."""
        settings = list(self.session.scalars(
            select(AgentSettings).where(AgentSettings.tenant_id == self.tenant_id,
                                        AgentSettings.user_memory_retention_days.is_not(None))
            .order_by(AgentSettings.agent_id)))
        self.session.commit()
        results: list[dict[str, Any]] = []
        for agent in settings:
            days = int(agent.user_memory_retention_days or 0)
            name = f"agent:{agent.agent_id}"
            counts = defaultdict(int, self._saved(name))
            before = repo.cutoff(days, self.now)
            governed = and_(MemoryPointer.agent_id == agent.agent_id,
                            or_(MemoryPointer.scope_type == "user",
                                MemoryPointer.subject_user_id.is_not(None)))
            counts["held"] = self._count_pointers(governed, before, held)
            if self.dry_run:
                counts["due"] = self._count_pointers(governed, before, not_(held))
            else:
                self._delete_pointers(name, counts, governed, before, held,
                                      f"agent user-memory retention ({days} days)")
            results.append({"agent_id": agent.agent_id, "retention_days": days,
                            "due": counts["due"], "deleted": counts["deleted"],
                            "held": counts["held"]})
        return results

    def _count_pointers(self, governed: ColumnElement[bool], before: datetime,
                        held: ColumnElement[bool], ttl: bool = False) -> int:
        age = (and_(MemoryPointer.expires_at.is_not(None), MemoryPointer.expires_at <= before)
               if ttl else MemoryPointer.updated_at < before)
        found = int(self.session.scalar(select(func.count()).select_from(MemoryPointer).where(
            MemoryPointer.tenant_id == self.tenant_id, governed, age,
            MemoryPointer.sync_status.in_(repo.LIVE), held)) or 0)
        self.session.commit()
        return found

    def _count_events(self, governed: ColumnElement[bool], before: datetime,
                      held: ColumnElement[bool]) -> int:
        found = int(self.session.scalar(select(func.count()).select_from(MemoryEvent).where(
            MemoryEvent.tenant_id == self.tenant_id, governed, MemoryEvent.occurred_at < before,
            MemoryEvent.sync_status.in_(repo.LIVE), held)) or 0)
        self.session.commit()
        return found

    def _save(self, name: str, counts: dict[str, int]) -> Callable[[int], None]:
        def save(removed: int) -> None:
            counts["deleted"] += removed
            if self.job is not None:
                self.job.save(**{name: {k: v for k, v in counts.items() if k == "deleted"}})
        return save

    def _delete_pointers(self, name: str, counts: dict[str, int],
                         governed: ColumnElement[bool], before: datetime,
                         held: ColumnElement[bool], detail: str, ttl_purge: bool = False) -> None:
        while True:
            if self.job is not None:
                self.job.check()
            batch = list(repo.due_pointers(self.session, self.tenant_id, governed, before,
                                           held, BATCH, ttl=ttl_purge))
            self.session.commit()
            if not batch:
                return
            begin_write(self.session)
            for pointer in batch:
                # updated_at stays: a rerun after a crash must still find the row due
                pointer.sync_status = "pending_delete"
            self.session.commit()
            self.plane.checkpoint("retention:after_mark")
            finish_deletes(self.session, self.plane, self.actor, batch, "delete",
                           detail=detail, before_commit=self._save(name, counts))

    def _delete_events(self, name: str, counts: dict[str, int],
                       governed: ColumnElement[bool], before: datetime,
                       held: ColumnElement[bool], detail: str) -> None:
        while True:
            if self.job is not None:
                self.job.check()
            batch = list(repo.due_events(self.session, self.tenant_id, governed, before,
                                         held, BATCH))
            self.session.commit()
            if not batch:
                return
            ids = [e.id for e in batch]
            begin_write(self.session)
            for event in batch:
                event.sync_status = "pending_delete"
            self.session.commit()
            self.plane.checkpoint("retention:after_mark")
            by_config: dict[uuid.UUID, list[str]] = defaultdict(list)
            for event in batch:
                by_config[event.storage_config_id].append(event.storage_path)
            for config_id, paths in by_config.items():
                target = self.plane.by_id(self.session, config_id)
                self.session.commit()
                with storage_errors():
                    target.delete(paths)
            self.plane.checkpoint("delete:after_object")
            begin_write(self.session)
            removed = self.session.execute(
                delete(MemoryEvent).where(MemoryEvent.id.in_(ids),
                                          MemoryEvent.sync_status == "pending_delete")
                .execution_options(synchronize_session=False))
            self.session.execute(delete(CompactionEvent).where(CompactionEvent.event_id.in_(ids))
                                 .execution_options(synchronize_session=False))
            for event in batch:
                audit.record(self.session, self.actor, "delete", event_id=event.id,
                             detail=detail)
            self._save(name, counts)(int(removed.rowcount))  # type: ignore[attr-defined]
            self.session.commit()

    def _archive(self, policy: RetentionPolicy, pointers: ColumnElement[bool],
                 events: ColumnElement[bool], counts: dict[str, int]) -> None:
        """Hand the policy's objects older than ``archive_after_days`` and still in the
        default class to the archive tier (``archive.service.archive``), in batches."""
        assert policy.archive_after_days is not None
        before = repo.cutoff(policy.archive_after_days, self.now)
        for model, governed, age in (
                (MemoryPointer, pointers, MemoryPointer.updated_at < before),
                (MemoryEvent, events, MemoryEvent.occurred_at < before)):
            after: uuid.UUID | None = None
            while True:
                if self.job is not None:
                    self.job.check()
                query = (select(model.id).where(
                    model.tenant_id == self.tenant_id, governed, age,
                    model.sync_status == "synced", model.storage_class.is_(None))
                    .order_by(model.id).limit(BATCH))
                if after is not None:
                    query = query.where(model.id > after)
                ids = list(self.session.scalars(query))
                self.session.commit()
                if not ids:
                    break
                after = ids[-1]
                ids_of = ({"pointer_ids": ids} if model is MemoryPointer
                          else {"event_ids": ids})
                report = archive_tier.archive(self.session, self.plane, self.tenant_id,
                                              actor=self.actor, **ids_of)  # type: ignore[arg-type]
                if self.session.in_transaction():
                    self.session.commit()
                counts["archived"] += report.archived
                counts["archive_failed"] += report.failed


# --- cleanup ---------------------------------------------------------------------------------

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
    visible = access.where(MemoryPointer.scope_type, MemoryPointer.scope_ref)
    if visible is not None:
        terms.append(visible)
    return terms


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
        before = repo.cutoff(body.older_than_days, now)
        holds = list(holds_repo.active(session, actor.tenant_id))
        held = holds_repo.pointers_held(holds)
        terms = _selection(actor.tenant_id, body, before, access)
        kept = (MemoryPointer.key.in_(body.exclude_keys) if body.exclude_keys
                else MemoryPointer.key.is_(None))
        excluded = _count(session, *terms, kept)
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
                                f"{excluded} excluded")
            session.commit()
            return CleanupOut(dry_run=True, matched=matched, deleted=0, held=held_count,
                              excluded=excluded, truncated=matched > len(rows),
                              items=[CleanupItem(pointer_id=p.id, scope=p.scope_type,
                                                 scope_ref=p.scope_ref, key=p.key,
                                                 updated_at=p.updated_at) for p in rows])
        session.rollback()
        if matched > CLEANUP_INLINE_LIMIT:
            begin_write(session)
            params = body.model_dump(mode="json")
            params.update(before=before.isoformat(), grants=_grants(access))
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
                     detail=f"{deleted} deleted, {held_count} held, {excluded} excluded")
        session.commit()
        return CleanupOut(dry_run=False, matched=matched, deleted=deleted, held=held_count,
                          excluded=excluded)


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
    access = Access.of(params.pop("grants", None), None)
    body = CleanupIn.model_validate(params)
    terms = _selection(ctx.tenant_id, body, before, access)
    kept = (MemoryPointer.key.in_(body.exclude_keys) if body.exclude_keys
            else MemoryPointer.key.is_(None))
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
