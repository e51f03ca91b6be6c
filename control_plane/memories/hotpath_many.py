"""A batch's write lookups and its pointer rows on PostgreSQL, each in ONE statement.

``hotpath`` and ``hotpath_commit`` run a single write's lookup and commit as one statement
each. A batch used to pipeline those statements once per item: one round trip, but the
server still started, ran and finished a many-CTE statement per item (~0.3-0.5 ms each on a
small machine). Here the
items travel as one JSON array (``json_to_recordset``: one parameter, so the SQL never
changes with the batch's size), and each statement handles them all: what it checks and
writes for an item is exactly what the one-item statement does (a test holds the two to the
same outcomes, item by item). Pointer rows are looked up through a LATERAL subquery per item
— the address's unique index, whatever the table's size — and locked in the order of the
array (the caller sorts it by address, so two batches never wait on each other in a cycle).
Each such subquery ends in ``LIMIT 1`` (or locks its row): without it PostgreSQL may pull
the subquery up into a plain join, and where the statistics still describe a smaller table
it hashes the items against a scan of the tenant's every pointer (tens of milliseconds a
batch at 60,000 pointers) instead of probing the index once per item.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import String, Table, Uuid, bindparam, text

from ..db import direct
from ..db.models import MemoryPointer
from .write_request import WriteRequest

P: Table = MemoryPointer.__table__  # type: ignore[assignment]
_tenant = bindparam("v_tenant", type_=Uuid)


def unindented(sql: str) -> str:
    """``sql`` without the indentation that makes it readable here (fewer bytes to send;
    psycopg caches, and then prepares, only statements under 4 KiB)."""
    return "\n".join(line.strip() for line in sql.splitlines())


LOOKUP_MANY = text(unindented("""
WITH w AS MATERIALIZED (
 SELECT * FROM json_to_recordset(CAST(:v_rows AS json))
  AS w(n int, scope text, scope_ref text, key text, meta_user text, user_ref text)
)
SELECT p.id, p.subject_user_id, k.id AS key_id, k.scope_type AS key_scope_type,
 k.scope_ref AS key_scope_ref, k.wrapped_key, k.kek_version_id,
 (SELECT e.job_id FROM subject_erasures AS e WHERE e.tenant_id = :v_tenant
  AND e.user_id IN (COALESCE(w.meta_user, p.subject_user_id, w.user_ref), w.user_ref)
  LIMIT 1) AS blocked_by
FROM w LEFT JOIN LATERAL (
 SELECT id, subject_user_id FROM memory_pointers WHERE tenant_id = :v_tenant
  AND scope_type = w.scope AND scope_ref = w.scope_ref AND key = w.key LIMIT 1) AS p ON true
LEFT JOIN LATERAL (
 SELECT * FROM subject_keys AS k WHERE k.tenant_id = :v_tenant AND k.destroyed_at IS NULL
  AND k.scope_type = CASE WHEN COALESCE(w.meta_user, p.subject_user_id) IS NOT NULL
   THEN 'user' ELSE w.scope END
  AND k.scope_ref = COALESCE(w.meta_user, p.subject_user_id, w.scope_ref)
 LIMIT 1) AS k ON true
ORDER BY w.n
""")).bindparams(_tenant)


def lookup_rows(tenant_id: uuid.UUID, writes: Sequence[tuple[Any, str | None]]
                ) -> dict[str, Any]:
    """``LOOKUP_MANY``'s parameters for ``(address, user_id)`` pairs, in order."""
    return {"v_tenant": tenant_id, "v_rows": direct.json_text([
        {"n": n, "scope": a.scope, "scope_ref": a.scope_ref, "key": a.key, "meta_user": user,
         "user_ref": a.user_ref}
        for n, (a, user) in enumerate(writes)])}


# The columns a write's INSERT sets (the one-item statement's too), in its SELECT's order.
INSERTED = ("id, tenant_id, scope_type, scope_ref, key, memory_type, subject_user_id, agent_id, "
            "title, tags, importance, source, storage_config_id, storage_path, content_sha256, "
            "content_size, sync_status, version, has_embeddings, expires_at, created_at, "
            "updated_at, searchable")

_COLUMNS = ("n int, pointer_id uuid, scope text, scope_ref text, key text, user_ref text, "
            "seen_user text, guard_user text, meta_user text, config uuid, path text, "
            "sha text, size bigint, memory_type text, default_type text, tags json, "
            "importance int, title text, agent_id text, expires_at timestamptz, source text, "
            "searchable boolean, key_id uuid, detail_head text, detail_tail text, "
            "operation text, now timestamptz, accessor_type text, accessor_id text, "
            "accessor_agent text, request_id text, existed boolean")

# The same steps as ``hotpath_commit.WRITE_POSTGRES``, for every item: lock the row (if any),
# check it is still what the object was sealed for, the erasure guard, the object's subject
# key (under a share lock, so an erasure's key destruction waits) and orphan GC's mark;
# update or insert; append the audit row. One result row per item, in order: the saved row
# (or NULLs) and the guard's job.
WRITE_MANY = text(unindented(f"""
WITH w AS MATERIALIZED (
 SELECT * FROM json_to_recordset(CAST(:v_rows AS json)) AS w({_COLUMNS})
), cur AS (
 SELECT w.n, p.* FROM w CROSS JOIN LATERAL (
  SELECT id, storage_config_id, storage_path FROM memory_pointers
  WHERE tenant_id = :v_tenant AND scope_type = w.scope AND scope_ref = w.scope_ref
   AND key = w.key FOR UPDATE) AS p
), sk AS (
 SELECT id, destroyed_at FROM subject_keys WHERE id IN (SELECT key_id FROM w)
 ORDER BY id FOR SHARE
), chk AS (
 SELECT w.n,
  (SELECT e.job_id FROM subject_erasures AS e WHERE e.tenant_id = :v_tenant
   AND e.user_id IN (w.guard_user, w.user_ref) LIMIT 1) AS blocked_by,
  EXISTS (SELECT 1 FROM sk WHERE sk.id = w.key_id AND sk.destroyed_at IS NOT NULL)
  OR EXISTS (SELECT 1 FROM gc_candidates AS g WHERE g.storage_config_id = w.config
   AND g.path = w.path) AS refused
 FROM w
), upd AS (
 UPDATE memory_pointers AS p SET
  version = p.version + 1, storage_config_id = w.config, storage_path = w.path,
  content_sha256 = w.sha, content_size = w.size, sync_status = 'synced',
  storage_class = NULL, updated_at = w.now,
  memory_type = COALESCE(w.memory_type, p.memory_type), tags = COALESCE(w.tags, p.tags),
  importance = COALESCE(w.importance, p.importance), title = COALESCE(w.title, p.title),
  subject_user_id = COALESCE(w.meta_user, p.subject_user_id),
  agent_id = COALESCE(w.agent_id, p.agent_id), source = COALESCE(w.source, p.source),
  searchable = COALESCE(w.searchable, p.searchable),
  expires_at = CASE WHEN p.expires_at <= w.now THEN w.expires_at
   ELSE COALESCE(w.expires_at, p.expires_at) END
 FROM w JOIN cur ON cur.n = w.n JOIN chk ON chk.n = w.n
 WHERE p.id = cur.id AND p.id = w.pointer_id
  AND (w.meta_user IS NOT NULL OR p.subject_user_id IS NOT DISTINCT FROM w.seen_user)
  AND chk.blocked_by IS NULL AND NOT chk.refused
 RETURNING p.*, cur.storage_config_id AS old_config, cur.storage_path AS old_path
), ins AS (
 INSERT INTO memory_pointers ({INSERTED})
 SELECT w.pointer_id, :v_tenant, w.scope, w.scope_ref, w.key,
  COALESCE(w.memory_type, w.default_type), COALESCE(w.meta_user, w.user_ref), w.agent_id,
  w.title, COALESCE(w.tags, CAST('[]' AS json)), COALESCE(w.importance, 3),
  COALESCE(w.source, 'api'), w.config, w.path, w.sha, w.size, 'synced', 1, false,
  w.expires_at, w.now, w.now, COALESCE(w.searchable, true)
 FROM w JOIN chk ON chk.n = w.n
 WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.n = w.n) AND NOT w.existed
  AND chk.blocked_by IS NULL AND NOT chk.refused
 ORDER BY w.n
 ON CONFLICT (tenant_id, scope_type, scope_ref, key) DO NOTHING
 RETURNING *, CAST(NULL AS uuid) AS old_config, CAST(NULL AS text) AS old_path
), res AS (
 SELECT * FROM upd UNION ALL SELECT * FROM ins
), mine AS (
 SELECT w.n, res.* FROM w JOIN res ON res.id = w.pointer_id AND res.scope_type = w.scope
  AND res.scope_ref = w.scope_ref AND res.key = w.key
), aud AS (
 INSERT INTO access_logs (tenant_id, pointer_id, accessor_type, accessor_id, agent_id,
  operation, success, detail, request_id, accessed_at)
 SELECT :v_tenant, mine.id, w.accessor_type, w.accessor_id, w.accessor_agent, w.operation,
  true, w.detail_head || mine.version || w.detail_tail, w.request_id, w.now
 FROM mine JOIN w ON w.n = mine.n ORDER BY w.n
)
SELECT mine.*, chk.blocked_by FROM w JOIN chk ON chk.n = w.n
LEFT JOIN mine ON mine.n = w.n ORDER BY w.n
""")).bindparams(_tenant).columns(*P.c, old_config=Uuid, old_path=String, blocked_by=Uuid)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def write_rows(requests: Sequence[WriteRequest]) -> dict[str, Any]:
    """``WRITE_MANY``'s parameters for ``requests`` (one tenant's), in order."""
    rows = []
    for n, r in enumerate(requests):
        address = r.address
        rows.append({
            "n": n, "pointer_id": str(r.pointer_id), "scope": address.scope,
            "scope_ref": address.scope_ref, "key": address.key,
            "user_ref": address.user_ref, "seen_user": r.seen_subject_user,
            "guard_user": r.guard_user,
            "meta_user": r.meta_user, "config": str(r.config_id), "path": r.path,
            "sha": r.sha256, "size": r.size, "memory_type": r.memory_type,
            "default_type": r.default_memory_type, "tags": r.tags,
            "importance": r.importance, "title": r.title, "agent_id": r.agent_id,
            "expires_at": _text(r.expires_at and r.expires_at.isoformat()),
            "source": r.source, "searchable": r.searchable, "key_id": _text(r.key_id),
            "detail_head": r.detail_head, "detail_tail": r.detail_tail,
            "operation": r.operation,
            "now": r.now.isoformat(), "accessor_type": r.accessor_type,
            "accessor_id": r.accessor_id, "accessor_agent": r.accessor_agent_id,
            "request_id": r.request_id, "existed": r.existed})
    (tenant_id,) = {r.tenant_id for r in requests}  # one tenant's: its id guards every row
    return {"v_tenant": tenant_id, "v_rows": direct.json_text(rows)}
