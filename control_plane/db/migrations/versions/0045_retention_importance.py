"""retention policies may keep memories and entries at or above an importance

Revision ID: 0045_retention_importance
Revises: 0030
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0045_retention_importance"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("retention_policies") as batch:
        batch.add_column(sa.Column("keep_importance_at_least", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("retention_policies") as batch:
        batch.drop_column("keep_importance_at_least")
