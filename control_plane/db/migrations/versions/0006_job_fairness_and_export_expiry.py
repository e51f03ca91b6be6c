"""jobs: when each was claimed (fair turns across tenants) and when an export's archive expires

Revision ID: 0006
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_tenant_id_claimed_at"),
                              ["tenant_id", "claimed_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_expires_at"))
        batch_op.drop_index(batch_op.f("ix_jobs_tenant_id_claimed_at"))
        batch_op.drop_column("expires_at")
        batch_op.drop_column("claimed_at")
