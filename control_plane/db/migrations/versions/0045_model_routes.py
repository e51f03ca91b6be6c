"""model routing: per-tenant rules sending a purpose (and optionally a scope) to an
OpenAI-compatible endpoint and model, with a token budget; API keys sealed

Revision ID: 0045_model_routes
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0045_model_routes"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_routes",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("scope_type", sa.String(length=16), nullable=True),
        sa.Column("base_url", sa.String(length=1024), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("api_key_encrypted", sa.LargeBinary(), nullable=True),
        sa.Column("timeout_ms", sa.Integer(), nullable=False),
        sa.Column("max_retries", sa.Integer(), nullable=False),
        sa.Column("token_budget_per_run",
                  sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_model_routes_tenant_id_tenants"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_routes")),
    )
    op.create_index(op.f("ix_model_routes_tenant_id"), "model_routes", ["tenant_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_model_routes_tenant_id"), table_name="model_routes")
    op.drop_table("model_routes")
