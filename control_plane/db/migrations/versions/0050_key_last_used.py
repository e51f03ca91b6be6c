"""when an API key was last used (to the hour), for the admin's list of keys

Revision ID: 0050_key_last_used
Revises: 0045_user_keys
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0050_key_last_used"
down_revision = "0045_user_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("last_used_at")
