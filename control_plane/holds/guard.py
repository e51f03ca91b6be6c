"""The write block during an erasure: one primary-key lookup per write that names a subject.

The memory write, append and delete paths call ``ensure_writable`` inside their write
transaction, after the pointer is locked and its subject is known. An erasure inserts its
``subject_erasures`` row (and commits) before it lists the subject's pointers, and removes
it only when the receipt is written, so a write either commits before the erasure lists
(and is erased with the rest) or sees the row and answers 409.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import SubjectErasure
from ..errors import SubjectErasureInProgress


def ensure_writable(session: Session, tenant_id: uuid.UUID, *subjects: str | None) -> None:
    wanted = {s for s in subjects if s}
    if not wanted:
        return
    blocked = session.scalar(
        select(SubjectErasure.job_id)
        .where(SubjectErasure.tenant_id == tenant_id, SubjectErasure.user_id.in_(wanted))
        .limit(1)
    )
    if blocked is not None:
        raise erasure_in_progress(blocked)


def erasure_in_progress(job_id: uuid.UUID) -> SubjectErasureInProgress:
    return SubjectErasureInProgress(
        "an erasure of this memory's data subject is in progress; writes for the subject "
        "are refused until it completes",
        job_id=str(job_id),
    )
