"""The retention run: the tenant's policies, each agent's user-memory retention, and the
``ttl_days`` purge.

**The run** (a ``retention`` job: daily from ``MEMPLANE_RETENTION_SCHEDULE``, or
``POST /v1/retention/run``) goes through the tenant's policies, then the memories whose
``ttl_days`` ran out. What is due and not under a legal hold is deleted in batches with the
memories' delete protocol (``memories.api.finish_deletes``): the batch is marked
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
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, not_, or_, select, true
from sqlalchemy.orm import Session

from ..archive import service as archive_tier
from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import (
    AgentSettings,
    CompactionEvent,
    MemoryEvent,
    MemoryPointer,
    RetentionPolicy,
)
from ..holds import repository as holds_repo
from ..identity import Actor
from ..jobs.service import JobContext
from ..memories import visibility
from ..memories.api import finish_deletes
from ..memories.visibility import ALL_TYPES
from ..plane.data_plane import DataPlane, storage_errors
from . import repository as repo

BATCH = 500


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
        policies = list(visibility.policies(self.session, self.tenant_id))
        holds = list(holds_repo.active(self.session, self.tenant_id))
        self.session.commit()
        held_pointers = holds_repo.pointers_held(holds)
        held_events = holds_repo.events_held(holds)
        results: list[dict[str, Any]] = []
        for policy in policies:
            name = f"policy:{policy.id}"
            counts = defaultdict(int, self._saved(name))
            deleting = policy.auto_delete and not self.dry_run
            before = visibility.cutoff(policy.retention_days, self.now)
            pointers = visibility.pointer_scope(policy, policies)
            events = visibility.event_scope(policy, policies)
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
            before = visibility.cutoff(days, self.now)
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
        before = visibility.cutoff(policy.archive_after_days, self.now)
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
