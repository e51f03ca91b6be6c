"""What memplane holds about one data subject, counted (``GET /v1/subjects/{user_id}``): the
compliance officer's first look before an export or an erasure. Counts only — never a value,
a key, a title or a scope ref of the subject's memories — plus the legal holds that cover the
subject and the subject's past export and erasure jobs (found by the id while it lives, and
by its keyed hash once erased: ``keys.pseudonyms``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..db.engine import begin_write
from ..db.models import Conversation, Job, MemoryPointer, SubjectErasure
from ..entries.repository import ENTRY
from ..events import repository as events_repo
from ..holds import repository as holds_repo
from ..identity import Actor
from ..keys import pseudonyms
from ..plane.credentials import CredentialBox
from . import subjects
from .service import subject_id

KNOWLEDGE = "knowledge"
MAX_JOBS = 100


def summary(session: Session, actor: Actor, user_id: str,
            credentials: CredentialBox | None) -> dict[str, Any]:
    """The subject's holdings by layer, holds and jobs; audited as ``subject_read`` (the
    row names no subject)."""
    with audit.audited(session, actor, "subject_read", detail="subject summary requested",
                       private=(user_id,)):
        subject = subject_id(user_id)
        tenant_id = actor.tenant_id
        is_entry = (MemoryPointer.key.is_(None)) & (MemoryPointer.memory_type == ENTRY)
        is_knowledge = MemoryPointer.memory_type == KNOWLEDGE
        row = session.execute(select(
            func.count(),
            func.sum(case((is_entry, 1), else_=0)),
            func.sum(case((is_knowledge, 1), else_=0)),
            func.sum(case((MemoryPointer.has_embeddings.is_(True), 1), else_=0)),
        ).where(subjects.owned_by(tenant_id, subject))).one()
        pointers, entries, knowledge, embeddings = (int(value or 0) for value in row)
        conversations = int(session.scalar(select(func.count()).select_from(Conversation)
                                           .where(Conversation.tenant_id == tenant_id,
                                                  Conversation.subject_user_id == subject))
                            or 0)
        layers = {"memories": pointers - entries - knowledge, "entries": entries,
                  "events": events_repo.count_subject(session, tenant_id, subject),
                  "conversations": conversations, "knowledge": knowledge,
                  "embeddings": embeddings}
        holds = [hold for hold in holds_repo.active(session, tenant_id)
                 if hold.target == "tenant"
                 or (hold.target == "subject" and hold.user_id == subject)
                 or (hold.target == "scope" and hold.scope_type == "user"
                     and hold.scope_ref == subject)]
        hashed = pseudonyms.pseudonym(credentials, tenant_id, subject)
        jobs = session.scalars(select(Job).where(
            Job.tenant_id == tenant_id, Job.kind.in_(("export", "erase")),
            Job.subject.in_((subject, hashed))).order_by(Job.created_at.desc())
            .limit(MAX_JOBS)).all()
        erasing = session.get(SubjectErasure, (tenant_id, subject))
        answer = {
            "layers": layers,
            "total": sum(layers.values()) - embeddings,
            "holds": [{"id": h.id, "target": h.target, "reason": h.reason,
                       "created_at": h.created_at} for h in holds],
            "erasure_in_progress": None if erasing is None else str(erasing.job_id),
            "erased": any(job.kind == "erase" and job.subject == hashed for job in jobs),
            "jobs": [_job(job) for job in jobs],
        }
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "subject_read",
                     detail=f"subject summary: {answer['total']} items, {len(holds)} holds, "
                            f"{len(jobs)} jobs")
        session.commit()
        return answer


def _job(job: Job) -> dict[str, Any]:
    result = job.result or {}
    return {"id": job.id, "kind": job.kind, "state": job.state,
            "dry_run": bool((job.params or {}).get("dry_run")),
            "created_at": job.created_at, "updated_at": job.updated_at,
            "receipt_id": result.get("receipt_id") if job.kind == "erase" else None,
            "archive_expires_at": result.get("expires_at") if job.kind == "export" else None}
