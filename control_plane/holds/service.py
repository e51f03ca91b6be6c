"""Legal holds (a subject, a scope ref or the whole tenant): placing, listing, lifting, and
the checks every deleting path asks.

While a hold is active, retention runs and cleanups pass over what it covers (their results
count it as ``held``), deletes of a held memory or entry answer 409 ``legal_hold``, and an
erasure of a held subject is refused with 409 ``legal_hold`` — when it is requested, and
again when its job starts, in case the hold was placed in between. A hold on a subject whose
erasure has already started is refused instead (409): part of the data may be gone, and the
erasure finishes. A tenant hold holds every subject.

Refusals name the hold id and its reason category, never the subject. An active hold keeps
the subject's id (or the scope ref) in clear, as it must match rows; lifting it replaces the
id with a keyed hash (``keys.pseudonyms``: the database alone cannot test a guessed
id against it), so once the subject is erased (which an active hold prevents) no clear id
remains here (DESIGN §11). Placing and lifting are audited with the key that did it.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence

from sqlalchemy.orm import Session

from .. import idempotency
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import LegalHold, SubjectErasure
from ..errors import Conflict, NotFound
from ..idempotency import Idempotency, Replay
from ..identity import Actor
from ..keys import pseudonyms
from ..plane.credentials import CredentialBox
from . import repository as repo
from .schemas import HoldIn, HoldOut

MAX_HOLDS = 1000


class LegalHoldActive(Conflict):
    code = "legal_hold"


def refusal(hold: LegalHold, what: str) -> LegalHoldActive:
    return LegalHoldActive(
        f"{what} is under legal hold {hold.id} ({hold.reason}); a compliance officer must "
        f"lift the hold (DELETE /v1/legal-holds/{hold.id}) first", hold_id=hold.id,
        reason=hold.reason)


def covering(holds: Sequence[LegalHold], *, scope: str | None, scope_ref: str | None,
             subject: str | None) -> LegalHold | None:
    """The first of ``holds`` covering an item of this scope ref and subject."""
    for hold in holds:
        if hold.target == "tenant":
            return hold
        if hold.target == "subject" and hold.user_id is not None and (
                hold.user_id == subject or (scope == "user" and scope_ref == hold.user_id)):
            return hold
        if (hold.target == "scope" and hold.scope_type == scope
                and hold.scope_ref == scope_ref):
            return hold
    return None


def ensure_not_held(session: Session, tenant_id: uuid.UUID, *, scope: str, scope_ref: str,
                    subject: str | None, what: str = "this memory") -> None:
    """409 ``legal_hold`` if an active hold covers an item (a delete's check)."""
    holds = repo.active(session, tenant_id)
    if not holds:
        return
    hold = covering(holds, scope=scope, scope_ref=scope_ref, subject=subject)
    if hold is not None:
        raise refusal(hold, what)


def ensure_scope_not_held(session: Session, tenant_id: uuid.UUID, scope: str,
                          scope_ref: str) -> None:
    """409 if a hold covers a whole scope ref or anything in it (clearing a scope)."""
    from sqlalchemy import select

    from ..db.models import MemoryPointer

    holds = repo.active(session, tenant_id)
    if not holds:
        return
    hold = covering(holds, scope=scope, scope_ref=scope_ref, subject=None)
    if hold is None:
        held = session.scalar(select(MemoryPointer.subject_user_id).where(
            MemoryPointer.tenant_id == tenant_id, MemoryPointer.scope_type == scope,
            MemoryPointer.scope_ref == scope_ref, repo.pointers_held(holds)).limit(1))
        if held is not None:
            hold = covering(holds, scope=scope, scope_ref=scope_ref, subject=held)
    if hold is not None:
        raise refusal(hold, "a memory of this scope")


def ensure_subject_not_held(session: Session, tenant_id: uuid.UUID, user_id: str) -> None:
    """409 ``legal_hold`` if an active hold covers the subject (an erasure's check): a hold
    on the subject, on their ``user`` scope, or on the tenant."""
    for hold in repo.active(session, tenant_id):
        if (hold.target == "tenant" or (hold.target == "subject" and hold.user_id == user_id)
                or (hold.target == "scope" and hold.scope_type == "user"
                    and hold.scope_ref == user_id)):
            raise refusal(hold, "this data subject")


# --- the routes' services --------------------------------------------------------------------

def place(session: Session, actor: Actor, body: HoldIn, *,
          idem: Idempotency | None = None) -> LegalHold | Replay:
    """Place a hold (``POST /v1/legal-holds``)."""
    target = "tenant" if body.tenant else "subject" if body.user_id else "scope"
    with audited(session, actor, "legal_hold", detail=f"{target} hold requested"):
        session.rollback()
        begin_write(session)
        if idem is not None:
            replay = idempotency.find(session, actor, idem)
            if replay is not None:
                audit.record(session, actor, "legal_hold",
                             detail="idempotency key answered from the first request")
                session.commit()
                return replay
        scope = body.scope.canonical if body.scope else None
        subject = body.user_id or (body.scope_ref if scope == "user" else None)
        if subject is not None:
            erasing = session.get(SubjectErasure, (actor.tenant_id, subject))
            if erasing is not None:
                raise Conflict("an erasure of this data subject has already started and "
                               "will finish; a hold can no longer keep its data",
                               job_id=str(erasing.job_id))
        if len(repo.active(session, actor.tenant_id)) >= MAX_HOLDS:
            raise Conflict(f"the tenant already has {MAX_HOLDS} active holds; lift those no "
                           "longer needed first")
        hold = LegalHold(id=f"lh_{secrets.token_hex(8)}", tenant_id=actor.tenant_id,
                         target=target, user_id=body.user_id, scope_type=scope,
                         scope_ref=body.scope_ref, reason=body.reason,
                         created_by=actor.accessor_id, created_at=utcnow())
        session.add(hold)
        session.flush()
        audit.record(session, actor, "legal_hold",
                     detail=f"hold {hold.id} placed on {_describe(hold)} ({hold.reason})")
        if idem is not None:
            idempotency.remember(session, actor, idem, 201,
                                 HoldOut.of(hold).model_dump(mode="json"))
        session.commit()
        return hold


def list_holds(session: Session, actor: Actor) -> list[LegalHold]:
    with audited(session, actor, "legal_hold_read"):
        holds = list(repo.all_of(session, actor.tenant_id, MAX_HOLDS))
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "legal_hold_read", detail=f"{len(holds)} holds listed")
        session.commit()
        return holds


def lift(session: Session, actor: Actor, hold_id: str, *,
         credentials: CredentialBox | None) -> LegalHold:
    """Lift a hold (``DELETE /v1/legal-holds/{id}``); lifting a lifted hold answers it as it
    is. The clear subject id (or user scope ref) becomes a keyed hash under ``credentials``
    (the server key)."""
    with audited(session, actor, "legal_hold_lift", detail=f"hold {hold_id[:40]}"):
        session.rollback()
        begin_write(session)
        hold = repo.get(session, actor.tenant_id, hold_id, for_update=True)
        if hold is None:
            raise NotFound(f"no legal hold {hold_id[:40]}")
        if hold.lifted_at is not None:
            session.rollback()
            return hold
        named = hold.user_id or (hold.scope_ref if hold.scope_type == "user" else None)
        if named is not None:
            hold.subject_hash = pseudonyms.pseudonym(credentials, actor.tenant_id, named)
            hold.user_id = None
            if hold.scope_type == "user":
                hold.scope_ref = None
            idempotency.forget_subject(session, actor.tenant_id, named)
        hold.lifted_at, hold.lifted_by = utcnow(), actor.accessor_id
        audit.record(session, actor, "legal_hold_lift",
                     detail=f"hold {hold.id} ({hold.reason}) lifted by {actor.accessor_id}")
        session.commit()
        return hold


def _describe(hold: LegalHold) -> str:
    if hold.target == "tenant":
        return "the tenant"
    if hold.target == "subject" or hold.scope_type == "user":
        return "a data subject"  # never the id in the audit row
    return f"scope {hold.scope_type}"
