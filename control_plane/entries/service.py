"""Entries: curated memories by id (the seed's ``title`` + Markdown ``summary``).

An entry is a ``memory_pointers`` row with ``key IS NULL`` and ``memory_type='entry'``; its
summary is the pointer's object in the tenant's bucket (a JSON string, sealed under the
subject's key like any memory value), so reads, exports, erasures, GC and the reconciler
treat it as they treat every pointer. Writes follow DESIGN §4 exactly as memories by key:

  1. serialise the summary, hash it, derive its search terms (``terms``);
  2. put the sealed bytes at a fresh per-version path, create-only (no transaction open);
  3. one transaction: insert (or lock and move) the pointer as ``synced``, rewrite its
     terms, append the audit row (and the idempotent answer, and the caller's ``extra``),
     commit — only then does the API answer;
  4. after the commit, delete the superseded object (best effort; orphan GC finishes).
A crash between 2 and 3 leaves an orphan object GC removes. Reads go through the memories
read path (verified, I3); deletes through its delete protocol. The steps shared with memories
by key come from the memories domain's public API (``memories.api``); the entry's object
(path, key, put) is in ``objects``, and the compactor's group write in ``group``.

These functions commit at the steps above, because the bucket is not in the transaction.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from .. import idempotency
from ..addresses import MemoryAddress, Scope, nfc
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..dlp.guard import screen_fields
from ..errors import Conflict, DomainError, Forbidden, HashMismatch, InvalidInput, NotFound
from ..holds.guard import ensure_writable
from ..holds.service import ensure_not_held
from ..idempotency import Idempotency, Replay
from ..identity import EVERYTHING, Access, Actor
from ..kit import decode_uuid_cursor, encode_cursor, page_limit, sha256_hex
from ..memories import batch_gets
from ..memories import repository as memories_repo
from ..memories.api import (
    CommitUncertain,
    after_commit,
    check_size,
    commit_or_uncertain,
    delete_quietly,
    finish_deletes,
    replay_of,
    serialise,
)
from ..memories.read import read_pointer
from ..memories.shared import given, sealed_address
from ..plane.data_plane import DataPlane
from ..tenants.access import ensure_in_scopes
from ..tenants.access import ensure_visible as access_check
from . import repository as repo
from . import terms as blind
from .objects import check_adoptable, put_object, subject_key
from .repository import ENTRY
from .schemas import EntryIn, EntryOut, EntryUpdate

COMPACTOR = "compactor"

__all__ = ["ENTRY", "EntryValue", "Replay", "create_entry", "delete_entry", "get_entry",
           "list_entries", "update_entry"]


@dataclass(frozen=True)
class EntryValue:
    pointer: MemoryPointer
    summary: str | None


Extra = Callable[[Session, MemoryPointer], None]


def stored_answer(pointer: MemoryPointer) -> dict[str, object]:
    """The idempotent first answer: metadata only, the summary left out (I7)."""
    return EntryOut.with_summary(pointer, None).model_dump(mode="json")



def _agent(access: Access, agent_id: str | None) -> str | None:
    """A key with an agent id writes as that agent (as memories by key do)."""
    if access.agent_id is None or agent_id in (None, access.agent_id):
        return access.agent_id if access.agent_id is not None else agent_id
    raise Forbidden(f"this key writes as agent {access.agent_id!r}; leave agent_id out or "
                    f"send that one")


def create_entry(session: Session, plane: DataPlane, actor: Actor, spec: EntryIn, *,
                 access: Access = EVERYTHING, idem: Idempotency | None = None,
                 source_override: str | None = None, pointer_id: uuid.UUID | None = None,
                 extra: Extra | None = None,
                 write_lock: contextlib.AbstractContextManager[object] | None = None,
                 ) -> MemoryPointer | Replay:
    """Create an entry; its summary goes (encrypted) to the tenant's bucket.

    ``source_override`` ("compactor") is how the compactor marks its entries; the API never
    passes it. ``pointer_id`` fixes the new entry's id. ``extra(session, pointer)`` runs in
    the very transaction that commits the pointer: if it raises, nothing is committed (the
    object just put is deleted, or left to orphan GC) and the error propagates.
    ``write_lock`` is held from the write transaction's start to its end: threads of one
    process writing side by side on SQLite take their turns on it rather than on SQLite's
    busy timeout, whose waits sleep in steps of up to 100 ms.
    """
    address = MemoryAddress.parse(spec.scope, spec.scope_ref)
    user_id = nfc(spec.user_id) if spec.user_id is not None else None
    subject_user = user_id if user_id is not None else address.user_ref
    with audited(session, actor, "write", detail=f"{address.scope} entry",
                 private=(*address.personal, user_id)):
        ensure_in_scopes(session, actor, access, address.scope, address.scope_ref,
                         operation="write", what=f"{address.scope} entry")
        if access.user_id is not None:
            subject_user = user_id = access.writes_for(user_id)
        agent_id = _agent(access, spec.agent_id)
        replay = replay_of(session, actor, idem)
        if replay is not None:
            return replay
        ensure_writable(session, actor.tenant_id, subject_user, address.user_ref)
        spec = screen_fields(session, actor, spec, ("title", "summary"), what="the entry",
                             tags_field="tags")
        payload = serialise(spec.summary)
        check_size(plane, len(payload))
        found = blind.terms(blind.index_key(plane, actor.tenant_id), (spec.title, spec.summary))
        target = plane.active(session, actor.tenant_id)
        key = subject_key(session, plane, actor, address, subject_user)
        new_pointer = pointer_id or new_id()
        session.commit()  # no transaction stays open across bucket I/O
        plane.checkpoint("entry:after_lookup")
        path = put_object(plane, target, actor, address, new_pointer, key, payload)
        plane.checkpoint("entry:after_put")
        with write_lock or contextlib.nullcontext():
            try:
                begin_write(session)
                check_adoptable(session, target, path, key)
                ensure_writable(session, actor.tenant_id, subject_user, address.user_ref)
                now = utcnow()
                pointer = MemoryPointer(
                    id=new_pointer, tenant_id=actor.tenant_id, scope_type=address.scope,
                    scope_ref=address.scope_ref, key=None, memory_type=ENTRY,
                    subject_user_id=subject_user, agent_id=agent_id, title=spec.title,
                    tags=list(dict.fromkeys(spec.tags)), importance=spec.importance,
                    source=source_override or spec.source, storage_config_id=target.config_id,
                    storage_path=path, content_sha256=sha256_hex(payload),
                    content_size=len(payload), sync_status="synced", version=1,
                    has_embeddings=False, created_at=now, updated_at=now,
                )
                session.add(pointer)
                session.flush()
                repo.add_terms(session, actor.tenant_id, pointer.id, found)
                audit.record(session, actor, "write", pointer_id=pointer.id,
                             detail=f"{address.scope} entry v1 {len(payload)} bytes"
                                    f"{sealed_address(actor, address, key)}")
                if idem is not None:
                    idempotency.remember(session, actor, idem, 201,
                                         stored_answer(pointer))
                if extra is not None:
                    extra(session, pointer)
                plane.checkpoint("entry:before_commit")
                commit_or_uncertain(session)
            except CommitUncertain as exc:
                session.rollback()
                raise exc.original from None  # keep the object: the commit may have landed
            except sa_exc.IntegrityError:
                session.rollback()
                delete_quietly(target, [path])
                replay = replay_of(session, actor, idem)
                if replay is not None:  # a twin request with the same key committed first
                    return replay
                raise Conflict("an entry with this id already exists") from None
            except Exception:
                session.rollback()
                delete_quietly(target, [path])
                raise
        return pointer

def _is_entry(pointer: MemoryPointer | None) -> bool:
    return (pointer is not None and pointer.key is None and pointer.memory_type == ENTRY
            and pointer.sync_status in ("synced", "corrupt"))


def _find(session: Session, actor: Actor, access: Access, entry_id: uuid.UUID,
          operation: str, *, for_update: bool = False) -> MemoryPointer:
    """The live entry, or 404 (also for one outside a scoped key's list: the same answer)."""
    pointer = memories_repo.get_by_id(session, actor.tenant_id, entry_id,
                                      for_update=for_update)
    missing = f"no entry {entry_id}"
    if pointer is None or not _is_entry(pointer):
        raise NotFound(missing)
    access_check(session, actor, access, pointer.scope_type, pointer.scope_ref,
                 operation=operation, what=f"{pointer.scope_type} entry", missing=missing,
                 user_id=pointer.subject_user_id if operation == "read" else None)
    return pointer


def get_entry(session: Session, plane: DataPlane, actor: Actor, entry_id: uuid.UUID, *,
              access: Access = EVERYTHING) -> EntryValue:
    """The entry and its summary, read from the bucket and verified (I3)."""
    with audited(session, actor, "read", detail="entry"):
        pointer = _find(session, actor, access, entry_id, "read")
        session.commit()
        summary = _summary(read_pointer(session, plane, actor, pointer).value)
        begin_write(session)
        audit.record(session, actor, "read", pointer_id=pointer.id,
                     detail=f"{pointer.scope_type} entry v{pointer.version}")
        session.commit()
        return EntryValue(pointer, summary)


def _summary(value: object) -> str:
    if not isinstance(value, str):
        raise Conflict("the entry's stored object does not hold a summary")
    return value


def update_entry(session: Session, plane: DataPlane, actor: Actor, entry_id: uuid.UUID,
                 spec: EntryUpdate, *, access: Access = EVERYTHING,
                 idem: Idempotency | None = None) -> MemoryPointer | Replay:
    """Replace the entry's title, summary, tags, importance and source: a new object version,
    exactly as a memory's overwrite (the superseded object is deleted after the commit)."""
    with audited(session, actor, "write", detail="entry"):
        seen = _find(session, actor, access, entry_id, "write")
        replay = replay_of(session, actor, idem)
        if replay is not None:
            return replay
        address = MemoryAddress(seen.scope_type, seen.scope_ref)
        subject_user = seen.subject_user_id
        ensure_writable(session, actor.tenant_id, subject_user, address.user_ref)
        spec = screen_fields(session, actor, spec, ("title", "summary"), what="the entry",
                             tags_field="tags")
        payload = serialise(spec.summary)
        check_size(plane, len(payload))
        found = blind.terms(blind.index_key(plane, actor.tenant_id), (spec.title, spec.summary))
        target = plane.active(session, actor.tenant_id)
        key = subject_key(session, plane, actor, address, subject_user)
        session.commit()
        plane.checkpoint("entry:after_lookup")
        path = put_object(plane, target, actor, address, seen.id, key, payload)
        plane.checkpoint("entry:after_put")
        try:
            begin_write(session)
            pointer = _find(session, actor, access, entry_id, "write", for_update=True)
            if pointer.subject_user_id != subject_user:
                raise Conflict("the entry changed while it was being written; retry")
            check_adoptable(session, target, path, key)
            ensure_writable(session, actor.tenant_id, subject_user, address.user_ref)
            superseded = (pointer.storage_config_id, pointer.storage_path)
            pointer.title = spec.title
            pointer.tags = list(dict.fromkeys(spec.tags))
            pointer.importance, pointer.source = spec.importance, spec.source
            pointer.storage_config_id, pointer.storage_path = target.config_id, path
            pointer.storage_class = None  # a new object, in the bucket's default class
            pointer.content_sha256, pointer.content_size = sha256_hex(payload), len(payload)
            pointer.sync_status, pointer.version = "synced", pointer.version + 1
            pointer.updated_at = utcnow()
            session.flush()
            repo.replace_terms(session, actor.tenant_id, pointer.id, found)
            audit.record(session, actor, "write", pointer_id=pointer.id,
                         detail=f"{address.scope} entry v{pointer.version} {len(payload)} "
                                f"bytes{sealed_address(actor, address, key)}")
            if idem is not None:
                idempotency.remember(session, actor, idem, 200,
                                     stored_answer(pointer))
            plane.checkpoint("entry:before_commit")
            commit_or_uncertain(session)
        except CommitUncertain as exc:
            session.rollback()
            raise exc.original from None
        except sa_exc.IntegrityError:
            session.rollback()
            delete_quietly(target, [path])
            replay = replay_of(session, actor, idem)
            if replay is not None:
                return replay
            raise Conflict("the entry was written concurrently by another request; "
                           "retry") from None
        except Exception:
            session.rollback()
            delete_quietly(target, [path])
            raise
        return after_commit(session, plane, (pointer, superseded))


def delete_entry(session: Session, plane: DataPlane, actor: Actor, entry_id: uuid.UUID, *,
                 access: Access = EVERYTHING) -> None:
    """Delete the entry, its object and its search terms (the memories delete protocol:
    mark ``pending_delete``, delete the object, delete the row; the terms cascade)."""
    with audited(session, actor, "delete", detail="entry"):
        _find(session, actor, access, entry_id, "delete")
        session.commit()
        begin_write(session)
        pointer = _find(session, actor, access, entry_id, "delete", for_update=True)
        ensure_writable(session, actor.tenant_id, pointer.subject_user_id,
                        pointer.scope_ref if pointer.scope_type == "user" else None)
        ensure_not_held(session, actor.tenant_id, scope=pointer.scope_type,
                        scope_ref=pointer.scope_ref, subject=pointer.subject_user_id,
                        what="this entry")
        pointer.sync_status, pointer.updated_at = "pending_delete", utcnow()
        session.commit()
        plane.checkpoint("delete:after_mark")
        finish_deletes(session, plane, actor, [pointer], "delete")


def list_entries(session: Session, plane: DataPlane, actor: Actor, *,
                 scope: Scope | str | None = None, scope_ref: str | None = None,
                 tag: str | None = None, search: str | None = None,
                 min_importance: int | None = None, cursor: str | None = None,
                 limit: int | None = None, access: Access = EVERYTHING,
                 include_summary: bool | None = None
                 ) -> tuple[list[EntryValue], str | None]:
    """One page of the entries the key may see, filtered in SQL by scope, scope ref, tag,
    minimum importance and search words (all of them, through the blind index).

    Summaries are read from the bucket (verified; one read per item, each audited) when
    ``include_summary`` is true — by default only when ``search`` is given. An item whose
    object fails verification is listed with ``summary`` null and ``sync_status`` corrupt.
    """
    operation = "search" if search is not None else "list"
    with audited(session, actor, operation, detail="entries"):
        size = page_limit(limit)
        after = decode_uuid_cursor(cursor)
        canonical = (Scope(scope).canonical if scope is not None else None)
        scope_ref = nfc(scope_ref) if scope_ref is not None else None
        wanted: list[str] | None = None
        if search is not None:
            words = blind.words(search)
            if not words:
                raise InvalidInput("search must contain at least one word (letters or digits)")
            if len(words) > blind.MAX_QUERY_WORDS:
                raise InvalidInput(f"search may hold at most {blind.MAX_QUERY_WORDS} words")
            key = blind.index_key(plane, actor.tenant_id)
            wanted = list(dict.fromkeys(blind.term(key, w) for w in words))
        rows = list(repo.list_page(
            session, actor.tenant_id, scope=canonical, scope_ref=scope_ref, tag=tag,
            terms=wanted, min_importance=min_importance, after=after, limit=size + 1,
            access=access))
        next_cursor = encode_cursor(str(rows[size - 1].id)) if len(rows) > size else None
        rows = rows[:size]
        session.commit()
        items = _with_summaries(session, plane, actor, rows,
                                search is not None if include_summary is None
                                else include_summary)
        # Filters by scope ref, tag or words are personal: the row says only whether one was
        # given (and how many words).
        audit.commit_reads(session, plane, actor, [
            (operation, None, f"entries scope={canonical} ref={given(scope_ref)} "
                              f"tag={given(tag)} words={len(wanted or ())} "
                              f"min_importance={min_importance} -> {len(rows)}"),
            *(("read", item.pointer.id,
               f"{item.pointer.scope_type} entry v{item.pointer.version} listed")
              for item in items if item.summary is not None)])
        return items, next_cursor


def _with_summaries(session: Session, plane: DataPlane, actor: Actor,
                    rows: Sequence[MemoryPointer], read: bool) -> list[EntryValue]:
    if not read:
        return [EntryValue(p, None) for p in rows]
    items = []
    for pointer, got in zip(rows, batch_gets.read_each(session, plane, actor, list(rows)),
                            strict=True):
        if isinstance(got, NotFound):
            continue  # deleted since the page was read
        if isinstance(got, HashMismatch):
            # Audited and marked corrupt by the read; never served (I3).
            items.append(EntryValue(pointer, None))
            continue
        if isinstance(got, DomainError):
            raise got
        items.append(EntryValue(pointer, _summary(got.value)))
    return items
