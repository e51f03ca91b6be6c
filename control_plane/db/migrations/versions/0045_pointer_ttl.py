"""ttl_restarted_at: when a read with ``refresh_ttl=true`` last restarted a memory's ttl. The
ttl itself is ``expires_at`` minus the later of this and ``updated_at`` (a write sets
``expires_at`` and ``updated_at`` from one clock reading), so writes never touch the column.

Revision ID: 0045_pointer_ttl
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0045_pointer_ttl"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_pointers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ttl_restarted_at", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_pointers", schema=None) as batch_op:
        batch_op.drop_column("ttl_restarted_at")
