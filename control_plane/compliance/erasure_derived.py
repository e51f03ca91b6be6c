"""What an erasure does to data derived from the subject's (DESIGN §12): compactor entries
built from their events and the search segments that indexed their memories.

A compactor entry built from an event of the subject belongs to the subject, whoever else's
events it summarised too: it is erased with them, and the others' events it covered are
released so the next compaction run folds them again. Search segments keep each subject's
rows under that subject's key (``search.parts``) and are rewritten without the erased
memories (``search.segment_writing.forget_pointers``); both are counted for the receipt.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import exists, or_, select
from sqlalchemy.orm import Session

from ..compactor.erase import release_survivors
from ..db.models import Compaction, CompactionEvent, MemoryEvent
from ..events import repository as events_repo
from ..jobs.service import JobContext
from ..search.segment_writing import forget_pointers

COUNTS = ("search_scopes_rewritten", "compactor_events_released")


def compactions_of(tenant_id: uuid.UUID, user_id: str) -> Any:
    """Compactor entries (``compactions`` ids) built from an event of the subject, or from an
    event that no longer exists (erased while the compactor was summarising it)."""
    subject_events = select(MemoryEvent.id).where(events_repo.owned_by(tenant_id, user_id))
    return (select(Compaction.id).distinct()
            .join(CompactionEvent, CompactionEvent.compaction_id == Compaction.id)
            .where(Compaction.tenant_id == tenant_id,
                   or_(CompactionEvent.event_id.in_(subject_events),
                       ~exists().where(MemoryEvent.id == CompactionEvent.event_id))))


def release_others(session: Session, tenant_id: uuid.UUID, user_id: str,
                   compaction_ids: Sequence[uuid.UUID]) -> dict[str, int]:
    """In the transaction deleting these entries: the other subjects' events they covered
    lose ``compressed_at``; the count to add to the job's progress."""
    subject_events = select(MemoryEvent.id).where(events_repo.owned_by(tenant_id, user_id))
    return {"compactor_events_released": release_survivors(session, tenant_id,
                                                           compaction_ids, subject_events)}


def forget_in_search(ctx: JobContext, pointer_ids: Sequence[uuid.UUID]) -> None:
    """Rewrite every search segment holding these pointers without them; the number of
    scopes rewritten is added to the job's progress."""
    rewritten = forget_pointers(ctx.session, ctx.plane, ctx.settings, ctx.tenant_id,
                                pointer_ids)
    if rewritten:
        ctx.commit_progress(search_scopes_rewritten=int(
            ctx.progress.get("search_scopes_rewritten", 0)) + rewritten)
