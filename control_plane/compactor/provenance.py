"""Where a compactor entry comes from (``GET /v1/compactor/provenance/{entry_id}``): the
summariser that wrote it and the id and SHA-256 of every event it summarised, recorded with
the entry's commit (``writing``)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.engine import begin_write
from ..db.models import MemoryEvent
from ..errors import NotFound
from ..identity import EVERYTHING, Access, Actor
from ..tenants.access import ensure_visible
from . import repository as repo
from .schemas import ProvenanceEvent, ProvenanceOut


def provenance(session: Session, actor: Actor, entry_id: uuid.UUID, *,
               access: Access = EVERYTHING) -> ProvenanceOut:
    """Which summariser wrote a compactor entry, and the id and SHA-256 of each event it
    summarised; 404 for any other entry (or one outside the key's scopes)."""
    with audited(session, actor, "compact_provenance", pointer_id=entry_id):
        found = repo.compaction_of(session, actor.tenant_id, entry_id)
        missing = f"no compactor entry {entry_id}"
        if found is None:
            raise NotFound(missing)
        compaction, covered = found
        ensure_visible(session, actor, access, compaction.scope_type, compaction.scope_ref,
                       operation="compact_provenance", what="compactor entry", missing=missing)
        order = {event_id: n for n, event_id in enumerate(session.scalars(
            select(MemoryEvent.id).where(
                MemoryEvent.tenant_id == actor.tenant_id,
                MemoryEvent.id.in_([c.event_id for c in covered]))
            .order_by(MemoryEvent.occurred_at, MemoryEvent.id)))}
        covered.sort(key=lambda c: (order.get(c.event_id, len(order)), str(c.event_id)))
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "compact_provenance", pointer_id=entry_id,
                     detail=f"{len(covered)} events")
        session.commit()
        return ProvenanceOut(
            entry_id=compaction.id, scope=compaction.scope_type,
            scope_ref=compaction.scope_ref, provider=compaction.provider,
            model=compaction.model, prompt_version=compaction.prompt_version,
            event_count=compaction.event_count, job_id=compaction.job_id,
            created_at=compaction.created_at,
            events=[ProvenanceEvent(event_id=c.event_id, event_sha256=c.event_sha256)
                    for c in covered])
