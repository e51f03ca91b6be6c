"""A page of pointers in ONE statement (PostgreSQL): ``GET /v1/pointers``.

A listing used to read the tenant's retention policies, then build its page's statement
from them (each auto-deleting policy a term of its own, so the statement's text changed
with the policies and SQLAlchemy built its cache key and parameters afresh every time),
then commit its audit row through the read group commit: three round trips and the most
Python of any read. Here one statement does all three, as a single read does (DESIGN §11,
"Reads in one statement"):

- the policies are a ``NOT EXISTS`` over ``retention_policies`` beside each row, with the
  very rule ``memories.visibility.pointer_scope`` states in Python: a policy about one
  memory type governs it in its scope; a policy about every type (``*``) governs the types
  of its scope that no policy names; event-only policies govern no pointer; a governed
  pointer last written more than the policy's days ago is hidden while it waits for the
  retention run (a test holds the two forms to the same rows);
- the audit row (``list``, its detail ending in the number of pointers answered) is
  appended by the statement's own ``INSERT``, committed with it before the page is answered
  (I6);
- only the filters given are in the text, so there is one text per combination of filters
  and order (a few hundred at most), each compiled once and prepared by the driver.

SQLite runs in-process, where round trips cost nothing: it keeps ``repository.list_page``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, TextClause, text

from ..db import direct
from ..db.models import MemoryPointer
from ..identity import ANY_REF, Access
from .hotpath import live_key_of
from .repository import UNREADABLE, After, pointer_of
from .visibility import ALL_TYPES, EVENT

# Each optional filter: its condition in the page's WHERE, and the parameter it takes.
_FILTERS: dict[str, str] = {
    "scope": "p.scope_type = :v_scope",
    "scope_ref": "p.scope_ref = :v_scope_ref",
    "user_id": "p.subject_user_id = :v_user_id",
    "memory_type": "p.memory_type = :v_memory_type",
    "sync_status": "p.sync_status = :v_sync_status",
    "tag": "CAST(p.tags AS jsonb) @> CAST(:v_tag AS jsonb)",
    "key_prefix": "p.key LIKE :v_key_prefix ESCAPE '/'",
    "after": "p.id > :v_after",
    # Listing by key (memories only), byte by byte whatever the database's collation, and
    # past the previous page's last (key, id).
    "by_key": "p.key IS NOT NULL",
    # What a read would serve (``repository.UNREADABLE``: a write or delete in flight).
    "readable": "p.key IS NOT NULL AND p.sync_status NOT IN ({})".format(
        ", ".join(f"'{status}'" for status in UNREADABLE)),
    "after_key": ('(p.key COLLATE "C" > :v_after_key '
                  "OR (p.key = :v_after_key AND p.id > :v_after))"),
    "before_key": ('(p.key COLLATE "C" < :v_after_key '
                   "OR (p.key = :v_after_key AND p.id < :v_after))"),
    # Listing by last write, newest first, past the previous page's last (written, id).
    "before_updated": ("(p.updated_at < CAST(:v_after_updated AS timestamptz) "
                       "OR (p.updated_at = CAST(:v_after_updated AS timestamptz) "
                       "AND p.id < :v_after))"),
    # A scoped key: one grant per (scope, scope ref), '*' for every ref of its scope.
    "grants": ("EXISTS (SELECT 1 FROM unnest(CAST(:v_grant_scopes AS text[]), "
               "CAST(:v_grant_refs AS text[])) AS g(s, r) WHERE g.s = p.scope_type "
               "AND (g.r = :v_any_ref OR g.r = p.scope_ref))"),
    # A scoped key with an agent id: its grants, or a team its agent is a member of (read
    # now, never cached, so a member removed is out from the next request on).
    "grants_teams": ("(EXISTS (SELECT 1 FROM unnest(CAST(:v_grant_scopes AS text[]), "
                     "CAST(:v_grant_refs AS text[])) AS g(s, r) WHERE g.s = p.scope_type "
                     "AND (g.r = :v_any_ref OR g.r = p.scope_ref)) "
                     "OR (p.scope_type = 'team' AND p.scope_ref IN (SELECT m.team_id "
                     "FROM team_members AS m WHERE m.tenant_id = :v_tenant "
                     "AND m.agent_id = :v_member)))"),
    # A data subject's own key: its subject's user scope, and what names its subject.
    "subject": ("((p.scope_type = 'user' AND p.scope_ref = :v_subject) "
                "OR p.subject_user_id = :v_subject)"),
}

# Hidden by an auto-deleting policy (``memories.visibility.pointer_scope`` and
# ``expired_under``). Days are counted as 86,400 seconds each, as ``cutoff`` does, whatever
# the session's time zone (an interval of days would follow its daylight saving).
_KEPT = """NOT EXISTS (
  SELECT 1 FROM retention_policies AS rp
  WHERE rp.tenant_id = p.tenant_id AND rp.auto_delete AND rp.scope_type = p.scope_type
   AND rp.memory_type <> :v_event
   AND (rp.keep_importance_at_least IS NULL OR p.importance < rp.keep_importance_at_least)
   AND p.updated_at < CAST(:v_now AS timestamptz) - rp.retention_days * interval '86400 seconds'
   AND (rp.memory_type = p.memory_type OR (rp.memory_type = :v_all AND NOT EXISTS (
    SELECT 1 FROM retention_policies AS o
    WHERE o.tenant_id = p.tenant_id AND o.scope_type = p.scope_type
     AND o.memory_type = p.memory_type AND o.memory_type NOT IN (:v_all, :v_event)))))"""

_STATEMENTS: dict[tuple[str, ...], TextClause] = {}


# {t}: the table's alias and a dot, or nothing (the outer select orders the page's rows).
_ORDER_BY = {"created": "{t}id", "key": '{t}key COLLATE "C", {t}id',
             "key_desc": '{t}key COLLATE "C" DESC, {t}id DESC',
             "updated_desc": "{t}updated_at DESC, {t}id DESC"}


# The list's audit row (its detail ends in the number of pointers answered).
_LIST_ROW = """SELECT 0 AS n, CAST(NULL AS uuid) AS pointer_id, 'list' AS operation,
  CAST(:v_detail AS text) || LEAST((SELECT count(*) FROM page), CAST(:v_size AS int)) AS detail"""
# A page with values (``readable``) appends, after the list's row, the read row of each of
# its pointers (not the one past the page, which only says whether there is a next page),
# as a single read appends its row with its lookup (a read that then fails appends its
# failure row as well); and answers each row with its subject's live key.
_READ_ROWS = """
  UNION ALL
  SELECT row_number() OVER (ORDER BY {by}), r.id, 'read', r.scope_type || :v_read_detail
  FROM (SELECT * FROM page ORDER BY {by} LIMIT :v_size) AS r"""
_LIVE_KEY = f"""
 LEFT JOIN LATERAL (
  SELECT s.id AS key_id, s.wrapped_key, s.kek_version_id FROM subject_keys AS s
  WHERE {live_key_of("s", "page")} LIMIT 1) AS k ON true"""
READ_DETAIL = " (listed)"  # after the scope: a listed value's read row


def _statement(given: tuple[str, ...], order: str) -> TextClause:
    found = _STATEMENTS.get((*given, order))
    if found is None:
        where = "\n  AND ".join([
            "p.tenant_id = :v_tenant",
            "(p.expires_at IS NULL OR p.expires_at > CAST(:v_now AS timestamptz))",
            _KEPT, *(_FILTERS[name] for name in given)])
        by = _ORDER_BY[order]
        readable = "readable" in given
        rows = _LIST_ROW + (_READ_ROWS.format(by=by.format(t="")) if readable else "")
        found = _STATEMENTS[(*given, order)] = text(f"""
WITH page AS (
 SELECT p.* FROM memory_pointers AS p
 WHERE {where}
 ORDER BY {by.format(t="p.")} LIMIT :v_limit
), aud AS (
 INSERT INTO access_logs (tenant_id, pointer_id, accessor_type, accessor_id, agent_id,
  operation, success, detail, request_id, accessed_at)
 SELECT :v_tenant, a.pointer_id, :v_accessor_type, :v_accessor_id, :v_accessor_agent,
  a.operation, true, a.detail, :v_request_id, :v_now
 FROM ({rows}) AS a ORDER BY a.n
)
SELECT * FROM page{_LIVE_KEY if readable else ""} ORDER BY {by.format(t="page.")}
""")
    return found


@dataclass(frozen=True)
class Listing:
    """What a page is filtered by (None: not filtered) and how long it may be."""

    scope: str | None
    scope_ref: str | None
    user_id: str | None
    memory_type: str | None
    sync_status: str | None
    tag: str | None
    key_prefix: str | None
    after: After | None
    limit: int
    order: str = "created"  # repository.ORDERS
    readable: bool = False  # only memories by key a read would serve


@dataclass(frozen=True)
class ListedBy:
    """Who lists (the audit row), and the row's detail up to the count it ends with."""

    accessor_type: str
    accessor_id: str
    accessor_agent: str | None
    request_id: str | None
    detail: str
    size: int  # the page's size: the count in the detail is at most this


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return escaped + "%"


# A subject key as ``keys.open_object`` takes it: id, wrapped key, KEK version.
LiveKey = tuple[uuid.UUID, bytes, uuid.UUID]


def list_page(engine: Engine, tenant_id: uuid.UUID, listing: Listing, access: Access,
              now: datetime, by: ListedBy) -> tuple[list[MemoryPointer], dict[uuid.UUID, LiveKey]]:
    """Up to ``listing.limit`` pointers of the tenant the key may see, in ``listing.order``,
    past ``listing.after``; their audit row committed with them. The pointers are in no
    session. With ``listing.readable`` also the read row of each of the first ``by.size``,
    and the live subject keys of the page by id (else none)."""
    params: dict[str, Any] = {
        "v_tenant": tenant_id, "v_now": now, "v_limit": listing.limit, "v_event": EVENT,
        "v_all": ALL_TYPES, "v_accessor_type": by.accessor_type,
        "v_accessor_id": by.accessor_id, "v_accessor_agent": by.accessor_agent,
        "v_detail": by.detail, "v_size": by.size, "v_request_id": by.request_id}
    given = []
    for name in ("scope", "scope_ref", "user_id", "memory_type", "sync_status", "tag",
                 "key_prefix"):
        value = getattr(listing, name)
        if value is None:
            continue
        given.append(name)
        if name == "tag":
            value = json.dumps([value])
        elif name == "key_prefix":
            value = _like_prefix(value)
        params[f"v_{name}"] = value
    if listing.order in ("key", "key_desc"):
        given.append("by_key")
    if listing.readable:
        given.append("readable")
        params["v_read_detail"] = READ_DETAIL
    if listing.after is not None:
        given.append({"created": "after", "key": "after_key", "key_desc": "before_key",
                      "updated_desc": "before_updated"}[listing.order])
        params |= {"v_after": listing.after.id, "v_after_key": listing.after.key,
                   "v_after_updated": listing.after.updated}
    if access.user_id is not None:
        given.append("subject")
        params["v_subject"] = access.user_id
    elif access.grants is not None:
        given.append("grants_teams" if access.teams else "grants")
        params |= {"v_grant_scopes": [g.scope for g in access.grants],
                   "v_grant_refs": [g.scope_ref for g in access.grants], "v_any_ref": ANY_REF}
        if access.teams:
            params["v_member"] = access.agent_id
    rows = direct.run(engine, _statement(tuple(given), listing.order), params)
    keys = {row.key_id: (row.key_id, bytes(row.wrapped_key), row.kek_version_id)
            for row in rows if listing.readable and row.wrapped_key is not None}
    return [pointer_of(row) for row in rows], keys
