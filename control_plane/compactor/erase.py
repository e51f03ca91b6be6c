"""The compactor's side of a subject's erasure and of derived data (DESIGN §12).

An entry is built from the events of one data subject at most (``by_subject``), so it is
sealed under that subject's key and a crypto-shredding of the subject covers it, copies
included. Entries written before that rule may mix subjects: an erasure of any of them
deletes the entry, and the other subjects' events it covered are released
(``release_survivors``: ``compressed_at`` cleared) so the next run folds them again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy import exists, select, update
from sqlalchemy.orm import Session, aliased

from ..db.models import CompactionEvent, MemoryEvent


class _Attributed(Protocol):
    @property
    def subject_user_id(self) -> str | None: ...


E = TypeVar("E", bound=_Attributed)


def by_subject(events: Sequence[E], sizes: Callable[[int], list[int]]) -> list[list[E]]:
    """The bucket's events as the chunks of its entries: each subject's events (and those
    of no subject) apart, in their order, each group split by ``sizes``."""
    groups: dict[str | None, list[E]] = {}
    for event in events:
        groups.setdefault(event.subject_user_id, []).append(event)
    chunks: list[list[E]] = []
    for group in groups.values():
        start = 0
        for size in sizes(len(group)):
            chunks.append(group[start:start + size])
            start += size
    return chunks


def release_survivors(session: Session, tenant_id: uuid.UUID,
                      compaction_ids: Sequence[uuid.UUID], subject_events: Any) -> int:
    """In the caller's transaction, before the entries' provenance rows go: clear
    ``compressed_at`` of the events these entries covered that are not among
    ``subject_events`` (a select of the erased subject's event ids) nor covered by another
    entry; how many."""
    if not compaction_ids:
        return 0
    covered = select(CompactionEvent.event_id).where(
        CompactionEvent.compaction_id.in_(compaction_ids))
    other = aliased(CompactionEvent)
    kept = exists().where(other.event_id == MemoryEvent.id,  # summarised by another entry
                          other.compaction_id.not_in(compaction_ids))
    result = session.execute(
        update(MemoryEvent)
        .where(MemoryEvent.tenant_id == tenant_id, MemoryEvent.id.in_(covered),
               MemoryEvent.id.not_in(subject_events), ~kept,
               MemoryEvent.compressed_at.is_not(None))
        .values(compressed_at=None).execution_options(synchronize_session=False))
    return int(result.rowcount)  # type: ignore[attr-defined]
