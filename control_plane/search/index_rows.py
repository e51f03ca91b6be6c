"""SQL of the indexer's bookkeeping: the pointers waiting for vectors, recording each vector
on its pointer, the live pointers a snapshot holds, and the scopes' segment rows."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, delete, select, text, true, update
from sqlalchemy.orm import Session

from ..db.models import VECTOR_SUFFIX, WANTS_VECTOR, MemoryPointer, SearchSegment
from ..memories.search_objects import vector_path

P = MemoryPointer


def wants_vector() -> Any:
    """The pointer is synced and searchable, and its vector is missing or made for older
    content: the indexer's to make. Written as the partial index on it is (``WANTS_VECTOR``,
    over the unaliased ``memory_pointers``), so the database uses the index."""
    return text(WANTS_VECTOR)


def vector_ready() -> Any:
    """The pointer's vector is the one of its current content."""
    return and_(P.has_embeddings == true(),
                P.embedding_storage_path == P.storage_path.concat(VECTOR_SUFFIX))


def needing_vectors(session: Session, since: datetime | None, limit: int,
                    skip: Sequence[uuid.UUID] = (), *,
                    newest_first: bool = False) -> Sequence[MemoryPointer]:
    """Synced, searchable pointers whose vector is missing or made for older content, oldest
    first (or newest first: a helping indexer starts from the other end of the backlog);
    ``since`` limits the look to rows written from then on (an index serves it); tenants in
    ``skip`` (whose bucket failed this pass) are left out."""
    return session.scalars(needing_vectors_query(since, limit, skip,
                                                 newest_first=newest_first)).all()


def needing_vector_ids(session: Session, since: datetime | None, limit: int,
                       skip: Sequence[uuid.UUID] = (), *,
                       newest_first: bool = False) -> list[uuid.UUID]:
    """``needing_vectors``' pointer ids alone: the candidates indexers claim from (the
    pointers they get are read once claimed)."""
    query = needing_vectors_query(since, limit, skip, newest_first=newest_first)
    return list(session.scalars(query.with_only_columns(P.id)))


def snapshots(session: Session, pointers: Sequence[MemoryPointer]) -> list[MemoryPointer]:
    """The pointers as read, taken out of ``session``: a later commit neither expires them
    (which would read each one again, a query per pointer) nor makes one deleted meanwhile
    fail the round (``ObjectDeletedError``). The indexer only reads them; what it records goes
    through ``mark_vectors``, which checks each pointer is still at the content it read."""
    for pointer in pointers:
        session.expunge(pointer)
    return list(pointers)


def needing_vectors_query(since: datetime | None, limit: int,
                          skip: Sequence[uuid.UUID] = (), *, newest_first: bool = False) -> Any:
    """``needing_vectors``' statement: an index scan of the partial index on
    ``WANTS_VECTOR`` in ``updated_at`` order."""
    query = select(P).where(wants_vector())
    if since is not None:
        query = query.where(P.updated_at >= since)
    if skip:
        query = query.where(P.tenant_id.not_in(list(skip)))
    order = P.updated_at.desc() if newest_first else P.updated_at
    return query.order_by(order).limit(limit)


# PostgreSQL: a batch's vectors recorded in ONE statement (the executemany ran an UPDATE
# per pointer on the server, then a SELECT read back which ones took); what it answers is
# what it updated, each row then holding its vector.
_MARK_MANY = text(
    "UPDATE memory_pointers AS p SET has_embeddings = true, embedding_model = :model, "
    "embedding_storage_path = p.storage_path || :suffix "
    "FROM unnest(CAST(:ids AS uuid[]), CAST(:versions AS integer[]), CAST(:paths AS text[])) "
    "AS m(id, version, path) "
    "WHERE p.id = m.id AND p.version = m.version AND p.storage_path = m.path "
    "AND p.sync_status = 'synced' RETURNING p.id, p.version")


def mark_vectors(session: Session, made: Sequence[tuple[uuid.UUID, int, str]],
                 model: str) -> set[tuple[uuid.UUID, int]]:
    """Record each (pointer id, version, content path)'s vector, if the pointer is still at
    the content it was made from (one statement for all); which ones were recorded."""
    if not made:
        return set()
    if session.get_bind().dialect.name == "postgresql":
        rows = session.execute(_MARK_MANY, {
            "ids": [m[0] for m in made], "versions": [m[1] for m in made],
            "paths": [m[2] for m in made], "model": model, "suffix": VECTOR_SUFFIX}).all()
        return {(r.id, r.version) for r in rows}
    table = MemoryPointer.__table__  # core: one executemany, no ORM bookkeeping
    session.execute(
        update(table).where(table.c.id == bindparam("b_id"),  # type: ignore[arg-type]
                            table.c.version == bindparam("b_version"),
                            table.c.storage_path == bindparam("b_path"),
                            table.c.sync_status == "synced")
        .values(has_embeddings=True, embedding_model=model,
                embedding_storage_path=bindparam("b_vector")),
        [{"b_id": pid, "b_version": version, "b_path": path, "b_vector": vector_path(path)}
         for pid, version, path in made])
    rows = session.execute(select(P.id, P.version).where(
        P.id.in_([m[0] for m in made]), P.embedding_model == model, vector_ready())).all()
    wanted = {(pid, version) for pid, version, _ in made}
    return {(r.id, r.version) for r in rows} & wanted


def segments(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str
             ) -> Sequence[SearchSegment]:
    return session.scalars(
        select(SearchSegment).where(SearchSegment.tenant_id == tenant_id,
                                    SearchSegment.scope_type == scope,
                                    SearchSegment.scope_ref == scope_ref)
        .order_by(SearchSegment.created_at, SearchSegment.id)).all()


def lock_live(session: Session, ids: Sequence[uuid.UUID]) -> set[tuple[uuid.UUID, int]]:
    """(id, version) of the synced pointers among ``ids``, share-locked: an erasure or delete
    marking one of them waits until this transaction ends."""
    if not ids:
        return set()
    rows = session.execute(select(P.id, P.version).where(P.id.in_(ids),
                                                         P.sync_status == "synced")
                           .with_for_update(read=True)).all()
    return {(r.id, r.version) for r in rows}


def live_in_scope(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str,
                  model: str) -> Sequence[Any]:
    """Every pointer of the scope with a ready vector of ``model``: what a snapshot holds."""
    return session.execute(
        select(P.id, P.version, P.storage_config_id, P.embedding_storage_path, P.subject_user_id)
        .where(P.tenant_id == tenant_id, P.scope_type == scope, P.scope_ref == scope_ref,
               P.sync_status == "synced", P.embedding_model == model, vector_ready())
        .order_by(P.id)).all()


def replace_segments(session: Session, old: Sequence[uuid.UUID],
                     new: SearchSegment | None) -> bool:
    """Swap ``old`` segments for ``new`` (in the caller's transaction); False if another
    compaction removed some of them first."""
    if old:
        removed = session.execute(delete(SearchSegment).where(SearchSegment.id.in_(old))
                                  .execution_options(synchronize_session=False))
        if int(removed.rowcount) != len(old):  # type: ignore[attr-defined]
            return False
    if new is not None:
        session.add(new)
    return True
