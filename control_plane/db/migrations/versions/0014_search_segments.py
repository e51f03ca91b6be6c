"""search: the vector segments (snapshots and deltas) of each scope's search index

Revision ID: 0014
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "search_segments",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("scope_ref", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("embedding_model", sa.String(length=128), nullable=False),
        sa.Column("storage_config_id", sa.Uuid(), nullable=False),
        sa.Column("storage_path", sa.String(length=1024), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["storage_config_id"], ["storage_configs.id"],
                                name=op.f("fk_search_segments_storage_config_id_storage_configs"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_search_segments_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_segments")),
    )
    with op.batch_alter_table("search_segments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_search_segments_tenant_id_scope_type_scope_ref"),
                              ["tenant_id", "scope_type", "scope_ref"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_search_segments_storage_config_id_storage_path"),
            ["storage_config_id", "storage_path"], unique=False)


def downgrade() -> None:
    op.drop_table("search_segments")
