"""encryption keys (KEK versions, wrapped subject keys) and orphan GC candidates

Revision ID: 0003
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kek_versions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=16), nullable=False),
        sa.Column("key_ref", sa.String(length=512), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_kek_versions_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kek_versions")),
        sa.UniqueConstraint("tenant_id", "version",
                            name=op.f("uq_kek_versions_tenant_id_version")),
    )
    op.create_table(
        "subject_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("scope_ref", sa.String(length=256), nullable=False),
        sa.Column("kek_version_id", sa.Uuid(), nullable=False),
        sa.Column("wrapped_key", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rewrapped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("destroyed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["kek_version_id"], ["kek_versions.id"],
                                name=op.f("fk_subject_keys_kek_version_id_kek_versions")),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_subject_keys_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subject_keys")),
    )
    with op.batch_alter_table("subject_keys", schema=None) as batch_op:
        batch_op.create_index("ux_subject_keys_active",
                              ["tenant_id", "scope_type", "scope_ref"], unique=True,
                              postgresql_where=sa.text("destroyed_at IS NULL"),
                              sqlite_where=sa.text("destroyed_at IS NULL"))
        batch_op.create_index(batch_op.f("ix_subject_keys_kek_version_id"),
                              ["kek_version_id"], unique=False)
    op.create_table(
        "gc_candidates",
        sa.Column("storage_config_id", sa.Uuid(), nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("marked_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["storage_config_id"], ["storage_configs.id"],
                                name=op.f("fk_gc_candidates_storage_config_id_storage_configs"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_gc_candidates_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("storage_config_id", "path", name=op.f("pk_gc_candidates")),
    )
    with op.batch_alter_table("gc_candidates", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gc_candidates_tenant_id"), ["tenant_id"],
                              unique=False)


def downgrade() -> None:
    op.drop_table("gc_candidates")
    op.drop_table("subject_keys")
    op.drop_table("kek_versions")
