"""storage classes: the class a memory's or an event's object was moved to (archive tier)

Revision ID: 0017
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0005"
branch_labels = None
depends_on = None

_TABLES = ("memory_pointers", "memory_events")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("storage_class", sa.String(length=32), nullable=True))


def downgrade() -> None:
    for table in reversed(_TABLES):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("storage_class")
