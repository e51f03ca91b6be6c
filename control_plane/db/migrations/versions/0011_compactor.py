"""the compactor: per-tenant thresholds and a unique job key (one daily run per tenant)

Revision ID: 0011
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dedupe_key", sa.String(length=128), nullable=True))
        batch_op.create_index("ux_jobs_tenant_id_dedupe_key", ["tenant_id", "dedupe_key"],
                              unique=True)
    op.create_table(
        "compactor_settings",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("min_events", sa.Integer(), nullable=False),
        sa.Column("older_than_days", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_compactor_settings_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_compactor_settings")),
    )


def downgrade() -> None:
    op.drop_table("compactor_settings")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ux_jobs_tenant_id_dedupe_key")
        batch_op.drop_column("dedupe_key")
