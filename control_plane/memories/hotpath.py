"""The write and read hot paths in as few statements as the database allows: the lookups.

Before the put, a write needs three facts: the pointer's id (sealed into the object), the
data subject's live key, and whether an erasure blocks the subject. ``lookup_for_write``
gets all three in one statement. After the put, ``hotpath_commit.commit_write`` moves the
pointer and appends its audit row in one statement (PostgreSQL) or one short write
transaction (SQLite).

A read needs the pointer and its subject's live key: ``lookup_for_read``, one statement.

Both lookups run outside any transaction (one statement each, no BEGIN/COMMIT round trips).
Whatever the fast path cannot settle — the row changed since the lookup, the subject has no
key yet — it reports, and the general protocol (``write_general``) takes over. The tables and
parameters the statements of both modules name are defined here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from typing import cast as as_type

from sqlalchemy import (
    String,
    Table,
    Uuid,
    and_,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    select,
    text,
    tuple_,
)
from sqlalchemy.orm import Session

from ..addresses import MemoryAddress
from ..db import direct
from ..db.models import AccessLog, GcCandidate, MemoryPointer, SubjectErasure, SubjectKey
from .hotpath_many import LOOKUP_MANY, lookup_rows
from .repository import pointer_of
from .write_request import address_params


def as_table(clause: Any) -> Table:
    return as_type(Table, clause)


P = as_table(MemoryPointer.__table__)
K = as_table(SubjectKey.__table__)
E = as_table(SubjectErasure.__table__)
A = as_table(AccessLog.__table__)
G = as_table(GcCandidate.__table__)

TENANT = bindparam("v_tenant", type_=Uuid)
SCOPE = bindparam("v_scope", type_=String)
SCOPE_REF = bindparam("v_scope_ref", type_=String)
KEY = bindparam("v_key", type_=String)
META_USER = bindparam("v_meta_user", type_=String)
USER_REF = bindparam("v_user_ref", type_=String)  # the scope ref when the scope is "user"

AT_ADDRESS = and_(P.c.tenant_id == TENANT, P.c.scope_type == SCOPE,
                   P.c.scope_ref == SCOPE_REF, P.c.key == KEY)


def _live_key_of(subject_user: Any) -> Any:
    """Join condition: the live key of the pointer's subject (its user, else its scope)."""
    return and_(K.c.tenant_id == TENANT, K.c.destroyed_at.is_(None),
                K.c.scope_type == case((subject_user.is_not(None), literal("user")),
                                       else_=SCOPE),
                K.c.scope_ref == func.coalesce(subject_user, SCOPE_REF))


_one = select(literal_column("1").label("one")).subquery("one")
_write_subject = func.coalesce(META_USER, P.c.subject_user_id)
_blocked = (select(E.c.job_id)
            .where(E.c.tenant_id == TENANT,
                   E.c.user_id.in_([func.coalesce(META_USER, P.c.subject_user_id, USER_REF),
                                    USER_REF]))
            .limit(1).scalar_subquery())

LOOKUP_WRITE = (
    select(P.c.id, P.c.subject_user_id, K.c.id.label("key_id"),
           K.c.scope_type.label("key_scope_type"), K.c.scope_ref.label("key_scope_ref"),
           K.c.wrapped_key, K.c.kek_version_id, _blocked.label("blocked_by"))
    .select_from(_one.outerjoin(P, AT_ADDRESS).outerjoin(K, _live_key_of(_write_subject)))
    .limit(1)
)

LOOKUP_READ = (
    select(P, K.c.id.label("key_id"), K.c.wrapped_key, K.c.kek_version_id)
    .select_from(P.outerjoin(K, _live_key_of(P.c.subject_user_id)))
    .where(AT_ADDRESS)
)


@dataclass(frozen=True)
class KeyRow:
    id: uuid.UUID
    scope_type: str
    scope_ref: str
    wrapped_key: bytes | None
    kek_version_id: uuid.UUID


# What a read's lookup finds at an address: the pointer, and its subject's live key (if any).
Found = tuple[MemoryPointer, KeyRow | None]


@dataclass(frozen=True)
class WriteLookup:
    pointer_id: uuid.UUID | None
    subject_user_id: str | None
    key: KeyRow | None
    blocked_by: uuid.UUID | None


def one_statement(session: Session, statement: Any, params: dict[str, Any]) -> list[Any]:
    """Run one self-contained statement outside the session's transaction, straight on the
    driver (``db.direct``): on PostgreSQL one round trip, on SQLite a pooled connection; no
    BEGIN/COMMIT on either (SQLite runs a lone statement atomically). On SQLite only the
    lookups come here, which write nothing."""
    if session.in_transaction():
        session.commit()
    engine = session.get_bind().engine
    if engine.dialect.name == "postgresql":
        return direct.run(engine, statement, params)
    return direct.run_sqlite(engine, statement, params)


def lookup_for_write(session: Session, tenant_id: uuid.UUID, address: MemoryAddress,
                     meta_user: str | None) -> WriteLookup:
    (row,) = one_statement(session, LOOKUP_WRITE,
                            address_params(tenant_id, address) | {"v_meta_user": meta_user})
    return _write_lookup(row)


def lookup_many_for_write(session: Session, tenant_id: uuid.UUID,
                          writes: list[tuple[MemoryAddress, str | None]]) -> list[WriteLookup]:
    """``lookup_for_write`` for many writes (a batch's sets: address and ``user_id``), in
    order: on PostgreSQL one statement for all (``hotpath_many.LOOKUP_MANY``), on SQLite one
    statement each in one short transaction."""
    if not writes:
        return []
    if session.in_transaction():
        session.commit()
    engine = session.get_bind().engine
    if engine.dialect.name == "postgresql":
        rows = direct.run(engine, LOOKUP_MANY, lookup_rows(tenant_id, writes))
        if len(rows) != len(writes):  # read only: nothing to roll back
            raise RuntimeError(f"{len(writes)} write lookups answered {len(rows)} rows")
    else:
        try:  # on the session's connection, straight on the driver, as a single write's is
            conn = session.connection()
            rows = []
            for address, meta_user in writes:
                (row,) = direct.execute_sqlite(conn, LOOKUP_WRITE, address_params(
                    tenant_id, address) | {"v_meta_user": meta_user})
                rows.append(row)
        finally:
            session.commit()
    return [_write_lookup(row) for row in rows]


def _write_lookup(row: Any) -> WriteLookup:
    key = None if row.key_id is None else KeyRow(row.key_id, row.key_scope_type,
                                                 row.key_scope_ref, row.wrapped_key,
                                                 row.kek_version_id)
    return WriteLookup(row.id, row.subject_user_id, key, row.blocked_by)


def lookup_for_read(session: Session, tenant_id: uuid.UUID,
                    address: MemoryAddress) -> Found | None:
    rows = one_statement(session, LOOKUP_READ, address_params(tenant_id, address))
    if not rows:
        return None
    (row,) = rows  # the address is unique
    key = None if row.key_id is None else KeyRow(row.key_id, "", "", bytes(row.wrapped_key),
                                                 row.kek_version_id)
    return pointer_of(row), key


def live_key_of(key: str, pointer: str) -> str:
    """SQL: the subject key row ``key`` is the live key of the pointer row ``pointer``'s
    subject (its user's when it has one, else its scope's)."""
    return (f"{key}.tenant_id = {pointer}.tenant_id AND {key}.destroyed_at IS NULL "
            f"AND {key}.scope_type = CASE WHEN {pointer}.subject_user_id IS NOT NULL "
            f"THEN 'user' ELSE {pointer}.scope_type END "
            f"AND {key}.scope_ref = COALESCE({pointer}.subject_user_id, {pointer}.scope_ref)")


# A read in ONE statement (PostgreSQL): look the pointer and its subject's live key up and,
# when the pointer is servable and its live key is the one the caller sealed the audit
# address under (a guess from an earlier read of the address), append the read's audit row
# — committed with the statement, before anything is fetched or served (I6). A read that then
# fails (a mismatch, a missing object, storage down) appends its failure row as well, so the
# log keeps both facts. ``logged`` says whether the row went in; if not (no guess, a new
# key, not servable) the caller audits as a two-statement read does.
READ_LOGGED_POSTGRES = text(f"""
WITH found AS (
 SELECT p.*, k.id AS key_id, k.wrapped_key, k.kek_version_id
 FROM memory_pointers AS p LEFT JOIN subject_keys AS k
  ON {live_key_of("k", "p")}
 WHERE p.tenant_id = :v_tenant AND p.scope_type = :v_scope AND p.scope_ref = :v_scope_ref
  AND p.key = :v_key
), aud AS (
 INSERT INTO access_logs (tenant_id, pointer_id, accessor_type, accessor_id, agent_id,
  operation, success, detail, request_id, accessed_at)
 SELECT :v_tenant, found.id, :v_accessor_type, :v_accessor_id, :v_accessor_agent, 'read', true,
  :v_detail, :v_request_id, :v_now
 FROM found
 WHERE found.key_id IS NOT DISTINCT FROM CAST(:v_expected_key AS uuid)
  AND found.sync_status = 'synced'
  AND (found.expires_at IS NULL OR found.expires_at > CAST(:v_now AS timestamptz))
 RETURNING 1
)
SELECT found.*, (SELECT count(*) FROM aud) AS logged FROM found
""").bindparams(bindparam("v_tenant", type_=Uuid), bindparam("v_expected_key", type_=Uuid))


@dataclass(frozen=True)
class ReadRow:
    """Who reads, and the audit detail (the address sealed under ``expected_key``)."""

    accessor_type: str
    accessor_id: str
    accessor_agent: str | None
    request_id: str | None
    detail: str
    now: datetime


def lookup_for_read_logged(session: Session, tenant_id: uuid.UUID, address: MemoryAddress,
                           expected_key: uuid.UUID | None, row: ReadRow
                           ) -> tuple[Found | None, bool]:
    """``lookup_for_read`` that also appends the read's audit row when it can (see
    ``READ_LOGGED_POSTGRES``): the lookup, and whether the row went in. PostgreSQL only."""
    rows = one_statement(session, READ_LOGGED_POSTGRES, address_params(tenant_id, address) | {
        "v_expected_key": expected_key, "v_accessor_type": row.accessor_type,
        "v_accessor_id": row.accessor_id, "v_accessor_agent": row.accessor_agent,
        "v_detail": row.detail[:2000], "v_request_id": row.request_id, "v_now": row.now})
    if not rows:
        return None, False
    (found,) = rows  # the address is unique
    key = None if found.key_id is None else KeyRow(found.key_id, "", "",
                                                   bytes(found.wrapped_key),
                                                   found.kek_version_id)
    return (pointer_of(found), key), bool(found.logged)


_BATCH_KEY = and_(K.c.tenant_id == P.c.tenant_id, K.c.destroyed_at.is_(None),
                  K.c.scope_type == case((P.c.subject_user_id.is_not(None), literal("user")),
                                         else_=P.c.scope_type),
                  K.c.scope_ref == func.coalesce(P.c.subject_user_id, P.c.scope_ref))


def lookup_many_for_read(session: Session, tenant_id: uuid.UUID,
                         addresses: list[MemoryAddress]
                         ) -> dict[MemoryAddress, Found]:
    """``lookup_for_read`` for many addresses (a batch's gets) in one statement; an address
    without a pointer is absent from the answer."""
    found: dict[MemoryAddress, Found] = {}
    if not addresses:
        return found
    statement = (select(P, K.c.id.label("key_id"), K.c.wrapped_key, K.c.kek_version_id)
                 .select_from(P.outerjoin(K, _BATCH_KEY))
                 .where(P.c.tenant_id == tenant_id,
                        tuple_(P.c.scope_type, P.c.scope_ref, P.c.key).in_(
                            [(a.scope, a.scope_ref, a.key) for a in addresses])))
    if session.in_transaction():
        session.commit()
    try:
        rows = session.execute(statement).all()
    finally:
        session.commit()
    for row in rows:
        key = None if row.key_id is None else KeyRow(row.key_id, "", "", bytes(row.wrapped_key),
                                                     row.kek_version_id)
        found[MemoryAddress(row.scope_type, row.scope_ref, row.key)] = (pointer_of(row), key)
    return found
