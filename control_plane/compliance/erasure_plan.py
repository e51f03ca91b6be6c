"""An erasure's dry run: what it would delete, counted; nothing deleted, nothing blocked."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

from sqlalchemy import func, select, update

from ..audit import service as audit
from ..db.engine import begin_write
from ..db.models import Job
from ..events import repository as events_repo
from ..jobs.service import JobContext
from ..plane.data_plane import storage_errors
from . import erasure_derived as derived
from . import erasure_walk, subjects


def plan(ctx: JobContext) -> dict[str, Any]:
    """Dry run: count what an erasure would delete; delete and block nothing."""
    session, user_id = ctx.session, ctx.subject or ""
    pointers = subjects.count_pointers(session, ctx.tenant_id, user_id)
    by_scope: dict[str, int] = defaultdict(int)
    after: uuid.UUID | None = None
    objects = 0
    while True:
        page = list(subjects.pointer_page(session, ctx.tenant_id, user_id, after,
                                          erasure_walk.BATCH))
        if not page:
            break
        for pointer in page:
            by_scope[pointer.scope_type] += 1
            objects += 1 + (1 if pointer.embedding_storage_path else 0)
        after = page[-1].id
    targets = subjects.targets(session, ctx.plane, ctx.tenant_id)
    session.commit()
    under_prefix = versions = 0
    with storage_errors():
        for target in targets:
            for entry in target.adapter.list_versions(target.path(
                    subjects.user_prefix(user_id))):
                under_prefix += 1
                versions += 0 if entry.is_latest and not entry.is_delete_marker else 1
    keys = ("the subject key would be destroyed if one exists"
            if erasure_walk.shredder() is not None
            else "no per-subject keys in this deployment")
    events = events_repo.count_subject(session, ctx.tenant_id, user_id)
    compactor_entries = int(session.scalar(select(func.count()).select_from(
        derived.compactions_of(ctx.tenant_id, user_id).subquery())) or 0)
    session.commit()
    plan = {"dry_run": True, "pointers": pointers, "pointers_by_scope": dict(by_scope),
            "events": events, "compactor_entries": compactor_entries,
            "objects": objects, "objects_under_subject_prefix": under_prefix,
            "noncurrent_versions_under_subject_prefix": versions, "keys": keys,
            "note": "dry run: nothing was deleted and writes were not blocked"}
    begin_write(session)
    audit.record(session, ctx.actor, "erase",
                 detail=f"job {ctx.job_id}: dry run; would delete {pointers} pointers and "
                        f"{objects} objects")
    session.execute(update(Job).where(Job.id == ctx.job_id).values(subject=None))
    session.commit()
    return plan
