"""Dropping the search index of a scope no memory is left in (DESIGN §12: derived data
follows its source).

A scope's segments hold the texts and vectors of its memories; once the scope is empty
(a conversation deleted, the subject's memories erased) nothing may keep them: the
``search_segments`` rows go, and so does every object and object version under the scope's
``@search/`` directory in each of the given bucket locations — a crash between a segment's
upload and its row leaves an object no row names, which the listing finds as well.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from ..addresses import MemoryAddress
from ..db.engine import begin_write
from ..db.models import MemoryEvent, MemoryPointer, SearchSegment, StorageConfig
from ..plane.data_plane import DataPlane, Target, storage_errors


def tenant_targets(session: Session, plane: DataPlane, tenant_id: uuid.UUID) -> list[Target]:
    """Every bucket location the tenant has written to (old configurations included)."""
    ids = session.scalars(select(StorageConfig.id).where(StorageConfig.tenant_id == tenant_id)
                          .order_by(StorageConfig.created_at)).all()
    found = [plane.by_id(session, config_id) for config_id in ids]
    session.commit()
    return found


def in_use(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str) -> bool:
    """Whether a memory or an event still lives in the scope."""
    for model in (MemoryPointer, MemoryEvent):
        found = session.scalar(select(model.id).where(  # type: ignore[attr-defined]
            model.tenant_id == tenant_id, model.scope_type == scope,  # type: ignore[attr-defined]
            model.scope_ref == scope_ref).limit(1))  # type: ignore[attr-defined]
        if found is not None:
            return True
    return False


def drop_empty_scopes(session: Session, targets: Sequence[Target], tenant_id: uuid.UUID,
                      scopes: Iterable[tuple[str, str]]) -> int:
    """Drop the search index of each of these scopes that no memory or event is left in,
    in every location of ``targets``. Idempotent. How many segment rows went."""
    empty = sorted({s for s in scopes if not in_use(session, tenant_id, *s)})
    rows = list(session.execute(select(SearchSegment.id, SearchSegment.storage_config_id,
                                       SearchSegment.storage_path).where(
        SearchSegment.tenant_id == tenant_id,
        or_(*((SearchSegment.scope_type == s) & (SearchSegment.scope_ref == r)
              for s, r in empty))))) if empty else []
    session.commit()
    if not empty:
        return 0
    dirs = [f"{MemoryAddress(s, r).scope_dir()}/@search/" for s, r in empty]
    with storage_errors():
        for target in targets:
            paths = {row.storage_path for row in rows if row.storage_config_id
                     == target.config_id}
            for directory in dirs:
                paths |= {info.path for info in target.adapter.list(target.path(directory))}
            if paths:
                target.adapter.delete_many(sorted(paths))
            if getattr(target, "versioned", False) or target.adapter.describe().versioning:
                for directory in dirs:
                    target.adapter.purge_versions(target.path(directory))
    if rows:
        begin_write(session)
        session.execute(delete(SearchSegment).where(SearchSegment.id.in_([r.id for r in rows]))
                        .execution_options(synchronize_session=False))
        session.commit()
    return len(rows)
