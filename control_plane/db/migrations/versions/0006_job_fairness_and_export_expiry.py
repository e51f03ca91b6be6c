"""jobs: when each was claimed (fair turns across tenants) and when an export's archive expires

Revision ID: 0006
Revises: 0004

Archives of exports finished before this revision get the default lifetime (72 h after the
job finished), so the worker deletes them too.
"""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_tenant_id_claimed_at"),
                              ["tenant_id", "claimed_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_expires_at"), ["expires_at"], unique=False)

    jobs = sa.table("jobs", sa.column("id", sa.Uuid()), sa.column("kind", sa.String()),
                    sa.column("state", sa.String()),
                    sa.column("updated_at", sa.DateTime(timezone=True)),
                    sa.column("expires_at", sa.DateTime(timezone=True)))
    bind = op.get_bind()
    finished = bind.execute(sa.select(jobs.c.id, jobs.c.updated_at).where(
        jobs.c.kind == "export", jobs.c.state == "completed")).all()
    for job_id, updated_at in finished:
        bind.execute(jobs.update().where(jobs.c.id == job_id)
                     .values(expires_at=updated_at + timedelta(hours=72)))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_expires_at"))
        batch_op.drop_index(batch_op.f("ix_jobs_tenant_id_claimed_at"))
        batch_op.drop_column("expires_at")
        batch_op.drop_column("claimed_at")
