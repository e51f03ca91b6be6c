"""The write hot path's step 3: after the put, ``commit_write`` moves the pointer and appends
its audit row — on PostgreSQL in one statement that locks the row, checks it is still what
the object was sealed for, checks the erasure guard again, upserts and audits (one round
trip, committed on its own); on SQLite in one short write transaction. ``commit_writes`` does
the same for a batch's writes in one transaction. The lookups before the put, and the tables
and parameters these statements name, are in ``hotpath``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    String,
    Uuid,
    and_,
    bindparam,
    case,
    false,
    func,
    insert,
    literal,
    literal_column,
    null,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.orm import Session

from ..db import direct
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from .hotpath import (
    AT_ADDRESS,
    KEY,
    META_USER,
    SCOPE,
    SCOPE_REF,
    TENANT,
    USER_REF,
    A,
    E,
    G,
    K,
    P,
    one_statement,
)
from .hotpath_many import INSERTED, WRITE_MANY, unindented, write_rows
from .repository import pointer_of
from .write_request import WriteRequest


@dataclass(frozen=True)
class WriteOutcome:
    """The saved pointer and what it superseded — or, when nothing was saved, why not:
    ``blocked_by`` (an erasure of the subject is running) or neither (the row changed)."""

    pointer: MemoryPointer | None
    superseded: tuple[uuid.UUID, str] | None
    blocked_by: uuid.UUID | None


_TYPES: dict[str, Any] = {
    "pointer_id": Uuid, "seen_user": String, "guard_user": String, "config": Uuid,
    "path": String, "sha": String, "size": P.c.content_size.type, "now": P.c.updated_at.type,
    "memory_type": String, "default_type": String, "tags": JSON(none_as_null=True),
    "importance": P.c.importance.type, "title": String, "agent_id": String,
    "expires_at": P.c.expires_at.type, "accessor_type": String, "accessor_id": String,
    "operation": String, "request_id": String, "accessor_agent": String, "detail_head": String,
    "detail_tail": String, "key_id": Uuid, "source": String, "searchable": Boolean,
    "new_searchable": Boolean, "existed": Boolean}
_b: dict[str, Any] = {name: bindparam(f"v_{name}", type_=t) for name, t in _TYPES.items()}
# The parameters the write statement types (each cast costs it ten to thirty bytes, and it
# must stay well under psycopg's 4 KiB: see WRITE_POSTGRES): the ones a NULL can come in where
# nothing else says its type, and the text joined to the version. The driver types the others
# itself (a UUID, a number, an aware datetime) or the database does from where they go (text
# into a varchar column, compared with one, or COALESCEd with a column or a typed constant).
_TYPED = ("expires_at", "detail_head", "detail_tail", "searchable", "new_searchable", "existed")

_GUARD = (select(E.c.job_id)
          .where(E.c.tenant_id == TENANT, E.c.user_id.in_([_b["guard_user"], USER_REF]))
          .limit(1))
# The key the object was sealed under was destroyed (an erasure of its subject completed
# between the lookup and now): the object must not be adopted; the general path seals anew.
_KEY_DESTROYED = select(K.c.id).where(K.c.id == _b["key_id"], K.c.destroyed_at.is_not(None))
# Orphan GC marked the new object while the write was in flight (its put came before GC's
# listing, its commit after): a candidate is never adopted, so GC's sweep cannot delete an
# object a pointer names; the general path puts a fresh object instead.
_GC_MARKED = select(G.c.path).where(G.c.storage_config_id == _b["config"],
                                    G.c.path == _b["path"])


def _update_values() -> dict[str, Any]:
    b = _b
    return {
        "version": P.c.version + 1, "storage_config_id": b["config"],
        "storage_path": b["path"], "content_sha256": b["sha"], "content_size": b["size"],
        "sync_status": "synced", "updated_at": b["now"], "storage_class": null(),
        "memory_type": func.coalesce(b["memory_type"], P.c.memory_type),
        "tags": func.coalesce(b["tags"], P.c.tags),
        "importance": func.coalesce(b["importance"], P.c.importance),
        "title": func.coalesce(b["title"], P.c.title),
        "subject_user_id": func.coalesce(META_USER, P.c.subject_user_id),
        "agent_id": func.coalesce(b["agent_id"], P.c.agent_id),
        "source": func.coalesce(b["source"], P.c.source),
        "searchable": func.coalesce(b["searchable"], P.c.searchable),
        # A memory whose ttl ran out is gone: a new value does not inherit its expiry.
        "expires_at": case((P.c.expires_at <= b["now"], b["expires_at"]),
                           else_=func.coalesce(b["expires_at"], P.c.expires_at)),
    }


def _insert_values() -> dict[str, Any]:
    b = _b
    return {
        "id": b["pointer_id"], "tenant_id": TENANT, "scope_type": SCOPE,
        "scope_ref": SCOPE_REF, "key": KEY, "version": literal(1),
        "created_at": b["now"], "updated_at": b["now"],
        "memory_type": func.coalesce(b["memory_type"], b["default_type"]),
        "tags": func.coalesce(b["tags"], literal([], JSON)),
        "importance": func.coalesce(b["importance"], literal(3)),
        "source": func.coalesce(b["source"], literal("api")), "has_embeddings": false(),
        "subject_user_id": func.coalesce(META_USER, USER_REF),
        "agent_id": b["agent_id"], "title": b["title"], "expires_at": b["expires_at"],
        "storage_config_id": b["config"], "storage_path": b["path"],
        "content_sha256": b["sha"], "content_size": b["size"],
        "sync_status": literal("synced"), "searchable": b["new_searchable"],
    }


_STILL_BOUND = and_(P.c.id == _b["pointer_id"],
                    or_(META_USER.is_not(None),
                        P.c.subject_user_id.is_not_distinct_from(_b["seen_user"])))


# One statement: lock the row, check it is still what the object was sealed for, check the
# erasure guard, check (under a share lock, so an erasure's key destruction waits for it)
# that the object's subject key was not destroyed since the lookup and that orphan GC has not
# marked the object, update or insert, append the audit row. Written out by hand to stay short:
# psycopg converts and caches (and then prepares) only statements of at most 4 KiB and 50
# parameters; this one keeps a margin (a test holds it under 3,500 bytes), so that the next
# column does not silently take it out of the cache.
WRITE_POSTGRES = text(unindented(f"""
WITH cur AS (
 SELECT id, storage_config_id, storage_path FROM memory_pointers
 WHERE tenant_id = :v_tenant AND scope_type = :v_scope AND scope_ref = :v_scope_ref
  AND key = :v_key
 FOR UPDATE
), guard AS (
 SELECT job_id FROM subject_erasures
 WHERE tenant_id = :v_tenant AND user_id IN (:v_guard_user, :v_user_ref) LIMIT 1
), sk AS MATERIALIZED (
 SELECT destroyed_at FROM subject_keys WHERE id = :v_key_id FOR SHARE
), ok AS (
 SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM guard)
  AND NOT EXISTS (SELECT 1 FROM sk WHERE destroyed_at IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM gc_candidates WHERE storage_config_id = :v_config
   AND path = :v_path)
), upd AS (
 UPDATE memory_pointers AS p SET
  version = p.version + 1, storage_config_id = :v_config, storage_path = :v_path,
  content_sha256 = :v_sha, content_size = :v_size, sync_status = 'synced', storage_class = NULL,
  updated_at = :v_now, memory_type = COALESCE(:v_memory_type, p.memory_type),
  tags = COALESCE(:v_tags, p.tags), importance = COALESCE(:v_importance, p.importance),
  title = COALESCE(:v_title, p.title),
  subject_user_id = COALESCE(:v_meta_user, p.subject_user_id),
  agent_id = COALESCE(:v_agent_id, p.agent_id), source = COALESCE(:v_source, p.source),
  searchable = COALESCE(:v_searchable, p.searchable),
  expires_at = CASE WHEN p.expires_at <= :v_now THEN :v_expires_at
   ELSE COALESCE(:v_expires_at, p.expires_at) END
 FROM cur, ok
 WHERE p.id = cur.id AND p.id = :v_pointer_id
  AND (CAST(:v_meta_user AS text) IS NOT NULL
   OR p.subject_user_id IS NOT DISTINCT FROM :v_seen_user)
 RETURNING p.*, cur.storage_config_id AS old_config, cur.storage_path AS old_path
), ins AS (
 INSERT INTO memory_pointers ({INSERTED})
 SELECT :v_pointer_id, :v_tenant, :v_scope, :v_scope_ref, :v_key,
  COALESCE(:v_memory_type, :v_default_type), COALESCE(:v_meta_user, :v_user_ref),
  :v_agent_id, :v_title, COALESCE(:v_tags, CAST('[]' AS json)),
  COALESCE(:v_importance, 3), COALESCE(:v_source, 'api'), :v_config,
  :v_path, :v_sha, :v_size, 'synced', 1, false, :v_expires_at, :v_now, :v_now,
  :v_new_searchable
 FROM ok WHERE NOT EXISTS (SELECT 1 FROM cur) AND NOT :v_existed
 ON CONFLICT (tenant_id, scope_type, scope_ref, key) DO NOTHING
 RETURNING *, CAST(NULL AS uuid) AS old_config, CAST(NULL AS text) AS old_path
), res AS (
 SELECT * FROM upd UNION ALL SELECT * FROM ins
), aud AS (
 INSERT INTO access_logs (tenant_id, pointer_id, accessor_type, accessor_id, agent_id,
  operation, success, detail, request_id, accessed_at)
 SELECT :v_tenant, res.id, :v_accessor_type, :v_accessor_id, :v_accessor_agent,
  :v_operation, true, :v_detail_head || res.version || :v_detail_tail, :v_request_id, :v_now
 FROM res
)
SELECT res.*, (SELECT job_id FROM guard) AS blocked_by
FROM (SELECT 1) AS one LEFT JOIN res ON true
""")).bindparams(*(_b[name] for name in _TYPED)).columns(*P.c, old_config=Uuid, old_path=String,
                                                        blocked_by=Uuid)


_SQLITE_CURRENT = select(P.c.id, P.c.storage_config_id, P.c.storage_path).where(
    AT_ADDRESS).subquery("cur")
# SQLite's checks before the row moves, in one statement: the erasure guard (blocked_by), the
# object's key destroyed or the object marked by orphan GC (refused), and the row at the
# address if there is one (id NULL: none).
_SQLITE_CHECK = select(
    _GUARD.scalar_subquery().label("blocked_by"),
    or_(_KEY_DESTROYED.exists(), _GC_MARKED.exists()).label("refused"),
    _SQLITE_CURRENT.c.id, _SQLITE_CURRENT.c.storage_config_id, _SQLITE_CURRENT.c.storage_path,
).select_from(select(literal_column("1").label("one")).subquery("one")
              .outerjoin(_SQLITE_CURRENT, true()))
_SQLITE_UPDATE = (update(P).where(_STILL_BOUND).values(_update_values())
                  .returning(*P.c))
_SQLITE_INSERT = insert(P).values(_insert_values()).returning(*P.c)
# The write's audit row; statements run straight on the driver are module constants.
_SQLITE_AUDIT = insert(A).values({name: bindparam(name) for name in (
    "tenant_id", "pointer_id", "accessor_type", "accessor_id", "agent_id", "operation",
    "success", "detail", "request_id", "accessed_at")})


def commit_write(session: Session, request: WriteRequest) -> WriteOutcome:
    """Step 3 of the write protocol; commits. Raises what the database raised (the caller
    decides whether the outcome is uncertain)."""
    params = request.params()
    if session.get_bind().dialect.name == "postgresql":
        if request.tags is not None:
            params["v_tags"] = json.dumps(request.tags)  # the driver sends it as JSON text
        (row,) = one_statement(session, WRITE_POSTGRES, params)
        if row.id is None:
            return WriteOutcome(None, None, row.blocked_by)
        superseded = None if row.old_path is None else (row.old_config, row.old_path)
        return WriteOutcome(pointer_of(row), superseded, None)
    return _commit_write_sqlite(session, params)


def _commit_write_sqlite(session: Session, params: dict[str, Any]) -> WriteOutcome:
    """A write transaction of its own (``BEGIN IMMEDIATE``) on a pooled connection, not the
    session's, straight on the driver (``direct.sqlite_write``): the write lock is held for
    three statements and as little Python as can be."""
    if session.in_transaction():
        session.commit()
    with direct.sqlite_write(session.get_bind().engine) as transaction:
        outcome = _write_sqlite(transaction.execute, params)
        if outcome.pointer is None:
            transaction.rollback()
    return outcome


def _write_sqlite(execute: Callable[[Any, dict[str, Any]], list[Any]],
                  params: dict[str, Any]) -> WriteOutcome:
    """One write's statements in the open write transaction (no commit), each run by
    ``execute(statement, params)``: the checks in one statement, the row's insert or update,
    its audit row."""
    (check,) = execute(_SQLITE_CHECK, params)
    if check.blocked_by is not None:
        return WriteOutcome(None, None, check.blocked_by)
    if check.refused:
        return WriteOutcome(None, None, None)
    if check.id is None:
        if params["v_existed"]:  # the row the object was sealed for has gone
            return WriteOutcome(None, None, None)
        (row,) = execute(_SQLITE_INSERT, params)
        superseded = None
    else:
        updated = execute(_SQLITE_UPDATE, params)
        if not updated:
            return WriteOutcome(None, None, None)
        (row,) = updated  # by its id: one row
        superseded = (check.storage_config_id, check.storage_path)
    execute(_SQLITE_AUDIT, {
        "tenant_id": params["v_tenant"], "pointer_id": row.id,
        "accessor_type": params["v_accessor_type"], "accessor_id": params["v_accessor_id"],
        "agent_id": params["v_accessor_agent"],
        "operation": params["v_operation"], "success": True,
        "detail": f"{params['v_detail_head']}{row.version}{params['v_detail_tail']}",
        "request_id": params["v_request_id"], "accessed_at": params["v_now"]})
    return WriteOutcome(pointer_of(row), superseded, None)


def commit_writes(session: Session, requests: list[WriteRequest]) -> list[WriteOutcome]:
    """Step 3 of the write protocol for many writes (a batch) in ONE transaction: each
    request's row moves exactly as ``commit_write`` moves it (same guards, same audit row),
    and one commit saves them all; outcomes in the order of ``requests``. Rows are locked in
    address order, so two batches never wait on each other in a cycle. Raises what the
    database raised: then nothing was saved (or, on a lost connection, maybe all was)."""
    order = sorted(range(len(requests)), key=lambda i: (
        requests[i].address.scope, requests[i].address.scope_ref, requests[i].address.key or ""))
    outcomes: list[WriteOutcome | None] = [None] * len(requests)
    if session.in_transaction():
        session.commit()
    if session.get_bind().dialect.name == "postgresql":
        rows = direct.run(session.get_bind().engine, WRITE_MANY,
                          write_rows([requests[i] for i in order]), expect=len(requests))
        for i, row in zip(order, rows, strict=True):
            if row.id is None:
                outcomes[i] = WriteOutcome(None, None, row.blocked_by)
            else:
                outcomes[i] = WriteOutcome(
                    pointer_of(row),
                    None if row.old_path is None else (row.old_config, row.old_path), None)
    else:
        begin_write(session)
        try:
            conn = session.connection()

            def execute(statement: Any, params: dict[str, Any]) -> list[Any]:
                return direct.execute_sqlite(conn, statement, params)

            for i in order:
                outcomes[i] = _write_sqlite(execute, requests[i].params())
            session.commit()
        finally:
            if session.in_transaction():
                session.rollback()
    return [o for o in outcomes if o is not None]
