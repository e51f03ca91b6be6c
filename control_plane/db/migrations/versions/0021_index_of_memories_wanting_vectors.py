"""ix_memory_pointers_wanting_vectors: a partial index holding only the memories the search
indexer still has to embed, so its look no longer reads every unsearchable or embedded row

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# As models.WANTS_VECTOR was when this revision was written; a migration never imports models.
WANTS_VECTOR = ("sync_status = 'synced' AND searchable AND (NOT has_embeddings"
                " OR embedding_storage_path IS NULL"
                " OR embedding_storage_path <> storage_path || '.vec')")


def upgrade() -> None:
    op.create_index("ix_memory_pointers_wanting_vectors", "memory_pointers", ["updated_at"],
                    postgresql_where=sa.text(WANTS_VECTOR), sqlite_where=sa.text(WANTS_VECTOR))


def downgrade() -> None:
    op.drop_index("ix_memory_pointers_wanting_vectors", table_name="memory_pointers")
