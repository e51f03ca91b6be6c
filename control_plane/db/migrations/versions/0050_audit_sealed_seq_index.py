"""access_logs: the (tenant_id, seq) uniqueness only over sealed rows

Every memory write and read appends an audit row, and that insert touched every index of
``access_logs`` — the unique (tenant_id, seq) constraint's included, with a NULL seq, since a
row is written unsealed and the sealer numbers it later (its UPDATE then adds the entry that
matters, with the seq). A NULL never conflicts with anything, so that first entry served no
one: the readers of (tenant_id, seq) — the sealer's and the chain verifier's ``seq >= n``
(audit/service.py), ``GET /v1/audit``'s ``seq IS NOT NULL AND seq > after``
(audit/repository.py), the proofs' ``seq IN (...)`` (compliance/proofs.py) — all name a seq,
which both databases read as implying ``seq IS NOT NULL``, the new index's condition. The
uniqueness of sealed rows' numbers is kept exactly; the unsealed rows keep their own partial
index (``ix_access_logs_unsealed``, the sealer's queue). An audit row's insert now touches
four indexes instead of five.

On PostgreSQL the new index is built before the constraint goes (one transaction); on SQLite
the table is rebuilt without the constraint (alembic's batch mode).

Revision ID: 0050_audit_seq_index
Revises: 0031_audit_tree
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0050_audit_seq_index"
down_revision = "0031_audit_tree"
branch_labels = None
depends_on = None

_SEALED = sa.text("seq IS NOT NULL")


def upgrade() -> None:
    op.create_index("uq_access_logs_sealed_seq", "access_logs", ["tenant_id", "seq"],
                    unique=True, postgresql_where=_SEALED, sqlite_where=_SEALED)
    with op.batch_alter_table("access_logs", schema=None) as batch_op:
        batch_op.drop_constraint("uq_access_logs_tenant_id_seq", type_="unique")


def downgrade() -> None:
    with op.batch_alter_table("access_logs", schema=None) as batch_op:
        batch_op.create_unique_constraint("uq_access_logs_tenant_id_seq", ["tenant_id", "seq"])
    op.drop_index("uq_access_logs_sealed_seq", table_name="access_logs")
