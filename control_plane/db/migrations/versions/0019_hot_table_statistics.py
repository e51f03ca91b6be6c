"""PostgreSQL keeps the planner's statistics of the hot tables close to their growth

A lookup by address (tenant, scope, scope ref, key) must use the address's unique index.
While a table's statistics describe it as (nearly) empty — a new deployment, or a tenant
that arrived since the last ANALYZE and writes in bulk — the planner costs every index
starting with ``tenant_id`` the same and may scan all the tenant's rows per lookup instead.
Autovacuum's default (analyze after 10 % of the table changed) lets that last for millions
of writes on a large table; these tables are analyzed after 2,000 changes plus 1 %.

Revision ID: 0019
Revises: 0001 (after 0003 and 0005, which create subject_keys and memory_events)
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0001"
branch_labels = None
depends_on = ("0003", "0005")

HOT_TABLES = ("memory_pointers", "subject_keys", "memory_events", "access_logs")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in HOT_TABLES:
        op.execute(f"ALTER TABLE {table} SET (autovacuum_analyze_threshold = 2000, "
                   "autovacuum_analyze_scale_factor = 0.01)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in HOT_TABLES:
        op.execute(f"ALTER TABLE {table} RESET (autovacuum_analyze_threshold, "
                   "autovacuum_analyze_scale_factor)")
