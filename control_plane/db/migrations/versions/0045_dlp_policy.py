"""the DLP guard: a tenant's policy (mode and kinds; no row: the defaults)

Revision ID: 0045_dlp_policy
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0045_dlp_policy"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dlp_policies",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("kinds", sa.String(length=256), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_dlp_policies_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_dlp_policies")),
    )


def downgrade() -> None:
    op.drop_table("dlp_policies")
