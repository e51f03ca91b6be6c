"""The compactor (DESIGN §8): old raw events become curated entries per (scope, scope ref).

For each bucket — a (scope, scope ref) with at least ``min_events`` uncompressed events that
occurred more than ``older_than_days`` ago (per tenant, ``PUT /v1/compactor/config``) —
a run reads the events in (occurred_at, id) order, reads their bodies hash-verified from the
bucket, has the tenant's summariser summarise each data subject's apart (``erase.py``), and
writes each summary as an entry (``source=compactor``, ``importance=4``) whose commit marks
the events compressed and records the provenance.

This module holds the compactor's entry points: its configuration, starting runs (by hand
and daily) and the ``compact`` job. The run itself: ``run.py``; what it compacts:
``selection.py``; summarising: ``summarise.py``; writing the entries: ``writing.py``; where
an entry comes from: ``provenance.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import CompactorSettings, Job, Tenant
from ..identity import EVERYTHING, Access, Actor
from ..jobs.daily import queue_for
from ..jobs.service import JobContext, enqueue
from ..plane.data_plane import DataPlane
from ..schedules import parse_schedule
from ..settings import Settings
from ..tenants.access import ensure_visible
from . import repository as repo
from .counts import Counts
from .run import Run
from .schedule import run_key
from .schemas import CompactorConfigIn, CompactorConfigOut, CompactRunIn
from .selection import Thresholds, thresholds

if TYPE_CHECKING:
    from ..summarizers import Summarizer

KIND = "compact"
WRITERS = 3


# --- configuration -------------------------------------------------------------------------

def _config_out(settings: Settings, limits: Thresholds,
                updated_at: datetime | None) -> CompactorConfigOut:
    schedule = parse_schedule(settings.compactor_schedule)
    next_run = schedule.next_after(utcnow()) if limits.enabled else None
    return CompactorConfigOut(min_events=limits.min_events,
                              older_than_days=limits.older_than_days, enabled=limits.enabled,
                              schedule=settings.compactor_schedule, next_run_at=next_run,
                              updated_at=updated_at)


def get_config(session: Session, settings: Settings, actor: Actor) -> CompactorConfigOut:
    """The tenant's thresholds (the defaults while none were set) and the server schedule."""
    with audited(session, actor, "compactor_config_read"):
        row = repo.get_settings(session, actor.tenant_id)
        limits = thresholds(session, actor.tenant_id)
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "compactor_config_read")
        session.commit()
        return _config_out(settings, limits, row.updated_at if row else None)


def set_config(session: Session, settings: Settings, actor: Actor,
               body: CompactorConfigIn) -> CompactorConfigOut:
    """Replace the tenant's thresholds; the next run (scheduled or by hand) uses them."""
    with audited(session, actor, "compactor_config_write"):
        session.rollback()
        begin_write(session)
        now = utcnow()
        row = repo.get_settings(session, actor.tenant_id)
        if row is None:
            row = CompactorSettings(tenant_id=actor.tenant_id)
            session.add(row)
        row.min_events, row.older_than_days = body.min_events, body.older_than_days
        row.enabled, row.updated_at = body.enabled, now
        audit.record(session, actor, "compactor_config_write",
                     detail=f"min_events={body.min_events} older_than_days="
                            f"{body.older_than_days} enabled={body.enabled}")
        session.commit()
        return _config_out(settings, Thresholds(body.min_events, body.older_than_days,
                                                body.enabled), now)


# --- starting runs ---------------------------------------------------------------------------

def start_run(session: Session, actor: Actor, body: CompactRunIn, *,
              access: Access = EVERYTHING) -> Job:
    """Queue a compaction of the caller's tenant now (``POST /v1/compactor/run``). Not bound
    by the daily key: a run by hand beside a scheduled one is safe, as each bucket commits
    only if none of its events was compacted meanwhile."""
    with audited(session, actor, "compact_run", detail="compaction requested"):
        scope = body.scope.canonical if body.scope else None
        if scope is not None:
            ensure_visible(session, actor, access, scope, body.scope_ref or "-",
                           operation="compact_run", what=f"{scope} events",
                           missing="no events in that scope")
        session.rollback()
        begin_write(session)
        # A user scope's ref is a data subject: the job names it as its subject, so the
        # subject's erasure finds this row and replaces the id with its salted hash.
        job = enqueue(session, actor.tenant_id, KIND,
                      subject=body.scope_ref if scope == "user" else None,
                      params={"dry_run": body.dry_run, "scope": scope,
                              "scope_ref": body.scope_ref})
        audit.record(session, actor, "compact_run",
                     detail=f"{'dry run' if body.dry_run else 'compaction'} job {job.id} "
                            f"queued{' for one scope' if scope else ''}")
        session.commit()
        return job


def queue_daily_runs(sessions: sessionmaker[Session], day: date, owner: str) -> int:
    """Queue the scheduled run of ``day`` for every active tenant (tenants with uncompressed
    events whose compactor is on); how many this call queued. Tenants already holding that
    day's job are passed over by the unique key, so racing schedulers queue each once."""
    with sessions() as session:
        tenants = repo.active_tenants(session)
        session.rollback()
        return queue_for(session, tenants, KIND, run_key(day), day, owner, "compact_run",
                         "compaction")


# --- the run -------------------------------------------------------------------------------

def run_job(ctx: JobContext) -> dict[str, Any]:
    """The ``compact`` job handler."""
    counts = compact_tenant(
        ctx.session, ctx.plane, ctx.settings, ctx.tenant_id, actor=ctx.actor,
        dry_run=bool(ctx.params.get("dry_run")), scope=ctx.params.get("scope"),
        scope_ref=ctx.params.get("scope_ref"), job=ctx)
    return counts.as_dict()


def compact_tenant(session: Session, plane: DataPlane, settings: Settings,
                   tenant_id: uuid.UUID, *, actor: Actor, dry_run: bool = False,
                   scope: str | None = None, scope_ref: str | None = None,
                   job: JobContext | None = None, summarizer: Summarizer | None = None,
                   writers: int = WRITERS, group: int | None = None,
                   now: Callable[[], datetime] = utcnow) -> Counts:
    """Compact every due bucket of the tenant (or of one scope); see ``run.py``.
    With ``job``, counts are saved in its progress with each bucket's commit, and a job
    taken over resumes with them (and with the first attempt's cutoff). ``summarizer``:
    default, the tenant's (``summarizers.summarizer_for``). ``writers``: threads writing
    groups of entries side by side. ``group``: entries per write transaction (default
    ``writing.GROUP_ENTRIES``; 1 writes each entry in a transaction of its own)."""
    return Run(session, plane, settings, tenant_id, actor, dry_run=dry_run, job=job,
               now=now, writers=writers, group=group).run(scope, scope_ref, summarizer)


def tenant_ids(session: Session, tenant: uuid.UUID | None) -> list[uuid.UUID]:
    """The CLI's tenants: the one named (if it exists), else every active tenant."""
    if tenant is not None:
        found = session.scalar(select(Tenant.id).where(Tenant.id == tenant))
        return [found] if found is not None else []
    return repo.active_tenants(session)
