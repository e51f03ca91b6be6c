"""Idempotency keys: a retried write returns the first answer instead of writing again.

The first answer (pointer metadata only, never content) is stored in the same transaction as
the write it answers, so a crash can never leave a write without its record or the reverse.

A first answer names its memory (scope ref, key, title, tags, user id): personal data. So it
is kept for :data:`TTL` only — an older row is never replayed, and is deleted when its key
comes back (``find``) or by :func:`purge_expired` — and an erasure deletes the subject's
rows at once (:func:`forget_subject`), so a replay after the erasure writes again instead of
answering with the erased metadata.

A key is the caller's own: answers are recorded and found per API key (the actor's
``accessor_id``), so one key can neither replay, probe for nor collide with another key's
Idempotency-Key, even in the same tenant.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.orm import Session

from .db.base import utcnow
from .db.engine import begin_write
from .db.models import IdempotentResponse
from .errors import DomainError, InvalidInput
from .kit import sha256_hex

MAX_KEY_LENGTH = 255
TTL = timedelta(hours=24)


class IdempotencyKeyReused(DomainError):
    status_code = 422
    code = "idempotency_key_reused"


class Holder(Protocol):
    """Whose keys: an audit actor (its tenant, and the API key as ``key:<id>``)."""

    @property
    def tenant_id(self) -> uuid.UUID: ...

    @property
    def accessor_id(self) -> str: ...


@dataclass(frozen=True)
class Idempotency:
    key: str
    fingerprint: str

    @classmethod
    def of(cls, key: str | None, *parts: str | bytes) -> Idempotency | None:
        if key is None:
            return None
        if not 1 <= len(key) <= MAX_KEY_LENGTH:
            raise InvalidInput(f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters")
        digest = sha256_hex(b"\x00".join(p if isinstance(p, bytes) else p.encode() for p in parts))
        return cls(key, digest)


@dataclass(frozen=True)
class Replay:
    """The stored first answer to a request sent again with the same key."""

    status_code: int
    response: dict[str, Any]


def _mine(holder: Holder, key: str) -> Any:
    return and_(IdempotentResponse.tenant_id == holder.tenant_id,
                IdempotentResponse.accessor_id == holder.accessor_id,
                IdempotentResponse.key == key)


def find(session: Session, holder: Holder, idem: Idempotency) -> Replay | None:
    row = session.scalar(select(IdempotentResponse).where(_mine(holder, idem.key)))
    if row is None:
        return None
    if row.created_at <= utcnow() - TTL:
        # Expired: never replayed. Deleted now so the write it precedes can record anew.
        session.rollback()
        begin_write(session)
        session.execute(delete(IdempotentResponse).where(
            _mine(holder, idem.key), IdempotentResponse.created_at <= utcnow() - TTL)
            .execution_options(synchronize_session=False))
        session.commit()
        return None
    if row.fingerprint != idem.fingerprint:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was already used for a different request; "
            "use a new key for a new request")
    return Replay(row.status_code, row.response)


def remember(session: Session, holder: Holder, idem: Idempotency, status_code: int,
             response: dict[str, Any]) -> None:
    session.add(IdempotentResponse(tenant_id=holder.tenant_id, accessor_id=holder.accessor_id,
                                   key=idem.key, fingerprint=idem.fingerprint,
                                   status_code=status_code, response=response))


def purge_expired(session: Session) -> int:
    """Delete every answer older than :data:`TTL` (all tenants), in the caller's write
    transaction; returns how many."""
    result = session.execute(delete(IdempotentResponse).where(
        IdempotentResponse.created_at <= utcnow() - TTL)
        .execution_options(synchronize_session=False))
    return int(result.rowcount)  # type: ignore[attr-defined]


def forget_subject(session: Session, tenant_id: uuid.UUID, user_id: str,
                   pointer_ids: Sequence[uuid.UUID] = ()) -> int:
    """Delete the answers about a data subject, in the caller's write transaction: those
    naming them as user, those of their ``user`` scope, and those of ``pointer_ids``."""
    answer = IdempotentResponse.response
    about = [answer["user_id"].as_string() == user_id,
             and_(answer["scope"].as_string() == "user",
                  answer["scope_ref"].as_string() == user_id)]
    if pointer_ids:
        about.append(answer["id"].as_string().in_([str(i) for i in pointer_ids]))
    result = session.execute(delete(IdempotentResponse).where(
        IdempotentResponse.tenant_id == tenant_id, or_(*about))
        .execution_options(synchronize_session=False))
    return int(result.rowcount)  # type: ignore[attr-defined]
