"""audit: the Merkle tree of each tenant's audit log, stored as C2SP tlog tiles, and where
its signed tlog checkpoints stand

Tenants whose rows were sealed before this revision get their tiles from the sealer, not
here: it builds a tenant's tree from its sealed rows (checking each against the hash chain)
before it seals anything new, ``tree_size`` recording how far it got in the same
transaction as the tiles (``control_plane/audit/tree.py``).

Revision ID: 0031_audit_tree
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031_audit_tree"
down_revision = "0008"
branch_labels = None
depends_on = None

_BIG = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_tiles",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("level", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("idx", _BIG, autoincrement=False, nullable=False),
        sa.Column("hashes", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", "level", "idx"),
    )
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tree_size", _BIG, nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("tlog_size", _BIG, nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("tlog_attempted_at", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_heads", schema=None) as batch_op:
        batch_op.drop_column("tlog_attempted_at")
        batch_op.drop_column("tlog_size")
        batch_op.drop_column("tree_size")
    op.drop_table("audit_tiles")
