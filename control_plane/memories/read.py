"""Memories by key, the read path: look the pointer up, fetch, decrypt, hash, compare (I3),
audit; and the pointer listing (metadata only).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.bounded import ObjectTooLarge
from storage_adapters.envelope import DecryptionError, sealed_size

from ..addresses import MemoryAddress, nfc
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..errors import Conflict, HashMismatch, InvalidInput, NotFound
from ..identity import EVERYTHING, Access, Actor
from ..keys import subject_keys as keys
from ..kit import (
    decode_cursor,
    decode_uuid_cursor,
    encode_cursor,
    page_limit,
    request_id_var,
    sha256_hex,
)
from ..plane.data_plane import AuditRecorder, DataPlane, Target, storage_errors
from . import hotpath, listing
from . import repository as repo
from .shared import (
    ensure_visible,
    expired,
    given,
    guessed_key,
    keyring_of,
    read_key,
    remember_key,
    sealed_address,
)

log = logging.getLogger(__name__)


_READ_ATTEMPTS = 3
TOO_LARGE = "larger than its pointer allows"  # _open's problem for an oversized object


@dataclass(frozen=True)
class MemoryValue:
    value: Any
    pointer: MemoryPointer


def get_value(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress, *,
              access: Access = EVERYTHING) -> MemoryValue:
    """Read and verify the value at the address (I3). On PostgreSQL, once the address was
    read before, the lookup statement also appends the read's audit row (one round trip)."""
    with audited(session, actor, "read", detail=address.scope, private=address.personal):
        # A data subject's own key reads its subject's memories in any scope: known only once
        # the pointer is found, so that lookup is never the one that audits the read itself.
        by_subject = access.user_id is not None and not access.allows(address.scope,
                                                                      address.scope_ref)
        if not by_subject:
            ensure_visible(session, actor, access, address, "read")
        known, guess, handle = guessed_key(plane, actor.tenant_id, address)
        if by_subject or not known or session.get_bind().dialect.name != "postgresql":
            found = hotpath.lookup_for_read(session, actor.tenant_id, address)
            if by_subject:
                ensure_visible(session, actor, access, address, "read",
                               found[0].subject_user_id if found is not None else None)
            return read_found(session, plane, actor, address, found)
        row = hotpath.ReadRow(actor.accessor_type, actor.accessor_id, actor.agent_id,
                              request_id_var.get(),
                              address.scope + sealed_address(actor, address, handle),
                              utcnow())
        found, logged = hotpath.lookup_for_read_logged(session, actor.tenant_id, address,
                                                       guess, row)
        if not logged:  # a new key, or nothing servable: audited as two statements
            return read_found(session, plane, actor, address, found)
        assert found is not None
        pointer, live = found
        result = _read_verified(session, plane, actor, address, pointer, live_key(live))
        session.commit()
        return result


def live_key(live: hotpath.KeyRow | None) -> tuple[uuid.UUID, bytes, uuid.UUID] | None:
    """A lookup's live key as ``keys.open_object`` takes it (None: no key to open with)."""
    if live is None or live.wrapped_key is None:
        return None
    return live.id, live.wrapped_key, live.kek_version_id


def read_found(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
               found: tuple[MemoryPointer, hotpath.KeyRow | None] | None) -> MemoryValue:
    """The read after its lookup (``get_value``, a batch's shared lookup): check the pointer
    is live, fetch, verify (I3), audit. Run it inside the caller's ``audited``."""
    pointer = check_live(found[0] if found else None, address)
    live = found[1] if found else None
    result = _read_verified(session, plane, actor, address, pointer, live_key(live))
    remember_key(actor.tenant_id, address, live.id if live is not None else None)
    detail = address.scope + sealed_address(actor, address, read_key(
        session, plane, actor, live))
    session.commit()
    if plane.audit_batcher is not None:
        plane.audit_batcher.record(actor.tenant_id, actor.accessor_type, actor.accessor_id,
                                   "read", pointer_id=result.pointer.id, detail=detail,
                                   agent_id=actor.agent_id)
        return result
    begin_write(session)
    audit.record(session, actor, "read", pointer_id=result.pointer.id, detail=detail)
    session.commit()
    return result


def read_logged(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                found: tuple[MemoryPointer, hotpath.KeyRow | None] | None) -> MemoryValue:
    """The read after a lookup that already appended its audit row (a batch's, whose fetch
    or check failed): fetch and verify again as ``get_value`` does after its one statement;
    a mismatch appends its failure row. Run it inside the caller's ``audited``."""
    pointer = check_live(found[0] if found else None, address)
    result = _read_verified(session, plane, actor, address, pointer,
                            live_key(found[1] if found else None))
    session.commit()
    return result


def _live_pointer(session: Session, actor: Actor, address: MemoryAddress,
                  pointer_id: uuid.UUID) -> MemoryPointer:
    if address.key is None:  # a keyless pointer (an entry) is found by its id alone
        return check_live(repo.get_by_id(session, actor.tenant_id, pointer_id), address)
    return check_live(repo.get(session, actor.tenant_id, address), address)




def check_live(pointer: MemoryPointer | None, address: MemoryAddress) -> MemoryPointer:
    """The pointer if a read may serve it: 404 if missing, being written or deleted, or
    expired."""
    if pointer is None or pointer.sync_status in repo.UNREADABLE:
        raise NotFound(f"no memory at {address.describe()}")
    if expired(pointer):
        raise NotFound(f"the memory at {address.describe()} has expired")
    return pointer


def _read_verified(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                   pointer: MemoryPointer,
                   live: tuple[uuid.UUID, bytes, uuid.UUID] | None = None, *,
                   raw: bool = False) -> MemoryValue:
    for _ in range(_READ_ATTEMPTS):
        target = plane.by_id(session, pointer.storage_config_id)
        session.commit()
        data, actual, problem = _open(session, plane, actor, target, pointer, live)
        live = None  # a second attempt reads a newer object: look its key up
        if actual == pointer.content_sha256:
            if pointer.sync_status == "corrupt":
                begin_write(session)
                repo.mark_synced(session, pointer.id, pointer.storage_path, utcnow())
                session.commit()
            return MemoryValue(data if raw else json.loads(data), pointer)
        # A concurrent overwrite may have replaced the object after we read the pointer:
        # look again before calling anything corrupt. (The lookup refreshes the very same
        # object in the session, so remember what was read first.)
        seen = (pointer.version, pointer.storage_path)
        fresh = _live_pointer(session, actor, address, pointer.id)
        if (fresh.version, fresh.storage_path) != seen:
            pointer = fresh
            continue
        _report_corrupt(session, actor, pointer, actual, problem)
    raise Conflict("the memory kept changing while it was being read; retry")


def read_pointer(session: Session, plane: DataPlane, actor: Actor,
                 pointer: MemoryPointer, *, raw: bool = False) -> MemoryValue:
    """Read and verify one pointer's value (I3) for bulk readers such as export.

    Same checks as ``get_value`` (a mismatch marks the pointer corrupt and raises
    HashMismatch); the caller writes its own audit row. ``raw``: the value is the verified
    bytes as stored (serialised JSON, whose SHA-256 is the pointer's), not parsed.
    """
    address = MemoryAddress(pointer.scope_type, pointer.scope_ref, pointer.key)
    return _read_verified(session, plane, actor, address, pointer, raw=raw)


def fetch_locked(session: Session, plane: DataPlane, actor: Actor,
                 pointer: MemoryPointer) -> Any:
    """Read and verify while holding the pointer's lock: a mismatch is real corruption."""
    target = plane.by_id(session, pointer.storage_config_id)
    data, actual, problem = _open(session, plane, actor, target, pointer)
    if actual == pointer.content_sha256:
        return json.loads(data)
    session.rollback()
    _report_corrupt(session, actor, pointer, actual, problem)


def _open(session: Session, plane: DataPlane, actor: Actor, target: Target,
          pointer: MemoryPointer, live: tuple[uuid.UUID, bytes, uuid.UUID] | None = None
          ) -> tuple[bytes, str | None, str | None]:
    """Fetch and decrypt: (plaintext, its SHA-256, why it could not be decrypted).

    A missing object gives no hash and no problem; an object that does not decrypt (wrong or
    destroyed key, edited, truncated, swapped) gives no hash and the reason.
    """
    try:
        with storage_errors(pointer.id):
            try:
                blob = target.adapter.get(pointer.storage_path,
                                          sealed_size(pointer.content_size))
            except ObjectTooLarge:  # more than the pointer allows: not served, not kept
                return b"", None, TOO_LARGE
    except storage.ObjectNotFound:
        return b"", None, None
    try:
        data = keys.open_object(session, keyring_of(plane), actor.tenant_id,
                                pointer.storage_path, pointer.id, blob, live)
    except DecryptionError as exc:
        return b"", None, str(exc)
    return data, sha256_hex(data), None


def _report_corrupt(session: Session, actor: Actor, pointer: MemoryPointer,
                    actual: str | None, problem: str | None = None) -> NoReturn:
    begin_write(session)
    repo.mark_corrupt(session, pointer.id, pointer.storage_path, utcnow())
    if problem == TOO_LARGE:
        what, reason = "is larger than its pointer allows", "mismatch"
    elif problem is not None:
        what, reason = f"could not be decrypted ({problem})", "undecryptable"
    elif actual is None:
        what, reason = "is missing from the bucket", "missing"
    else:
        what, reason = "does not match its hash", "mismatch"
    audit.record(session, actor, "read", success=False, pointer_id=pointer.id,
                 detail=f"hash_mismatch: object {what}; expected {pointer.content_sha256} "
                        f"actual {actual}")
    session.commit()
    error = HashMismatch(
        f"the stored object {what}; it was not served and the pointer is marked corrupt",
        pointer_id=str(pointer.id), expected_sha256=pointer.content_sha256,
        actual_sha256=actual, reason=reason,
    )
    error.audited = True
    raise error


@dataclass(frozen=True)
class Listed:
    """A page of pointers, and for a page of readable ones (``page_of_pointers``) what the
    listing already did toward reading them."""

    pointers: list[MemoryPointer]
    next_cursor: str | None
    keys: dict[uuid.UUID, listing.LiveKey]  # the pointers' live subject keys (PostgreSQL)
    reads_logged: bool  # each pointer's read row went in with the page (PostgreSQL)


def list_pointers(session: Session, actor: Actor, *, scope: str | None, scope_ref: str | None,
                  user_id: str | None, memory_type: str | None, sync_status: str | None,
                  cursor: str | None, limit: int | None, access: Access = EVERYTHING,
                  tag: str | None = None, key_prefix: str | None = None,
                  batcher: AuditRecorder | None = None, order: str = "created",
                  ) -> tuple[list[MemoryPointer], str | None]:
    """One page of the pointers the key may see (a scoped key's list is filtered in SQL);
    an expired memory (``ttl_days`` ran out) is not listed, as it is not read. The audit
    row: on PostgreSQL in the page's own statement (``listing``); elsewhere through
    ``batcher`` (the read group commit) when given."""
    page = page_of_pointers(session, actor, scope=scope, scope_ref=scope_ref, user_id=user_id,
                            memory_type=memory_type, sync_status=sync_status, cursor=cursor,
                            limit=limit, access=access, tag=tag, key_prefix=key_prefix,
                            batcher=batcher, order=order)
    return page.pointers, page.next_cursor


def page_of_pointers(session: Session, actor: Actor, *, scope: str | None,
                     scope_ref: str | None, user_id: str | None, memory_type: str | None,
                     sync_status: str | None, cursor: str | None, limit: int | None,
                     access: Access, tag: str | None, key_prefix: str | None,
                     batcher: AuditRecorder | None, order: str, readable: bool = False,
                     ) -> Listed:
    """``list_pointers``'s page; with ``readable``, of the memories by key a read would serve,
    to be read (on PostgreSQL with their live keys and read rows)."""
    size = page_limit(limit)
    after = _after(cursor, order)
    scope_ref, user_id, key_prefix = (nfc(v) if v is not None else None
                                      for v in (scope_ref, user_id, key_prefix))
    # Filters by scope ref or user are personal: the row says only whether one was given.
    detail = (f"{'pointers with values' if readable else 'pointers'} scope={scope} "
              f"ref={given(scope_ref)} user={given(user_id)} "
              f"tag={given(tag)} prefix={given(key_prefix)} -> ")
    engine = session.get_bind().engine
    if engine.dialect.name == "postgresql":  # the page and its audit rows: one statement
        if session.in_transaction():
            session.commit()
        rows, keys = listing.list_page(
            engine, actor.tenant_id,
            listing.Listing(scope, scope_ref, user_id, memory_type, sync_status, tag,
                            key_prefix, after, size + 1, order, readable),
            access, utcnow(),
            listing.ListedBy(actor.accessor_type, actor.accessor_id, actor.agent_id,
                             request_id_var.get(), detail, size))
        return Listed(rows[:size], _next_cursor(rows, size, order), keys, readable)
    rows = list(repo.list_page(session, actor.tenant_id, scope=scope, scope_ref=scope_ref,
                               user_id=user_id, memory_type=memory_type,
                               sync_status=sync_status, after=after, limit=size + 1,
                               access=access, now=utcnow(), tag=tag, key_prefix=key_prefix,
                               order=order, readable=readable))
    session.commit()
    detail += str(min(len(rows), size))
    page = Listed(rows[:size], _next_cursor(rows, size, order), {}, False)
    if batcher is not None:
        batcher.record(actor.tenant_id, actor.accessor_type, actor.accessor_id, "list",
                       detail=detail, agent_id=actor.agent_id)
        return page
    begin_write(session)
    audit.record(session, actor, "list", detail=detail)
    session.commit()
    return page


_WRITTEN = "w"  # marks a cursor of a listing by last write


def _next_cursor(rows: list[MemoryPointer], size: int, order: str) -> str | None:
    if len(rows) <= size:
        return None
    last = rows[size - 1]
    if order == "created":
        return encode_cursor(str(last.id))
    if order == "updated_desc":
        return encode_cursor([_WRITTEN, last.updated_at.isoformat(), str(last.id)])
    return encode_cursor([last.key, str(last.id)])


def _after(cursor: str | None, order: str) -> repo.After | None:
    """Where the page starts: the cursor a page listed in the same order answered."""
    if order == "created":
        after = decode_uuid_cursor(cursor)
        return None if after is None else repo.After(after)
    if cursor is None:
        return None
    value = decode_cursor(cursor)
    try:
        if order == "updated_desc":
            mark, written, pointer_id = value
            if mark != _WRITTEN or not isinstance(written, str):
                raise ValueError(mark)
            return repo.After(uuid.UUID(str(pointer_id)),
                              updated=datetime.fromisoformat(written).astimezone(UTC))
        key, pointer_id = value
        if not isinstance(key, str):
            raise ValueError(key)
        return repo.After(uuid.UUID(str(pointer_id)), key)
    except (TypeError, ValueError):
        raise InvalidInput("cursor is not valid for this order; pass the next_cursor value of "
                           "the previous page, listed in the same order, unchanged") from None

