"""orphan GC tombstones: candidates the sweep deleted stay as tombstones for a while

Revision ID: 0012
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gc_candidates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("swept_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gc_candidates", schema=None) as batch_op:
        batch_op.drop_column("swept_at")
