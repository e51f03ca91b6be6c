"""Idempotency keys: a retried write returns the first answer instead of writing again.

The first answer (pointer metadata only, never content) is stored in the same transaction as
the write it answers, so a crash can never leave a write without its record or the reverse.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .db.models import IdempotentResponse
from .errors import DomainError, InvalidInput
from .kit import sha256_hex

MAX_KEY_LENGTH = 255


class IdempotencyKeyReused(DomainError):
    status_code = 422
    code = "idempotency_key_reused"


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


def find(session: Session, tenant_id: uuid.UUID, idem: Idempotency) -> Replay | None:
    row = session.scalar(select(IdempotentResponse).where(
        IdempotentResponse.tenant_id == tenant_id, IdempotentResponse.key == idem.key))
    if row is None:
        return None
    if row.fingerprint != idem.fingerprint:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was already used for a different request; "
            "use a new key for a new request")
    return Replay(row.status_code, row.response)


def remember(session: Session, tenant_id: uuid.UUID, idem: Idempotency, status_code: int,
             response: dict[str, Any]) -> None:
    session.add(IdempotentResponse(tenant_id=tenant_id, key=idem.key,
                                   fingerprint=idem.fingerprint, status_code=status_code,
                                   response=response))
