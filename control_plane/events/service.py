"""Raw events (the append-only log): append, read, list, and bulk body reads.

Append follows the write protocol of DESIGN §4, object first:
  1. serialise the body, hash the plaintext;
  2. put the sealed bytes at ``{prefix}/events/{scope}/{scope_ref}/{yyyy}/{mm}/{id}.json``,
     create-only (no transaction is open);
  3. one transaction: insert the row ``synced`` and its audit row; commit — only then does
     the API answer 201.
A crash between 2 and 3 leaves an object no row names, which orphan GC removes
(``integrity/reconcile.py`` lists ``events/`` too). Events are never updated (only
``compressed_at``, by the compactor) and have no delete route: erasure and retention remove
them.

Bodies are sealed like memory values (``keys.seal_object``: the subject's key, associated
data = tenant, path, event id), and every read verifies SHA-256 (I3). The protocols commit at
the steps named above because the bucket is not part of the database transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn
from urllib.parse import quote

from sqlalchemy import exc as sa_exc
from sqlalchemy import exists, null, select
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

from .. import idempotency
from ..addresses import MemoryAddress, Scope, nfc
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import GcCandidate, MemoryEvent, SubjectErasure, SubjectKey
from ..dlp.guard import screen_fields
from ..errors import (
    Conflict,
    Forbidden,
    HashMismatch,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
)
from ..holds.guard import erasure_in_progress
from ..idempotency import Idempotency, Replay
from ..identity import EVERYTHING, Access, Actor
from ..keys import subject_keys as keys
from ..kit import decode_cursor, encode_cursor, page_limit, sha256_hex
from ..memories.api import CommitUncertain, delete_quietly, serialise
from ..memories.shared import given, keyring_of, sealed_address
from ..plane.data_plane import DataPlane, Target, storage_errors
from ..tenants.access import ensure_in_scopes
from ..tenants.access import ensure_visible as access_check
from . import repository as repo
from .schemas import EventIn, EventOut

_PUT_ATTEMPTS = 3
_READERS = 8  # bounded object I/O of read_bodies


@dataclass(frozen=True)
class EventWithBody:
    event: MemoryEvent
    body: str


def object_path(scope: str, scope_ref: str, occurred_at: datetime, event_id: uuid.UUID) -> str:
    """The body's path under the target's prefix: time-sharded by month of occurrence."""
    at = occurred_at.astimezone(UTC)
    return (f"events/{scope}/{quote(scope_ref, safe='')}/{at.year:04d}/{at.month:02d}/"
            f"{event_id}.json")


def subject_of(scope: str, scope_ref: str, user_id: str | None) -> str | None:
    """The event's data subject: the user named, else the user of a ``user`` scope."""
    if user_id is not None:
        return user_id
    return scope_ref if scope == "user" else None


def _address(scope: Scope, scope_ref: str) -> MemoryAddress:
    return MemoryAddress.parse(scope, scope_ref)


def _check_agent(access: Access, agent_id: str | None) -> str | None:
    """A key with an agent id appends as that agent (fills it in; refuses another)."""
    if access.agent_id is None or agent_id == access.agent_id:
        return agent_id
    if agent_id is None:
        return access.agent_id
    raise Forbidden(f"this key writes as agent {access.agent_id!r}; leave agent_id out or "
                    f"send that one")


def _payload(plane: DataPlane, body: str) -> bytes:
    if not body.strip():
        raise InvalidInput("body must not be empty or blank; send the event's Markdown text")
    try:
        payload = serialise(body)
    except UnicodeEncodeError:
        raise InvalidInput("body is not valid Unicode text (it holds a lone surrogate); "
                           "send UTF-8 text") from None
    limit = plane.max_object_bytes
    if limit is not None and len(payload) > limit:
        raise PayloadTooLarge(
            f"the event body would be stored as {len(payload)} bytes, over this server's "
            f"limit of {limit} bytes per object (MEMPLANE_MAX_OBJECT_BYTES); split it into "
            "several events")
    return payload


def _in_utc(occurred_at: datetime | None) -> datetime:
    if occurred_at is None:
        return utcnow()
    try:
        return occurred_at.astimezone(UTC)
    except OverflowError:
        raise InvalidInput("occurred_at is out of range once converted to UTC; send a date "
                           "between years 1 and 9999") from None


def append_event(session: Session, plane: DataPlane, actor: Actor, spec: EventIn, *,
                 access: Access = EVERYTHING,
                 idem: Idempotency | None = None) -> MemoryEvent | Replay:
    """Append one immutable event: its body to the bucket, then its row (see module doc)."""
    address = _address(spec.scope, spec.scope_ref)
    subject = subject_of(address.scope, address.scope_ref, spec.user_id)
    with audited(session, actor, "write", detail=f"event {address.scope}",
                 private=(*address.personal, spec.user_id, spec.source_ref)):
        ensure_in_scopes(session, actor, access, address.scope, address.scope_ref,
                         operation="write", what=f"{address.scope} event")
        subject = subject_of(address.scope, address.scope_ref, access.writes_for(spec.user_id))
        agent_id = _check_agent(access, spec.agent_id)
        replay = _replay(session, actor, idem)
        if replay is not None:
            return replay
        spec = screen_fields(session, actor, spec, ("body",), what="the event")
        payload = _payload(plane, spec.body)
        occurred = _in_utc(spec.occurred_at)
        for _ in range(_PUT_ATTEMPTS):
            event_id = new_id()
            target = plane.active(session, actor.tenant_id)
            ring = keyring_of(plane)
            key = (keys.key_for_write(session, ring, actor.tenant_id,
                                      keys.subject_of(address.scope, address.scope_ref, subject))
                   if ring.enabled else None)
            session.commit()  # no transaction stays open across bucket I/O
            path = target.path(object_path(address.scope, address.scope_ref, occurred,
                                           event_id))
            blob = keys.seal_object(ring, actor.tenant_id, key, path, event_id, payload)
            with storage_errors():
                target.adapter.put(path, blob)
            plane.checkpoint("event:after_put")
            try:
                saved = _save(session, plane, target, actor, address, spec, event_id, path,
                              payload, occurred, subject, agent_id, key, idem)
            except sa_exc.IntegrityError:
                # A twin request with the same Idempotency-Key committed first.
                session.rollback()
                delete_quietly(target, [path])
                replay = _replay(session, actor, idem)
                if replay is None:
                    raise
                return replay
            except CommitUncertain as exc:
                session.rollback()
                raise exc.original from None  # keep the object: the commit may have landed
            except Exception:  # the new object is an orphan now; remove it rather than wait
                session.rollback()
                delete_quietly(target, [path])
                raise
            if saved is not None:
                return saved
            delete_quietly(target, [path])  # sealed under a dead key, or a GC candidate
        raise Conflict("the event's subject key kept changing while it was being written; "
                       "retry")



def _save(session: Session, plane: DataPlane, target: Target, actor: Actor,
          address: MemoryAddress, spec: EventIn, event_id: uuid.UUID, path: str,
          payload: bytes, occurred: datetime, subject: str | None, agent_id: str | None,
          key: keys.SubjectKeyHandle | None, idem: Idempotency | None) -> MemoryEvent | None:
    """Step 3; None when the object must not be adopted and is put again: its subject key was
    destroyed meanwhile (an erasure completed), or GC marked it while it was in flight."""
    begin_write(session)
    # One statement for the three checks (the memory write's hot path folds them alike): the
    # subject key still live, under a share lock so that its destruction by an erasure waits
    # for this commit; the object not an orphan-GC candidate; no erasure of the subject
    # running (``holds.guard.ensure_writable``'s query).
    marked = exists().where(GcCandidate.storage_config_id == target.config_id,
                            GcCandidate.path == path)
    blocked: Any = null()
    if subject is not None:
        blocked = (select(SubjectErasure.job_id)
                   .where(SubjectErasure.tenant_id == actor.tenant_id,
                          SubjectErasure.user_id == subject).limit(1).scalar_subquery())
    if key is not None:
        checks = session.execute(select(SubjectKey.destroyed_at, marked, blocked)
                                 .where(SubjectKey.id == key.id)
                                 .with_for_update(read=True, of=SubjectKey)).first()
    else:
        checks = session.execute(select(null(), marked, blocked)).first()
    if checks is None or checks[0] is not None or checks[1]:
        session.rollback()
        return None
    if checks[2] is not None:
        raise erasure_in_progress(checks[2])
    now = utcnow()
    event = MemoryEvent(
        id=event_id, tenant_id=actor.tenant_id, scope_type=address.scope,
        scope_ref=address.scope_ref, kind=spec.kind, source=spec.source,
        source_ref=spec.source_ref, subject_user_id=subject, agent_id=agent_id,
        occurred_at=occurred, compressed_at=None, storage_config_id=target.config_id,
        storage_path=path, content_sha256=sha256_hex(payload), content_size=len(payload),
        sync_status="synced", created_at=now,
    )
    session.add(event)
    audit.record(session, actor, "write", event_id=event.id,
                 detail=f"event {address.scope} {spec.kind} {len(payload)} bytes"
                        f"{sealed_address(actor, address, key)}")
    if idem is not None:
        idempotency.remember(session, actor, idem, 201,
                             EventOut.of(event).model_dump(mode="json"))
    plane.checkpoint("event:before_commit")
    try:
        session.commit()
    except sa_exc.OperationalError as exc:
        raise CommitUncertain(exc) from exc
    plane.checkpoint("event:after_commit")
    return event


def _replay(session: Session, actor: Actor, idem: Idempotency | None) -> Replay | None:
    if idem is None:
        return None
    replay = idempotency.find(session, actor, idem)
    session.rollback()
    if replay is not None:
        begin_write(session)
        audit.record(session, actor, "replay", event_id=uuid.UUID(replay.response["id"]),
                     detail="idempotency key answered from the first request")
        session.commit()
    return replay


def get_event(session: Session, plane: DataPlane, actor: Actor, event_id: uuid.UUID, *,
              access: Access = EVERYTHING) -> EventWithBody:
    """One event and its body, verified against its SHA-256 (I3)."""
    missing = f"no event {event_id}"
    with audited(session, actor, "read", detail="event"):
        event = repo.get(session, actor.tenant_id, event_id)
        if event is None or event.sync_status == "pending_delete":  # an erasure deletes it
            raise NotFound(missing)
        access_check(session, actor, access, event.scope_type, event.scope_ref,
                     operation="read", what=f"{event.scope_type} event", missing=missing,
                     user_id=event.subject_user_id)
        body = read_bodies(session, plane, actor.tenant_id, [event], actor=actor)[event.id]
        begin_write(session)
        address = MemoryAddress(event.scope_type, event.scope_ref)
        key = _key_of(session, plane, actor.tenant_id, event)
        audit.record(session, actor, "read", event_id=event.id,
                     detail=f"event {event.scope_type}{sealed_address(actor, address, key)}")
        session.commit()
        return EventWithBody(event, body)


def _key_of(session: Session, plane: DataPlane, tenant_id: uuid.UUID,
            event: MemoryEvent) -> keys.SubjectKeyHandle | None:
    ring = keyring_of(plane)
    if not ring.enabled:
        return None
    return keys.active_key(session, ring, tenant_id, keys.subject_of(
        event.scope_type, event.scope_ref, event.subject_user_id))


def list_events(session: Session, actor: Actor, *, scope: Scope | str | None,
                scope_ref: str | None, kind: str | None = None,
                since: datetime | None = None, until: datetime | None = None,
                include_compressed: bool = False, cursor: str | None = None,
                limit: int | None = None,
                access: Access = EVERYTHING) -> tuple[list[MemoryEvent], str | None]:
    """One page of event metadata in (occurred_at, id) order; compressed events only when
    asked; a scoped key's page is filtered in SQL."""
    with audited(session, actor, "list", detail="events", private=(scope_ref,)):
        size = page_limit(limit)
        try:
            canonical = Scope(scope).canonical if scope is not None else None
        except ValueError:
            raise InvalidInput(
                f"scope must be one of {', '.join(s.value for s in Scope)}") from None
        if scope_ref is not None:
            if canonical is None:
                raise InvalidInput("scope_ref needs scope: pass both, e.g. "
                                   "?scope=entity&scope_ref=ent_acme")
            scope_ref = nfc(scope_ref)
        for name, value in (("since", since), ("until", until)):
            if value is not None and value.tzinfo is None:
                raise InvalidInput(f"{name} needs a timezone, e.g. 2026-01-31T00:00:00Z")
        rows = list(repo.list_page(
            session, actor.tenant_id, scope=canonical, scope_ref=scope_ref, kind=kind,
            since=since, until=until, include_compressed=include_compressed,
            after=_decode(cursor), limit=size + 1, access=access))
        next_cursor = None
        if len(rows) > size:
            last = rows[size - 1]
            next_cursor = encode_cursor([last.occurred_at.isoformat(), str(last.id)])
        session.commit()
        begin_write(session)
        audit.record(session, actor, "list",
                     detail=f"events scope={canonical} ref={given(scope_ref)} kind={kind} "
                            f"compressed={include_compressed} -> {min(len(rows), size)}")
        session.commit()
    return rows[:size], next_cursor


def _decode(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    if cursor is None:
        return None
    value = decode_cursor(cursor)
    try:
        at, last = value
        parsed = datetime.fromisoformat(at)
        if parsed.tzinfo is None:
            raise ValueError
        return parsed, uuid.UUID(str(last))
    except (TypeError, ValueError):
        raise InvalidInput(
            "cursor is not valid; pass the next_cursor value of the previous page unchanged"
        ) from None


def read_bodies(session: Session, plane: DataPlane, tenant_id: uuid.UUID,
                events: Sequence[MemoryEvent], *,
                actor: Actor | None = None) -> dict[uuid.UUID, str]:
    """The hash-verified bodies of ``events`` (for the compactor, export and reads).

    Objects are fetched by a bounded pool; each is opened and checked in the caller's
    session. A body that is missing, does not decrypt or does not match its hash is never
    returned: the event is marked ``corrupt``, a failed audit row is written and
    HashMismatch (409 ``hash_mismatch``) raised, as for memories. The caller's open
    transaction is committed first (no transaction stays open across bucket I/O).
    """
    if not events:
        return {}
    ring = keyring_of(plane)
    targets = {cid: plane.by_id(session, cid) for cid in {e.storage_config_id for e in events}}
    session.commit()

    def fetch(event: MemoryEvent) -> bytes | None:
        try:
            with storage_errors():
                return targets[event.storage_config_id].adapter.get(
                    event.storage_path, envelope.sealed_size(event.content_size))
        except storage.ObjectNotFound:
            return None

    if len(events) == 1:
        blobs = [fetch(events[0])]
    else:
        with ThreadPoolExecutor(max_workers=min(_READERS, len(events))) as pool:
            blobs = list(pool.map(fetch, events))
    live: dict[uuid.UUID, tuple[uuid.UUID, bytes, uuid.UUID] | None] = {}
    bodies: dict[uuid.UUID, str] = {}
    for event, blob in zip(events, blobs, strict=True):
        actual: str | None = None
        problem: str | None = None
        data = b""
        if blob is not None:
            try:
                data = keys.open_object(session, ring, tenant_id, event.storage_path, event.id,
                                        blob, _live_key(session, tenant_id, blob, live))
                actual = sha256_hex(data)
            except DecryptionError as exc:
                problem = str(exc)
        if actual != event.content_sha256:
            _report_corrupt(session, actor or Actor(tenant_id, "system", "events"), event,
                            actual, problem)
        if event.sync_status == "corrupt":
            begin_write(session)
            repo.mark_synced(session, event.id, event.storage_path)
            session.commit()
        bodies[event.id] = json.loads(data)
    session.commit()
    return bodies


def _live_key(session: Session, tenant_id: uuid.UUID, blob: bytes,
              cache: dict[uuid.UUID, tuple[uuid.UUID, bytes, uuid.UUID] | None]
              ) -> tuple[uuid.UUID, bytes, uuid.UUID] | None:
    """The subject key an envelope names, looked up once per key for a whole batch."""
    if not envelope.is_envelope(blob):
        return None
    key_id = envelope.read_header(blob).key_id
    if key_id not in cache:
        row = session.get(SubjectKey, key_id)
        cache[key_id] = (None if row is None or row.tenant_id != tenant_id
                         or row.wrapped_key is None
                         else (row.id, bytes(row.wrapped_key), row.kek_version_id))
    return cache[key_id]


def _report_corrupt(session: Session, actor: Actor, event: MemoryEvent, actual: str | None,
                    problem: str | None) -> NoReturn:
    if problem is not None:
        what, reason = f"could not be decrypted ({problem})", "undecryptable"
    elif actual is None:
        what, reason = "is missing from the bucket", "missing"
    else:
        what, reason = "does not match its hash", "mismatch"
    session.rollback()
    begin_write(session)
    repo.mark_corrupt(session, event.id, event.storage_path)
    audit.record(session, actor, "read", success=False, event_id=event.id,
                 detail=f"hash_mismatch: event body {what}; expected {event.content_sha256} "
                        f"actual {actual}")
    session.commit()
    error = HashMismatch(
        f"the stored event body {what}; it was not served and the event is marked corrupt",
        event_id=str(event.id), expected_sha256=event.content_sha256, actual_sha256=actual,
        reason=reason)
    error.audited = True
    raise error

