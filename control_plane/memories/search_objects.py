"""The search index's objects in a memory's bucket, named here so the memories' bookkeeping
(orphan GC) knows them without asking search: a memory's vector beside its content
(``<content path>.vec``) and a scope's segments (``….seg``), named by their rows."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import VECTOR_SUFFIX, SearchSegment

SEGMENT_SUFFIX = ".seg"  # a search segment object's path ends with this


def vector_path(storage_path: str) -> str:
    """A pointer's vector object lives beside its content object."""
    return storage_path + VECTOR_SUFFIX


def named_segment_paths(session: Session, config_id: uuid.UUID,
                        paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` a segment row names (orphan GC keeps them)."""
    return set(session.scalars(
        select(SearchSegment.storage_path)
        .where(SearchSegment.storage_config_id == config_id,
               SearchSegment.storage_path.in_(paths))).all())
