"""retention policies and legal holds

Revision ID: 0016
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retention_policies",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("memory_type", sa.String(length=64), nullable=False),
        sa.Column("retention_days", sa.Integer(), nullable=False),
        sa.Column("archive_after_days", sa.Integer(), nullable=True),
        sa.Column("auto_delete", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_retention_policies_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retention_policies")),
        sa.UniqueConstraint("tenant_id", "scope_type", "memory_type",
                            name=op.f("uq_retention_policies_tenant_id_scope_type_memory_type")),
    )
    op.create_table(
        "legal_holds",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("target", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.String(length=256), nullable=True),
        sa.Column("scope_type", sa.String(length=16), nullable=True),
        sa.Column("scope_ref", sa.String(length=256), nullable=True),
        sa.Column("subject_hash", sa.String(length=128), nullable=True),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("created_by", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lifted_by", sa.String(length=256), nullable=True),
        sa.Column("lifted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_legal_holds_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_legal_holds")),
    )
    op.create_index(op.f("ix_legal_holds_tenant_id_lifted_at"), "legal_holds",
                    ["tenant_id", "lifted_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_legal_holds_tenant_id_lifted_at"), table_name="legal_holds")
    op.drop_table("legal_holds")
    op.drop_table("retention_policies")
