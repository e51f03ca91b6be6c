"""conversations: token accounting, summary state and message sizes (no message text)

Revision ID: 0015
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("subject_user_id", sa.String(length=256), nullable=True),
        sa.Column("agent_id", sa.String(length=256), nullable=True),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("context_window_limit", sa.Integer(), nullable=False),
        sa.Column("context_window_tokens", sa.Integer(), nullable=False),
        sa.Column("needs_summarization", sa.Boolean(), nullable=False),
        sa.Column("summary_pointer_id", sa.Uuid(), nullable=True),
        sa.Column("summarized_through", sa.Integer(), nullable=False),
        sa.Column("summary_tokens", sa.Integer(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("summary_job_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_conversations_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversations")),
        sa.UniqueConstraint("tenant_id", "conversation_id",
                            name=op.f("uq_conversations_tenant_id_conversation_id")),
    )
    op.create_index(op.f("ix_conversations_tenant_id_subject_user_id"), "conversations",
                    ["tenant_id", "subject_user_id"])
    op.create_index(op.f("ix_conversations_needs_summarization_updated_at"), "conversations",
                    ["needs_summarization", "updated_at"])
    op.create_table(
        "conversation_messages",
        sa.Column("conversation_row_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("pointer_id", sa.Uuid(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_row_id"], ["conversations.id"],
                                name=op.f("fk_conversation_messages_conversation_row_id_"
                                          "conversations"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("conversation_row_id", "seq",
                                name=op.f("pk_conversation_messages")),
    )


def downgrade() -> None:
    op.drop_table("conversation_messages")
    op.drop_index(op.f("ix_conversations_needs_summarization_updated_at"),
                  table_name="conversations")
    op.drop_index(op.f("ix_conversations_tenant_id_subject_user_id"), table_name="conversations")
    op.drop_table("conversations")
