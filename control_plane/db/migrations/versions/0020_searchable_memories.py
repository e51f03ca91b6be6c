"""searchable: a memory written with ``searchable: false`` (machine state such as an agent
framework's checkpoints) is never embedded and never found by search

Revision ID: 0020
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_pointers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("searchable", sa.Boolean(), nullable=False,
                                      server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("memory_pointers", schema=None) as batch_op:
        batch_op.drop_column("searchable")
