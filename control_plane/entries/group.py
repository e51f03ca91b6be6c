"""Entries written as one group (the compactor's path): the protocol of
``service.create_entry``, once for all of them — the subjects' keys in one statement, the
puts side by side, and one transaction for every pointer, term and audit row."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from ..addresses import MemoryAddress, nfc
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..dlp.guard import screen_fields
from ..errors import Conflict
from ..holds.guard import ensure_writable
from ..identity import Actor
from ..keys import subject_keys as keys
from ..kit import request_id_var, sha256_hex
from ..memories import repository as memories_repo
from ..memories.api import (
    CommitUncertain,
    check_size,
    commit_or_uncertain,
    delete_quietly,
    serialise,
)
from ..memories.shared import keyring_of, sealed_address
from ..plane.data_plane import DataPlane, Target, storage_errors
from . import repository as repo
from . import terms as blind
from .objects import object_path
from .repository import ENTRY
from .schemas import EntryIn


@dataclass(frozen=True)
class NewEntry:
    """One entry of a group (``create_entries``): its id, what it holds, and one more audit
    row (operation, detail) to record beside its ``write`` row, if any."""

    pointer_id: uuid.UUID
    spec: EntryIn
    audit: tuple[str, str] | None = None


@dataclass(frozen=True)
class _Staged:
    item: NewEntry
    address: MemoryAddress
    subject_user: str | None
    payload: bytes
    terms: list[str]


GroupExtra = Callable[[Session, Sequence[uuid.UUID]], None]


def create_entries(session: Session, plane: DataPlane, actor: Actor,
                   items: Sequence[NewEntry], *, source: str, extra: GroupExtra,
                   write_lock: contextlib.AbstractContextManager[object] | None = None,
                   put_map: Callable[[Callable[[int], None], range], Iterable[None]] = map,
                   ) -> None:
    """Write several entries of one tenant as one group (the compactor's path): the same
    protocol as ``service.create_entry``, once for all of them.

      1. serialise each summary, hash it, derive its terms; look the subjects' keys up in
         one statement and check the erasure guard once for every subject;
      2. put every sealed object (side by side through ``put_map``; no transaction open);
      3. one transaction: the adoptability checks for every object at once, all pointers,
         terms and audit rows in one multi-row INSERT each, ``extra(session, ids)`` (the
         compactor's marks and provenance), one commit.

    The group lands whole or not at all: if anything raises before the commit, nothing is
    committed, every object of the group is deleted (or left to orphan GC after a crash)
    and the error propagates — the caller decides whether to write the entries one by one.
    Writes as the caller's system actor: no idempotency key, no agent, every scope.
    """
    staged = []
    private: list[str | None] = []
    index_key = blind.index_key(plane, actor.tenant_id)
    for item in items:
        item = replace(item, spec=screen_fields(session, actor, item.spec, ("title", "summary"),
                                                what="the entry", tags_field="tags"))
        spec = item.spec
        address = MemoryAddress.parse(spec.scope, spec.scope_ref)
        user_id = nfc(spec.user_id) if spec.user_id is not None else None
        payload = serialise(spec.summary)
        check_size(plane, len(payload))
        staged.append(_Staged(item, address,
                              user_id if user_id is not None else address.user_ref, payload,
                              blind.terms(index_key, (spec.title, spec.summary))))
        private.extend((*address.personal, user_id))
    with audited(session, actor, "write", detail=f"{len(staged)} entries", private=private):
        guarded = [s for e in staged for s in (e.subject_user, e.address.user_ref)]
        ensure_writable(session, actor.tenant_id, *guarded)
        target = plane.active(session, actor.tenant_id)
        handles = _subject_keys(session, plane, actor, staged)
        session.commit()  # no transaction stays open across bucket I/O
        plane.checkpoint("entry:after_lookup")
        paths = [object_path(target, e.address, e.item.pointer_id) for e in staged]
        ring = keyring_of(plane)

        def put(n: int) -> None:
            entry = staged[n]
            blob = keys.seal_object(ring, actor.tenant_id, handles[n], paths[n],
                                    entry.item.pointer_id, entry.payload)
            with storage_errors():
                target.adapter.put(paths[n], blob)

        try:
            for _ in put_map(put, range(len(staged))):
                pass
        except Exception:
            delete_quietly(target, paths)  # deleting one never put succeeds too
            raise
        plane.checkpoint("entry:after_put")
        with write_lock or contextlib.nullcontext():
            try:
                begin_write(session)
                live = {h.id: h for h in handles if h is not None}
                if (repo.any_key_destroyed(session, list(live))
                        or memories_repo.gc_marked(session, target.config_id, paths)):
                    raise Conflict("an entry's data subject changed while it was being "
                                   "written; retry")
                ensure_writable(session, actor.tenant_id, *guarded)
                _insert_group(session, actor, target, staged, paths, handles, source)
                extra(session, [e.item.pointer_id for e in staged])
                plane.checkpoint("entry:before_commit")
                commit_or_uncertain(session)
            except CommitUncertain as exc:
                session.rollback()
                raise exc.original from None  # keep the objects: the commit may have landed
            except Exception:
                session.rollback()
                delete_quietly(target, paths)
                raise


def _subject_keys(session: Session, plane: DataPlane, actor: Actor,
                  staged: Sequence[_Staged]) -> list[keys.SubjectKeyHandle | None]:
    """Each staged entry's subject key: the live ones in one statement, a missing one
    created (``keys.key_for_write``, in a transaction of its own)."""
    ring = keyring_of(plane)
    if not ring.enabled:
        return [None] * len(staged)
    wanted = [keys.subject_of(e.address.scope, e.address.scope_ref, e.subject_user)
              for e in staged]
    found: dict[tuple[str, str], keys.SubjectKeyHandle] = {
        subject: keys.handle_of(session, ring, actor.tenant_id, key_id, subject, wrapped,
                                kek_version_id)
        for key_id, subject, wrapped, kek_version_id in repo.live_keys(
            session, actor.tenant_id, set(wanted))}
    for subject in wanted:
        if subject not in found:
            found[subject] = keys.key_for_write(session, ring, actor.tenant_id, subject)
    return [found[subject] for subject in wanted]


def _insert_group(session: Session, actor: Actor, target: Target, staged: Sequence[_Staged],
                  paths: Sequence[str], handles: Sequence[keys.SubjectKeyHandle | None],
                  source: str) -> None:
    """A group's pointers, terms and audit rows: one multi-row INSERT each."""
    now, request_id = utcnow(), request_id_var.get()
    pointers: list[dict[str, object]] = []
    terms: list[dict[str, object]] = []
    rows: list[dict[str, object]] = []
    for entry, path, key in zip(staged, paths, handles, strict=True):
        spec, pointer_id = entry.item.spec, entry.item.pointer_id
        pointers.append({
            "id": pointer_id, "tenant_id": actor.tenant_id, "scope_type": entry.address.scope,
            "scope_ref": entry.address.scope_ref, "key": None, "memory_type": ENTRY,
            "subject_user_id": entry.subject_user, "agent_id": None, "title": spec.title,
            "tags": list(dict.fromkeys(spec.tags)), "importance": spec.importance,
            "source": source, "storage_config_id": target.config_id, "storage_path": path,
            "content_sha256": sha256_hex(entry.payload), "content_size": len(entry.payload),
            "sync_status": "synced", "version": 1, "has_embeddings": False,
            "created_at": now, "updated_at": now})
        terms.extend({"pointer_id": pointer_id, "term": t, "tenant_id": actor.tenant_id}
                     for t in entry.terms)
        audited_rows = [("write", f"{entry.address.scope} entry v1 {len(entry.payload)} "
                                  f"bytes{sealed_address(actor, entry.address, key)}")]
        if entry.item.audit is not None:
            audited_rows.append(entry.item.audit)
        rows.extend({
            "tenant_id": actor.tenant_id, "pointer_id": pointer_id, "event_id": None,
            "accessor_type": actor.accessor_type, "accessor_id": actor.accessor_id,
            "agent_id": actor.agent_id, "operation": operation, "success": True,
            "detail": detail[:2000], "request_id": request_id, "accessed_at": now}
            for operation, detail in audited_rows)
    repo.insert_rows(session, repo.POINTERS, pointers)
    repo.insert_rows(session, repo.TERMS, terms)
    repo.insert_rows(session, repo.AUDIT, rows)
