"""scoped agent keys (access list, agent id) and the agent id on audit rows

Revision ID: 0009
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scopes", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("agent_id", sa.String(length=256), nullable=True))
    with op.batch_alter_table("access_logs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_id", sa.String(length=256), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("access_logs", schema=None) as batch_op:
        batch_op.drop_column("agent_id")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("agent_id")
        batch_op.drop_column("scopes")
