"""entries: the keyed blind index of their words (search without plaintext, I7)

Revision ID: 0007
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entry_terms",
        sa.Column("pointer_id", sa.Uuid(), nullable=False),
        sa.Column("term", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(["pointer_id"], ["memory_pointers.id"],
                                name=op.f("fk_entry_terms_pointer_id_memory_pointers"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_entry_terms_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pointer_id", "term", name=op.f("pk_entry_terms")),
    )
    with op.batch_alter_table("entry_terms", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_entry_terms_tenant_id_term"),
                              ["tenant_id", "term"], unique=False)


def downgrade() -> None:
    op.drop_table("entry_terms")
