"""initial schema

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
    )
    op.create_table(
        "access_logs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("pointer_id", sa.Uuid(), nullable=True),
        sa.Column("event_id", sa.Uuid(), nullable=True),
        sa.Column("accessor_type", sa.String(length=16), nullable=False),
        sa.Column("accessor_id", sa.String(length=256), nullable=False),
        sa.Column("operation", sa.String(length=32), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("accessed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=True),
        sa.Column("row_hash", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_access_logs_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_access_logs")),
        sa.UniqueConstraint("tenant_id", "seq", name=op.f("uq_access_logs_tenant_id_seq")),
    )
    with op.batch_alter_table("access_logs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_access_logs_tenant_id_accessed_at"),
            ["tenant_id", "accessed_at"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_access_logs_tenant_id_pointer_id"),
            ["tenant_id", "pointer_id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_access_logs_unsealed",
            ["tenant_id", "id"],
            unique=False,
            postgresql_where=sa.text("seq IS NULL"),
            sqlite_where=sa.text("seq IS NULL"),
        )

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("key_sha256", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("can_create_tenants", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_api_keys_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_sha256", name=op.f("uq_api_keys_key_sha256")),
    )
    op.create_table(
        "audit_heads",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("last_seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("last_hash", sa.String(length=64), nullable=False),
        sa.Column("sealed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_audit_heads_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_audit_heads")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_idempotency_keys_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_table(
        "storage_configs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("storage_type", sa.String(length=16), nullable=False),
        sa.Column("bucket", sa.String(length=255), nullable=True),
        sa.Column("prefix", sa.String(length=255), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=True),
        sa.Column("endpoint", sa.String(length=255), nullable=True),
        sa.Column("connection_config", sa.JSON(), nullable=False),
        sa.Column("credentials_encrypted", sa.LargeBinary(), nullable=True),
        sa.Column("kek_ref", sa.String(length=255), nullable=True),
        sa.Column("versioning", sa.Boolean(), nullable=True),
        sa.Column("soft_delete_days", sa.Double(), nullable=True),
        sa.Column("object_lock", sa.Boolean(), nullable=True),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_storage_configs_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_storage_configs")),
    )
    with op.batch_alter_table("storage_configs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_storage_configs_tenant_id"), ["tenant_id"], unique=False
        )

    op.create_table(
        "memory_pointers",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("scope_ref", sa.String(length=256), nullable=False),
        sa.Column("key", sa.String(length=256), nullable=True),
        sa.Column("memory_type", sa.String(length=64), nullable=False),
        sa.Column("subject_user_id", sa.String(length=256), nullable=True),
        sa.Column("agent_id", sa.String(length=256), nullable=True),
        sa.Column("title", sa.String(length=500), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("importance", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("storage_config_id", sa.Uuid(), nullable=False),
        sa.Column("storage_path", sa.String(length=1024), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column(
            "content_size", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("sync_status", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("has_embeddings", sa.Boolean(), nullable=False),
        sa.Column("embedding_model", sa.String(length=128), nullable=True),
        sa.Column("embedding_storage_path", sa.String(length=1024), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["storage_config_id"],
            ["storage_configs.id"],
            name=op.f("fk_memory_pointers_storage_config_id_storage_configs"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_memory_pointers_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_pointers")),
        sa.UniqueConstraint(
            "tenant_id",
            "scope_type",
            "scope_ref",
            "key",
            name=op.f("uq_memory_pointers_tenant_id_scope_type_scope_ref_key"),
        ),
    )
    with op.batch_alter_table("memory_pointers", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_pointers_sync_status_updated_at"),
            ["sync_status", "updated_at"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_memory_pointers_tenant_id_scope_type_scope_ref_id"),
            ["tenant_id", "scope_type", "scope_ref", "id"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_memory_pointers_tenant_id_subject_user_id"),
            ["tenant_id", "subject_user_id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("memory_pointers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_pointers_tenant_id_subject_user_id"))
        batch_op.drop_index(batch_op.f("ix_memory_pointers_tenant_id_scope_type_scope_ref_id"))
        batch_op.drop_index(batch_op.f("ix_memory_pointers_sync_status_updated_at"))

    op.drop_table("memory_pointers")
    with op.batch_alter_table("storage_configs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_storage_configs_tenant_id"))

    op.drop_table("storage_configs")
    op.drop_table("idempotency_keys")
    op.drop_table("audit_heads")
    op.drop_table("api_keys")
    with op.batch_alter_table("access_logs", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_access_logs_unsealed",
            postgresql_where=sa.text("seq IS NULL"),
            sqlite_where=sa.text("seq IS NULL"),
        )
        batch_op.drop_index(batch_op.f("ix_access_logs_tenant_id_pointer_id"))
        batch_op.drop_index(batch_op.f("ix_access_logs_tenant_id_accessed_at"))

    op.drop_table("access_logs")
    op.drop_table("tenants")
