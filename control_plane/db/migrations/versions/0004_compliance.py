"""compliance: jobs, subject erasures in progress, signed erasure receipts

Revision ID: 0004
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=256), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_jobs_tenant_id_tenants"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_state_created_at"),
                              ["state", "created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_tenant_id_kind_subject"),
                              ["tenant_id", "kind", "subject"], unique=False)

    op.create_table(
        "subject_erasures",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.String(length=256), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_subject_erasures_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant_id", "user_id", name=op.f("pk_subject_erasures")),
    )

    op.create_table(
        "erasure_receipts",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("signature", sa.String(length=128), nullable=False),
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_erasure_receipts_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_erasure_receipts")),
        sa.UniqueConstraint("job_id", name=op.f("uq_erasure_receipts_job_id")),
    )
    with op.batch_alter_table("erasure_receipts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_erasure_receipts_tenant_id"), ["tenant_id"],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table("erasure_receipts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_erasure_receipts_tenant_id"))
    op.drop_table("erasure_receipts")
    op.drop_table("subject_erasures")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_tenant_id_kind_subject"))
        batch_op.drop_index(batch_op.f("ix_jobs_state_created_at"))
    op.drop_table("jobs")
