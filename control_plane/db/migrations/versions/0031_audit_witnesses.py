"""the witnesses a tenant registers for its audit log (C2SP tlog-witness), and what each
last answered

Revision ID: 0031_audit_witnesses
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031_audit_witnesses"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_witnesses",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=1024), nullable=False),
        sa.Column("verifier_key", sa.String(length=512), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cosigned_size", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  nullable=False),
        sa.Column("last_status", sa.String(length=64), nullable=True),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_audit_witnesses_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_witnesses")),
        sa.UniqueConstraint("tenant_id", "position",
                            name=op.f("uq_audit_witnesses_tenant_id_position")),
        sa.UniqueConstraint("tenant_id", "verifier_key",
                            name=op.f("uq_audit_witnesses_tenant_id_verifier_key")),
    )


def downgrade() -> None:
    op.drop_table("audit_witnesses")
