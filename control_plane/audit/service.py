"""The access audit log (I6): every operation appends a row; a sealer chains them.

Writers only INSERT, so a tenant's writes never queue on a shared lock. The sealer takes
the tenant's chain head (``audit_heads``, locked FOR UPDATE), numbers the unsealed rows in
insertion order and links each to the one before:

    row_hash = SHA-256(prev_hash || canonical JSON of the row's fields, seq included)

``verify`` recomputes the chain: an edited row breaks its own hash, a deleted row leaves a
gap in ``seq`` (or, at the tail, disagrees with the head), a reordered row breaks the link.
Rows rewritten together with every later hash and the head pass that test; the signed
checkpoints the sealer writes into the tenant's bucket catch them (``checkpoints.py``).

In the same transaction the sealer adds the rows to the tenant's Merkle tree (``tree.py``,
leaves from ``leaves.py``), whose signed checkpoints and proofs make the log a transparency
log (``transparency.py``, ``tlog_anchor.py``).
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from base64 import b64encode
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from hashlib import sha256
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, insert, select, text, update
from sqlalchemy.orm import Session

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AccessLog, AuditHead
from ..errors import DomainError, InvalidInput
from ..identity import Actor
from ..kit import decode_cursor, encode_cursor, page_limit, request_id_var, sha256_hex
from . import sealed, tree
from .chain import CHAINED, GENESIS, HASHED, canonical, sealed_forms
from .chain import chain_hash as chain_hash  # the chain's form, where callers look for it
from .leaves import leaf_bytes
from .repository import list_rows

if TYPE_CHECKING:
    from ..plane.data_plane import DataPlane, SubjectKeys
    from ..settings import Settings

log = logging.getLogger(__name__)

def record(session: Session, actor: Actor, operation: str, *, success: bool = True,
           pointer_id: uuid.UUID | None = None, event_id: uuid.UUID | None = None,
           detail: str = "") -> None:
    """Add an audit row to the session's transaction; it commits with the change it records."""
    session.add(AccessLog(
        tenant_id=actor.tenant_id, pointer_id=pointer_id, event_id=event_id,
        accessor_type=actor.accessor_type, accessor_id=actor.accessor_id,
        agent_id=actor.agent_id, operation=operation, success=success, detail=detail[:2000],
        request_id=request_id_var.get(), accessed_at=utcnow(),
    ))


def record_many(session: Session, actor: Actor, operation: str,
                entries: list[tuple[uuid.UUID | None, str]]) -> None:
    """Add one row per (pointer id, detail) in a single executemany, for bulk operations."""
    if not entries:
        return
    now, request_id = utcnow(), request_id_var.get()
    session.execute(insert(AccessLog), [
        {"tenant_id": actor.tenant_id, "pointer_id": pointer_id, "event_id": None,
         "accessor_type": actor.accessor_type, "accessor_id": actor.accessor_id,
         "agent_id": actor.agent_id,
         "operation": operation, "success": True, "detail": detail[:2000],
         "request_id": request_id, "accessed_at": now}
        for pointer_id, detail in entries])


ReadRow = tuple[str, uuid.UUID | None, str]  # (operation, pointer id, detail)
_gathered: contextvars.ContextVar[tuple[Actor, list[ReadRow]] | None] = (
    contextvars.ContextVar("memplane_gathered_reads", default=None))


@contextmanager
def reads_committed_together(session: Session, plane: DataPlane, actor: Actor
                             ) -> Iterator[None]:
    """Within the block, ``commit_reads`` of ``actor``'s rows gathers them; they are
    committed together, in one insert, when the block ends — before the caller answers, so
    I6 holds — and also when it ends with an error (the reads happened). For a request that
    reads several kinds of things and answers once (context assembly): one durable commit
    instead of one per kind."""
    if _gathered.get() is not None:  # already gathering: the outer block commits
        yield
        return
    rows: list[ReadRow] = []
    token = _gathered.set((actor, rows))
    try:
        yield
    except BaseException:
        _gathered.reset(token)
        if rows:
            try:
                commit_reads(session, plane, actor, rows)
            except Exception:  # the error being raised matters more
                log.warning("could not commit the audit rows of a failed request's reads")
        raise
    _gathered.reset(token)
    if rows:
        commit_reads(session, plane, actor, rows)


def commit_reads(session: Session, plane: DataPlane, actor: Actor,
                 rows: list[ReadRow]) -> None:
    """Commit the audit rows ``(operation, pointer_id, detail)`` of an operation that
    changed nothing else (a search, a listing, a read of several items) before its answer
    (I6): one insert of the audit batcher, committed on its own, when the plane has one;
    else in a transaction of the session. The session's open transaction ends first.
    Inside ``reads_committed_together`` for the same actor, the rows wait for its end."""
    gathering = _gathered.get()
    if gathering is not None and gathering[0] == actor:
        gathering[1].extend(rows)
        return
    batcher = plane.audit_batcher
    if batcher is None:
        begin_write(session)
        for operation, pointer_id, detail in rows:
            record(session, actor, operation, pointer_id=pointer_id, detail=detail)
        session.commit()
        return
    if session.in_transaction():
        session.commit()
    batcher.record_operations(actor.tenant_id, actor.accessor_type, actor.accessor_id, rows,
                              agent_id=actor.agent_id)


def record_failure(session: Session, actor: Actor, operation: str, *, detail: str,
                   pointer_id: uuid.UUID | None = None) -> None:
    """Write a failed operation's row in a transaction of its own.

    The failed change itself is rolled back first; the audit row must still land, so this
    commits on purpose.
    """
    session.rollback()
    begin_write(session)
    record(session, actor, operation, success=False, pointer_id=pointer_id, detail=detail)
    session.commit()


@contextmanager
def audited(session: Session, actor: Actor, operation: str, *, detail: str = "",
            pointer_id: uuid.UUID | None = None,
            private: Sequence[str | None] = ()) -> Iterator[None]:
    """Audit the failure of whatever runs inside; success rows are the service's own job.

    ``private``: personal strings (scope ref, key, user id) the error's sentence may quote;
    they are cut out of the row (see ``sealed``)."""
    try:
        yield
    except DomainError as exc:
        if not exc.audited:
            reason = f"{exc.code}: {sealed.redact(exc.detail, private)}"
            record_failure(session, actor, operation, pointer_id=pointer_id,
                           detail=f"{detail} {reason}".strip())
            exc.audited = True
        raise
    except Exception as exc:
        try:
            record_failure(session, actor, operation, pointer_id=pointer_id,
                           detail=f"{detail} error: {type(exc).__name__}".strip())
        except Exception:  # the database may be what failed; the original error matters more
            log.warning("could not audit a failed %s", operation, exc_info=True)
        raise


def create_head(session: Session, tenant_id: uuid.UUID) -> None:
    session.add(AuditHead(tenant_id=tenant_id, last_seq=0, last_hash=GENESIS))


def _no_checkpoint(step: str) -> None:
    """Tests replace this to stop a sealer or a reader at a named step (races made
    deterministic); in production it does nothing."""


checkpoint: Callable[[str], None] = _no_checkpoint


def seal(session: Session, tenant_id: uuid.UUID, *, batch: int = 5000,
         with_tree: bool = True) -> int:
    """Chain the tenant's unsealed rows and add them to its Merkle tree (``tree.py``) in the
    same transaction; returns how many were sealed. Commits. A tree behind the chain (rows
    sealed before it existed) is built first. ``with_tree=False`` chains only (the bench's
    baseline): the tree catches up at the next seal with it."""
    sealed = 0
    build = with_tree
    while True:
        begin_write(session)
        head = session.scalar(
            select(AuditHead).where(AuditHead.tenant_id == tenant_id).with_for_update()
        )
        if head is None:
            session.rollback()
            return sealed
        if build and head.tree_size < head.last_seq:
            grown = tree.catch_up(session, tenant_id, head.tree_size, head.last_seq,
                                  batch=batch)
            if grown > head.tree_size:
                head.tree_size = grown
                session.commit()
                continue
            build = False  # the chain is broken below its head: chain on without the tree
        # Plain rows, not ORM objects: loading and flushing thousands of objects cost more
        # than hashing them. One executemany by primary key writes the links.
        rows = session.execute(
            select(*HASHED).where(AccessLog.tenant_id == tenant_id, AccessLog.seq.is_(None))
            .order_by(AccessLog.id).limit(batch)
        ).all()
        checkpoint("seal:rows-read")
        if not rows:
            session.rollback()
            return sealed
        seq, prev = head.last_seq, head.last_hash
        leaves: list[bytes] | None = [] if build and head.tree_size == seq else None
        links = []
        for row in rows:
            seq += 1
            if leaves is None:
                row_hash = sha256_hex(prev.encode() + canonical(row, seq))
            else:  # the chain's form and the leaf, made together
                chained, leaf = sealed_forms(row, seq)
                row_hash = sha256_hex(prev.encode() + chained)
                leaves.append(sha256(b"\x00" + leaf).digest())
            links.append({"id": row.id, "seq": seq, "prev_hash": prev, "row_hash": row_hash})
            prev = row_hash
        _write_links(session, links)
        if leaves is not None:
            try:
                head.tree_size = tree.append(session, tenant_id, head.last_seq, leaves)
            except tree.TreeError:
                log.warning("the audit tree of tenant %s was not grown: its tiles disagree "
                            "with its size", tenant_id)
        head.last_seq, head.last_hash, head.sealed_at = seq, prev, utcnow()
        session.commit()
        sealed += len(rows)
        if len(rows) < batch:
            return sealed


# PostgreSQL: a round's links in one statement, rather than an executemany that the driver
# sends and the server runs row by row (the sealer runs in the server beside the requests).
# The links are consecutive, so only the ids and the row hashes travel, each as one
# comma-joined string (an array parameter is dumped element by element by the driver, a
# regular-expression check per hash): each row's seq is the first plus its position, its
# prev_hash the row hash before it (the head's for the first).
_LINK_MANY = text(
    "UPDATE access_logs AS a SET seq = v.seq, prev_hash = v.prev_hash, row_hash = v.row_hash "
    "FROM (SELECT u.id, CAST(:first AS bigint) + u.n - 1 AS seq, u.row_hash, "
    "coalesce(lag(u.row_hash) OVER (ORDER BY u.n), CAST(:prev AS text)) AS prev_hash "
    "FROM unnest(CAST(string_to_array(:ids, ',') AS bigint[]), string_to_array(:hashes, ',')) "
    "WITH ORDINALITY AS u(id, row_hash, n)) AS v WHERE a.id = v.id")


def _write_links(session: Session, links: list[dict[str, Any]]) -> None:
    if session.get_bind().dialect.name != "postgresql":
        session.execute(update(AccessLog), links)
        return
    session.execute(_LINK_MANY, {
        "first": links[0]["seq"], "prev": links[0]["prev_hash"],
        "ids": ",".join(str(link["id"]) for link in links),
        "hashes": ",".join(link["row_hash"] for link in links)})


def seal_all(session: Session) -> int:
    """Seal every tenant's unsealed rows; also builds the tree of every tenant whose tree is
    behind its chain (rows sealed before the tree existed)."""
    unsealed = session.scalars(
        select(AccessLog.tenant_id).where(AccessLog.seq.is_(None)).distinct()
    ).all()
    behind = session.scalars(
        select(AuditHead.tenant_id).where(AuditHead.tree_size < AuditHead.last_seq)).all()
    session.rollback()
    return sum(seal(session, tenant_id) for tenant_id in dict.fromkeys([*unsealed, *behind]))


@dataclass(frozen=True)
class Verification:
    ok: bool
    checked: int
    unsealed: int
    first_bad_seq: int | None
    problem: str | None = None
    # Against the signed checkpoints in the tenant's bucket (checkpoints.py); zero/None
    # when verify ran without the data plane.
    checkpoints_checked: int = 0
    first_checkpoint_seq: int | None = None
    last_checkpoint_seq: int | None = None
    first_bad_checkpoint: int | None = None
    head_seq: int = 0
    anchored_seq: int = 0
    anchor_lag_seconds: float | None = None
    anchor_problem: str | None = None
    # The places read (checkpoints.py, anchors.py), the anchor's recorded moves, and
    # configurations whose bucket could not be read but need not be.
    anchors_checked: int = 0
    anchor_moves: int = 0
    anchors_unreadable: tuple[str, ...] = ()


def verify(session: Session, tenant_id: uuid.UUID, *, chunk: int = 5000,
           plane: DataPlane | None = None, settings: Settings | None = None) -> Verification:
    """Recompute the tenant's chain from the first row to the head; with the data plane,
    also hold it to the signed checkpoints in the tenant's bucket."""
    chain = _verify_chain(session, tenant_id, chunk=chunk)
    if plane is None or settings is None:
        return chain
    from . import checkpoints

    report = checkpoints.check(session, plane, settings, tenant_id)
    lag = None
    if chain.head_seq > report.anchored_seq:
        since = report.anchored_at
        lag = (utcnow() - since).total_seconds() if since is not None else None
    anchored = replace(
        chain, checkpoints_checked=report.checked, first_checkpoint_seq=report.first_seq,
        last_checkpoint_seq=report.last_seq, first_bad_checkpoint=report.first_bad,
        anchored_seq=report.anchored_seq, anchor_lag_seconds=lag,
        anchor_problem=report.anchor_problem, anchors_checked=report.places,
        anchor_moves=report.moves, anchors_unreadable=report.unreadable)
    if not chain.ok or report.ok:
        return anchored
    return replace(anchored, ok=False, first_bad_seq=report.first_uncovered_row,
                   problem=report.problem)


def _verify_chain(session: Session, tenant_id: uuid.UUID, *, chunk: int) -> Verification:
    """Read the head and the rows in one snapshot.

    On PostgreSQL's default READ COMMITTED each statement sees the latest commits, so a
    sealer committing between reading the head and reading the rows made a sound chain look
    longer than its head ("ends at row N but was sealed up to M"). There the walk runs on a
    connection of its own in REPEATABLE READ: one snapshot, no lock, so it holds up neither
    writers nor the sealer. A SQLite transaction is a snapshot already (WAL): the session's
    own is used, and sees what the caller's session sees."""
    engine = session.get_bind().engine
    if engine.dialect.name != "postgresql":
        return _walk_chain(session, tenant_id, chunk=chunk)
    with engine.connect() as conn:
        conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            return _walk_chain(conn, tenant_id, chunk=chunk)


def _walk_chain(conn: Session | Connection, tenant_id: uuid.UUID, *, chunk: int) -> Verification:
    head = conn.execute(
        select(AuditHead.last_seq, AuditHead.last_hash).where(AuditHead.tenant_id == tenant_id)
    ).first()
    checkpoint("verify:head-read")
    unsealed = conn.scalar(
        select(func.count()).select_from(AccessLog)
        .where(AccessLog.tenant_id == tenant_id, AccessLog.seq.is_(None))
    ) or 0
    expected_seq, prev, checked = 1, GENESIS, 0
    last_seq = 0
    head_seq = head.last_seq if head else 0
    head_hash = head.last_hash if head else GENESIS
    while True:
        rows = conn.execute(
            select(*CHAINED)
            .where(AccessLog.tenant_id == tenant_id, AccessLog.seq >= expected_seq)
            .order_by(AccessLog.seq).limit(chunk)
        ).all()
        for row in rows:
            assert row.seq is not None
            if row.seq != expected_seq:
                return Verification(False, checked, unsealed, expected_seq,
                                    f"row {expected_seq} is missing", head_seq=head_seq)
            if row.prev_hash != prev:
                return Verification(False, checked, unsealed, row.seq,
                                    f"row {row.seq} does not follow row {row.seq - 1}",
                                    head_seq=head_seq)
            if row.row_hash != sha256_hex(prev.encode() + canonical(row)):
                return Verification(False, checked, unsealed, row.seq,
                                    f"row {row.seq} was changed after it was sealed",
                                    head_seq=head_seq)
            prev, expected_seq, last_seq = row.row_hash, expected_seq + 1, row.seq
            checked += 1
        if len(rows) < chunk:
            break
    if last_seq != head_seq or prev != head_hash:
        return Verification(False, checked, unsealed, last_seq + 1,
                            f"the chain ends at row {last_seq} but was sealed up to {head_seq}",
                            head_seq=head_seq)
    return Verification(True, checked, unsealed, None, head_seq=head_seq)


def _page_cursor(cursor: str | None) -> int | None:
    """A cursor holds the ``seq`` of the last row shown: an int the database's BIGINT can
    hold (not a bool, not negative)."""
    if not cursor:
        return None
    value = decode_cursor(cursor)
    after = value.get("seq") if isinstance(value, dict) and len(value) == 1 else None
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after < 2**63:
        raise InvalidInput("cursor is not valid; pass the next_cursor value unchanged")
    return after


@dataclass(frozen=True)
class ShownRow:
    """An audit row as ``GET /v1/audit`` shows it: its detail opened, its leaf beside it."""

    seq: int | None
    pointer_id: uuid.UUID | None
    event_id: uuid.UUID | None
    accessor_type: str
    accessor_id: str
    agent_id: str | None
    operation: str
    success: bool
    detail: str
    request_id: str | None
    accessed_at: datetime
    leaf: str | None  # base64 of leaves.leaf_bytes(row); None while unsealed


def query_page(session: Session, actor: Actor, *, pointer_id: uuid.UUID | None,
               accessor_id: str | None, operation: str | None, since: datetime | None,
               until: datetime | None, cursor: str | None, limit: int | None,
               keys: SubjectKeys | None = None) -> tuple[list[ShownRow], str | None]:
    """One page of the tenant's sealed audit log in chain order; sealed first, so the page
    holds every row committed before the call (a row committing later is on a later page).

    Sealed addresses are shown opened while their subject's key lives (``sealed.reveal``,
    through ``keys``); each row's leaf is of the row as stored. The rows returned are copies,
    so showing them never writes to the log."""
    size = page_limit(limit)
    # A time without a zone is read as UTC, the zone every audit row is stored in.
    since, until = (t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t
                    for t in (since, until))
    after = _page_cursor(cursor)
    session.rollback()
    seal(session, actor.tenant_id)
    rows = list_rows(session, actor.tenant_id, pointer_id=pointer_id, accessor_id=accessor_id,
                     operation=operation, since=since, until=until, after_seq=after,
                     limit=size + 1)
    next_cursor = encode_cursor({"seq": rows[size - 1].seq}) if len(rows) > size else None
    rows = rows[:size]
    opened = sealed.reveal(session, keys, actor.tenant_id, [row.detail for row in rows])
    shown = [ShownRow(row.seq, row.pointer_id, row.event_id, row.accessor_type,
                      row.accessor_id, row.agent_id, row.operation, row.success, detail,
                      row.request_id, row.accessed_at,
                      None if row.seq is None else b64encode(leaf_bytes(row)).decode())
             for row, detail in zip(rows, opened, strict=True)]
    session.rollback()
    begin_write(session)
    record(session, actor, "audit_query", detail=f"operation={operation} -> {len(shown)}")
    session.commit()
    return shown, next_cursor


def verify_as(session: Session, actor: Actor, *, plane: DataPlane | None = None,
              settings: Settings | None = None) -> Verification:
    result = verify(session, actor.tenant_id, plane=plane, settings=settings)
    session.rollback()
    begin_write(session)
    record(session, actor, "audit_verify", success=result.ok,
           detail=f"checked {result.checked}, unsealed {result.unsealed}, "
                  f"first bad {result.first_bad_seq}, checkpoints "
                  f"{result.checkpoints_checked}, first bad checkpoint "
                  f"{result.first_bad_checkpoint}")
    session.commit()
    return result
