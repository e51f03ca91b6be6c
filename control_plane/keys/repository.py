from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Uuid, bindparam, func, select, update
from sqlalchemy.orm import Session

from ..db import direct
from ..db.models import KekVersion, MemoryEvent, MemoryPointer, SubjectKey


def current_kek(session: Session, tenant_id: uuid.UUID) -> KekVersion | None:
    return session.scalar(
        select(KekVersion)
        .where(KekVersion.tenant_id == tenant_id, KekVersion.retired_at.is_(None))
        .order_by(KekVersion.version.desc()).limit(1)
    )


def kek_versions(session: Session, tenant_id: uuid.UUID) -> Sequence[KekVersion]:
    return session.scalars(
        select(KekVersion).where(KekVersion.tenant_id == tenant_id)
        .order_by(KekVersion.version)
    ).all()


def next_kek_version(session: Session, tenant_id: uuid.UUID) -> int:
    top = session.scalar(select(func.max(KekVersion.version))
                         .where(KekVersion.tenant_id == tenant_id))
    return (top or 0) + 1


def active_subject_key(session: Session, tenant_id: uuid.UUID, scope_type: str,
                       scope_ref: str) -> SubjectKey | None:
    return session.scalar(
        select(SubjectKey).execution_options(populate_existing=True)
        .where(SubjectKey.tenant_id == tenant_id, SubjectKey.scope_type == scope_type,
               SubjectKey.scope_ref == scope_ref, SubjectKey.destroyed_at.is_(None))
    )


def subject_key(session: Session, tenant_id: uuid.UUID, key_id: uuid.UUID) -> SubjectKey | None:
    return session.scalar(
        select(SubjectKey).execution_options(populate_existing=True)
        .where(SubjectKey.id == key_id, SubjectKey.tenant_id == tenant_id)
    )


_LIVE = (SubjectKey.tenant_id == bindparam("tenant", None, type_=Uuid()),
         SubjectKey.wrapped_key.is_not(None))
# The ids as one parameter (``db.direct.id_list``).
_LIVE_SQLITE = select(SubjectKey.id).where(*_LIVE, direct.in_id_list(SubjectKey.id, "sqlite"))
_LIVE_POSTGRES = select(SubjectKey.id).where(*_LIVE,
                                             direct.in_id_list(SubjectKey.id, "postgresql"))


def live_key_ids(session: Session, tenant_id: uuid.UUID,
                 key_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of ``key_ids`` the tenant still has undestroyed, as the database holds them now:
    one statement on its own, outside the session's transaction (``db.direct``: one round
    trip, no BEGIN or COMMIT), so a key destroyed since the session's last read is seen."""
    engine = session.get_bind().engine
    params = {"tenant": tenant_id, "ids": direct.id_list(key_ids, engine.dialect)}
    if engine.dialect.name == "postgresql":
        rows = direct.run(engine, _LIVE_POSTGRES, params)
    else:
        rows = direct.run_sqlite(engine, _LIVE_SQLITE, params)
    return {row[0] for row in rows}


def wrapped_by_older(session: Session, tenant_id: uuid.UUID, current: uuid.UUID,
                     limit: int) -> Sequence[SubjectKey]:
    return session.scalars(
        select(SubjectKey).execution_options(populate_existing=True)
        .where(SubjectKey.tenant_id == tenant_id, SubjectKey.kek_version_id != current,
               SubjectKey.wrapped_key.is_not(None))
        .order_by(SubjectKey.id).limit(limit)
    ).all()


def rewrap(session: Session, key: SubjectKey, old_version: uuid.UUID, new_version: uuid.UUID,
           wrapped: bytes, now: datetime) -> bool:
    """Compare-and-swap: only a key still wrapped by ``old_version`` and not destroyed."""
    result = session.execute(
        update(SubjectKey)
        .where(SubjectKey.id == key.id, SubjectKey.kek_version_id == old_version,
               SubjectKey.wrapped_key.is_not(None))
        .values(kek_version_id=new_version, wrapped_key=wrapped, rewrapped_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def keys_per_version(session: Session, tenant_id: uuid.UUID) -> dict[uuid.UUID, int]:
    rows = session.execute(
        select(SubjectKey.kek_version_id, func.count())
        .where(SubjectKey.tenant_id == tenant_id, SubjectKey.wrapped_key.is_not(None))
        .group_by(SubjectKey.kek_version_id)
    ).all()
    return {row[0]: int(row[1]) for row in rows}


def destroy_subject(session: Session, tenant_id: uuid.UUID, scope_type: str, scope_ref: str,
                    now: datetime) -> int:
    result = session.execute(
        update(SubjectKey)
        .where(SubjectKey.tenant_id == tenant_id, SubjectKey.scope_type == scope_type,
               SubjectKey.scope_ref == scope_ref, SubjectKey.destroyed_at.is_(None))
        .values(wrapped_key=None, destroyed_at=now)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def retire_scopes(session: Session, tenant_id: uuid.UUID, scope_type: str,
                  scope_refs: Sequence[str], rename_to: str, now: datetime) -> int:
    """Erasure of the subject whose scopes these are (their conversations): each scope's
    key is destroyed and its row renamed to ``rename_to`` (the subject's keyed hash), so no
    row keeps the scope's name — unless a memory or event still lives in the scope (not the
    subject's: it keeps its key, and its own row names the scope anyway). How many rows."""
    if not scope_refs:
        return 0
    in_use = set(session.scalars(
        select(MemoryPointer.scope_ref).where(
            MemoryPointer.tenant_id == tenant_id, MemoryPointer.scope_type == scope_type,
            MemoryPointer.scope_ref.in_(scope_refs)).distinct()))
    in_use |= set(session.scalars(
        select(MemoryEvent.scope_ref).where(
            MemoryEvent.tenant_id == tenant_id, MemoryEvent.scope_type == scope_type,
            MemoryEvent.scope_ref.in_(scope_refs)).distinct()))
    unused = [ref for ref in scope_refs if ref not in in_use]
    if not unused:
        return 0
    where = (SubjectKey.tenant_id == tenant_id, SubjectKey.scope_type == scope_type,
             SubjectKey.scope_ref.in_(unused))
    session.execute(update(SubjectKey).where(*where, SubjectKey.destroyed_at.is_(None))
                    .values(wrapped_key=None, destroyed_at=now))
    result = session.execute(update(SubjectKey).where(*where).values(scope_ref=rename_to))
    return int(result.rowcount)  # type: ignore[attr-defined]


def kek_still_live(session: Session, kek_id: uuid.UUID) -> bool:
    """Whether the KEK version is not retired, holding it (FOR SHARE on PostgreSQL) until the
    caller's transaction ends, so a retirement waits for the key the caller is adding."""
    retired = session.execute(
        select(KekVersion.retired_at).where(KekVersion.id == kek_id).with_for_update(read=True)
    ).first()
    return retired is not None and retired.retired_at is None


def lock_kek_versions(session: Session, tenant_id: uuid.UUID) -> None:
    session.execute(select(KekVersion.id).where(KekVersion.tenant_id == tenant_id)
                    .with_for_update())
