"""PostgreSQL plans a listing once, whatever its first ANALYZE saw of the scope refs

A page of memories (``memories.listing``) is one prepared statement. After five executions
PostgreSQL compares the plan it would keep for any values (the generic plan) with the plans
it made for each call's values, and keeps the generic one unless it looks dearer. The
generic plan estimates ``scope_ref = $n`` from the column's number of distinct values: where
the statistics say there are few — a new deployment's first ANALYZE (``db.statistics``)
saw its first scope or two, and autovacuum analyzes again only after 2,000 changes — each
ref seems to hold most of the table, the generic plan scans it all, and every listing was
planned again for its own values, ~0.3 ms of the database's CPU per call (a LangGraph
checkpointer's every read of a thread's state).

Scope refs are many by the data model's design (one per user, conversation, thread, agent,
team), so the column states it: its distinct values are taken as a twentieth of the rows
(about 20 memories per ref), not as what a sample of the first rows showed. Only the planner's
estimate for a ref it has no statistics of changes; a ref common enough to be among the most
common values keeps its own. The setting applies from the table's next ANALYZE, so a
deployment whose table already holds memories is analyzed here (a sample of the table, a
second or two at a million rows). An empty table is left alone: its first ANALYZE is the
audit sealer's once the first memories arrive (``db.statistics``), which looks only for
tables never analyzed.

Revision ID: 0052_scope_refs_are_many
Revises: 0019
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0052_scope_refs_are_many"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE memory_pointers ALTER COLUMN scope_ref SET (n_distinct = -0.05)")
    if op.get_bind().execute(text("SELECT EXISTS (SELECT 1 FROM memory_pointers)")).scalar():
        op.execute("ANALYZE memory_pointers")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE memory_pointers ALTER COLUMN scope_ref RESET (n_distinct)")
