from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from ..db.models import Conversation, ConversationMessage, Job, MemoryEvent, MemoryPointer


def get(session: Session, tenant_id: uuid.UUID, conversation_id: str, *,
        for_update: bool = False) -> Conversation | None:
    query = (select(Conversation).execution_options(populate_existing=True)
             .where(Conversation.tenant_id == tenant_id,
                    Conversation.conversation_id == conversation_id))
    if for_update:
        query = query.with_for_update()
    return session.scalar(query)


def get_by_row(session: Session, tenant_id: uuid.UUID, row_id: uuid.UUID, *,
               for_update: bool = False) -> Conversation | None:
    query = (select(Conversation).execution_options(populate_existing=True)
             .where(Conversation.tenant_id == tenant_id, Conversation.id == row_id))
    if for_update:
        query = query.with_for_update()
    return session.scalar(query)


def messages(session: Session, row_id: uuid.UUID, *, after: int = 0,
             through: int | None = None, limit: int | None = None,
             newest_first: bool = False) -> list[ConversationMessage]:
    """The conversation's message rows with ``after`` < seq (<= ``through``, if given)."""
    query = select(ConversationMessage).where(ConversationMessage.conversation_row_id == row_id,
                                              ConversationMessage.seq > after)
    if through is not None:
        query = query.where(ConversationMessage.seq <= through)
    query = query.order_by(ConversationMessage.seq.desc() if newest_first
                           else ConversationMessage.seq)
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def tokens_after(session: Session, row_id: uuid.UUID, seq: int) -> int:
    return int(session.scalar(select(func.coalesce(func.sum(ConversationMessage.tokens), 0))
                              .where(ConversationMessage.conversation_row_id == row_id,
                                     ConversationMessage.seq > seq)) or 0)


def job_active(session: Session, job_id: uuid.UUID | None) -> bool:
    if job_id is None:
        return False
    state = session.scalar(select(Job.state).where(Job.id == job_id))
    return state in ("queued", "running")


def delete_row(session: Session, tenant_id: uuid.UUID, row_id: uuid.UUID) -> None:
    session.execute(delete(ConversationMessage)
                    .where(ConversationMessage.conversation_row_id == row_id))
    session.execute(delete(Conversation).where(Conversation.tenant_id == tenant_id,
                                               Conversation.id == row_id))


def forget_subject(session: Session, tenant_id: uuid.UUID, user_id: str) -> list[str]:
    """Erasure: the subject's conversations go (their messages and summaries are the
    subject's pointers, deleted with them), leaving no user id behind. In the caller's
    write transaction; the conversation ids (scope refs) that went."""
    rows = list(session.execute(select(Conversation.id, Conversation.conversation_id).where(
        Conversation.tenant_id == tenant_id, Conversation.subject_user_id == user_id)))
    for row in rows:
        delete_row(session, tenant_id, row.id)
    return [row.conversation_id for row in rows]


def recent_events(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str,
                  limit: int) -> list[MemoryEvent]:
    """The newest uncompressed, synced events of one scope (compressed ones are never read:
    the compactor's entry stands for them)."""
    return list(session.scalars(
        select(MemoryEvent).where(MemoryEvent.tenant_id == tenant_id,
                                  MemoryEvent.scope_type == scope,
                                  MemoryEvent.scope_ref == scope_ref,
                                  MemoryEvent.compressed_at.is_(None),
                                  MemoryEvent.sync_status == "synced")
        .order_by(MemoryEvent.occurred_at.desc(), MemoryEvent.id.desc()).limit(limit)))


def compressed_events(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str,
                      limit: int) -> list[uuid.UUID]:
    return list(session.scalars(
        select(MemoryEvent.id).where(MemoryEvent.tenant_id == tenant_id,
                                     MemoryEvent.scope_type == scope,
                                     MemoryEvent.scope_ref == scope_ref,
                                     MemoryEvent.compressed_at.is_not(None))
        .order_by(MemoryEvent.occurred_at.desc(), MemoryEvent.id.desc()).limit(limit)))


def clear_job(session: Session, row_id: uuid.UUID, job_id: uuid.UUID) -> None:
    session.execute(update(Conversation).where(Conversation.id == row_id,
                                               Conversation.summary_job_id == job_id)
                    .values(summary_job_id=None))


def by_ids(session: Session, tenant_id: uuid.UUID,
           ids: Sequence[uuid.UUID]) -> list[Conversation]:
    return list(session.scalars(select(Conversation).where(Conversation.tenant_id == tenant_id,
                                                           Conversation.id.in_(ids))))


def subject_scopes(session: Session, tenant_id: uuid.UUID, user_id: str,
                   limit: int) -> list[tuple[str, str]]:
    """The scopes (other than conversations) holding memories by key about ``user_id``,
    most recently written first, at most ``limit`` (the subject's index)."""
    P = MemoryPointer
    newest = func.max(P.updated_at)
    rows = session.execute(
        select(P.scope_type, P.scope_ref)
        .where(P.tenant_id == tenant_id, P.subject_user_id == user_id, P.key.is_not(None),
               P.scope_type != "conversation",
               P.memory_type.not_in(("conversation_history", "summary")))
        .group_by(P.scope_type, P.scope_ref).order_by(newest.desc(), P.scope_type,
                                                      P.scope_ref).limit(limit)).all()
    return [(scope, ref) for scope, ref in rows]
