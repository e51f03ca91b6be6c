"""raw events (append-only log) and the provenance of compactor entries

Revision ID: 0005
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_events",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("scope_ref", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("source_ref", sa.String(length=256), nullable=True),
        sa.Column("subject_user_id", sa.String(length=256), nullable=True),
        sa.Column("agent_id", sa.String(length=256), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("compressed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("storage_config_id", sa.Uuid(), nullable=False),
        sa.Column("storage_path", sa.String(length=1024), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("content_size", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  nullable=False),
        sa.Column("sync_status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["storage_config_id"], ["storage_configs.id"],
                                name=op.f("fk_memory_events_storage_config_id_storage_configs")),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_memory_events_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_events")),
    )
    with op.batch_alter_table("memory_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_events_tenant_id_scope_type_scope_ref_occurred_at_id"),
            ["tenant_id", "scope_type", "scope_ref", "occurred_at", "id"], unique=False)
        batch_op.create_index(batch_op.f("ix_memory_events_tenant_id_subject_user_id"),
                              ["tenant_id", "subject_user_id"], unique=False)
        batch_op.create_index(
            "ix_memory_events_uncompressed",
            ["tenant_id", "scope_type", "scope_ref", "occurred_at"], unique=False,
            postgresql_where=sa.text("compressed_at IS NULL"),
            sqlite_where=sa.text("compressed_at IS NULL"))

    op.create_table(
        "compactions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("scope_ref", sa.String(length=256), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("prompt_version", sa.String(length=32), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["id"], ["memory_pointers.id"],
                                name=op.f("fk_compactions_id_memory_pointers"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_compactions_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_compactions")),
    )
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_compactions_tenant_id_scope_type_scope_ref"),
                              ["tenant_id", "scope_type", "scope_ref"], unique=False)

    op.create_table(
        "compaction_events",
        sa.Column("compaction_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("event_sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["compaction_id"], ["compactions.id"],
                                name=op.f("fk_compaction_events_compaction_id_compactions"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("compaction_id", "event_id", name=op.f("pk_compaction_events")),
    )
    with op.batch_alter_table("compaction_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_compaction_events_event_id"), ["event_id"],
                              unique=False)


def downgrade() -> None:
    op.drop_table("compaction_events")
    op.drop_table("compactions")
    op.drop_table("memory_events")
