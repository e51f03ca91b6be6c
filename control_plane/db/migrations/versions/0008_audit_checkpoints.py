"""audit: where each tenant's chain was last anchored in its bucket

Revision ID: 0008
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.add_column(sa.Column(
            "anchored_seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("anchored_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("anchor_attempted_at", sa.DateTime(timezone=True),
                                      nullable=True))
        batch_op.add_column(sa.Column("anchor_problem", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("anchor_config_id", sa.Uuid(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.drop_column("anchor_config_id")
        batch_op.drop_column("anchor_problem")
        batch_op.drop_column("anchor_attempted_at")
        batch_op.drop_column("anchored_at")
        batch_op.drop_column("anchored_seq")
