"""audit_heads.tlog_claimed_until: one writer of a tenant's tlog checkpoints at a time

A checkpoint's writer reads the last checkpoint's size, writes the consistency proof from it
and the new checkpoint into the bucket with no transaction open, then records the new size.
Two writers at once — replicas whose bucket was slower than the interval, a move of the
anchor beside the sealer's round — could both start from the same last size and each write
a checkpoint: the bucket then held two checkpoints with no consistency proof between them,
and verification refused the log. The writer now holds a lease on the tenant's head until it
has recorded its size (audit/tlog_anchor.py).

Revision ID: 0051_audit_tlog_lease
Revises: 0050_audit_seq_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0051_audit_tlog_lease"
down_revision = "0050_audit_seq_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tlog_claimed_until", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.drop_column("tlog_claimed_until")
