"""A pointer table grown past what its statistics describe: copies of its first memory made by
one INSERT, for the tests of the plans PostgreSQL keeps."""

from __future__ import annotations

from sqlalchemy import Connection, text


def grow(conn: Connection, rows: int, *, scope_type: str = "p.scope_type",
         scope_ref: str = "p.scope_ref", key: str = "'grown/' || n") -> None:
    """``rows`` copies of the table's first memory; ``scope_type``, ``scope_ref`` and ``key``
    are SQL over the copied row ``p`` and its number ``n`` (1 to ``rows``)."""
    conn.execute(text(f"""
INSERT INTO memory_pointers (id, tenant_id, scope_type, scope_ref, key, memory_type, tags,
  importance, source, storage_config_id, storage_path, content_sha256, content_size,
  sync_status, version, has_embeddings, created_at, updated_at, searchable)
SELECT gen_random_uuid(), p.tenant_id, {scope_type}, {scope_ref}, {key}, p.memory_type,
  p.tags, 3, 'api', p.storage_config_id, p.storage_path || n, p.content_sha256,
  p.content_size, 'synced', 1, false, p.created_at, p.updated_at, false
FROM (SELECT * FROM memory_pointers LIMIT 1) AS p, generate_series(1, :rows) AS n"""),
                 {"rows": rows})
