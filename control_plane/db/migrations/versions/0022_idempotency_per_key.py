"""idempotency keys belong to the API key that sent them, not to the whole tenant

Revision ID: 0022_idempotency
Revises: 0001

Rows written before carry no API key: they are deleted (they are replay records kept 24
hours at most; a retry of a write sent before the upgrade writes again).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_idempotency"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DELETE FROM idempotency_keys")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_constraint("pk_idempotency_keys", type_="primary")
        batch_op.add_column(sa.Column("accessor_id", sa.String(length=64), nullable=False))
        batch_op.create_primary_key("pk_idempotency_keys", ["tenant_id", "accessor_id", "key"])


def downgrade() -> None:
    op.execute("DELETE FROM idempotency_keys")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_constraint("pk_idempotency_keys", type_="primary")
        batch_op.drop_column("accessor_id")
        batch_op.create_primary_key("pk_idempotency_keys", ["tenant_id", "key"])
