"""several named storage configurations per tenant; agents and their user-memory settings

Revision ID: 0018
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("storage_configs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "agents",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("agent_id", sa.String(length=256), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("user_memory_enabled", sa.Boolean(), nullable=False),
        sa.Column("user_memory_retention_days", sa.Integer(), nullable=True),
        sa.Column("user_memory_storage_config_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_agents_tenant_id_tenants"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_memory_storage_config_id"], ["storage_configs.id"],
                                name=op.f("fk_agents_user_memory_storage_config_id_"
                                          "storage_configs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("tenant_id", "agent_id", name=op.f("uq_agents_tenant_id_agent_id")),
    )


def downgrade() -> None:
    op.drop_table("agents")
    with op.batch_alter_table("storage_configs", schema=None) as batch_op:
        batch_op.drop_column("retired_at")
        batch_op.drop_column("name")
