"""Conversations' token accounting and their messages' places."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, UTCDateTime, new_id, utcnow


class Conversation(Base):
    """A conversation's token accounting (metadata only: its messages and summary are keyed
    memories in the bucket, scope ``conversation``). ``context_window_tokens`` counts the
    messages after ``summarized_through``; ``subject_user_id`` is removed by erasure."""

    __tablename__ = "conversations"
    __table_args__ = (
        UniqueConstraint("tenant_id", "conversation_id"),
        Index(None, "tenant_id", "subject_user_id"),
        Index(None, "needs_summarization", "updated_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    conversation_id: Mapped[str] = mapped_column(String(256))
    subject_user_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    model: Mapped[str] = mapped_column(String(128))
    context_window_limit: Mapped[int] = mapped_column(Integer)
    context_window_tokens: Mapped[int] = mapped_column(Integer, default=0)
    needs_summarization: Mapped[bool] = mapped_column(Boolean, default=False)
    summary_pointer_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    summarized_through: Mapped[int] = mapped_column(Integer, default=0)
    summary_tokens: Mapped[int] = mapped_column(Integer, default=0)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    # The last sequence number handed out; a message whose write never finished leaves a gap.
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    # The summarisation job queued or running for it (one at a time); NULL when none.
    summary_job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ConversationMessage(Base):
    """One message's place and size (its text is the keyed memory ``m/<seq>``)."""

    __tablename__ = "conversation_messages"

    conversation_row_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    pointer_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    role: Mapped[str] = mapped_column(String(16))
    tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
