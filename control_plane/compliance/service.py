"""Starting a data subject's export or erasure: validate, deduplicate, queue, audit.

The work itself runs in the job worker (``export.run``, ``erasure.run``).
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..addresses import MAX_SCOPE_REF_BYTES, MAX_SCOPE_REF_CHARS, nfc, validate_segment
from ..audit import service as audit
from ..db.engine import begin_write
from ..db.models import Job, SubjectErasure, Tenant
from ..errors import Conflict, InvalidInput, NotFound
from ..holds.service import ensure_subject_not_held
from ..identity import Actor, Caller
from ..jobs import repository as jobs_repo
from ..jobs.service import enqueue

FORMATS = ("json",)


def subject_id(user_id: str) -> str:
    user_id = nfc(user_id)  # the form memories store it in (addresses.nfc)
    validate_segment(user_id, "user_id", max_chars=MAX_SCOPE_REF_CHARS,
                     max_bytes=MAX_SCOPE_REF_BYTES)
    return user_id


def ensure_own_subject(session: Session, caller: Caller, user_id: str) -> None:
    """A data subject's own key names its own subject only: any other answers 404, audited
    (the other id is not in the row)."""
    subject = caller.access.user_id
    if subject is None or nfc(user_id) == subject:
        return
    audit.record_failure(session, caller.actor, "export",
                         detail="export requested: another subject than the key's")
    error = NotFound("no data subject with that user id for this key; a user key exports "
                     "its own subject only")
    error.audited = True
    raise error


def ensure_own_export(session: Session, caller: Caller, job_id: uuid.UUID) -> None:
    """A data subject's own key sees only the export jobs of its own subject (others: 404,
    as a missing job)."""
    subject = caller.access.user_id
    if subject is None:
        return
    job = jobs_repo.get(session, caller.tenant_id, job_id)
    if job is not None and job.kind == "export" and job.subject == subject:
        return
    audit.record_failure(session, caller.actor, "job_read",
                         detail=f"job {job_id}: not an export of the key's subject")
    error = NotFound(f"no job {job_id}")
    error.audited = True
    raise error


def start_export(session: Session, actor: Actor, user_id: str, fmt: str) -> Job:
    """Queue an export of everything stored about ``user_id`` (GDPR Art. 15/20); an export of
    the subject already queued or running is returned instead of a second one."""
    with audit.audited(session, actor, "export", detail="export requested"):
        if fmt not in FORMATS:
            raise InvalidInput(f"format must be one of {', '.join(FORMATS)}")
        subject = subject_id(user_id)
        session.rollback()
        begin_write(session)
        # Concurrent requests for one subject queue here (SQLite: the write lock already), so
        # the second finds the first's job. NO KEY UPDATE leaves inserts that reference the
        # tenant free to proceed.
        session.execute(select(Tenant.id).where(Tenant.id == actor.tenant_id)
                        .with_for_update(key_share=True))
        # A dry run deletes nothing, so only a real erasure makes an export pointless.
        erasing = [job for job in jobs_repo.all_active_for_subject(
            session, actor.tenant_id, "erase", subject) if not job.params.get("dry_run")]
        if session.get(SubjectErasure, (actor.tenant_id, subject)) is not None or erasing:
            raise Conflict("an erasure of this subject is queued or running; an export would "
                           "find nothing to export")
        running = jobs_repo.active_for_subject(session, actor.tenant_id, "export", subject)
        if running is not None:
            audit.record(session, actor, "export",
                         detail=f"export job {running.id} already {running.state}; returned")
            session.commit()
            return running
        job = enqueue(session, actor.tenant_id, "export", subject=subject,
                      params={"format": fmt})
        audit.record(session, actor, "export", detail=f"export job {job.id} queued")
        session.commit()
        return job


def start_erasure(session: Session, actor: Actor, user_id: str, dry_run: bool) -> Job:
    """Queue an erasure (or its dry run) of ``user_id``; an identical one already queued or
    running is returned instead of a second one."""
    with audit.audited(session, actor, "erase", detail="erasure requested"):
        subject = subject_id(user_id)
        session.rollback()
        begin_write(session)
        running = session.scalars(select(Job).where(
            Job.tenant_id == actor.tenant_id, Job.subject == subject,
            Job.kind.in_(("export", "erase")), Job.state.in_(("queued", "running")))).all()
        for job in running:
            if job.kind == "erase" and bool(job.params.get("dry_run")) == dry_run:
                audit.record(session, actor, "erase",
                             detail=f"{'dry run' if dry_run else 'erasure'} job {job.id} "
                                    f"already {job.state}; returned")
                session.commit()
                return job
        if not dry_run:
            ensure_subject_not_held(session, actor.tenant_id, subject)
        if not dry_run and any(job.kind == "export" for job in running):
            raise Conflict("an export of this subject is still running; erase it once the "
                           "export has completed (its archive is erased too)")
        job = enqueue(session, actor.tenant_id, "erase", subject=subject,
                      params={"dry_run": dry_run})
        audit.record(session, actor, "erase",
                     detail=f"{'dry run' if dry_run else 'erasure'} job {job.id} queued")
        session.commit()
        return job
