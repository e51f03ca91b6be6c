"""SQL of a search: the kept state's rows and tokens, the live filter (one statement, run on a
driver connection, that may also write the search's audit row) and its rows; and queuing
again the vectors of another embedder that a search finds."""

from __future__ import annotations

import functools
import json
import uuid
from collections import namedtuple
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    Engine,
    String,
    and_,
    bindparam,
    cast,
    exists,
    func,
    not_,
    or_,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from ..db.direct import in_id_list, pooled_raw
from ..db.models import EmbedderConfig, MemoryPointer, RetentionPolicy, SearchSegment
from ..identity import Access

P = MemoryPointer


def reembed_other_models(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str,
                         model: str) -> int:
    """Vectors of another embedder are never compared with this one's: queue them again."""
    result = session.execute(
        update(P).where(P.tenant_id == tenant_id, P.scope_type == scope,
                        P.scope_ref == scope_ref, P.has_embeddings == true(),
                        P.embedding_model != model)
        .values(has_embeddings=False).execution_options(synchronize_session=False))
    return int(result.rowcount)  # type: ignore[attr-defined]


# The warm path: what a search keeps of the control plane between searches (the tenant's
# embedder row, retention policies and the scope's segment rows), each with a token the
# database computes from the rows themselves. The one statement of a warm search reads the
# tokens beside the live pointers, in the same snapshot: a token that changed means the kept
# state is stale, and the search reads it again and ranks once more before answering.

SEGMENT_COLUMNS = (SearchSegment.id, SearchSegment.tenant_id, SearchSegment.scope_type,
                   SearchSegment.scope_ref, SearchSegment.embedding_model,
                   SearchSegment.storage_config_id, SearchSegment.storage_path)


def segment_where(tenant_id: uuid.UUID, scope: str | None, scope_ref: str | None,
                  access: Access) -> list[Any]:
    """Which segment rows a search reads: the scope's (both given), else every one the key
    may see (of the scope type, if given)."""
    where: list[Any] = [SearchSegment.tenant_id == tenant_id]
    if scope is not None:
        where.append(SearchSegment.scope_type == scope)
    if scope_ref is not None:
        where.append(SearchSegment.scope_ref == scope_ref)
    else:
        # A user key's subject may be named by memories of any scope: the segments of the
        # scopes holding one (the live statement then keeps only the subject's pointers).
        seen = access.where(SearchSegment.scope_type, SearchSegment.scope_ref)
        if seen is not None and access.user_id is not None:
            seen = or_(seen, exists().where(
                P.tenant_id == tenant_id, P.scope_type == SearchSegment.scope_type,
                P.scope_ref == SearchSegment.scope_ref, P.subject_user_id == access.user_id))
        if seen is not None:
            where.append(seen)
    return where


def segment_rows(session: Session, where: Sequence[Any]) -> Sequence[Any]:
    return session.execute(
        select(*SEGMENT_COLUMNS).where(*where)
        .order_by(SearchSegment.scope_type, SearchSegment.scope_ref,
                  SearchSegment.created_at, SearchSegment.id)).all()


def tokens(tenant_id: uuid.UUID, where: Sequence[Any]) -> tuple[Any, Any, Any]:
    """Scalar subqueries: the embedder row's id (None: the server's default), the retention
    policies' and the segments' contents as comma-joined strings (order not given: compare
    them as sets, ``token_set``)."""
    R = RetentionPolicy
    embedder = (select(EmbedderConfig.id).where(EmbedderConfig.tenant_id == tenant_id)
                .scalar_subquery().label("t_embedder"))
    policy = (select(func.aggregate_strings(
        cast(R.id, String) + ":" + cast(R.retention_days, String) + ":"
        + cast(R.auto_delete, String) + ":" + R.scope_type + ":" + R.memory_type, ","))
        .where(R.tenant_id == tenant_id).scalar_subquery().label("t_policies"))
    segment = (select(func.aggregate_strings(cast(SearchSegment.id, String), ","))
               .where(*where).scalar_subquery().label("t_segments"))
    return embedder, policy, segment


def read_tokens(session: Session, tenant_id: uuid.UUID, where: Sequence[Any]) -> Any:
    return session.execute(select(*tokens(tenant_id, where))).one()


def token_set(value: str | None) -> frozenset[str]:
    return frozenset(value.split(",")) if value else frozenset()


def live_statement(tenant_id: uuid.UUID, scopes: Sequence[tuple[str, str]], *,
                   policies: Sequence[Any], by_ids: bool, user_id: bool, memory_type: bool,
                   access: Access, where: Sequence[Any], dialect: Dialect) -> LiveQuery:
    """``candidates`` under ``policies`` (as kept) and the tokens, in ONE statement: a
    one-row select of the tokens, left-joined to the live pointers; compiled for
    ``dialect`` once per kept state and shape (``LiveQuery``). Its parameters: ``now``,
    ``cut_<k>`` (``live_parameters``), ``ids`` (``db.direct.id_list``), ``user_id``,
    ``memory_type``."""
    from ..memories.visibility import deleting

    on: list[Any] = [P.tenant_id == tenant_id, P.sync_status == "synced",
                     or_(P.expires_at.is_(None), P.expires_at > bindparam("now", None))]
    terms = [and_(governed, P.updated_at < bindparam(f"cut_{k}", None))
             for k, (governed, _) in enumerate(deleting(policies))]
    if terms:
        on.append(not_(or_(*terms)))
    if by_ids:
        # One parameter for any number of candidates, so the SQL never changes.
        on.append(in_id_list(P.id, dialect.name))
    if scopes:
        on.append(or_(*(and_(P.scope_type == s, P.scope_ref == r) for s, r in scopes)))
    if user_id:
        on.append(P.subject_user_id == bindparam("user_id", None))
    if memory_type:
        on.append(P.memory_type == bindparam("memory_type", None))
    seen = access.where(P.scope_type, P.scope_ref, P.subject_user_id)
    if seen is not None:
        on.append(seen)
    head = select(*tokens(tenant_id, where)).subquery("t")
    return LiveQuery(select(head, *LIVE_RAW).select_from(head.outerjoin(P, and_(*on))),
                     dialect)


def text_array(values: Sequence[object]) -> str:
    """The text of a PostgreSQL array of ``values`` (each quoted), for a parameter cast to
    an array in SQL: one string for the driver to send, not a list to adapt item by item."""
    quoted = (str(v).replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return "{" + ",".join(f'"{v}"' for v in quoted) + "}"


def live_parameters(policies: Sequence[Any], now: datetime) -> dict[str, Any]:
    from ..memories.visibility import cutoff, deleting

    values: dict[str, Any] = {"now": now}
    for k, (_, days) in enumerate(deleting(policies)):
        values[f"cut_{k}"] = cutoff(days, now)
    return values


# PostgreSQL: a warm search's live statement (by ids) that also writes the search's audit
# row, committed with it: one round trip instead of two (the commit's WAL flush is paid
# once either way). The row is written only if the search ends with this statement: the
# kept state's tokens are the ones the statement reads (else the search ranks again), and
# the candidates found live at the version their vector was made for, with the hits found
# by earlier statements (``a_found``), reach the limit, or no candidate is left to check
# (``a_final``). Its detail ends with that count: the number of hits the search answers.
# When it is not written, the search commits its row as before (the audit batcher).
_AUDITED = (
    "WITH live AS ({live}), audited AS ("
    "INSERT INTO access_logs (tenant_id, accessor_type, accessor_id, operation, success, "
    "detail, request_id, accessed_at, agent_id) "
    "SELECT %(a_tenant_id)s::uuid, %(a_accessor_type)s::text, %(a_accessor_id)s::text, "
    "'search', true, left(%(a_detail)s::text || least(%(a_found)s::int + m.n, "
    "%(a_limit)s::int), 2000), %(a_request_id)s::text, %(a_accessed_at)s::timestamptz, "
    "%(a_agent_id)s::text "
    "FROM (SELECT count(*)::int AS n FROM live JOIN unnest(%(ids)s::uuid[], "
    "%(a_versions)s::int[]) AS c(id, version) ON live.id = c.id AND live.version = c.version"
    ") AS m, (SELECT t_embedder, t_policies, t_segments FROM live LIMIT 1) AS t "
    "WHERE t.t_embedder IS NOT DISTINCT FROM %(a_embedder)s::uuid "
    "AND ARRAY(SELECT p FROM unnest(string_to_array(t.t_policies, ',')) AS p "
    "ORDER BY p COLLATE \"C\") = %(a_policies)s::text[] "
    "AND ARRAY(SELECT g FROM unnest(string_to_array(t.t_segments, ',')) AS g "
    "ORDER BY g COLLATE \"C\") = %(a_segments)s::text[] "
    "AND (%(a_found)s::int + m.n >= %(a_limit)s::int OR %(a_final)s::boolean) "
    "RETURNING 1) "
    "SELECT live.*, (SELECT count(*) FROM audited) AS audited FROM live")


def audit_row(actor: Any, detail: str, request_id: str | None, accessed_at: datetime,
              limit: int) -> dict[str, Any]:
    """A search's ``_AUDITED`` values known before its ranking: the audit row's columns as
    the audit batcher writes them (``detail``: up to the count) and the search's limit."""
    return {"a_tenant_id": actor.tenant_id, "a_accessor_type": actor.accessor_type,
            "a_accessor_id": actor.accessor_id, "a_detail": detail,
            "a_request_id": request_id, "a_accessed_at": accessed_at,
            "a_agent_id": actor.agent_id, "a_limit": limit}


def audit_values(row: dict[str, Any], tokens: tuple[Any, frozenset[str], frozenset[str]],
                 versions: list[int], found: int, final: bool) -> dict[str, Any]:
    """``LiveQuery.run``'s ``audit``: ``row`` from ``audit_row``, ``tokens`` the kept
    state's, ``versions`` of the candidates (as ``ids``), ``found`` the hits so far,
    ``final``: no candidate left."""
    embedder, policies, segments = tokens
    return {**row, "a_embedder": embedder, "a_policies": text_array(sorted(policies)),
            "a_segments": text_array(sorted(segments)), "a_versions": text_array(versions),
            "a_found": found, "a_final": final}


class LiveQuery:
    """A live statement compiled once for the driver and run straight on a pooled driver
    connection, outside any transaction: one statement is its own snapshot, and a warm
    search pays neither SQLAlchemy's per-execution work (execution context, expanding
    parameters, result processing: ~1.2 ms of a 10,000-memory search on SQLite) nor a
    BEGIN/COMMIT. Rows come back as the driver gives them (``LIVE_RAW``)."""

    def __init__(self, statement: Any, dialect: Dialect) -> None:
        self.statement = statement
        # Literal parts (the token separators) rendered into the SQL; the values come from
        # a plain compile of the same statement, whose parameter names are the same.
        rendered = statement.compile(dialect=dialect,
                                     compile_kwargs={"render_postcompile": True})
        self.sql: str = rendered.string
        self.order: list[str] | None = (list(rendered.positiontup)
                                        if rendered.positiontup is not None else None)
        self._compiled = statement.compile(dialect=dialect)
        self._processors = dict(self._compiled._bind_processors)
        self._expanding = [name for bind, name in self._compiled.bind_names.items()
                           if bind.expanding]
        # The statement's own values (tenant, scopes, separators), converted for the driver
        # once: a run converts only the parameters it is given.
        self._base = {name: value if name in self._expanding or name not in self._processors
                      else self._processors[name](value)
                      for name, value in self._compiled.construct_params(_check=False).items()}
        self.row: Any = namedtuple(  # type: ignore[misc]  # noqa: PYI024
            "LiveRow", [c.key for c in statement.selected_columns])
        self._audited: tuple[str, Any] | None = None

    def _audited_sql(self) -> tuple[str, Any]:
        if self._audited is None:
            row: Any = namedtuple(  # type: ignore[misc]  # noqa: PYI024
                "AuditedLiveRow", [*self.row._fields, "audited"])
            self._audited = (_AUDITED.replace("{live}", self.sql), row._make)
        return self._audited

    def values(self, parameters: dict[str, Any]) -> Any:
        values = dict(self._base)
        for name, value in parameters.items():
            if name in values:  # a parameter the statement does not have is not sent
                process = self._processors.get(name)
                values[name] = (value if process is None or name in self._expanding
                                else process(value))
        for name in self._expanding:  # ``x IN (...)``: rendered as x_1, x_2, … in self.sql
            process = self._processors.get(name)
            for i, value in enumerate(values.pop(name), 1):
                values[f"{name}_{i}"] = process(value) if process is not None else value
        return values if self.order is None else [values[name] for name in self.order]

    def run(self, engine: Engine, parameters: dict[str, Any],
            audit: dict[str, Any] | None = None) -> list[Any]:
        """Execute with ``parameters``: the rows, as ``self.row`` tuples. Errors are the
        SQLAlchemy exceptions a Session raises (a lost connection leaves the pool).

        With ``audit`` (PostgreSQL, a statement by ids: ``audit_values``), the same statement
        also writes the search's audit row and commits it, if the search ends with these
        candidates (see ``_AUDITED``); the rows then carry ``audited``, 1 if it did."""
        values = self.values(parameters)
        sql, make = self.sql, self.row._make
        if audit is not None:
            values = {**values, **audit}
            sql, make = self._audited_sql()
        dbapi_error = engine.dialect.loaded_dbapi.Error
        raw = pooled_raw(engine)
        driver: Any = raw.driver_connection
        postgres = engine.dialect.name == "postgresql"
        try:
            if postgres:
                driver.autocommit = True  # one statement, no BEGIN/COMMIT round trips
            cursor = driver.cursor()
            try:
                cursor.execute(sql, values)
                return list(map(make, cursor.fetchall()))
            finally:
                cursor.close()
                if postgres and not driver.closed:
                    driver.autocommit = False
        except dbapi_error as exc:
            lost = engine.dialect.is_disconnect(exc, driver, None)
            if lost:
                raw.invalidate()
            raise sa_exc.DBAPIError.instance(sql, values, exc, dbapi_error,
                                             connection_invalidated=lost,
                                             dialect=engine.dialect) from exc
        finally:
            raw.close()


def live_with_tokens(session: Session, statement: LiveQuery, parameters: dict[str, Any],
                     tags: Sequence[str], audit: dict[str, Any] | None = None
                     ) -> tuple[Any, list[Any]]:
    """Run a ``live_statement``: (the tokens row, the live pointers' rows)."""
    if session.in_transaction():
        session.commit()  # the statement runs on a connection of its own: end this one first
    rows = statement.run(session.get_bind().engine, parameters, audit)
    found = [r for r in rows if r.id is not None]
    if tags:  # tags are a JSON list: filtered here, portably, on the few candidates left
        wanted = set(tags)
        found = [r for r in found if wanted.issubset(tag_list(r.tags))]
    return rows[0], found


# The live statement's columns. Ids, tags and times come as the driver gives them (SQLite:
# hex, JSON text and ISO text; PostgreSQL: UUID, JSON text and datetime), so a row costs no
# conversion until it is a hit:
# ``raw_hex`` keys the rows, ``LivePointer.of`` converts the few hits.
LIVE_RAW = (type_coerce(P.id, String).label("id"), P.version, P.scope_type, P.scope_ref,
            P.key, P.title, P.memory_type,
            cast(P.tags, String).label("tags"),  # text: the driver parses no JSON per row
            P.subject_user_id,
            type_coerce(P.storage_config_id, String).label("storage_config_id"),
            P.storage_path, P.content_sha256, P.expires_at, P.content_size)


def raw_hex(value: Any) -> str:
    return value.hex if isinstance(value, uuid.UUID) else str(value).replace("-", "")


def raw_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


@functools.lru_cache(maxsize=1024)
def _config_id(value: Any) -> uuid.UUID:
    """A bucket configuration's id as the driver gave it, as a UUID (a tenant's searches
    name the same few configurations over and over)."""
    return raw_uuid(value)


def raw_utc(value: Any) -> datetime | None:
    """A time column as the driver gave it (SQLite: naive UTC text), timezone-aware UTC."""
    if value is None:
        return None
    found = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found.astimezone(UTC)


def tag_list(value: Any) -> list[str]:
    if value is None or value == "[]":
        return []
    found = json.loads(value) if isinstance(value, str | bytes) else value
    return list(found or [])


class LivePointer(NamedTuple):
    """A search result's pointer as the live filter read it (attribute access like a
    MemoryPointer)."""

    id: uuid.UUID
    version: int
    scope_type: str
    scope_ref: str
    key: str | None
    title: str | None
    memory_type: str
    tags: list[str]
    subject_user_id: str | None
    storage_config_id: uuid.UUID
    storage_path: str
    content_sha256: str
    expires_at: datetime | None
    content_size: int | None  # what a read of its object may take (envelope.sealed_size)

    @classmethod
    def of(cls, row: Any, pointer_id: uuid.UUID | None = None) -> LivePointer:
        """The row as a pointer (``pointer_id``: its id, if the caller has it as a UUID)."""
        return cls(raw_uuid(row.id) if pointer_id is None else pointer_id, row.version,
                   row.scope_type, row.scope_ref, row.key,
                   row.title, row.memory_type, tag_list(row.tags), row.subject_user_id,
                   _config_id(row.storage_config_id), row.storage_path, row.content_sha256,
                   raw_utc(row.expires_at), row.content_size)
